package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/runtime/sink"
)

func newSinkCmd(io IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sink",
		Short: "Inspect a sink's fencing record, or move a sink to another state (adopt)",
		Long: "A sink keeps its own fencing record (the highest token it accepted per interval, and the\n" +
			"state that issued it) and is bound to the one state that first published to it. A publish\n" +
			"from any other state is refused; `pipec sink adopt` moves the binding, on the record.",
		Args: subcommandArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return usageErr("sink: give a subcommand (adopt, show)") },
	}
	cmd.AddCommand(newSinkAdoptCmd(io), newSinkShowCmd(io))
	return cmd
}

type sinkOptions struct {
	state  stateFlag
	reason string
}

func newSinkAdoptCmd(io IO) *cobra.Command {
	var opts sinkOptions
	cmd := &cobra.Command{
		Use:   "adopt SPEC|PLAN SINK [--state PATH] [--reason TEXT]",
		Short: "Bind a sink to this state, starting this state's tokens above everything the sink has seen",
		Long: "Adopt moves a sink's binding to the state given by --state (or PIPEC_STATE, or the one beside\n" +
			"SPEC). First it raises that state's tokens, durably, above every token the sink's records hold,\n" +
			"so every later publish from it is above what the sink has seen; then it rebinds the sink. The\n" +
			"adoption is recorded in the sink (.fence/.binding.json, with its history) and in the state's\n" +
			"event log. The previously bound state's publishes are refused from then on. The state must\n" +
			"exist (a run on it makes it): adopt never creates one.\n\n" +
			"Use it when the state moved (a new database, a restored backup) or a second state must\n" +
			"take over a sink; not to share a sink between two states at once.",
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSinkAdopt(cmd.Context(), io, args[0], args[1], opts)
		},
	}
	opts.state.register(cmd)
	cmd.Flags().StringVar(&opts.reason, "reason", "", "why, recorded with the adoption")
	return cmd
}

// managedSink builds a spec's sink for the sink commands, on a state that
// exists: a directory sink or an s3 sink, through the one seam
// (sink.Managed).
func managedSink(ctx context.Context, io IO, specPath, name string, opts sinkOptions) (sink.Managed, func(), error) {
	plan, err := loadPlan(io, specPath)
	if err != nil {
		return nil, nil, err
	}
	loc, err := opts.state.location(io, specPath)
	if err != nil {
		return nil, nil, err
	}
	for _, ps := range plan.Sinks {
		if ps.Name != name {
			continue
		}
		// Like status and events, never create a state: adopting into a
		// mistyped --state would bind the sink to a new, empty one.
		st, err := openState(ctx, io, loc, true)
		if err != nil {
			return nil, nil, err
		}
		statePath, err := statePathOf(loc)
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		d, err := sink.OpenManaged(sink.Config{Name: ps.Name, Type: ps.Type, Path: ps.Path, Fencing: ps.Fencing,
			BaseDir: filepath.Dir(specPath), Pipeline: plan.Pipeline, Store: st, StatePath: statePath})
		if err != nil {
			st.Close()
			return nil, nil, &exitError{Code: ExitFindings, Err: err}
		}
		return d, func() { st.Close() }, nil
	}
	return nil, nil, usageErr("%s: pipeline %s has no sink %q", specPath, plan.Pipeline, name)
}

func runSinkAdopt(ctx context.Context, io IO, specPath, name string, opts sinkOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	d, done, err := managedSink(ctx, io, specPath, name, opts)
	if err != nil {
		return err
	}
	defer done()
	res, err := d.Adopt(ctx, opts.reason, time.Now())
	if err != nil {
		return &exitError{Code: ExitFindings, Err: fmt.Errorf("adopt sink %s: %w", name, err)}
	}
	id, err := d.StateStore().StateID(ctx)
	if err != nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	switch {
	case res.Same:
		fmt.Fprintf(io.Stdout, "sink %s is already bound to this state (%s); nothing changed\n", name, id)
	case res.Previous == nil:
		fmt.Fprintf(io.Stdout, "sink %s bound to state %s (no state had published to it)\n", name, id)
	default:
		fmt.Fprintf(io.Stdout, "sink %s moved from state %s to state %s\n", name, res.Previous.State, id)
	}
	if !res.Same && res.Floor > 0 {
		fmt.Fprintf(io.Stdout, "  this state's tokens for %d interval(s) now start above %d, the highest the sink has seen\n",
			len(res.Resources), res.Floor)
	}
	return nil
}

func newSinkShowCmd(io IO) *cobra.Command {
	var opts sinkOptions
	cmd := &cobra.Command{
		Use:   "show SPEC|PLAN SINK",
		Short: "Print a sink's binding and its fencing record per interval",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSinkShow(cmd.Context(), io, args[0], args[1], opts)
		},
	}
	opts.state.register(cmd)
	return cmd
}

func runSinkShow(ctx context.Context, io IO, specPath, name string, opts sinkOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	d, done, err := managedSink(ctx, io, specPath, name, opts)
	if err != nil {
		return err
	}
	defer done()
	b, recs, err := d.FenceRecords(ctx)
	if err != nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	id, err := d.StateStore().StateID(ctx)
	if err != nil {
		return &exitError{Code: ExitFindings, Err: err}
	}
	switch {
	case b == nil:
		fmt.Fprintf(io.Stdout, "sink %s: not bound (nothing published yet)\n", name)
	case b.State == id:
		fmt.Fprintf(io.Stdout, "sink %s: bound to this state (%s), %d adoption(s) recorded\n", name, b.State, len(b.Adoptions))
	default:
		fmt.Fprintf(io.Stdout, "sink %s: bound to ANOTHER state %s, not this one (%s); %d adoption(s) recorded\n",
			name, b.State, id, len(b.Adoptions))
	}
	for _, r := range recs {
		fmt.Fprintf(io.Stdout, "  %s  %s  token %d  %s#%d  %s\n", r.Interval, r.Artifact, r.Token, r.Run, r.Attempt, r.Version)
	}
	return nil
}
