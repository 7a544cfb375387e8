package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/report"
	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/gc"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

type gcOptions struct {
	state     stateFlag
	spec      string
	keep      int
	dryRun    bool
	json      bool
	artifacts artifactsFlag
	workdir   string
}

func newGCCmd(io IO) *cobra.Command {
	var opts gcOptions
	cmd := &cobra.Command{
		Use:   "gc [--spec SPEC] [--keep N]",
		Short: "Remove finished staging, superseded versions and crash leftovers",
		Long: "Gc removes what no run needs any more:\n" +
			"  - the staging folders of finished attempts whose output is not the current accepted\n" +
			"    version of its interval, and staging and logs of runs the state does not know;\n" +
			"  - the heartbeat files of attempts that are over;\n" +
			"  - in the artifact store (versions/ beside the state, and the shared one of --artifacts or\n" +
			"    of the spec's artifacts field), the versions of this state's pipelines that are not the\n" +
			"    current accepted one of their interval, and the unfinished copies a crash left there\n" +
			"    (older than an hour, so a copy in progress is kept); in a shared store, only the versions\n" +
			"    of pipelines it keeps for this state (the first state to put or collect a pipeline's\n" +
			"    versions there owns them);\n" +
			"  - in this machine's cache of an object store's versions (cache/ beside the state, or in\n" +
			"    --workdir), the copies of versions that are not the current accepted one, not read for a day;\n" +
			"  - with --spec, in each of the spec's directory and s3 sinks, the versions of an interval beyond\n" +
			"    the newest N (--keep), never the visible one, and the unfinished copies a crash left.\n" +
			"Nothing of a running run is touched, nor the staging of a queued, running or unknown\n" +
			"attempt; while any run is running, no accepted version's staging and no artifact store\n" +
			"version is removed either, and a run that starts while gc removes versions waits for it\n" +
			"before it puts a task's outputs. A reader still reading a superseded version folder loses it\n" +
			"when it is removed: keep enough versions for the longest read.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGC(cmd.Context(), io, opts)
		},
	}
	opts.state.registerHelp(cmd, stateBesideSpecFlag)
	f := cmd.Flags()
	f.StringVar(&opts.spec, "spec", "", "the spec or plan whose sinks (directory, s3) are pruned too")
	f.IntVar(&opts.keep, "keep", gc.DefaultKeep, "versions kept per interval in each sink, newest first (the visible one always)")
	f.BoolVar(&opts.dryRun, "dry-run", false, "say what would be removed, remove nothing")
	f.BoolVar(&opts.json, "json", false, "print JSON")
	opts.artifacts.register(cmd, "the shared artifact store to collect too (default: the spec's artifacts, with --spec)")
	f.StringVar(&opts.workdir, "workdir", "", "a worker's --workdir on this machine, collected instead of the folder beside the state: "+
		"its staging, heartbeat files, logs and cache")
	return cmd
}

func runGC(ctx context.Context, io IO, opts gcOptions) error {
	if opts.keep < 1 {
		return usageErr("gc: --keep must be at least 1 (the visible version is always kept)")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	loc, err := opts.state.location(io, opts.spec)
	if err != nil {
		return err
	}
	st, err := openState(ctx, io, loc, true)
	if err != nil {
		return err
	}
	defer st.Close()
	// Staging and heartbeats live beside the state database (for a server,
	// in .pipec beside the spec), as the runtime keeps them.
	stateDir, err := filepath.Abs(cmp.Or(opts.workdir, store.ScratchDir(loc.Path)))
	if err != nil {
		return usageErr("%v", err)
	}
	var sinks []sink.Managed
	artsDir, err := opts.artifacts.path()
	if err != nil {
		return err
	}
	if opts.spec != "" {
		plan, err := loadPlan(io, opts.spec)
		if err != nil {
			return err
		}
		if artsDir, err = opts.artifacts.storeOf(plan, opts.spec); err != nil {
			return err
		}
		for _, s := range plan.Sinks {
			if !slices.Contains(sink.Types(), s.Type) {
				continue
			}
			d, err := sink.OpenManaged(sink.Config{Name: s.Name, Type: s.Type, Path: s.Path, Fencing: s.Fencing,
				BaseDir: filepath.Dir(opts.spec), Pipeline: plan.Pipeline, Store: st})
			if err != nil {
				return &exitError{Code: ExitFindings, Err: err}
			}
			sinks = append(sinks, d)
		}
	}
	var arts artifacts.Store
	if artsDir != "" {
		if arts, err = artifacts.Open(artsDir); err != nil {
			return usageErr("gc: %v", err)
		}
	}
	statePath, err := statePathOf(loc)
	if err != nil {
		return err
	}
	rep, err := gc.Collect(ctx, gc.Options{Store: st, StateDir: stateDir, StatePath: statePath, Sinks: sinks, Artifacts: arts,
		Keep: opts.keep, DryRun: opts.dryRun})
	if rep != nil {
		for i := range rep.Removed {
			rep.Removed[i].Path = relToWD(rep.Removed[i].Path)
		}
	}
	if err != nil {
		if rep != nil {
			printGC(io, rep, opts.json)
		}
		return &exitError{Code: ExitFindings, Err: fmt.Errorf("gc: %w", err)}
	}
	return printGC(io, rep, opts.json)
}

func printGC(io IO, rep *gc.Report, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(io.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	var b strings.Builder
	verb := "removed"
	if rep.DryRun {
		verb = "would remove"
	}
	fmt.Fprintf(&b, "%s %d item(s), %s\n", verb, len(rep.Removed), humanBytes(rep.Bytes))
	for _, it := range rep.Removed {
		fmt.Fprintf(&b, "  %s  (%s)\n", it.Path, it.Why)
	}
	if len(rep.Running) > 0 {
		fmt.Fprintf(&b, "kept what running runs may read: %s\n", report.Escape(strings.Join(rep.Running, ", ")))
	}
	for _, f := range rep.Foreign {
		owner := f.State
		if f.StatePath != "" {
			owner += " (" + f.StatePath + ")"
		}
		fmt.Fprintf(&b, "left alone: the versions of pipeline %s in %s, which belong to state %s\n",
			report.Escape(f.Pipeline), report.Escape(f.Store), report.Escape(owner))
	}
	_, err := fmt.Fprint(io.Stdout, b.String())
	return err
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
