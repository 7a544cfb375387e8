// Package spec is pipec's typed model of a pipeline spec. The HCL and CUE
// loaders both produce a *Pipeline; every element keeps the source range it
// came from so later stages (compiler, linter) can point at the exact place.
//
// The model is what the author wrote, validated for shape (types, durations,
// names) but not for meaning: references between elements are resolved by the
// compiler, and judgements are made by lint rules.
package spec

import (
	"fmt"
	"time"

	"github.com/pipec/pipec/diag"
)

// Pipeline is one spec's pipeline.
type Pipeline struct {
	Name      string
	NameRange diag.Range
	// Range is the definition range of the pipeline (its block header in HCL,
	// its field in CUE).
	Range diag.Range
	// File is the spec file the pipeline came from, as given on the command line.
	File string
	Attrs

	CodeVersion string
	// Workers is the size of the worker pool the pipeline runs on, for
	// failover-limits; 0 when the spec does not say.
	Workers int
	// Artifacts is the folder of the pipeline's shared artifact store, as
	// written (a relative path is resolved against the spec's folder at run
	// time); "" when the spec does not say.
	Artifacts   string
	Schedule    *Schedule
	RetryBudget *RetryBudget
	Pools       []Pool
	Errors      []ErrorClass
	Retries     []RetryPolicy
	Tasks       []Task
	Checks      []Check
	Sinks       []Sink
	Publishes   []Publish
}

// Attrs records the source range of each attribute an element set, keyed by its
// spec name ("retry", "env.MODE"). An attribute missing from the map was not
// written by the author.
//
// An attribute whose value the loader refused (a schema finding) is still
// recorded, and marked refused: it is present but invalid. Rules must not
// judge it again, neither by its zero value ("no timeout" for a timeout that
// does not parse) nor by its absence; one mistake gets one finding.
type Attrs struct {
	Ranges map[string]diag.Range
	// Invalid holds the attributes written with a value the loader refused
	// (see Refused); nil when there are none.
	Invalid map[string]bool `json:",omitempty"`
}

// Has reports whether the author wrote the attribute, valid or not.
func (a Attrs) Has(name string) bool {
	_, ok := a.Ranges[name]
	return ok
}

// Refused reports whether the author wrote the attribute with a value the
// loader refused (and reported, under the schema rule).
func (a Attrs) Refused(name string) bool { return a.Invalid[name] }

// Valid reports whether the author wrote the attribute with a value the
// loader accepted: the model's field then holds what was written.
func (a Attrs) Valid(name string) bool { return a.Has(name) && !a.Invalid[name] }

// Refuse marks a written attribute as refused; loaders call it when they
// report its value.
func (a *Attrs) Refuse(name string) {
	if a.Invalid == nil {
		a.Invalid = map[string]bool{}
	}
	a.Invalid[name] = true
}

// At returns the range of the attribute, or fallback when it was not written.
func (a Attrs) At(name string, fallback diag.Range) diag.Range {
	if r, ok := a.Ranges[name]; ok {
		return r
	}
	return fallback
}

// Set records an attribute's range; loaders call it.
func (a *Attrs) Set(name string, r diag.Range) {
	if a.Ranges == nil {
		a.Ranges = map[string]diag.Range{}
	}
	a.Ranges[name] = r
}

// Named is embedded by every labelled element (task "extract" {...}).
type Named struct {
	Name string
	// NameRange is the range of the label (HCL) or the field name (CUE).
	NameRange diag.Range
	// Range is the definition range of the whole element header.
	Range diag.Range
	Attrs
}

// Ref is a name written in the spec, with where it was written.
type Ref struct {
	Name  string
	Range diag.Range
}

// Duration is a parsed duration; zero means "not set".
type Duration = time.Duration

// Schedule says which logical data intervals exist.
type Schedule struct {
	Range diag.Range
	Attrs
	// Every is the interval length.
	Every Duration
	// Start is the start of the first interval.
	Start time.Time
	// Catchup launches every missed interval since Start when true.
	Catchup bool
	// MaxActiveRuns bounds concurrent runs; 0 means unbounded.
	MaxActiveRuns int
}

// Pool bounds concurrency for the tasks that name it.
type Pool struct {
	Named
	Slots int
}

// ErrorClass classifies a failure by exit code or output pattern.
type ErrorClass struct {
	Named
	ExitCodes []int
	// Match holds substrings looked for in the task's output.
	Match         []string
	Deterministic bool
}

// Jitter is how a retry delay is randomised.
type Jitter string

const (
	JitterNone  Jitter = "none"
	JitterFull  Jitter = "full"
	JitterEqual Jitter = "equal"
)

// RetryPolicy says which failures are retried and how.
type RetryPolicy struct {
	Named
	// MaxAttempts counts the first attempt; 0 means unlimited. When not written
	// the compiler applies a default.
	MaxAttempts int
	Initial     Duration
	Multiplier  float64
	MaxDelay    Duration
	Jitter      Jitter
	MaxElapsed  Duration
	// On names the error classes retried; empty means every failure.
	On []Ref
}

// RetryBudget caps retries across one run.
type RetryBudget struct {
	Range diag.Range
	Attrs
	// Ratio of retries to first attempts allowed in a run.
	Ratio float64
	// Min retries always allowed.
	Min int
}

// Heartbeat is the lease a running task must renew.
type Heartbeat struct {
	Range diag.Range
	Attrs
	Every Duration
	Lease Duration
}

// Failover limits how a task moves across workers.
type Failover struct {
	Range diag.Range
	Attrs
	// PerWorker is how many starts a task gets on one worker (the first start
	// counts); 0 means unlimited.
	PerWorker int
	// Global is how many failovers across all workers before the job stops.
	Global int
}

// Input is an artifact a task reads, for this interval or one at an offset.
type Input struct {
	Artifact string
	// Offset is the interval offset: 0 is this run's interval, -1 the previous.
	Offset int
	Range  diag.Range
}

// Task is one command of the pipeline.
type Task struct {
	Named
	Command   []string
	Inputs    []Input
	Outputs   []Ref
	DependsOn []Ref
	Env       map[string]string
	SecretEnv []Ref
	Effects   []Ref
	// Labels are the worker labels the task requires: only a worker
	// offering every one of them may run it.
	Labels []Ref
	// Idempotent is nil when not written.
	Idempotent *bool
	Retry      *Ref
	Pool       *Ref
	Timeout    Duration
	Heartbeat  *Heartbeat
	Failover   *Failover
}

// IsIdempotent reports the author's declaration; a task that did not say is
// taken as idempotent unless it declares effects.
func (t *Task) IsIdempotent() bool {
	if t.Idempotent != nil {
		return *t.Idempotent
	}
	return len(t.Effects) == 0
}

// Check audits one artifact version before it may be published.
type Check struct {
	Named
	Input       Ref
	RowCountMin *int
	RowCountMax *int
	Unique      []string
	NotNull     []string
	Columns     []string
	// CodeVersionColumn names a column that must hold the pipeline's
	// code_version in every row (the seed's code_version stamping, enforced).
	CodeVersionColumn string
	// Command is an external check, run with the artifact's directory.
	Command []string
}

// UnreachableRows is a row count no artifact reaches: a file of that many
// one-byte rows would be a petabyte. A row_count_max at or above it can never
// fail.
const UnreachableRows = 1 << 50

// checkFields are the fields of a check that assert something.
var checkFields = [...]string{"row_count_min", "row_count_max", "unique", "not_null", "columns", "code_version_column", "command"}

// Asserts reports whether the check can fail: it has an assertion that some
// data would break. row_count_min = 0, row_count_max of UnreachableRows or
// more, and empty unique, not_null or columns lists hold for any data. A
// check with a value the loader refused counts as asserting (present but
// invalid: schema reports it).
func (c *Check) Asserts() bool {
	for _, f := range checkFields {
		if c.Refused(f) {
			return true
		}
	}
	return c.RowCountMin != nil && *c.RowCountMin > 0 ||
		c.RowCountMax != nil && *c.RowCountMax < UnreachableRows ||
		len(c.Unique) > 0 || len(c.NotNull) > 0 || len(c.Columns) > 0 || len(c.Command) > 0 || c.CodeVersionColumn != ""
}

// Vacuous lists, for a check that cannot fail (see Asserts), what it wrote
// that holds for any data ("row_count_min = 0", "unique = []"), in field
// order; empty when it wrote no assertion at all.
func (c *Check) Vacuous() []string {
	var out []string
	if c.RowCountMin != nil {
		out = append(out, "row_count_min = 0")
	}
	if c.RowCountMax != nil {
		out = append(out, fmt.Sprintf("row_count_max = %d", *c.RowCountMax))
	}
	for _, l := range []struct {
		name string
		set  bool
	}{{"unique", c.Has("unique")}, {"not_null", c.Has("not_null")}, {"columns", c.Has("columns")}} {
		if l.set {
			out = append(out, l.name+" = []")
		}
	}
	return out
}

// Fencing is whether a sink refuses writes carrying a stale token.
type Fencing string

const (
	FencingToken Fencing = "token"
	FencingNone  Fencing = "none"
)

// Sink is where published data becomes visible.
type Sink struct {
	Named
	Type    string
	Path    string
	Fencing Fencing
}

// Publish makes an accepted artifact visible in a sink.
type Publish struct {
	Named
	Artifact Ref
	Sink     Ref
}
