package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// What another dispatch engine's command (the Temporal dispatcher, in the
// nested module temporal/, cmd/pipec-temporal) needs of pipec's own: the
// same compile and lint before anything runs, and the same shared state.

// LoadPlan compiles and lints the spec at path (or reads a plan .json) as
// pipec run and pipec submit do, printing findings to io.Stderr; an error
// when there are errors among them.
func LoadPlan(io IO, path string) (*compiler.Plan, error) { return loadPlan(io, path) }

// WithArtifacts names dir as the plan's artifact store (pipec submit
// --artifacts), updating its digest; nothing when dir is empty.
func WithArtifacts(plan *compiler.Plan, dir string) { withArtifacts(plan, dir) }

// Shared is a shared state opened for workers: the store, its queue (for
// registering workers and listing them), the state as tasks get it in
// PIPEC_STATE, and the artifact store its workers share by default ("" for
// a database server).
type Shared struct {
	Store            store.Store
	Queue            queue.Queue
	TaskState        string
	DefaultArtifacts string
}

// OpenShared opens the state value (a postgres:// URL or an SQLite file,
// as --state takes it) the way pipec worker and pipec submit do.
func OpenShared(ctx context.Context, value string) (*Shared, error) {
	if value == "" {
		return nil, fmt.Errorf("give the shared state with --state (the path of an SQLite file, for workers on this machine, or a postgres:// URL) or set %s", stateEnv)
	}
	io := IO{Getenv: func(string) string { return "" }}
	sf := &stateFlag{}
	cmd := &cobra.Command{Use: "worker"}
	sf.register(cmd)
	if err := cmd.Flags().Set("state", value); err != nil {
		return nil, err
	}
	st, q, loc, err := openQueue(ctx, io, sf, "")
	if err != nil {
		return nil, err
	}
	sh := &Shared{Store: st, Queue: q, TaskState: serverState(loc)}
	if !loc.Server {
		abs, err := filepath.Abs(loc.Path)
		if err != nil {
			st.Close()
			return nil, err
		}
		sh.TaskState = abs
		sh.DefaultArtifacts = filepath.Join(store.ScratchDir(abs), "versions")
	}
	return sh, nil
}

// OSIO is the process's own standard streams and environment.
func OSIO() IO {
	return IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Environ: os.Environ}
}
