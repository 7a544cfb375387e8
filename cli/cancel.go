package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/runtime/store"
)

type cancelOptions struct {
	state  stateFlag
	reason string
	engine engineFlag
}

// newCancelCmd is the control action that ends a run, local or handed to
// workers, as cancelled: the store records who and why in the run; the
// run's own pipec (a local run, at its next lease renewal) or its workers
// (at their next heartbeat) stop its tasks, and the interval is free.
func newCancelCmd(io IO) *cobra.Command {
	var opts cancelOptions
	cmd := &cobra.Command{
		Use:   "cancel RUN [SPEC|PLAN] --reason TEXT",
		Short: "End a run as cancelled (a recorded control action)",
		Long: "Cancel ends RUN (an id such as orders/2024-01-01/r1, as pipec status lists them) as cancelled:\n" +
			"its tasks not started yet never start, its running tasks are stopped by whoever runs them\n" +
			"(pipec run within a third of its run lease, a worker at its next heartbeat), nothing of it is\n" +
			"published once they have stopped, and the interval is free for the next run. Who cancelled\n" +
			"it and why are recorded in the run (run.cancelled). A non-idempotent task stopped this way\n" +
			"is unknown, as any interrupted one: settle it with pipec resolve.\n" +
			stateOrder,
		Args: withUsage(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := ""
			if len(args) == 2 {
				spec = args[1]
			}
			return runCancel(cmd.Context(), io, args[0], spec, opts)
		},
	}
	opts.state.registerHelp(cmd, stateBesideSpecOrHere)
	cmd.Flags().StringVar(&opts.reason, "reason", "", "why (recorded with the cancellation)")
	opts.engine.register(cmd)
	return cmd
}

func runCancel(ctx context.Context, io IO, runID, spec string, opts cancelOptions) error {
	if strings.TrimSpace(opts.reason) == "" {
		return usageErr("cancel: --reason is required: say why (it is recorded)")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	st, err := openRunState(ctx, io, &opts.state, spec, runID, "cancel")
	if err != nil {
		return err
	}
	defer st.Close()
	run, err := st.CancelRun(ctx, runID, opts.reason, who())
	if errors.Is(err, store.ErrConflict) {
		return &exitError{Code: ExitFindings, Err: fmt.Errorf("cancel: %w", err)}
	}
	if err != nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	if _, err := fmt.Fprintf(io.Stdout, "cancelled %s %s: its running tasks stop within seconds; interval %s is free\n",
		run.ID, run.Cancelled, run.Interval); err != nil {
		return err
	}
	if e := opts.engine.get(io); e != "" {
		// Dispatched through an engine: cancel its workflow too, which
		// stops the activities' processes at once.
		id, err := st.StateID(ctx)
		if err != nil {
			return &exitError{Code: ExitFindings, Err: err}
		}
		return engineCancel(io, run.ID, e, id)
	}
	return nil
}

// openRunState opens the state that holds runID, for a control action
// (cmd): a state that must exist, and a run that must be in it.
func openRunState(ctx context.Context, io IO, sf *stateFlag, spec, runID, cmd string) (store.Store, error) {
	loc, err := sf.location(io, spec)
	if err != nil {
		return nil, err
	}
	st, err := openState(ctx, io, loc, true)
	if err != nil {
		return nil, err
	}
	if _, err := st.GetRun(ctx, runID); err != nil {
		st.Close()
		if errors.Is(err, store.ErrNotFound) {
			return nil, usageErr("%s: no run %q (pipec status lists the runs)", cmd, runID)
		}
		return nil, &exitError{Code: ExitFindings, Err: err}
	}
	return st, nil
}
