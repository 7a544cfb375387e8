package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/backend"
)

// stateEnv overrides the default state location; --state overrides it.
const stateEnv = "PIPEC_STATE"

// stateFlag is the --state flag every command that reads or writes the
// state has; resolve it with (stateFlag).location.
type stateFlag struct {
	value string
	cmd   *cobra.Command
}

// The --state flag's help, by what the command does without it (see
// location and openQueue); each says what the code does.
const (
	// stateBesideSpec: the command takes a spec or plan file.
	stateBesideSpec = "the state: an SQLite file, or PostgreSQL as a postgres:// URL or 'host=… dbname=…' (default: " + stateEnv +
		" if set, else .pipec/state.db beside the spec or plan file)"
	// stateBesideSpecOrHere: the spec is optional (status, events, resolve).
	stateBesideSpecOrHere = "the state: an SQLite file, or PostgreSQL as a postgres:// URL or 'host=… dbname=…' (default: " + stateEnv +
		" if set, else .pipec/state.db beside SPEC, or in the working directory without SPEC)"
	// stateBesideSpecFlag: gc, whose spec is the optional --spec.
	stateBesideSpecFlag = "the state: an SQLite file, or PostgreSQL as a postgres:// URL or 'host=… dbname=…' (default: " + stateEnv +
		" if set, else .pipec/state.db beside --spec's file, or in the working directory without --spec)"
	// stateShared: workers have no default state.
	stateShared = "the shared state: an SQLite file (workers on this machine), or PostgreSQL as a postgres:// URL or 'host=… dbname=…'; " +
		"required unless " + stateEnv + " is set (there is no default)"
)

// stateOrder is the sentence the long help of a command with an optional
// SPEC gives: --state, then PIPEC_STATE, then the state beside SPEC.
const stateOrder = "The state is --state if given, else " + stateEnv + " if set, else .pipec/state.db beside SPEC\n" +
	"(or in the working directory without SPEC)."

// register adds --state with the help of a command that takes a spec.
func (s *stateFlag) register(cmd *cobra.Command) { s.registerHelp(cmd, stateBesideSpec) }

// registerHelp adds --state with the given help (one of the state* texts).
func (s *stateFlag) registerHelp(cmd *cobra.Command, help string) {
	s.cmd = cmd
	cmd.Flags().StringVar(&s.value, "state", "", help)
}

// location decides which state a command uses: --state, else PIPEC_STATE,
// else .pipec/state.db beside the spec (or plan) file, so that `pipec run
// dir/p.hcl` and `cd dir && pipec run p.hcl` share one state; without a
// spec, .pipec/state.db in the working directory.
func (s *stateFlag) location(io IO, specPath string) (store.Location, error) {
	v := s.value
	if s.cmd == nil || !s.cmd.Flags().Changed("state") {
		v = ""
	}
	if v == "" && io.Getenv != nil {
		v = io.Getenv(stateEnv)
	}
	if v == "" {
		if specPath != "" {
			v = filepath.Join(filepath.Dir(specPath), store.DefaultPath)
		} else {
			v = store.DefaultPath
		}
	}
	l, err := store.ParseLocation(v)
	if err != nil {
		return store.Location{}, usageErr("%v", err)
	}
	if l.Server {
		// Logs and staging stay on this machine, in .pipec beside the spec
		// (the runtime keeps them beside StatePath), in a folder of this
		// database's: two states run from one folder (staging beside
		// production) must not share one (store.ClaimScratch).
		dir := "."
		if specPath != "" {
			dir = filepath.Dir(specPath)
		}
		sum := sha256.Sum256([]byte(l.WithoutPassword()))
		l.Path = filepath.Join(dir, filepath.Dir(store.DefaultPath), "server-"+hex.EncodeToString(sum[:6]))
	}
	return l, nil
}

// stateRestartWait is how long a command waits for a state server that
// refuses connections (a restart): at its start (openState), and for each
// of its writes after (a task's write failing fails the task, as the
// state's failure). Workers, and the commands that hand them work, open
// the state with openQueue.
const stateRestartWait = 30 * time.Second

// stateRetry is how often a command started while its state's server is
// down tries again.
const stateRetry = 2 * time.Second

// openState is the one way a command opens its state: the store and the
// workers' queue on it. mustExist is for commands that only read (status,
// events): they never create a state.
func openState(ctx context.Context, io IO, l store.Location, mustExist bool) (backend.Handle, error) {
	return openStateWith(ctx, io, l, mustExist, backend.Options{WaitForServer: stateRestartWait}, "", stateRestartWait)
}

// openStateWith opens the state at l with opt. A server that does not
// answer (a restart, or a supervisor or cron starting pipec beside its
// database) is tried again every stateRetry for up to limit (0: until ctx
// ends), said once on stderr, where a wait inside the open left the
// command silent.
func openStateWith(ctx context.Context, io IO, l store.Location, mustExist bool, opt backend.Options, who string, limit time.Duration) (backend.Handle, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if mustExist {
		ok, err := l.Exists()
		if err != nil {
			return nil, usageErr("state %s: %v", l, unwrapPathError(err))
		}
		if !ok {
			return nil, usageErr("no state at %s: nothing has run here yet (or give --state, or set %s)", l, stateEnv)
		}
	}
	start := time.Now()
	for told := false; ; {
		st, err := openOnce(ctx, l, opt)
		if !errors.Is(err, store.ErrUnreachable) || limit > 0 && time.Since(start)+stateRetry > limit {
			return st, err
		}
		if !told {
			told = true
			bound := ""
			if limit > 0 {
				bound = " for up to " + limit.String()
			}
			fmt.Fprintf(io.Stderr, "pipec: %s%v; trying again every %s%s\n", who, err, stateRetry, bound)
		}
		select {
		case <-ctx.Done():
			return nil, &exitError{Code: ExitInterrupted, Err: fmt.Errorf("%sstopped while waiting for the state", who)}
		case <-time.After(stateRetry):
		}
	}
}

// openOnce opens the state at l, failing at once when its server refuses
// connections (openStateWith waits, and says so).
func openOnce(ctx context.Context, l store.Location, opt backend.Options) (backend.Handle, error) {
	st, err := backend.Open(store.WaitingForServer(ctx, 0), l, opt)
	if errors.Is(err, store.ErrUnreachable) {
		// Not a usage error: the server is down or restarting.
		return nil, &exitError{Code: ExitFindings, Err: unreachableError(fmt.Sprintf("state %s: %s", l, l.Hide(err.Error())))}
	}
	if err != nil && l.Server {
		// The driver's messages may quote the connection string.
		return nil, usageErr("state %s: %s", l, l.Hide(err.Error()))
	}
	if err != nil {
		if runtime.DiskFailure(err) {
			// A store failure, not a usage error: exit 1.
			return nil, &exitError{Code: ExitFindings, Err: fmt.Errorf("state %s: %v (disk full, a file size limit or a read-only file?); nothing was run", l, err)}
		}
		return nil, usageErr("state %s: %v", l, err)
	}
	return st, nil
}

// unreachableError is a state whose server does not answer, its message
// without the connection's password; errors.Is(err, store.ErrUnreachable).
type unreachableError string

func (e unreachableError) Error() string { return string(e) }
func (e unreachableError) Unwrap() error { return store.ErrUnreachable }

// openIfExists opens the state at l when there is one, and nil when there
// is none: a dry run reads the state and never makes one.
func openIfExists(ctx context.Context, io IO, l store.Location) (backend.Handle, error) {
	ok, err := l.Exists()
	if err != nil {
		return nil, usageErr("state %s: %v", l, unwrapPathError(err))
	}
	if !ok {
		return nil, nil
	}
	return openState(ctx, io, l, false)
}

// stateSilence says on stderr when the state stops answering a local run
// (runtime.Options.OnStateSilent) and when it answers again, once for all
// the runs of a batch: the run waits for its state, and without a word a
// frozen server or a file another process holds locked looks like a hung
// pipec.
type stateSilence struct {
	mu     sync.Mutex
	w      io.Writer
	silent int // runs whose renewal waits for the state
}

// told is runtime.Options.OnStateSilent. A renewal that ended in an error
// (the state gave up, or the stopped run gave up on it) is no answer: the
// run's own failures say what it was.
func (s *stateSilence) told(silent bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case silent:
		if s.silent++; s.silent == 1 {
			fmt.Fprintln(s.w, "pipec: the state does not answer; the run waits for it (Ctrl-C stops it)")
		}
	case s.silent > 0:
		if s.silent--; s.silent == 0 && err == nil {
			fmt.Fprintln(s.w, "pipec: the state answers again")
		}
	}
}
