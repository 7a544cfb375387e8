package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/store"
)

func newHeartbeatCmd(io IO) *cobra.Command {
	return &cobra.Command{
		Use:   "heartbeat",
		Short: "Renew the lease of the task attempt that runs this command",
		Long: "Heartbeat is for task scripts whose spec has a heartbeat block. Run it at least once per\n" +
			"heartbeat period; it renews the attempt's lease in the state database, using the variables\n" +
			"pipec gave the task: PIPEC_STATE, PIPEC_RUN_ID, PIPEC_TASK, PIPEC_ATTEMPT and PIPEC_TOKEN.\n" +
			"Under a database server's state (a worker, or pipec run --state postgres://…) it renews\n" +
			"through the file PIPEC_HEARTBEAT instead, which the worker watches: tasks are never given\n" +
			"the database's password.\n\n" +
			"Exit code 1 when the lease is lost (the attempt was declared unknown and a newer attempt\n" +
			"may be running): stop working, whatever this attempt publishes will be fenced.\n" +
			"Touching the file named by PIPEC_HEARTBEAT renews the lease just as well.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runHeartbeat(cmd.Context(), io)
		},
	}
}

func runHeartbeat(ctx context.Context, io IO) error {
	get := func(k string) (string, error) {
		v := io.Getenv(k)
		if v == "" {
			return "", usageErr("heartbeat: %s is not set; run pipec heartbeat from a task that pipec run started", k)
		}
		return v, nil
	}
	var vals [5]string
	for i, k := range []string{"PIPEC_STATE", "PIPEC_RUN_ID", "PIPEC_TASK", "PIPEC_ATTEMPT", "PIPEC_TOKEN"} {
		v, err := get(k)
		if err != nil {
			return err
		}
		vals[i] = v
	}
	attempt, err := strconv.Atoi(vals[3])
	if err != nil {
		return usageErr("heartbeat: PIPEC_ATTEMPT=%q is not a number", vals[3])
	}
	token, err := strconv.ParseInt(vals[4], 10, 64)
	if err != nil {
		return usageErr("heartbeat: PIPEC_TOKEN=%q is not a number", vals[4])
	}
	if ctx == nil {
		ctx = context.Background()
	}
	loc, err := store.ParseLocation(vals[0])
	if err != nil {
		return usageErr("heartbeat: %v", err)
	}
	if loc.Server {
		return heartbeatFile(io, vals[2], attempt, token)
	}
	st, err := openState(ctx, io, loc, true)
	if err != nil {
		return err
	}
	defer st.Close()
	ref := store.AttemptRef{Run: vals[1], Task: vals[2], Number: attempt}
	if err := renewBeat(ctx, st, ref, token); err != nil {
		if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrNotFound) {
			fmt.Fprintf(io.Stderr, "pipec heartbeat: lease lost for %s attempt %d (token %d): stop; this attempt's output will be fenced\n",
				ref.Task, ref.Number, token)
			return silentExit(ExitFindings)
		}
		return &exitError{Code: ExitFindings, Err: err}
	}
	return nil
}

// renewBeat renews the attempt's lease for a task's beat. A renewal is
// refused while the attempt is queued: the runtime records the process it
// started (MarkRunning) only once it has its pid, and a task that beats at
// once can get there first. Read after the refusal, the attempt still
// queued with this token has nothing to renew yet, and nothing is lost;
// running with it, its start was recorded in between, and the lease is
// renewed again. Anything else is the refusal.
func renewBeat(ctx context.Context, st store.Store, ref store.AttemptRef, token int64) error {
	err := st.RenewLease(ctx, ref, token, 0)
	if !errors.Is(err, store.ErrLeaseLost) {
		return err
	}
	a, gerr := st.GetAttempt(ctx, ref)
	switch {
	case gerr != nil || a.Token != token:
		return err
	case a.State == store.AttemptQueued:
		return nil
	case a.State == store.AttemptRunning:
		return st.RenewLease(ctx, ref, token, 0)
	}
	return err
}

// heartbeatFile renews through the heartbeat file (runtime.BeatFile): under a
// server's state PIPEC_STATE has no password, and the process that holds
// one (the worker, or pipec run) renews the lease as it sees the file move.
func heartbeatFile(io IO, task string, attempt int, token int64) error {
	path := io.Getenv("PIPEC_HEARTBEAT")
	if path == "" {
		return usageErr("heartbeat: PIPEC_HEARTBEAT is not set: under a database server's state, pipec heartbeat renews " +
			"through the heartbeat file, which only a task with a heartbeat block gets (without one, pipec keeps the lease " +
			"while the task runs)")
	}
	if err := runtime.BeatFile(path); err != nil {
		if errors.Is(err, runtime.ErrBeatLost) {
			fmt.Fprintf(io.Stderr, "pipec heartbeat: lease lost for %s attempt %d (token %d): stop; this attempt's output will be fenced\n",
				task, attempt, token)
			return silentExit(ExitFindings)
		}
		return &exitError{Code: ExitFindings, Err: err}
	}
	return nil
}

// serverState is what tasks get as PIPEC_STATE under a database server's
// state: its URL or keyword/value string without any password; "" for a
// file.
func serverState(loc store.Location) string { return loc.WithoutPassword() }
