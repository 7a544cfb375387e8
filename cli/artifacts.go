package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/store"
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

// storeOf is the shared artifact store that a command managing plan's
// versions uses (runtime.SharedArtifacts): the flag's when given, else the
// plan's artifacts field; "" when neither names one.
func (a *artifactsFlag) storeOf(plan *compiler.Plan, specPath string) (string, error) {
	dir, err := a.path()
	if err != nil {
		return "", err
	}
	if dir, err = runtime.SharedArtifacts(dir, plan, filepath.Dir(specPath)); err != nil {
		return "", usageErr("%v", err)
	}
	return dir, nil
}

// statePathOf names the state at l as a run records it where others read
// it (an artifact store's owner, a sink's binding): a server's URL
// without its password, or the SQLite file's absolute path.
func statePathOf(l store.Location) (string, error) {
	if p := serverState(l); p != "" {
		return p, nil
	}
	p, err := filepath.Abs(l.Path)
	if err != nil {
		return "", usageErr("%v", err)
	}
	return p, nil
}

type artifactsOptions struct {
	state     stateFlag
	artifacts artifactsFlag
	reason    string
}

func newArtifactsCmd(io IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "artifacts",
		Short: "Move a pipeline's versions in a shared artifact store to another state (adopt)",
		Long: "The first state to put or collect a pipeline's versions in a shared artifact store owns them\n" +
			"there (recorded in the store, under .owners/). Any other state's run of that pipeline with that\n" +
			"store is refused before a task starts, and its gc leaves those versions alone: two states that\n" +
			"ran one pipeline into one store would each remove the versions the other accepted.\n" +
			"`pipec artifacts adopt` moves them to another state, on the record.",
		Args: subcommandArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return usageErr("artifacts: give a subcommand (adopt)") },
	}
	cmd.AddCommand(newArtifactsAdoptCmd(io))
	return cmd
}

func newArtifactsAdoptCmd(io IO) *cobra.Command {
	var opts artifactsOptions
	cmd := &cobra.Command{
		Use:   "adopt SPEC|PLAN [--state PATH] [--artifacts DIR|URL] [--reason TEXT]",
		Short: "Make this state the owner of the pipeline's versions in its shared artifact store",
		Long: "Adopt makes the state given by --state (or PIPEC_STATE, or the one beside SPEC) the owner of\n" +
			"the pipeline's versions in its shared artifact store (--artifacts, else the spec's artifacts\n" +
			"field), whichever state owned them. The takeover is recorded in the store's owner record, with\n" +
			"its reason. From then on the previous owner's runs of the pipeline with that store are refused,\n" +
			"and this state's gc removes the versions it did not accept, the previous owner's among them.\n" +
			"The state must exist (a run on it makes it): adopt never creates one.\n\n" +
			"Use it when the state moved (a new database) or replaces another; not to share a store between\n" +
			"two states at once: give each its own (another folder, or another prefix of the bucket).",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runArtifactsAdopt(cmd.Context(), io, args[0], opts)
		},
	}
	opts.state.register(cmd)
	opts.artifacts.register(cmd, "the shared artifact store (default: the spec's artifacts field)")
	cmd.Flags().StringVar(&opts.reason, "reason", "", "why, recorded with the adoption")
	return cmd
}

func runArtifactsAdopt(ctx context.Context, io IO, specPath string, opts artifactsOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	plan, err := loadPlan(io, specPath)
	if err != nil {
		return err
	}
	where, err := opts.artifacts.storeOf(plan, specPath)
	if err != nil {
		return err
	}
	if where == "" {
		return usageErr("artifacts adopt: pipeline %s keeps its versions beside its state (no artifacts field in %s, "+
			"no --artifacts): there is no shared store to adopt", plan.Pipeline, specPath)
	}
	loc, err := opts.state.location(io, specPath)
	if err != nil {
		return err
	}
	statePath, err := statePathOf(loc)
	if err != nil {
		return err
	}
	// Like sink adopt, never create a state: adopting into a mistyped
	// --state would give the versions to a new, empty one.
	st, err := openState(ctx, io, loc, true)
	if err != nil {
		return err
	}
	defer st.Close()
	id, err := st.StateID(ctx)
	if err != nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	s, err := artifacts.Open(where)
	if err != nil {
		return usageErr("artifacts adopt: %v", err)
	}
	prev, had, err := artifacts.Adopt(ctx, s, plan.Pipeline, artifacts.Owner{State: id, StatePath: statePath}, opts.reason, time.Now())
	if err != nil {
		return &exitError{Code: ExitFindings, Err: fmt.Errorf("artifacts adopt: %w", err)}
	}
	switch {
	case had && prev.State == id:
		fmt.Fprintf(io.Stdout, "the versions of pipeline %s in %s already belong to this state (%s); nothing changed\n",
			plan.Pipeline, s, id)
	case had:
		fmt.Fprintf(io.Stdout, "the versions of pipeline %s in %s moved from state %s to state %s\n", plan.Pipeline, s, prev.State, id)
	default:
		fmt.Fprintf(io.Stdout, "the versions of pipeline %s in %s now belong to state %s (no state owned them)\n", plan.Pipeline, s, id)
	}
	return nil
}
