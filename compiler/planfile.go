package compiler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

// PlanFileError is a plan file refused by LoadPlan or ReadPlan: unreadable, not a
// plan, or a plan that pipec compile could not have written. Problems lists
// each reason, in plan order.
type PlanFileError struct {
	File     string
	Problems []string
}

// maxShownProblems bounds the problems an error message lists: a hostile
// plan can hold millions.
const maxShownProblems = 10

func (e *PlanFileError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if len(e.Problems) == 1 {
		b.WriteString(": " + e.Problems[0])
		return b.String()
	}
	b.WriteString(": not a valid plan:")
	for i, p := range e.Problems {
		if i == maxShownProblems {
			fmt.Fprintf(&b, "\n  and %d more", len(e.Problems)-i)
			break
		}
		b.WriteString("\n  " + p)
	}
	return b.String()
}

// maxPlanSize bounds what LoadPlan reads: a plan of 100,000 tasks is about
// 60 MB.
const maxPlanSize = 512 << 20

// LoadPlan reads and validates a plan file written by `pipec compile`. A plan
// is input like a spec: a digest proves only that the file is consistent with
// itself (anyone can recompute it), so every name and reference is checked
// again with the loaders' and the compiler's rules (see ReadPlan). Sink paths
// are resolved from the plan file's folder, as the runtime resolves them.
func LoadPlan(path string) (*Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &PlanFileError{File: path, Problems: []string{unwrapPath(err)}}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPlanSize+1))
	if err != nil {
		return nil, &PlanFileError{File: path, Problems: []string{unwrapPath(err)}}
	}
	if len(b) > maxPlanSize {
		return nil, &PlanFileError{File: path, Problems: []string{fmt.Sprintf("larger than %d MB: not a plan", maxPlanSize>>20)}}
	}
	return ReadPlan(path, b)
}

func unwrapPath(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// ReadPlan parses and validates the bytes of a plan file named file. It
// refuses:
//
//   - anything but one JSON object with the fields of a Plan (an unknown
//     field is refused, not ignored), of this apiVersion, whose digest matches;
//   - a name the loaders would refuse (spec.ValidName, spec.ValidEnvName), a
//     duration, timestamp, enumeration or count out of its range;
//   - a name declared twice, and a reference the compiler would refuse (a
//     missing task, artifact, check, pool, policy, class or sink; a cycle;
//     two producers of an artifact; a sink conflict);
//   - derived fields (needs, producers, checks of a publish, artifacts,
//     order) that are not what the compiler derives from the rest.
//
// The last check compiles the plan's pipeline again and compares the two
// plans: a valid plan is exactly what pipec compile writes for it.
func ReadPlan(file string, b []byte) (*Plan, error) {
	fail := func(problems ...string) (*Plan, error) { return nil, &PlanFileError{File: file, Problems: problems} }
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		return fail("not a plan: " + err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return fail("not a plan: data after the plan's JSON object")
	}
	if p.APIVersion != APIVersion {
		return fail(fmt.Sprintf("apiVersion %q, want %q", clip(p.APIVersion), APIVersion))
	}
	if d := Digest(&p); d != p.Digest {
		return fail("the plan's digest does not match its content (edited by hand?); compile it again")
	}
	v := &planValidator{file: file}
	sp := v.pipeline(&p)
	if len(v.problems) > 0 {
		return fail(v.problems...)
	}
	res, ds := Compile(sp)
	for _, d := range ds {
		if d.Severity == diag.Error {
			v.problems = append(v.problems, d.Message+" ["+d.Rule+"]")
		}
	}
	if len(v.problems) > 0 {
		return fail(v.problems...)
	}
	if problems := orderProblems(p.Order, res); len(problems) > 0 {
		return fail(problems...)
	}
	if !bytes.Equal(res.Plan.Marshal(), p.Marshal()) {
		return fail("the plan's derived fields (needs, producers, checks, artifacts, order) or its sorting differ from what pipec compile writes for its tasks: compile the spec again")
	}
	return &p, nil
}

// orderProblems checks a plan's order against the graph compiled from its
// tasks: every node exactly once, each after every node it needs.
func orderProblems(order []string, res *Result) []string {
	var out []string
	nodes := map[string]bool{}
	for _, id := range res.Plan.Order {
		nodes[id] = true
	}
	at := make(map[string]int, len(order))
	for i, id := range order {
		switch _, dup := at[id]; {
		case !nodes[id]:
			out = append(out, fmt.Sprintf("order names %q, which is no task, check or publish of the plan", clip(id)))
		case dup:
			out = append(out, fmt.Sprintf("order names %q twice", id))
		default:
			at[id] = i
		}
	}
	for _, id := range res.Plan.Order {
		if _, ok := at[id]; !ok {
			out = append(out, fmt.Sprintf("order leaves out %q", id))
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, id := range order {
		for _, pred := range res.Graph.Pred[id] {
			if at[pred] > at[id] {
				out = append(out, fmt.Sprintf("order puts %q before %q, which it needs", id, pred))
			}
		}
	}
	return out
}

// clip shortens a value shown in a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// planValidator rebuilds the spec a plan was compiled from, checking each
// value as the loaders check what an author writes.
type planValidator struct {
	file     string
	problems []string
}

func (v *planValidator) problemf(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

// rng is the range of every element rebuilt from a plan: the plan file, with
// no line (a plan's findings are messages, not places in a source).
func (v *planValidator) rng() diag.Range { return diag.Range{Filename: v.file} }

func (v *planValidator) named(kind, name string, seen map[string]bool) spec.Named {
	if !spec.ValidName(name) {
		v.problemf("%s", spec.NameError(kind, clip(name)))
	} else if seen[name] {
		v.problemf("%s %q is declared twice", kind, name)
	}
	seen[name] = true
	r := v.rng()
	return spec.Named{Name: name, NameRange: r, Range: r}
}

func (v *planValidator) ref(kind, name string) spec.Ref {
	if !spec.ValidName(name) {
		v.problemf("%s", spec.NameError(kind, clip(name)))
	}
	return spec.Ref{Name: name, Range: v.rng()}
}

func (v *planValidator) refs(kind string, names []string) []spec.Ref {
	out := make([]spec.Ref, 0, len(names))
	for _, n := range names {
		out = append(out, v.ref(kind, n))
	}
	return out
}

// duration parses a duration of the plan; zero is allowed only where the spec
// allows it.
func (v *planValidator) duration(what, s string, zeroOK bool) time.Duration {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		v.problemf("%s: invalid duration %q", what, clip(s))
	case d < 0 || (d == 0 && !zeroOK):
		v.problemf("%s: duration %q must be greater than zero", what, s)
	}
	return d
}

func (v *planValidator) count(what string, n, min int) {
	if n < min || n > 1<<31-1 {
		v.problemf("%s: %d is out of range", what, n)
	}
}

func (v *planValidator) pipeline(p *Plan) *spec.Pipeline {
	if !spec.ValidName(p.Pipeline) {
		v.problemf("%s", spec.NameError(spec.KindPipeline, clip(p.Pipeline)))
	}
	r := v.rng()
	sp := &spec.Pipeline{Name: p.Pipeline, NameRange: r, Range: r, File: v.file, CodeVersion: p.CodeVersion}
	if p.CodeVersion != "" {
		sp.Set("code_version", r)
	}
	if p.Workers != 0 {
		v.count("workers", p.Workers, 1)
		sp.Workers = p.Workers
		sp.Set("workers", r)
	}
	if p.ArtifactStore != "" {
		sp.Artifacts = p.ArtifactStore
		sp.Set("artifacts", r)
	}
	if s := p.Schedule; s != nil {
		sch := &spec.Schedule{Range: v.rng(), Catchup: s.Catchup, MaxActiveRuns: s.MaxActiveRuns}
		if s.Every != "" {
			sch.Every = v.duration("schedule every", s.Every, false)
			sch.Set("every", sch.Range)
		}
		if s.Start != "" {
			t, err := spec.ParseTime(s.Start)
			if err != nil {
				v.problemf("schedule start: %v", err)
			}
			sch.Start = t
			sch.Set("start", sch.Range)
		}
		v.count("schedule max_active_runs", s.MaxActiveRuns, 0)
		sch.Set("catchup", sch.Range)
		sch.Set("max_active_runs", sch.Range)
		sp.Schedule = sch
	}
	if b := p.RetryBudget; b != nil {
		if b.Ratio < 0 {
			v.problemf("retry_budget ratio: %g must not be negative", b.Ratio)
		}
		v.count("retry_budget min", b.Min, 0)
		rb := &spec.RetryBudget{Range: v.rng(), Ratio: b.Ratio, Min: b.Min}
		rb.Set("ratio", rb.Range)
		rb.Set("min", rb.Range)
		sp.RetryBudget = rb
	}
	seen := map[string]bool{}
	for _, pl := range p.Pools {
		n := v.named(spec.KindPool, pl.Name, seen)
		v.count("pool "+clip(pl.Name)+" slots", pl.Slots, 1)
		sp.Pools = append(sp.Pools, spec.Pool{Named: n, Slots: pl.Slots})
	}
	clear(seen)
	for _, e := range p.Errors {
		n := v.named("error class", e.Name, seen)
		for _, c := range e.ExitCodes {
			if c < 1 || c > 255 {
				v.problemf("error class %q: exit code %d is out of range (1 to 255)", clip(e.Name), c)
			}
		}
		sp.Errors = append(sp.Errors, spec.ErrorClass{Named: n, ExitCodes: e.ExitCodes, Match: e.Match, Deterministic: e.Deterministic})
	}
	clear(seen)
	policies := map[string]*PlanRetry{}
	for i := range p.Tasks {
		sp.Tasks = append(sp.Tasks, v.task(&p.Tasks[i], seen, policies, sp))
	}
	clear(seen)
	for _, c := range p.Checks {
		ch := spec.Check{Named: v.named(spec.KindCheck, c.Name, seen), Input: v.ref("artifact", c.Input),
			RowCountMin: c.RowCountMin, RowCountMax: c.RowCountMax, Unique: c.Unique, NotNull: c.NotNull, Columns: c.Columns, Command: c.Command}
		for _, bound := range []*int{c.RowCountMin, c.RowCountMax} {
			if bound != nil && *bound < 0 {
				v.problemf("check %q: a row count bound of %d is negative", clip(c.Name), *bound)
			}
		}
		if len(c.Command) > 0 && c.Command[0] == "" {
			v.problemf("check %q: the command's program name is empty", clip(c.Name))
		}
		sp.Checks = append(sp.Checks, ch)
	}
	clear(seen)
	for _, s := range p.Sinks {
		sk := spec.Sink{Named: v.named(spec.KindSink, s.Name, seen), Type: s.Type, Path: s.Path, Fencing: spec.Fencing(s.Fencing)}
		if s.Type == "" || s.Path == "" {
			v.problemf("sink %q: type and path are required", clip(s.Name))
		}
		if sk.Fencing != spec.FencingToken && sk.Fencing != spec.FencingNone {
			v.problemf("sink %q: fencing %q is not \"token\" or \"none\"", clip(s.Name), clip(s.Fencing))
		}
		sk.Set("path", sk.NameRange)
		sp.Sinks = append(sp.Sinks, sk)
	}
	clear(seen)
	for _, pub := range p.Publishes {
		sp.Publishes = append(sp.Publishes, spec.Publish{Named: v.named(spec.KindPublish, pub.Name, seen),
			Artifact: v.ref("artifact", pub.Artifact), Sink: v.ref(spec.KindSink, pub.Sink)})
	}
	return sp
}

func (v *planValidator) task(t *PlanTask, seen map[string]bool, policies map[string]*PlanRetry, sp *spec.Pipeline) spec.Task {
	n := v.named(spec.KindTask, t.Name, seen)
	what := "task " + fmt.Sprintf("%q", clip(t.Name))
	st := spec.Task{Named: n, Command: t.Command, Outputs: v.refs("artifact", t.Outputs), DependsOn: v.refs(spec.KindTask, t.DependsOn),
		Effects: v.refs("effect", t.Effects)}
	if len(t.Command) == 0 || t.Command[0] == "" {
		v.problemf("%s: the command is empty", what)
	}
	for _, in := range t.Inputs {
		if !spec.ValidName(in.Artifact) {
			v.problemf("%s", spec.NameError("artifact", clip(in.Artifact)))
		}
		st.Inputs = append(st.Inputs, spec.Input{Artifact: in.Artifact, Offset: in.Offset, Range: v.rng()})
	}
	if len(t.Env) > 0 {
		st.Env = make(map[string]string, len(t.Env))
		for _, k := range sortedKeys(t.Env) {
			if !spec.ValidEnvName(k) {
				v.problemf("%s: invalid environment variable name %q", what, clip(k))
			}
			st.Env[k] = t.Env[k]
			st.Set("env."+k, n.Range)
		}
	}
	for _, l := range t.Labels {
		if !spec.ValidLabel(l) {
			v.problemf("%s: %s", what, spec.LabelError(clip(l)))
		}
		st.Labels = append(st.Labels, spec.Ref{Name: l, Range: v.rng()})
	}
	if t.Labels != nil && len(t.Labels) == 0 {
		v.problemf("%s: labels is empty (pipec compile leaves it out)", what)
	}
	for _, s := range t.SecretEnv {
		if !spec.ValidEnvName(s) {
			v.problemf("%s: invalid environment variable name %q in secret_env", what, clip(s))
		}
		st.SecretEnv = append(st.SecretEnv, spec.Ref{Name: s, Range: v.rng()})
	}
	idem := t.Idempotent
	st.Idempotent = &idem
	if t.Pool != "" {
		r := v.ref(spec.KindPool, t.Pool)
		st.Pool = &r
	}
	if t.Timeout != "" {
		st.Timeout = v.duration(what+" timeout", t.Timeout, false)
		st.Set("timeout", n.Range)
	}
	if h := t.Heartbeat; h != nil {
		hb := &spec.Heartbeat{Range: v.rng(), Every: v.duration(what+" heartbeat every", h.Every, false), Lease: v.duration(what+" heartbeat lease", h.Lease, false)}
		hb.Set("every", hb.Range)
		hb.Set("lease", hb.Range)
		st.Heartbeat = hb
	}
	if f := t.Failover; f != nil {
		v.count(what+" failover per_worker", f.PerWorker, 0)
		fo := &spec.Failover{Range: v.rng(), PerWorker: f.PerWorker}
		fo.Set("per_worker", fo.Range)
		if f.Global != nil {
			v.count(what+" failover global", *f.Global, 0)
			fo.Global = *f.Global
			fo.Set("global", fo.Range)
		}
		st.Failover = fo
	}
	if r := t.Retry; r != nil {
		ref := v.ref("retry policy", r.Policy)
		st.Retry = &ref
		if prev, ok := policies[r.Policy]; ok {
			if !samePolicy(prev, r) {
				v.problemf("%s: retry policy %q differs from the one other tasks name", what, clip(r.Policy))
			}
		} else {
			policies[r.Policy] = r
			sp.Retries = append(sp.Retries, v.policy(r))
		}
	}
	return st
}

func (v *planValidator) policy(r *PlanRetry) spec.RetryPolicy {
	what := fmt.Sprintf("retry policy %q", clip(r.Policy))
	rng := v.rng()
	pol := spec.RetryPolicy{Named: spec.Named{Name: r.Policy, NameRange: rng, Range: rng}, MaxAttempts: r.MaxAttempts,
		Multiplier: r.Multiplier, Jitter: spec.Jitter(r.Jitter), On: v.refs("error class", r.On)}
	v.count(what+" max_attempts", r.MaxAttempts, 0)
	pol.Initial = v.duration(what+" initial", r.Initial, true)
	pol.MaxDelay = v.duration(what+" max_delay", r.MaxDelay, true)
	if r.MaxElapsed != "" {
		pol.MaxElapsed = v.duration(what+" max_elapsed", r.MaxElapsed, false)
		pol.Set("max_elapsed", rng)
	}
	if r.Multiplier < 0 {
		v.problemf("%s: multiplier %g must not be negative", what, r.Multiplier)
	}
	switch pol.Jitter {
	case spec.JitterFull, spec.JitterEqual, spec.JitterNone:
	default:
		v.problemf("%s: jitter %q is not \"full\", \"equal\" or \"none\"", what, clip(r.Jitter))
	}
	for _, f := range []string{"max_attempts", "initial", "multiplier", "max_delay", "jitter", "on"} {
		pol.Set(f, rng)
	}
	return pol
}

func samePolicy(a, b *PlanRetry) bool {
	return a.Policy == b.Policy && a.MaxAttempts == b.MaxAttempts && a.Initial == b.Initial && a.Multiplier == b.Multiplier &&
		a.MaxDelay == b.MaxDelay && a.Jitter == b.Jitter && a.MaxElapsed == b.MaxElapsed && slices.Equal(a.On, b.On)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
