// Package compiler turns a spec.Pipeline into a validated DAG and a
// deterministic Plan. It reports reference and graph errors (cycles, missing
// dependencies and artifacts, duplicate producers) without stopping at the
// first, and without reporting a follow-on error for a cause already reported.
package compiler

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/suggest"
	"github.com/pipec/pipec/spec"
)

// Rule ids reported by the compiler (docs/design.md section 5).
const (
	RuleCycle             = "cycle"
	RuleMissingDependency = "missing-dependency"
	RuleMissingArtifact   = "missing-artifact"
	RuleDuplicateProducer = "duplicate-producer"
	// RuleSinkConflict is in sinks.go, RuleInputVariable in inputvars.go.
	RuleSchema = spec.RuleSchema
)

// Retry defaults applied to a policy that does not set a field.
const (
	DefaultMaxAttempts = 3
	DefaultInitial     = time.Second
	DefaultMultiplier  = 2.0
	DefaultMaxDelay    = 5 * time.Minute
	DefaultJitter      = spec.JitterFull
)

// Result is everything the compiler learned about one pipeline.
type Result struct {
	Spec *spec.Pipeline
	// Plan is complete even when there are error findings (best effort), but
	// callers must not execute or write a plan from a result with errors.
	// It is nil in a result of Check until PlanOf builds it.
	Plan  *Plan
	Graph *Graph
	// Producer maps an artifact to the task that outputs it (the first, when
	// several do).
	Producer map[string]string
	// Names is how the compiler resolved every name: later stages (the
	// linter's index, the language server) look names up here rather than
	// resolve them again, so a name means the same element everywhere.
	Names *Names
	// written holds the edges as the spec created them; edgeKeys, sorted
	// by (from, to), finds the first writing of each (see EdgeRange). Only
	// a cycle's finding reads a range: copying every edge into sorted order
	// was about an eighth of a 10,000-task compile.
	written  []edge
	edgeKeys []edgeKey
	// lazy builds the plan of a result of Check on first use.
	lazy *lazyPlan
}

// lazyPlan is the compilation a result of Check keeps to build its plan
// later, once, even when several readers ask at the same time.
type lazyPlan struct {
	once sync.Once
	c    *compilation
	plan *Plan
}

// PlanOf returns the result's plan: Plan for a result of Compile, built on
// first use (and kept) for a result of Check.
func (r *Result) PlanOf() *Plan {
	if r.Plan != nil || r.lazy == nil {
		return r.Plan
	}
	r.lazy.once.Do(func() { r.lazy.plan = r.lazy.c.plan(r.Graph) })
	return r.lazy.plan
}

// edge is one dependency and the spec text that created it (a depends_on
// entry, an input, a check's or a publish's artifact).
type edge struct {
	from, to string
	r        diag.Range
}

// EdgeRange says where the spec created the edge between two node ids.
func (r *Result) EdgeRange(from, to string) (diag.Range, bool) {
	f, okFrom := slices.BinarySearch(r.Graph.Nodes, from)
	t, okTo := slices.BinarySearch(r.Graph.Nodes, to)
	if !okFrom || !okTo {
		return diag.Range{}, false
	}
	i, ok := slices.BinarySearchFunc(r.edgeKeys, edgeKey{from: int32(f), to: int32(t)}, cmpEdge)
	if !ok {
		return diag.Range{}, false
	}
	return r.written[r.edgeKeys[i].seq].r, true
}

// Compile validates references and builds the DAG and the plan.
func Compile(p *spec.Pipeline) (*Result, diag.Diagnostics) {
	res, c, ds := compile(p)
	res.Plan = c.plan(res.Graph)
	return res, ds
}

// Check validates references and builds the DAG like Compile, with the same
// findings, but leaves the plan (and its digest) to be built by PlanOf when a
// reader needs it. Linting needs the graph, not the plan: at 10,000 tasks the
// plan and its digest were about half of a compile, which the language server
// paid on every keystroke.
func Check(p *spec.Pipeline) (*Result, diag.Diagnostics) {
	res, c, ds := compile(p)
	res.lazy = &lazyPlan{c: c}
	return res, ds
}

func compile(p *spec.Pipeline) (*Result, *compilation, diag.Diagnostics) {
	c := &compilation{
		p: p,
		// Sized up front: growing a map of 10,000 tasks rehashes it
		// again and again.
		tasks:    make(map[string]*spec.Task, len(p.Tasks)),
		checks:   map[string]*spec.Check{},
		policies: map[string]*spec.RetryPolicy{},
		classes:  map[string]*spec.ErrorClass{},
		pools:    map[string]*spec.Pool{},
		sinks:    map[string]*spec.Sink{},
		producer: make(map[string]string, len(p.Tasks)),
	}
	c.index()
	// On a second core, while link resolves references: the node ids'
	// sort and the input variables' check, which read only what index
	// built (a sixth of a 10,000-task compile).
	beside := inBackground(func() besideLink {
		return besideLink{nodes: indexNodes(c.nodes), inputVars: c.checkInputVars()}
	})
	c.edges = make([]edge, 0, c.edgeEstimate())
	c.link()
	done := beside()
	c.ds = append(c.ds, done.inputVars...)
	c.resolveClasses()
	c.checkSinks()
	c.checkNumbers()
	g, keys := newGraph(done.nodes, c.edges)
	res := &Result{Spec: p, Graph: g, Producer: c.producer, written: c.edges, edgeKeys: keys, Names: &Names{
		Tasks: c.tasks, Checks: c.checks, Policies: c.policies, Classes: c.classes, Pools: c.pools, Sinks: c.sinks, Publishes: c.publishes,
	}}
	c.reportCycles(res)
	return res, c, c.ds.Sort()
}

// besideLink is what compile computes while link runs.
type besideLink struct {
	nodes     nodeIndex
	inputVars diag.Diagnostics
}

// inBackground runs f on another goroutine; the function it returns waits
// for f's result.
func inBackground[T any](f func() T) func() T {
	result := make(chan T, 1)
	go func() { result <- f() }()
	return func() T { return <-result }
}

type compilation struct {
	p        *spec.Pipeline
	ds       diag.Diagnostics
	tasks    map[string]*spec.Task
	checks   map[string]*spec.Check
	policies map[string]*spec.RetryPolicy
	classes  map[string]*spec.ErrorClass
	pools    map[string]*spec.Pool
	sinks    map[string]*spec.Sink
	// publishes holds each publish's first declaration.
	publishes map[string]*spec.Publish
	producer  map[string]string
	nodes     []string
	edges     []edge
	// checksOf maps an artifact to the checks that audit it.
	checksOf map[string][]string
}

// Names maps each name a pipeline declares, per kind, to its first
// declaration (a second is reported by the loader and ignored everywhere).
// The maps are the compiler's own: read them, never write.
type Names struct {
	Tasks     map[string]*spec.Task
	Checks    map[string]*spec.Check
	Policies  map[string]*spec.RetryPolicy
	Classes   map[string]*spec.ErrorClass
	Pools     map[string]*spec.Pool
	Sinks     map[string]*spec.Sink
	Publishes map[string]*spec.Publish
}

// index records every named element. A duplicate name is reported by the
// loader (it knows both positions); here the first declaration wins.
func (c *compilation) index() {
	for i := range c.p.Tasks {
		t := &c.p.Tasks[i]
		if _, dup := c.tasks[t.Name]; dup {
			continue
		}
		c.tasks[t.Name] = t
		c.nodes = append(c.nodes, NodeID(KindTask, t.Name))
	}
	for i := range c.p.Tasks {
		t := &c.p.Tasks[i]
		if c.tasks[t.Name] != t {
			continue
		}
		for _, o := range t.Outputs {
			if first, dup := c.producer[o.Name]; dup {
				if first != t.Name {
					c.ds = append(c.ds, diag.Errorf(RuleDuplicateProducer, o.Range,
						"artifact %q is already produced by task %q: two writers of one artifact race each other; give each task its own output", o.Name, first))
				}
				continue
			}
			c.producer[o.Name] = t.Name
		}
	}
	for i := range c.p.Retries {
		r := &c.p.Retries[i]
		if _, dup := c.policies[r.Name]; !dup {
			c.policies[r.Name] = r
		}
	}
	for i := range c.p.Errors {
		if e := &c.p.Errors[i]; c.classes[e.Name] == nil {
			c.classes[e.Name] = e
		}
	}
	for i := range c.p.Pools {
		if pl := &c.p.Pools[i]; c.pools[pl.Name] == nil {
			c.pools[pl.Name] = pl
		}
	}
	for i := range c.p.Sinks {
		s := &c.p.Sinks[i]
		if _, dup := c.sinks[s.Name]; !dup {
			c.sinks[s.Name] = s
		}
	}
	c.checksOf = map[string][]string{}
	for i := range c.p.Checks {
		ch := &c.p.Checks[i]
		if _, dup := c.checks[ch.Name]; dup {
			continue
		}
		c.checks[ch.Name] = ch
		c.nodes = append(c.nodes, NodeID(KindCheck, ch.Name))
		c.checksOf[ch.Input.Name] = append(c.checksOf[ch.Input.Name], ch.Name)
	}
	c.publishes = map[string]*spec.Publish{}
	for i := range c.p.Publishes {
		if pub := &c.p.Publishes[i]; c.publishes[pub.Name] == nil {
			c.publishes[pub.Name] = pub
			c.nodes = append(c.nodes, NodeID(KindPublish, pub.Name))
		}
	}
}

// edgeEstimate is an upper bound of the edges link adds, so the edge list is
// allocated once (at 100,000 tasks its regrowth was a third of all allocation).
func (c *compilation) edgeEstimate() int {
	n := len(c.p.Checks)
	for i := range c.p.Tasks {
		n += len(c.p.Tasks[i].DependsOn) + len(c.p.Tasks[i].Inputs)
	}
	for _, pub := range c.p.Publishes {
		n += max(1, len(c.checksOf[pub.Artifact.Name]))
	}
	return n
}

func (c *compilation) edge(from, to string, r diag.Range) {
	c.edges = append(c.edges, edge{from, to, r})
}

// link resolves every reference and adds the edges it implies.
func (c *compilation) link() {
	taskNames, artifacts := lazySortedKeys(c.tasks), lazySortedKeys(c.producer)
	for i := range c.p.Tasks {
		t := &c.p.Tasks[i]
		if c.tasks[t.Name] != t {
			continue
		}
		id := NodeID(KindTask, t.Name)
		for _, d := range t.DependsOn {
			if d.Name == "" {
				continue // a malformed reference, already reported by the loader
			}
			if _, ok := c.tasks[d.Name]; !ok {
				c.ds = append(c.ds, diag.Errorf(RuleMissingDependency, d.Range,
					"task %q depends on %q, which is not a task in this pipeline%s", t.Name, d.Name, suggest.Hint(d.Name, taskNames())))
				continue
			}
			c.edge(NodeID(KindTask, d.Name), id, d.Range)
		}
		for _, in := range t.Inputs {
			prod, ok := c.producer[in.Artifact]
			if in.Artifact == "" {
				continue
			}
			if !ok {
				c.ds = append(c.ds, diag.Errorf(RuleMissingArtifact, in.Range,
					"task %q reads artifact %q, which no task outputs%s", t.Name, in.Artifact, suggest.Hint(in.Artifact, artifacts())))
				continue
			}
			// An input of another interval is produced by another run: it
			// gates the start of this task but is not an edge of this run's DAG.
			if in.Offset == 0 {
				c.edge(NodeID(KindTask, prod), id, in.Range)
			}
		}
		c.resolveTaskRefs(t)
	}
	for _, name := range slices.Sorted(maps.Keys(c.checks)) {
		ch := c.checks[name]
		prod, ok := c.producer[ch.Input.Name]
		if ch.Input.Name == "" {
			continue
		}
		if !ok {
			c.ds = append(c.ds, diag.Errorf(RuleMissingArtifact, ch.Input.Range,
				"check %q audits artifact %q, which no task outputs%s", ch.Name, ch.Input.Name, suggest.Hint(ch.Input.Name, artifacts())))
			continue
		}
		c.edge(NodeID(KindTask, prod), NodeID(KindCheck, ch.Name), ch.Input.Range)
	}
	sinkNames := slices.Sorted(maps.Keys(c.sinks))
	seen := map[string]bool{}
	for _, pub := range c.p.Publishes {
		if seen[pub.Name] {
			continue
		}
		seen[pub.Name] = true
		if _, ok := c.sinks[pub.Sink.Name]; !ok && pub.Sink.Name != "" {
			c.ds = append(c.ds, diag.Errorf(RuleSchema, pub.Sink.Range,
				"publish %q names sink %q, which is not defined%s", pub.Name, pub.Sink.Name, suggest.Hint(pub.Sink.Name, sinkNames)))
		}
		prod, ok := c.producer[pub.Artifact.Name]
		if pub.Artifact.Name == "" {
			continue
		}
		if !ok {
			c.ds = append(c.ds, diag.Errorf(RuleMissingArtifact, pub.Artifact.Range,
				"publish %q names artifact %q, which no task outputs%s", pub.Name, pub.Artifact.Name, suggest.Hint(pub.Artifact.Name, artifacts())))
			continue
		}
		id := NodeID(KindPublish, pub.Name)
		checks := c.checksOf[pub.Artifact.Name]
		for _, ch := range checks {
			c.edge(NodeID(KindCheck, ch), id, pub.Artifact.Range)
		}
		if len(checks) == 0 {
			// Still wait for the data; bypassed-validation reports the gap.
			c.edge(NodeID(KindTask, prod), id, pub.Artifact.Range)
		}
	}
}

// lazySortedKeys returns a function giving m's keys sorted, sorted on the first
// call: link needs them only for the hint of a reference it cannot resolve,
// and sorting 10,000 task and artifact names for every spec was about a
// twentieth of a compile.
func lazySortedKeys[V any](m map[string]V) func() []string {
	return sync.OnceValue(func() []string { return slices.Sorted(maps.Keys(m)) })
}

// resolveTaskRefs checks the names a task uses for its policy and pool, and the
// classes its policy retries.
func (c *compilation) resolveTaskRefs(t *spec.Task) {
	if t.Retry != nil && t.Retry.Name != "" {
		if _, ok := c.policies[t.Retry.Name]; !ok {
			c.ds = append(c.ds, diag.Errorf(RuleSchema, t.Retry.Range,
				"task %q uses retry policy %q, which is not defined%s", t.Name, t.Retry.Name, suggest.Hint(t.Retry.Name, slices.Sorted(maps.Keys(c.policies)))))
		}
	}
	if t.Pool != nil && t.Pool.Name != "" && c.pools[t.Pool.Name] == nil {
		c.ds = append(c.ds, diag.Errorf(RuleSchema, t.Pool.Range,
			"task %q uses pool %q, which is not defined%s", t.Name, t.Pool.Name, suggest.Hint(t.Pool.Name, slices.Sorted(maps.Keys(c.pools)))))
	}
}

// resolveClasses checks that every class a retry policy names exists.
func (c *compilation) resolveClasses() {
	classes := slices.Sorted(maps.Keys(c.classes))
	for _, name := range slices.Sorted(maps.Keys(c.policies)) {
		r := c.policies[name]
		for _, on := range r.On {
			if on.Name == "" || slices.Contains(BuiltinClasses(), on.Name) || c.classes[on.Name] != nil {
				continue
			}
			c.ds = append(c.ds, diag.Errorf(RuleSchema, on.Range,
				"retry policy %q retries error class %q, which is not defined (built-in classes: timeout, killed)%s", r.Name, on.Name, suggest.Hint(on.Name, classes)))
		}
	}
}

// checkNumbers rejects values that cannot be written to JSON (a float such as
// 1e400 overflows to +Inf), so the plan always marshals.
func (c *compilation) checkNumbers() {
	finite := func(f *float64, r diag.Range, what string) {
		if math.IsInf(*f, 0) || math.IsNaN(*f) {
			c.ds = append(c.ds, diag.Errorf(RuleSchema, r, "%s is not a finite number", what))
			*f = 0
		}
	}
	for i := range c.p.Retries {
		r := &c.p.Retries[i]
		finite(&r.Multiplier, r.At("multiplier", r.Range), "multiplier")
	}
	if b := c.p.RetryBudget; b != nil {
		finite(&b.Ratio, b.At("ratio", b.Range), "ratio")
	}
}

// reportCycles reports each cycle once, at the edge leaving its smallest task.
func (c *compilation) reportCycles(res *Result) {
	g := res.Graph
	for _, cyc := range g.Cycles {
		names := make([]string, len(cyc))
		for i, id := range cyc {
			names[i] = strings.TrimPrefix(id, KindTask+".")
		}
		r, _ := res.EdgeRange(cyc[0], cyc[1])
		c.ds = append(c.ds, diag.Errorf(RuleCycle, r, "dependency cycle: %s", strings.Join(names, " -> ")))
	}
}

// BuiltinClasses returns the error classes every pipeline has: a task that
// ran out of time, or was killed by a signal. Both are transient. A function,
// not a variable, so no caller can change the list for everyone.
func BuiltinClasses() []string { return []string{"killed", "timeout"} }

func durString(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

func (c *compilation) plan(g *Graph) *Plan {
	p := c.p
	pl := &Plan{APIVersion: APIVersion, Pipeline: p.Name, CodeVersion: p.CodeVersion, Workers: p.Workers,
		ArtifactStore: p.Artifacts,
		Pools:         []PlanPool{}, Errors: []PlanError{}, Tasks: []PlanTask{}, Checks: []PlanCheck{},
		Sinks: []PlanSink{}, Publishes: []PlanPublish{}, Artifacts: []PlanArtifact{}, Order: g.Order}
	if s := p.Schedule; s != nil {
		pl.Schedule = &PlanSchedule{Every: durString(s.Every), Catchup: s.Catchup, MaxActiveRuns: s.MaxActiveRuns}
		if !s.Start.IsZero() {
			pl.Schedule.Start = s.Start.UTC().Format(time.RFC3339)
		}
	}
	if b := p.RetryBudget; b != nil {
		pl.RetryBudget = &PlanBudget{Ratio: b.Ratio, Min: b.Min}
	}
	for _, pool := range p.Pools {
		pl.Pools = append(pl.Pools, PlanPool{Name: pool.Name, Slots: pool.Slots})
	}
	for _, e := range p.Errors {
		pl.Errors = append(pl.Errors, PlanError{Name: e.Name, ExitCodes: nonNil(e.ExitCodes), Match: nonNil(e.Match), Deterministic: e.Deterministic})
	}
	readers := map[string][]string{}
	pl.Tasks = make([]PlanTask, 0, len(c.tasks))
	for _, name := range slices.Sorted(maps.Keys(c.tasks)) {
		t := c.tasks[name]
		id := NodeID(KindTask, name)
		pt := PlanTask{Name: name, Command: nonNil(t.Command), Inputs: []PlanInput{}, Outputs: refNames(t.Outputs),
			DependsOn: refNames(t.DependsOn), Env: t.Env, SecretEnv: refNames(t.SecretEnv), Effects: refNames(t.Effects),
			Idempotent: t.IsIdempotent(), Timeout: durString(t.Timeout), Needs: []string{}}
		if len(pt.Env) == 0 {
			pt.Env = nil
		}
		slices.Sort(pt.Outputs)
		slices.Sort(pt.DependsOn)
		slices.Sort(pt.SecretEnv)
		slices.Sort(pt.Effects)
		if len(t.Labels) > 0 {
			pt.Labels = refNames(t.Labels)
			slices.Sort(pt.Labels)
			pt.Labels = slices.Compact(pt.Labels)
		}
		for _, in := range t.Inputs {
			pt.Inputs = append(pt.Inputs, PlanInput{Artifact: in.Artifact, Offset: in.Offset, Producer: c.producer[in.Artifact]})
			readers[in.Artifact] = append(readers[in.Artifact], name)
		}
		slices.SortFunc(pt.Inputs, func(a, b PlanInput) int {
			return cmp.Or(cmp.Compare(a.Artifact, b.Artifact), cmp.Compare(a.Offset, b.Offset))
		})
		pt.Inputs = slices.Compact(pt.Inputs)
		for _, pred := range g.Pred[id] {
			pt.Needs = append(pt.Needs, strings.TrimPrefix(pred, KindTask+"."))
		}
		if t.Retry != nil {
			if pol, ok := c.policies[t.Retry.Name]; ok {
				pt.Retry = resolveRetry(pol)
			}
		}
		if t.Pool != nil {
			pt.Pool = t.Pool.Name
		}
		if h := t.Heartbeat; h != nil {
			pt.Heartbeat = &PlanHeartbeat{Every: durString(h.Every), Lease: durString(h.Lease)}
		}
		if f := t.Failover; f != nil {
			pt.Failover = &PlanFailover{PerWorker: f.PerWorker}
			if f.Has("global") {
				g := max(f.Global, 0)
				pt.Failover.Global = &g
			}
		}
		pl.Tasks = append(pl.Tasks, pt)
	}
	for _, name := range slices.Sorted(maps.Keys(c.checks)) {
		ch := c.checks[name]
		pl.Checks = append(pl.Checks, PlanCheck{Name: name, Input: ch.Input.Name, RowCountMin: ch.RowCountMin, RowCountMax: ch.RowCountMax,
			Unique: nonNil(ch.Unique), NotNull: nonNil(ch.NotNull), Columns: nonNil(ch.Columns),
			CodeVersionColumn: ch.CodeVersionColumn, Command: nonNil(ch.Command)})
	}
	for _, name := range slices.Sorted(maps.Keys(c.sinks)) {
		s := c.sinks[name]
		pl.Sinks = append(pl.Sinks, PlanSink{Name: name, Type: s.Type, Path: s.Path, Fencing: string(SinkFencing(s))})
	}
	publishesOf := map[string][]string{}
	seen := map[string]bool{}
	for _, pub := range p.Publishes {
		if seen[pub.Name] {
			continue
		}
		seen[pub.Name] = true
		pl.Publishes = append(pl.Publishes, PlanPublish{Name: pub.Name, Artifact: pub.Artifact.Name, Sink: pub.Sink.Name,
			Checks: nonNil(slices.Sorted(slices.Values(c.checksOf[pub.Artifact.Name])))})
		publishesOf[pub.Artifact.Name] = append(publishesOf[pub.Artifact.Name], pub.Name)
	}
	slices.SortFunc(pl.Publishes, func(a, b PlanPublish) int { return cmp.Compare(a.Name, b.Name) })
	for _, a := range slices.Sorted(maps.Keys(c.producer)) {
		pa := PlanArtifact{Name: a, Producer: c.producer[a],
			Readers:   nonNil(slices.Compact(slices.Sorted(slices.Values(readers[a])))),
			Checks:    nonNil(slices.Sorted(slices.Values(c.checksOf[a]))),
			Publishes: nonNil(slices.Sorted(slices.Values(publishesOf[a])))}
		pl.Artifacts = append(pl.Artifacts, pa)
	}
	pl.Digest = Digest(pl)
	return pl
}

// SinkFencing is the sink's declared fencing, or its default: a directory sink
// and an s3 sink are owned by pipec and fenced by token (the s3 sink with the
// object store's conditional writes); any other type cannot be assumed to be.
func SinkFencing(s *spec.Sink) spec.Fencing {
	if s.Fencing != "" {
		return s.Fencing
	}
	if s.Type == "directory" || s.Type == SinkTypeS3 {
		return spec.FencingToken
	}
	return spec.FencingNone
}

// resolveRetry applies the documented defaults to a policy.
func resolveRetry(r *spec.RetryPolicy) *PlanRetry {
	pr := &PlanRetry{Policy: r.Name, MaxAttempts: r.MaxAttempts, Initial: durString(r.Initial), Multiplier: r.Multiplier,
		MaxDelay: durString(r.MaxDelay), Jitter: string(r.Jitter), MaxElapsed: durString(r.MaxElapsed), On: refNames(r.On)}
	if !r.Has("max_attempts") {
		pr.MaxAttempts = DefaultMaxAttempts
	}
	// Zero is a value: initial = "0s" and max_delay = "0s" mean immediate
	// retries; only a field left out takes the default.
	if r.Has("initial") {
		pr.Initial = r.Initial.String()
	} else {
		pr.Initial = DefaultInitial.String()
	}
	if !r.Has("multiplier") {
		pr.Multiplier = DefaultMultiplier
	}
	if r.Has("max_delay") {
		pr.MaxDelay = r.MaxDelay.String()
		if r.MaxDelay == 0 {
			// Every delay is capped at zero, so every delay is zero: the plan
			// says so with a zero initial delay too, which means the same to
			// any reader of the plan, whatever it makes of a zero cap.
			pr.Initial = "0s"
		}
	} else {
		pr.MaxDelay = DefaultMaxDelay.String()
	}
	if r.Jitter == "" {
		pr.Jitter = string(DefaultJitter)
	}
	slices.Sort(pr.On)
	pr.On = slices.Compact(pr.On)
	return pr
}

// Digest is the sha256 of the plan's canonical JSON with the digest left empty,
// so it identifies the pipeline's meaning, not its syntax or layout.
func Digest(p *Plan) string {
	cp := *p
	cp.Digest = ""
	b, err := json.Marshal(&cp)
	if err != nil {
		// A Plan holds only strings, numbers, bools and slices of them.
		panic(fmt.Sprintf("compiler: plan does not marshal: %v", err))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Marshal writes the plan as indented, deterministic JSON with a final newline.
func (p *Plan) Marshal() []byte {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("compiler: plan does not marshal: %v", err))
	}
	return append(b, '\n')
}

func refNames(rs []spec.Ref) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// TaskDigest identifies what a task does, as its spec says: its command,
// environment, secrets' names, inputs, outputs, effects and idempotence,
// in 16 hex digits. A run records it for every task (store.Run.TaskDigests)
// and a later run of the interval reuses a task's results only if its
// digest is the same: an edited command runs again although code_version
// did not move. What decides only when or where it runs (retries, pool,
// timeout, labels) is left out, and so are the contents of the scripts it
// calls, which code_version stands for. The checks of its outputs are
// recorded beside it (Plan.TaskDigests).
func TaskDigest(t *PlanTask) string {
	h := sha256.New()
	var n [8]byte
	put := func(s string) { // length-prefixed: no two definitions write the same bytes
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	list := func(tag string, ss []string) {
		put(tag)
		put(strconv.Itoa(len(ss)))
		for _, s := range ss {
			put(s)
		}
	}
	list("command", t.Command)
	put("env")
	put(strconv.Itoa(len(t.Env)))
	for _, k := range slices.Sorted(maps.Keys(t.Env)) {
		put(k)
		put(t.Env[k])
	}
	list("secret_env", t.SecretEnv)
	put("inputs")
	put(strconv.Itoa(len(t.Inputs)))
	for _, in := range t.Inputs {
		put(in.Artifact)
		put(strconv.Itoa(in.Offset))
	}
	list("outputs", t.Outputs)
	list("effects", t.Effects)
	put(strconv.FormatBool(t.Idempotent))
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// CheckDigest identifies what a check asserts (its name, input and every
// assertion, its command included), in 16 hex digits.
func CheckDigest(c *PlanCheck) string {
	b, _ := json.Marshal(c) // strings, integers and lists of strings: it cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// TaskDigests is, for every task of the plan by name, its definition as a
// run records it (store.Run.TaskDigests): TaskDigest, then "/" and the
// CheckDigest of each check of its outputs, sorted and comma-separated
// (nothing after the "/" when none). DefinitionEdit compares two.
func (p *Plan) TaskDigests() map[string]string {
	checks := map[string][]string{} // artifact -> its checks' digests
	for i := range p.Checks {
		c := &p.Checks[i]
		checks[c.Input] = append(checks[c.Input], CheckDigest(c))
	}
	out := make(map[string]string, len(p.Tasks))
	for i := range p.Tasks {
		t := &p.Tasks[i]
		var audits []string
		for _, o := range t.Outputs {
			audits = append(audits, checks[o]...)
		}
		slices.Sort(audits)
		out[t.Name] = TaskDigest(t) + "/" + strings.Join(audits, ",")
	}
	return out
}

// Edits of a task's definition between a run's record and the spec now
// (DefinitionEdit).
const (
	// EditedTask: the task itself (TaskDigest) is defined otherwise.
	EditedTask = "task"
	// EditedChecks: a check of its outputs is new or defined otherwise,
	// so what was accepted was never audited by it. A check removed since
	// leaves what it accepted valid, and is no edit.
	EditedChecks = "checks"
)

// DefinitionEdit says how a task defined as now (a Plan.TaskDigests value)
// differs from recorded, the value a run recorded for it: "" when alike,
// EditedTask, or EditedChecks. A value recorded before checks were part
// of it (no "/") compares the task alone; nothing recorded ("", a task
// the run did not have) is an edited task.
func DefinitionEdit(recorded, now string) string {
	task, _, _ := strings.Cut(recorded, "/")
	nowTask, _, _ := strings.Cut(now, "/")
	switch {
	case task != nowTask:
		return EditedTask
	case ChecksEdited(recorded, now):
		return EditedChecks
	}
	return ""
}

// ChecksEdited says whether a check of the task's outputs is new or
// defined otherwise in now than in recorded (Plan.TaskDigests values),
// whatever became of the task itself: false for a value recorded before
// checks were part of it.
func ChecksEdited(recorded, now string) bool {
	_, audits, withChecks := strings.Cut(recorded, "/")
	_, nowAudits, _ := strings.Cut(now, "/")
	if !withChecks || nowAudits == "" {
		return false
	}
	had := strings.Split(audits, ",")
	for _, d := range strings.Split(nowAudits, ",") {
		if !slices.Contains(had, d) {
			return true
		}
	}
	return false
}
