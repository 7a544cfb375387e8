// Package lint runs pipec's rule catalogue (docs/design.md section 5) over a
// compiled pipeline.
//
// A rule is a value in the style of golang.org/x/tools/go/analysis: an id, a
// default severity, a one-line summary, a doc text with a bad and a fixed
// example, and a Run function. Rules hold no state; everything one run needs
// lives in the Pass it is given. A rule reports findings through the pass; its
// error return is only for an internal failure, which Run turns into a finding
// of its own so findings and crashes never mix.
//
// Some rules of the catalogue (syntax, schema, cycle, missing-dependency,
// missing-artifact, duplicate-producer) are found by the loaders and the
// compiler. They are in the catalogue, with docs for `pipec explain` and SARIF
// metadata, but have no Run: lint never reports them twice.
package lint

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/suggest"
	"github.com/pipec/pipec/spec"
)

// Rule is one check of the catalogue.
type Rule struct {
	// ID is the rule's slug ("bypassed-validation"): lower-case words joined by '-'.
	ID string
	// Severity is the default severity of the rule's findings.
	Severity diag.Severity
	// Summary is one line: what the rule catches. It is the first line of
	// Doc: All and Lookup fill it in, so a rule states it once.
	Summary string
	// Doc starts with the summary line, then explains what the rule catches
	// and why it matters, with a bad and a fixed example in HCL. `pipec
	// explain RULE` prints it.
	Doc string
	// Run checks one pipeline. It is nil for rules whose findings come from the
	// loaders or the compiler.
	Run func(*Pass) error
}

// Reported reports whether lint runs the rule itself (as opposed to the
// loaders or the compiler reporting its findings).
func (r *Rule) Reported() bool { return r.Run != nil }

// Pass is what a rule sees of one pipeline, and where it reports.
type Pass struct {
	// Rule is the rule being run.
	Rule *Rule
	// Spec is the pipeline as written.
	Spec *spec.Pipeline
	// Result is the compiler's result: the plan, the graph and the producers.
	Result *compiler.Result
	// Index holds lookups shared by every rule, built once per run.
	Index *Index
	// Now is the reference time for rules that count intervals.
	Now time.Time
	// Workers is the size of the worker pool the pipeline runs on (from
	// Options.Workers, else the spec's workers), or 0 when nobody said:
	// failover rules then report only what is wrong for every pool size.
	Workers int
	// WorkerLabels holds the labels each worker of the pool offers, one
	// entry per worker (w1, w2, ... in order), when the pool was declared
	// with its labels (Options.WorkerLabels); nil otherwise. failover-limits
	// then judges a labelled task on the workers that may run it.
	WorkerLabels [][]string

	report func(diag.Diagnostic)
}

// Report records a finding of the pass's rule. The severity is the caller's:
// use Reportf for the rule's default.
func (p *Pass) Report(d diag.Diagnostic) {
	d.Rule = p.Rule.ID
	p.report(d)
}

// Reportf records a finding with the rule's default severity.
func (p *Pass) Reportf(r diag.Range, format string, args ...any) {
	p.Report(diag.Diagnostic{Severity: p.Rule.Severity, Message: fmt.Sprintf(format, args...), Range: r})
}

// Options choose which rules run and give the rules their context.
type Options struct {
	// Disable turns rules off by id.
	Disable []string
	// Enable turns on rules that are off by default. Every rule of the
	// catalogue is on by default today, so this matters only when the
	// catalogue grows one that is not; naming a rule that is on is harmless.
	Enable []string
	// Now is the reference time of catchup-stampede; zero means time.Now().
	Now time.Time
	// Workers is the size of the worker pool the pipelines run on (pipec
	// lint --workers, or the configuration file's workers). It overrides a
	// spec's own workers field; 0 means unknown, and then the spec's field
	// applies, and without one failover-limits reports only limits that are
	// wrong whatever the pool size.
	Workers int
	// WorkerLabels describes the pool worker by worker: entry i holds the
	// labels worker w<i+1> offers (the configuration file's workers list).
	// When set, Workers must be its length (CheckOptions); a caller that
	// replaces the worker count (pipec lint --workers) drops it, since the
	// labels described another pool. nil means the labels are unknown, and
	// every task is judged on the whole pool.
	WorkerLabels [][]string
}

// DefaultWorkers is the worker count of the worked cases in
// docs/design.md section 6. Lint does not assume it: callers that want the worked cases'
// pool pass it in Options.Workers.
const DefaultWorkers = 2

// offByDefault lists rules that run only when enabled. None is today (the map
// is nil and never written); the mechanism exists so a noisy rule can join the
// catalogue without breaking pre-commit hooks.
var offByDefault map[string]bool

// CheckOptions reports a usage error for an unknown rule name, a rule both
// enabled and disabled, or a rule found by the compiler (which cannot be
// turned off: a spec with such an error has no valid plan).
func CheckOptions(opts Options) error {
	ids := IDs()
	disabled := map[string]bool{}
	for _, list := range [][]string{opts.Disable, opts.Enable} {
		for _, id := range list {
			r := Lookup(id)
			if r == nil {
				return fmt.Errorf("unknown rule %q%s (pipec explain lists them)", id, suggest.Hint(id, ids))
			}
			if !r.Reported() {
				return fmt.Errorf("rule %q is reported by the compiler and cannot be turned off or on", id)
			}
		}
	}
	for _, id := range opts.Disable {
		disabled[id] = true
	}
	for _, id := range opts.Enable {
		if disabled[id] {
			return fmt.Errorf("rule %q is both enabled and disabled", id)
		}
	}
	if opts.Workers < 0 {
		return fmt.Errorf("workers must be at least 1, not %d", opts.Workers)
	}
	if opts.WorkerLabels != nil && len(opts.WorkerLabels) != opts.Workers {
		return fmt.Errorf("%d workers are described by their labels, but the pool has %d", len(opts.WorkerLabels), opts.Workers)
	}
	return nil
}

// Run lints one compiled pipeline. src is the spec's source text, scanned for
// `pipec:ignore` comments. Unknown rule names in opts are ignored (check them
// with CheckOptions first). The findings are sorted.
func Run(res *compiler.Result, src []byte, opts Options) diag.Diagnostics {
	return run(All(), offByDefault, res, src, opts)
}

// run lints with the given rules, those in off running only when enabled.
func run(rules []*Rule, off map[string]bool, res *compiler.Result, src []byte, opts Options) diag.Diagnostics {
	if res == nil || res.Spec == nil {
		return nil
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = res.Spec.Workers
	}
	var labels [][]string
	if opts.WorkerLabels != nil && len(opts.WorkerLabels) == workers {
		labels = opts.WorkerLabels
	}
	enabled := map[string]bool{}
	for _, r := range rules {
		enabled[r.ID] = r.Reported() && !off[r.ID]
	}
	for _, id := range opts.Enable {
		if _, ok := enabled[id]; ok {
			enabled[id] = true
		}
	}
	for _, id := range opts.Disable {
		delete(enabled, id)
	}
	var found diag.Diagnostics
	ix := newIndex(res)
	for _, r := range rules {
		if !enabled[r.ID] {
			continue
		}
		pass := &Pass{Rule: r, Spec: res.Spec, Result: res, Index: ix, Now: now.UTC(), Workers: workers, WorkerLabels: labels,
			report: func(d diag.Diagnostic) { found = append(found, d) }}
		if err := runRule(r, pass); err != nil {
			found = append(found, diag.Errorf(r.ID, res.Spec.NameRange, "internal error in rule %s: %v", r.ID, err))
		}
	}
	found = applySuppressions(found, res.Spec.File, src, enabled)
	return found.Sort()
}

// runRule runs one rule, turning a panic (a bug in the rule, met on some
// input) into an error, so one broken rule cannot take the others down.
func runRule(r *Rule, pass *Pass) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return r.Run(pass)
}

// All returns the catalogue, sorted by id. Each call returns fresh copies, so
// no caller can change another's rules.
func All() []*Rule {
	rules := make([]*Rule, 0, len(catalogue))
	for _, r := range catalogue {
		rules = append(rules, withSummary(r))
	}
	slices.SortFunc(rules, func(a, b *Rule) int { return cmp.Compare(a.ID, b.ID) })
	return rules
}

// IDs returns every rule id, sorted.
func IDs() []string {
	ids := make([]string, 0, len(catalogue))
	for _, r := range catalogue {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	return ids
}

// Lookup returns a copy of the rule with the given id, or nil.
func Lookup(id string) *Rule {
	for _, r := range catalogue {
		if r.ID == id {
			return withSummary(r)
		}
	}
	return nil
}

// withSummary copies a rule of the catalogue, its summary taken from its doc.
func withSummary(r *Rule) *Rule {
	c := *r
	if c.Summary == "" {
		c.Summary = Title(c.Doc)
	}
	return &c
}

// Title is the first line of a doc string.
func Title(doc string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(doc), "\n")
	return first
}

// Details is the rule's doc after its summary line: what exactly it catches,
// why it matters, and the bad and fixed examples. Whatever shows a rule shows
// its summary once and then this, so the summary is never stated twice.
func (r *Rule) Details() string {
	_, rest, _ := strings.Cut(strings.TrimSpace(r.Doc), "\n")
	return strings.TrimSpace(rest)
}

// Sentence is a summary line as a sentence: a capital first letter and a
// full stop. A summary that starts with a field name (depends_on, catchup =)
// keeps its case, as the spec spells it.
func Sentence(summary string) string {
	s := strings.TrimSpace(summary)
	if s == "" {
		return s
	}
	first, rest, _ := strings.Cut(s, " ")
	if !strings.Contains(first, "_") && !strings.HasPrefix(rest, "= ") {
		s = strings.ToUpper(s[:1]) + s[1:]
	}
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// Explanation is what `pipec explain RULE` prints (and the language server
// shows on a finding): the id and default severity, the summary as a
// sentence, then the details.
func Explanation(r *Rule) string {
	summary := r.Summary
	if summary == "" {
		summary = Title(r.Doc)
	}
	return fmt.Sprintf("%s (%s)\n\n%s\n\n%s\n", r.ID, r.Severity, Sentence(summary), r.Details())
}
