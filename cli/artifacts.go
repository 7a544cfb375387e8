package cli

import (
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/artifacts"
)

// artifactsFlag is --artifacts DIR on the commands that run or hand over
// runs: the folder of the pipeline's shared artifact store, which wins over
// the spec's artifacts field (a worker may mount the shared folder at its
// own path). Relative to the working directory.
type artifactsFlag struct{ dir string }

func (a *artifactsFlag) register(cmd *cobra.Command, help string) {
	cmd.Flags().StringVar(&a.dir, "artifacts", "", help)
}

// path is the flag's folder, absolute; "" when it was not given.
func (a *artifactsFlag) path() (string, error) {
	if a.dir == "" || strings.Contains(a.dir, "://") {
		return a.dir, nil // an object store's URL (s3://bucket/prefix) is kept as given
	}
	p, err := filepath.Abs(a.dir)
	if err != nil {
		return "", usageErr("--artifacts: %v", err)
	}
	if _, err := artifacts.NewFolder(p); err != nil {
		return "", usageErr("--artifacts: %v", err) // a file, a device: refused before anything runs
	}
	return p, nil
}

// withArtifacts makes dir (when given) the artifact store of a plan handed
// to the workers: the submitted plan is the one they run, in place of the
// spec's artifacts field, and its digest says so.
func withArtifacts(plan *compiler.Plan, dir string) {
	if dir == "" {
		return
	}
	plan.ArtifactStore = dir
	plan.Digest = compiler.Digest(plan)
}
