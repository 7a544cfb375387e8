package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

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
func LoadPlan(io IO, path string) (*compiler.Plan, error) { return loadPlanForWorkers(io, path) }

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
	loc              store.Location
}

// RefuseForeignSinks refuses plan, its spec in baseDir, when a sink it
// publishes to is bound to another state, as pipec submit does.
func (sh *Shared) RefuseForeignSinks(ctx context.Context, plan *compiler.Plan, baseDir string) error {
	return refuseForeignSinks(ctx, sh.Store, sh.loc, plan, baseDir)
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
	st, q, loc, err := openQueue(ctx, io, sf, "", "", stateRestartWait)
	if err != nil {
		return nil, err
	}
	sh := &Shared{Store: st, Queue: q, TaskState: serverState(loc), loc: loc}
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

// engineEnv is --engine's default.
const engineEnv = "PIPEC_ENGINE"

// engineCommand is the command that dispatches through another engine: the
// Temporal dispatcher is a command of its own (a nested module, so the
// Temporal SDK stays out of pipec's binary).
const engineCommand = "pipec-temporal"

// engineFlag is --engine of pipec worker and pipec submit.
type engineFlag struct{ value string }

func (e *engineFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&e.value, "engine", "", "dispatch through Temporal instead of the state's own queue: "+
		"temporal://HOST:PORT[?namespace=NS] (default: "+engineEnv+"; runs the "+engineCommand+" command, see docs/temporal.md)")
}

// get is the engine a command was given (--engine, else PIPEC_ENGINE), ""
// for the state's own queue.
func (e *engineFlag) get(io IO) string {
	if e.value != "" {
		return e.value
	}
	if io.Getenv != nil {
		return io.Getenv(engineEnv)
	}
	return ""
}

// delegate runs the command on the engine: pipec-temporal (beside this
// executable, else on PATH) replaces this process with the same command,
// arguments and flags (--engine given explicitly), so signals (SIGTERM to
// a worker) reach it directly. With only, the flags are those engineFlags
// lists for the command (pipec-temporal's own worker and submit); without,
// every flag goes (submit --due and backfill --submit, which pipec-temporal
// runs as pipec's own commands: EngineMain).
func delegate(io IO, cmd *cobra.Command, args []string, engine string, only bool) error {
	if !strings.HasPrefix(engine, "temporal://") {
		return usageErr("%s: --engine %q: the only engine is temporal://HOST:PORT[?namespace=NS]", cmd.Name(), engine)
	}
	argv := []string{engineCommand, cmd.Name()}
	argv = append(argv, args...)
	var bad []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch {
		case f.Name == "engine":
		case only && !engineFlags[cmd.Name()][f.Name]:
			bad = append(bad, "--"+f.Name)
		default:
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				for _, v := range sv.GetSlice() {
					argv = append(argv, "--"+f.Name+"="+v)
				}
				return
			}
			argv = append(argv, "--"+f.Name+"="+f.Value.String())
		}
	})
	if len(bad) > 0 {
		return usageErr("%s --engine: %s not supported on Temporal yet", cmd.Name(), strings.Join(bad, ", "))
	}
	argv = append(argv, "--engine="+engine)
	bin, err := engineBinary(cmd.Name())
	if err != nil {
		return err
	}
	return execEngine(bin, argv, engineEnviron(io))
}

// engineBinary finds pipec-temporal: beside this executable, else on PATH.
func engineBinary(cmd string) (string, error) {
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), engineCommand); isFile(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath(engineCommand)
	if err != nil {
		return "", usageErr("%s --engine: the %s command is not installed (go install github.com/pipec/pipec/temporal/cmd/%s, "+
			"from the repository's temporal/ folder; see docs/temporal.md)", cmd, engineCommand, engineCommand)
	}
	return p, nil
}

func engineEnviron(io IO) []string {
	if io.Environ != nil {
		return io.Environ()
	}
	return os.Environ()
}

// engineCancel cancels a run's workflow on the engine (pipec-temporal
// cancel), which stops its running activities' processes; the workflow's
// ID is its state's (stateID).
func engineCancel(io IO, run, engine, stateID string) error {
	if !strings.HasPrefix(engine, "temporal://") {
		return usageErr("cancel: --engine %q: the only engine is temporal://HOST:PORT[?namespace=NS]", engine)
	}
	bin, err := engineBinary("cancel")
	if err != nil {
		return err
	}
	c := exec.Command(bin, "cancel", run, "--engine="+engine, "--state-id="+stateID)
	c.Env, c.Stdout, c.Stderr = engineEnviron(io), io.Stdout, io.Stderr
	if err := c.Run(); err != nil {
		return &exitError{Code: ExitFindings, Err: fmt.Errorf("cancel: the run is cancelled in the state, but its workflow on %s: %w", engine, err)}
	}
	return nil
}

// engineFlags are the flags each command passes on to pipec-temporal.
var engineFlags = map[string]map[string]bool{
	"worker": {"state": true, "name": true, "slots": true, "workdir": true, "lease": true, "label": true, "artifacts": true},
	"submit": {"state": true, "interval": true, "wait": true, "artifacts": true, "poll": true, "force": true},
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
