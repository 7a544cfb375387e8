package cli

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/runtime/store"
)

type resolveOptions struct {
	state   stateFlag
	as      string
	reason  string
	attempt int
}

// newResolveCmd is the control action that settles an attempt nobody saw
// end: a non-idempotent task whose pipec died while it ran. Only a person
// can know whether its effect happened (the ledger, the payment provider);
// pipec records their word, who gave it and why, and the next run follows it.
func newResolveCmd(io IO) *cobra.Command {
	var opts resolveOptions
	cmd := &cobra.Command{
		Use:   "resolve RUN TASK [SPEC|PLAN] --as succeeded|failed --reason TEXT",
		Short: "Settle an unknown attempt of a non-idempotent task (a recorded control action)",
		Long: "Resolve settles the unknown attempt of TASK in RUN (pipec run names both when it stops on one).\n" +
			"--as succeeded: its effect happened; the next run does not run the task again and audits and\n" +
			"publishes its staged outputs, if any. --as failed: it did not; the next run runs the task again.\n" +
			"The decision, the reason and who gave it are recorded in the run's events (attempt.resolved).\n" +
			stateOrder,
		Args: withUsage(cobra.RangeArgs(2, 3)),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := ""
			if len(args) == 3 {
				spec = args[2]
			}
			return runResolve(cmd.Context(), io, args[0], args[1], spec, opts)
		},
	}
	opts.state.registerHelp(cmd, stateBesideSpecOrHere)
	cmd.Flags().StringVar(&opts.as, "as", "", "succeeded or failed")
	cmd.Flags().StringVar(&opts.reason, "reason", "", "why (recorded with the decision)")
	cmd.Flags().IntVar(&opts.attempt, "attempt", 0, "the attempt number (default: the task's unknown attempt)")
	return cmd
}

func runResolve(ctx context.Context, io IO, runID, task, spec string, opts resolveOptions) error {
	as := store.AttemptState(opts.as)
	if as != store.AttemptSucceeded && as != store.AttemptFailed {
		return usageErr("resolve: --as must be succeeded or failed, not %q", opts.as)
	}
	if strings.TrimSpace(opts.reason) == "" {
		return usageErr("resolve: --reason is required: say how you know (it is recorded)")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	st, err := openRunState(ctx, io, &opts.state, spec, runID, "resolve")
	if err != nil {
		return err
	}
	defer st.Close()
	as2, err := st.Attempts(ctx, runID)
	if err != nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	var mine []store.Attempt
	var unknown []store.Attempt
	for _, a := range as2 {
		if a.Task != task {
			continue
		}
		mine = append(mine, a)
		if a.State == store.AttemptUnknown && (opts.attempt == 0 || a.Number == opts.attempt) {
			unknown = append(unknown, a)
		}
	}
	if len(mine) == 0 {
		return usageErr("resolve: run %s has no attempt of task %q", runID, task)
	}
	if len(unknown) == 0 {
		var states []string
		for _, a := range mine {
			states = append(states, fmt.Sprintf("attempt %d is %s", a.Number, a.State))
		}
		return &exitError{Code: ExitFindings, Err: fmt.Errorf("resolve: task %s in %s has no unknown attempt to settle (%s)",
			task, runID, strings.Join(states, ", "))}
	}
	if len(unknown) > 1 {
		return usageErr("resolve: task %s in %s has %d unknown attempts; name one with --attempt", task, runID, len(unknown))
	}
	a, err := st.ResolveAttempt(ctx, unknown[0].AttemptRef, as, opts.reason, who())
	if err != nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	next := "the next run of the interval does not run it again"
	if as == store.AttemptFailed {
		next = "the next run of the interval runs it again"
	}
	_, err = fmt.Fprintf(io.Stdout, "resolved %s %s#%d (token %d) as %s: %s\n", runID, task, a.Number, a.Token, as, next)
	return err
}

// who names the person giving a control action: user@host.
func who() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}
