package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

type showOptions struct {
	spec  string
	json  bool
	state stateFlag
}

func newShowCmd(io IO) *cobra.Command {
	var opts showOptions
	cmd := &cobra.Command{
		Use:   "show ARTIFACT[@INTERVAL] --spec SPEC|PLAN",
		Short: "Lineage of the visible version of an artifact: code_version, run, attempt, token, checks, immutable path",
		Long: "Show reads what a consumer sees: for each publish of ARTIFACT in the spec, the sink's link for\n" +
			"INTERVAL (every published interval when none is given) is resolved once, and the lineage\n" +
			"manifest (_pipec.json) of the immutable version folder it names is printed: pipeline,\n" +
			"code_version, run, task, attempt, fencing token, content digest and the checks that accepted it.\n\n" +
			"A reader should do the same: resolve the link once and read every file from the folder it\n" +
			"names (the \"path\" printed here). Opening files one by one through the link can mix two\n" +
			"versions when a publish swaps the link in between.\n\n" +
			"Exit code 1 when an interval asked for has no visible version.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runShow(cmd.Context(), io, args[0], opts)
		},
	}
	cmd.Flags().StringVar(&opts.spec, "spec", "", "the pipeline's spec or plan file, which names the artifact's sinks (required)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON")
	opts.state.register(cmd)
	return cmd
}

// shown is one visible version, as show prints it.
type shown struct {
	Publish  string `json:"publish"`
	Sink     string `json:"sink"`
	Artifact string `json:"artifact"`
	Interval string `json:"interval"`
	// Visible is the link readers open; Path the immutable folder it names
	// now, the one to read every file from.
	Visible string `json:"visible"`
	Path    string `json:"path,omitempty"`
	// Version is "artifact@interval#digest".
	Version     string               `json:"version,omitempty"`
	Pipeline    string               `json:"pipeline,omitempty"`
	CodeVersion string               `json:"code_version,omitempty"`
	Run         string               `json:"run,omitempty"`
	Task        string               `json:"task,omitempty"`
	Attempt     int                  `json:"attempt,omitempty"`
	Token       int64                `json:"token,omitempty"`
	Digest      string               `json:"digest,omitempty"`
	Checks      []sink.ManifestCheck `json:"checks"`
	// Store compares the link with the state's pointer, when the state is
	// there: "agrees", or how they differ.
	Store string `json:"store,omitempty"`
	// Error says why the version's lineage cannot be shown.
	Error string `json:"error,omitempty"`
}

func runShow(ctx context.Context, io IO, arg string, opts showOptions) error {
	if opts.spec == "" {
		return usageErr("show: --spec is required (the spec or plan that publishes the artifact)")
	}
	artifact, interval, _ := strings.Cut(arg, "@")
	if artifact == "" || strings.Contains(arg, "@") && interval == "" {
		return usageErr("show: %q is not ARTIFACT or ARTIFACT@INTERVAL", arg)
	}
	plan, err := loadPlan(io, opts.spec)
	if err != nil {
		return err
	}
	if interval != "" {
		iv, err := runtime.ResolveInterval(plan.Schedule, interval)
		if err != nil {
			return usageErr("show: %v", err)
		}
		interval = iv.Key
	}
	pubs, err := publishesOf(plan, artifact)
	if err != nil {
		return err
	}
	base := filepath.Dir(opts.spec)
	var out []shown
	missing := false
	for _, pub := range pubs {
		sk, ok := sinkOf(plan, pub.Sink)
		var d sink.Managed
		if ok {
			// The sink judges nothing here: a store is needed to build it,
			// not to read it.
			d, err = sink.OpenManaged(sink.Config{Name: sk.Name, Type: sk.Type, Path: sk.Path, Fencing: sk.Fencing,
				BaseDir: base, Pipeline: plan.Pipeline, Store: noStore{}})
		}
		if !ok || err != nil {
			why := fmt.Sprintf("sink %q is not a sink pipec can read (directory, s3)", pub.Sink)
			if ok && slices.Contains(sink.Types(), sk.Type) {
				why = err.Error()
			}
			out = append(out, shown{Publish: pub.Name, Sink: pub.Sink, Artifact: artifact, Interval: interval,
				Checks: []sink.ManifestCheck{}, Error: why})
			missing = true
			continue
		}
		intervals := []string{interval}
		if interval == "" {
			if intervals, err = d.Intervals(ctx); err != nil {
				return &exitError{Code: ExitFindings, Err: fmt.Errorf("show: sink %s: %v", sk.Name, unwrapPathError(err))}
			}
		}
		for _, iv := range intervals {
			s := showOne(ctx, d, pub, artifact, iv)
			missing = missing || s.Error != ""
			out = append(out, s)
		}
	}
	compareWithState(ctx, io, plan.Pipeline, opts, out)
	for i := range out {
		out[i].Visible, out[i].Path = relToWD(out[i].Visible), relToWD(out[i].Path)
	}
	if opts.json {
		enc := json.NewEncoder(io.Stdout)
		enc.SetIndent("", "  ")
		if out == nil {
			out = []shown{}
		}
		if err := enc.Encode(map[string]any{"artifact": artifact, "versions": out}); err != nil {
			return err
		}
	} else {
		writeShown(io, artifact, out)
	}
	if missing && interval != "" {
		return silentExit(ExitFindings)
	}
	return nil
}

// showOne resolves one interval's visible version once (a link, a pointer
// object) and reads the manifest of the version it names.
func showOne(ctx context.Context, d sink.Managed, pub compiler.PlanPublish, artifact, interval string) shown {
	s := shown{Publish: pub.Name, Sink: d.SinkName(), Artifact: artifact, Interval: interval, Checks: []sink.ManifestCheck{}}
	vis, err := d.VisibleVersion(ctx, interval)
	s.Visible, s.Path = vis.Pointer, vis.Location
	if errors.Is(err, fs.ErrNotExist) && vis.Location == "" {
		s.Error = "nothing is published for this interval"
		return s
	}
	if err != nil {
		s.Error = unwrapPathError(err).Error()
		return s
	}
	m := vis.Manifest
	v := store.Version{Artifact: m.Artifact, Interval: m.Interval, Digest: m.Digest, Token: m.Token}
	if m.Artifact != artifact || m.Interval != interval || sink.VersionName(v) != vis.Name {
		s.Error = fmt.Sprintf("the manifest (%s, token %d) does not describe the folder it is in", v.Label(), m.Token)
		return s
	}
	s.Version, s.Pipeline, s.CodeVersion, s.Run, s.Task = v.Label(), m.Pipeline, m.CodeVersion, m.Run, m.Task
	s.Attempt, s.Token, s.Digest, s.Checks = m.Attempt, m.Token, m.Digest, m.Checks
	return s
}

// noStore is the store of a sink built only to be read (pipec show): any
// call that would judge or record is a mistake.
type noStore struct{ store.Store }

func writeShown(io IO, artifact string, out []shown) {
	var b strings.Builder
	if len(out) == 0 {
		fmt.Fprintf(&b, "%s: nothing is published yet\n", artifact)
	}
	for i, s := range out {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s@%s  (publish %s -> sink %s)\n", s.Artifact, s.Interval, s.Publish, s.Sink)
		switch {
		case s.Path != "":
			fmt.Fprintf(&b, "  visible       %s\n", s.Visible)
		case s.Visible == "":
			// A sink pipec cannot read: the error says why.
			b.WriteString("  visible       unknown\n")
		default:
			// The link names no version: say so, not "visible PATH".
			fmt.Fprintf(&b, "  visible       nothing (no version at %s)\n", s.Visible)
		}
		if s.Path != "" {
			fmt.Fprintf(&b, "  path          %s\n", s.Path)
		}
		if s.Error != "" {
			fmt.Fprintf(&b, "  error         %s\n", s.Error)
			continue
		}
		fmt.Fprintf(&b, "  version       %s\n", runtime.ShortLabel(s.Version))
		fmt.Fprintf(&b, "  code_version  %s\n", orDash(s.CodeVersion))
		fmt.Fprintf(&b, "  run           %s\n", s.Run)
		fmt.Fprintf(&b, "  attempt       %s#%d\n", s.Task, s.Attempt)
		fmt.Fprintf(&b, "  token         %d\n", s.Token)
		var cs []string
		for _, c := range s.Checks {
			cs = append(cs, fmt.Sprintf("%s (in %s)", c.Name, c.Run))
		}
		if len(cs) == 0 {
			cs = []string{"none"}
		}
		fmt.Fprintf(&b, "  checks        %s\n", strings.Join(cs, ", "))
		if s.Store != "" {
			fmt.Fprintf(&b, "  state         %s\n", s.Store)
		}
	}
	fmt.Fprint(io.Stdout, b.String())
}

// compareWithState checks each visible version against the state's pointer,
// when the state exists (show never creates one): a link behind the store is
// a publish that crashed between its swap and its link, which the next run
// of the interval completes.
func compareWithState(ctx context.Context, io IO, pipeline string, opts showOptions, out []shown) {
	if ctx == nil {
		ctx = context.Background()
	}
	loc, err := opts.state.location(io, opts.spec)
	if err != nil {
		return
	}
	st, err := openState(ctx, io, loc, true)
	if err != nil {
		return
	}
	defer st.Close()
	for i := range out {
		s := &out[i]
		if s.Error != "" {
			continue
		}
		p, err := st.Pointer(ctx, pipeline, s.Sink, s.Artifact, s.Interval)
		if errors.Is(err, store.ErrNotFound) {
			s.Store = "the state has no pointer for it (published from another state?)"
			continue
		}
		if err != nil {
			s.Store = "cannot read the state: " + err.Error()
			continue
		}
		v, err := st.GetVersion(ctx, p.Version)
		switch {
		case err != nil:
			s.Store = "cannot read the state: " + err.Error()
		case sink.VersionName(v) == path.Base(strings.TrimSuffix(s.Path, "/")):
			s.Store = "agrees"
		case p.Token > s.Token:
			s.Store = fmt.Sprintf("ahead: its pointer names %s (token %d); a publish stopped before its link swap, the next run of the interval completes it",
				runtime.ShortLabel(v.Label()), p.Token)
		default:
			s.Store = fmt.Sprintf("differs: its pointer names %s (token %d)", runtime.ShortLabel(v.Label()), p.Token)
		}
	}
}

// publishesOf lists the publishes of an artifact, sorted by name; an
// artifact the plan does not know is a usage error.
func publishesOf(plan *compiler.Plan, artifact string) ([]compiler.PlanPublish, error) {
	var pubs []compiler.PlanPublish
	for _, p := range plan.Publishes {
		if p.Artifact == artifact {
			pubs = append(pubs, p)
		}
	}
	if len(pubs) > 0 {
		slices.SortFunc(pubs, func(a, b compiler.PlanPublish) int { return strings.Compare(a.Name, b.Name) })
		return pubs, nil
	}
	for _, a := range plan.Artifacts {
		if a.Name == artifact {
			return nil, &exitError{Code: ExitFindings, Err: fmt.Errorf("show: artifact %s is not published (no publish names it): a consumer sees nothing", artifact)}
		}
	}
	return nil, usageErr("show: pipeline %s has no artifact %q", plan.Pipeline, artifact)
}

func sinkOf(plan *compiler.Plan, name string) (compiler.PlanSink, bool) {
	for _, s := range plan.Sinks {
		if s.Name == name {
			return s, true
		}
	}
	return compiler.PlanSink{}, false
}

// relToWD prints a path relative to the working directory when it is inside
// it, as the run summary does.
func relToWD(p string) string {
	if p == "" || strings.Contains(p, "://") {
		return p
	}
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	if r, err := filepath.Rel(wd, abs); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}
