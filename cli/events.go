package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pipec/pipec/report"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/store"
)

type eventsOptions struct {
	state stateFlag
	json  bool
}

func newEventsCmd(io IO) *cobra.Command {
	var opts eventsOptions
	cmd := &cobra.Command{
		Use:   "events RUN [SPEC|PLAN]",
		Short: "Show a run attempt by attempt (tokens, classes, exit codes, error tails, fenced publishes)",
		Long: "Events shows what happened in one run (an id such as orders/2024-01-01/r1, as pipec status\n" +
			"lists them): every attempt with its token, state, error class, exit code and the tail of its\n" +
			"output (secrets redacted), then the run's event log, fenced publishes included.\n" +
			stateOrder + "\n" +
			"Attempts are listed by task in the plan's order when SPEC is given and is the run's pipeline,\n" +
			"else in the order the tasks started (and the output says so).",
		Args: withUsage(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := ""
			if len(args) == 2 {
				spec = args[1]
			}
			return runEvents(cmd.Context(), io, args[0], spec, opts)
		},
	}
	opts.state.registerHelp(cmd, stateBesideSpecOrHere)
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the event log as JSON lines (schema/events.schema.json), as pipec run --json does")
	return cmd
}

func runEvents(ctx context.Context, io IO, id, spec string, opts eventsOptions) error {
	loc, err := opts.state.location(io, spec)
	if err != nil {
		return err
	}
	st, err := openState(ctx, io, loc, true)
	if err != nil {
		return err
	}
	defer st.Close()
	if ctx == nil {
		ctx = context.Background()
	}
	run, err := st.GetRun(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return usageErr("events: no run %q (pipec status lists the runs)", id)
	}
	if err != nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	evs, err := st.Events(ctx, id)
	if err != nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	if opts.json {
		enc := json.NewEncoder(io.Stdout)
		for _, ev := range evs {
			if err := enc.Encode(toLogEvent(ev)); err != nil {
				return err
			}
		}
		return nil
	}
	as, err := st.Attempts(ctx, id)
	if err != nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	order, how := taskOrder(planForOrder(io, spec), run.Pipeline, evs)
	slices.SortStableFunc(as, func(x, y store.Attempt) int {
		return cmp.Or(order(x.Task, y.Task), cmp.Compare(x.Number, y.Number))
	})
	var b strings.Builder
	fmt.Fprintf(&b, "run %s  %s  interval %s/%s  code_version %s\n", run.ID, run.State,
		run.IntervalStart.Format(time.RFC3339), run.IntervalEnd.Format(time.RFC3339), orDash(run.CodeVersion))
	b.WriteString("attempts:\n")
	if len(as) == 0 {
		b.WriteString("  none\n")
	}
	attW := 0
	for _, a := range as {
		attW = max(attW, len(fmt.Sprintf("%s#%d", a.Task, a.Number)))
	}
	for _, a := range as {
		line := fmt.Sprintf("  %-*s  token %d  %s", attW, fmt.Sprintf("%s#%d", a.Task, a.Number), a.Token, a.State)
		if a.Class != "" {
			line += "  class " + a.Class
		}
		if a.State == store.AttemptFailed {
			line += fmt.Sprintf("  exit %d", a.ExitCode)
		}
		if !a.Ended.IsZero() && !a.Started.IsZero() {
			line += "  " + a.Ended.Sub(a.Started).Round(time.Millisecond).String()
		}
		if !a.State.Finished() && a.Host != "" {
			// Where to look before settling it with pipec resolve.
			if a.PID > 0 {
				line += fmt.Sprintf("  pid %d on %s", a.PID, a.Host)
			} else {
				line += "  on " + a.Host
			}
		}
		b.WriteString(line + "\n")
		if a.ErrorTail != "" {
			for _, l := range strings.Split(a.ErrorTail, "\n") {
				b.WriteString("      | " + l + "\n")
			}
		}
	}
	var fenced []string
	for _, ev := range evs {
		if ev.Kind != store.EventPublishFenced {
			continue
		}
		var p struct {
			Sink         string `json:"sink"`
			Label        string `json:"label"`
			Token        int64  `json:"token"`
			CurrentToken int64  `json:"current_token"`
			GrantedToken int64  `json:"granted_token"`
			FencedBy     string `json:"fenced_by"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		why := fmt.Sprintf("whose pointer holds token %d", p.CurrentToken)
		if p.FencedBy == "grant" {
			// The pointer may be older (or empty): what fenced it is a newer
			// attempt of the same task, granted token GrantedToken.
			why = fmt.Sprintf("as a newer attempt of the task holds token %d", p.GrantedToken)
		}
		fenced = append(fenced, fmt.Sprintf("  %s#%d  token %d  refused by sink %s, %s  (%s)",
			ev.Task, ev.Attempt, p.Token, p.Sink, why, runtime.ShortLabel(p.Label)))
	}
	if len(fenced) > 0 {
		b.WriteString("fenced publishes:\n" + strings.Join(fenced, "\n") + "\n")
	}
	b.WriteString("events:\n")
	// Columns as wide as their longest entry shown: kind, then who.
	whoOf := func(ev store.Event) string {
		if ev.Attempt > 0 {
			return fmt.Sprintf("%s#%d", ev.Task, ev.Attempt)
		}
		return ev.Task
	}
	kindW, whoW := 0, 0
	for _, ev := range evs {
		kindW, whoW = max(kindW, len(ev.Kind)), max(whoW, len(whoOf(ev)))
	}
	for _, ev := range evs {
		line := fmt.Sprintf("  %6d  %s  %-*s  %-*s", ev.Seq, ev.Time.UTC().Format("15:04:05.000"), kindW, ev.Kind, whoW, whoOf(ev))
		if len(ev.Payload) > 0 && string(ev.Payload) != "{}" && string(ev.Payload) != "null" {
			line += "  " + string(ev.Payload)
		}
		if ev.Kind == store.EventPublishFenced {
			line += "  <- FENCED"
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	if how != orderPlan {
		b.WriteString("(attempts in the order their tasks started: give the SPEC for the plan's order)\n")
	}
	// Reasons and error tails quote task output: escaped, like every text output.
	_, err = fmt.Fprint(io.Stdout, report.Escape(b.String()))
	return err
}
