package spec

import (
	"math"
	"time"
)

// Element kinds: the words a spec uses for its elements, in HCL (`task "x" {}`,
// `heartbeat {}`) and in CUE (`task: x: {}`, `heartbeat: {}`) alike. They key
// Fields and name elements in messages ("invalid task name").
const (
	KindPipeline    = "pipeline"
	KindSchedule    = "schedule"
	KindRetryBudget = "retry_budget"
	KindPool        = "pool"
	KindError       = "error"
	KindRetry       = "retry"
	KindTask        = "task"
	KindHeartbeat   = "heartbeat"
	KindFailover    = "failover"
	KindCheck       = "check"
	KindSink        = "sink"
	KindPublish     = "publish"
)

// Field is one field a spec element accepts, and how its value is read into
// the model. Both loaders walk this table: the HCL loader derives its schemas
// from it, the CUE decoder looks fields up in it, and each reads the value the
// way Value says and hands it to the field's setter. Adding a plain field is
// one entry here (and its line in schema/pipeline.cue).
type Field struct {
	// Name is the spec name: the HCL attribute or block type, the CUE field.
	Name string
	// Required fields must be written; every other field may be left out, and
	// the loaders then leave the model's value unset (the compiler applies
	// defaults).
	Required bool
	// Nested is the element kind the field holds when it is a nested element
	// (a block in HCL, a struct in CUE), or "" for a plain value.
	Nested string
	// Labelled is true for the named elements under a pipeline (`task "x" {}`
	// in HCL, `task: x: {}` in CUE): the field holds any number of them.
	Labelled bool
	// Value is how a plain field's value is read; ValNested for a nested
	// element.
	Value ValueKind
	// Min and Max bound a ValInt or each element of a ValInts. The HCL loader
	// checks them; in CUE, schema/pipeline.cue does.
	Min, Max int64
	// RefKind names the kind of element a ValRef or ValRefs names, as
	// messages say it ("retry policy"); envVarKind for environment variables.
	RefKind string
	// Enum lists the values a ValEnum allows (checked by the HCL loader; in
	// CUE, by the schema).
	Enum []string

	// set stores a value read for the field into target, a pointer to the
	// element being decoded (*Task, *Schedule, ...). Loaders call it only
	// when the value was read.
	set func(target any, v *value)
}

// ValueKind says how a plain field's value is written and read.
type ValueKind uint8

// Value kinds of plain fields.
const (
	// ValNested marks a nested element, decoded by its own kind's fields.
	ValNested ValueKind = iota
	ValString
	// ValColumn is a non-empty string naming a column.
	ValColumn
	ValBool
	// ValInt is a whole number in [Min, Max].
	ValInt
	// ValFloat is a finite, non-negative number.
	ValFloat
	// ValDuration is a string parsed by ParseField.
	ValDuration
	// ValTime is a string parsed by ParseTime.
	ValTime
	// ValEnum is a string among Enum.
	ValEnum
	// ValRef is a name of an element of kind RefKind.
	ValRef
	// ValRefs is a list of names of elements of kind RefKind.
	ValRefs
	ValStrings
	// ValInts is a list of whole numbers, each in [Min, Max].
	ValInts
	// ValCommand is a program and its arguments.
	ValCommand
	// ValInputs is a list of inputs, parsed by ParseInput.
	ValInputs
	// ValEnv is a map of environment variables to strings; each entry's
	// range is recorded as "env.KEY".
	ValEnv
)

// value is a field's value as a loader read it, whatever the source syntax;
// the member Field.Value names holds it. Loaders keep one and reuse it.
type value struct {
	str    string
	b      bool
	n      int
	f      float64
	dur    Duration
	t      time.Time
	ref    *Ref
	refs   []Ref
	strs   []string
	ints   []int
	inputs []Input
	env    map[string]string
}

// fieldTable is Fields, built once for the loaders, which only read it.
var fieldTable = Fields()

// lookupField returns the field name of kind, if it has one.
func lookupField(kind, name string) (*Field, bool) {
	fs := fieldTable[kind]
	for i := range fs {
		if fs[i].Name == name {
			return &fs[i], true
		}
	}
	return nil, false
}

// Fields returns, for each element kind, the fields it accepts, in the order
// the spec reference lists them (which is also the order the HCL loader
// decodes them in). It is the single table the HCL loader, the CUE loader and
// schema/pipeline.cue are checked against (a test fails when they disagree),
// so adding a field starts here. A fresh map is built on each call: callers
// may keep or change it.
func Fields() map[string][]Field {
	return map[string][]Field{
		KindPipeline: {
			{Name: "code_version", Value: ValString, set: func(t any, v *value) { t.(*Pipeline).CodeVersion = v.str }},
			{Name: "workers", Value: ValInt, Min: 1, Max: math.MaxInt32, set: func(t any, v *value) { t.(*Pipeline).Workers = v.n }},
			{Name: "artifacts", Value: ValString, set: func(t any, v *value) { t.(*Pipeline).Artifacts = v.str }},
			{Name: "schedule", Nested: KindSchedule},
			{Name: "retry_budget", Nested: KindRetryBudget},
			{Name: "pool", Nested: KindPool, Labelled: true},
			{Name: "error", Nested: KindError, Labelled: true},
			{Name: "retry", Nested: KindRetry, Labelled: true},
			{Name: "task", Nested: KindTask, Labelled: true},
			{Name: "check", Nested: KindCheck, Labelled: true},
			{Name: "sink", Nested: KindSink, Labelled: true},
			{Name: "publish", Nested: KindPublish, Labelled: true},
		},
		KindSchedule: {
			{Name: "every", Value: ValDuration, set: func(t any, v *value) { t.(*Schedule).Every = v.dur }},
			{Name: "start", Value: ValTime, set: func(t any, v *value) { t.(*Schedule).Start = v.t }},
			{Name: "catchup", Value: ValBool, set: func(t any, v *value) { t.(*Schedule).Catchup = v.b }},
			{Name: "max_active_runs", Value: ValInt, Min: 0, Max: math.MaxInt32, set: func(t any, v *value) { t.(*Schedule).MaxActiveRuns = v.n }},
		},
		KindRetryBudget: {
			{Name: "ratio", Value: ValFloat, set: func(t any, v *value) { t.(*RetryBudget).Ratio = v.f }},
			{Name: "min", Value: ValInt, Min: 0, Max: math.MaxInt32, set: func(t any, v *value) { t.(*RetryBudget).Min = v.n }},
		},
		KindPool: {
			{Name: "slots", Value: ValInt, Min: 1, Max: math.MaxInt32, set: func(t any, v *value) { t.(*Pool).Slots = v.n }},
		},
		KindError: {
			{Name: "exit_codes", Value: ValInts, Min: 1, Max: 255, set: func(t any, v *value) { t.(*ErrorClass).ExitCodes = v.ints }},
			{Name: "match", Value: ValStrings, set: func(t any, v *value) { t.(*ErrorClass).Match = v.strs }},
			{Name: "deterministic", Value: ValBool, set: func(t any, v *value) { t.(*ErrorClass).Deterministic = v.b }},
		},
		KindRetry: {
			{Name: "max_attempts", Value: ValInt, Min: 0, Max: math.MaxInt32, set: func(t any, v *value) { t.(*RetryPolicy).MaxAttempts = v.n }},
			{Name: "initial", Value: ValDuration, set: func(t any, v *value) { t.(*RetryPolicy).Initial = v.dur }},
			{Name: "multiplier", Value: ValFloat, set: func(t any, v *value) { t.(*RetryPolicy).Multiplier = v.f }},
			{Name: "max_delay", Value: ValDuration, set: func(t any, v *value) { t.(*RetryPolicy).MaxDelay = v.dur }},
			{Name: "jitter", Value: ValEnum, Enum: []string{"full", "equal", "none"}, set: func(t any, v *value) { t.(*RetryPolicy).Jitter = Jitter(v.str) }},
			{Name: "max_elapsed", Value: ValDuration, set: func(t any, v *value) { t.(*RetryPolicy).MaxElapsed = v.dur }},
			{Name: "on", Value: ValRefs, RefKind: "error class", set: func(t any, v *value) { t.(*RetryPolicy).On = v.refs }},
		},
		KindTask: {
			{Name: "command", Required: true, Value: ValCommand, set: func(t any, v *value) { t.(*Task).Command = v.strs }},
			{Name: "inputs", Value: ValInputs, set: func(t any, v *value) { t.(*Task).Inputs = v.inputs }},
			{Name: "outputs", Value: ValRefs, RefKind: "artifact", set: func(t any, v *value) { t.(*Task).Outputs = v.refs }},
			{Name: "depends_on", Value: ValRefs, RefKind: "task", set: func(t any, v *value) { t.(*Task).DependsOn = v.refs }},
			{Name: "env", Value: ValEnv, set: func(t any, v *value) { t.(*Task).Env = v.env }},
			{Name: "secret_env", Value: ValRefs, RefKind: envVarKind, set: func(t any, v *value) { t.(*Task).SecretEnv = v.refs }},
			{Name: "effects", Value: ValRefs, RefKind: "effect", set: func(t any, v *value) { t.(*Task).Effects = v.refs }},
			{Name: "labels", Value: ValRefs, RefKind: labelKind, set: func(t any, v *value) { t.(*Task).Labels = v.refs }},
			{Name: "idempotent", Value: ValBool, set: func(t any, v *value) { b := v.b; t.(*Task).Idempotent = &b }},
			{Name: "retry", Value: ValRef, RefKind: "retry policy", set: func(t any, v *value) { t.(*Task).Retry = v.ref }},
			{Name: "pool", Value: ValRef, RefKind: "pool", set: func(t any, v *value) { t.(*Task).Pool = v.ref }},
			{Name: "timeout", Value: ValDuration, set: func(t any, v *value) { t.(*Task).Timeout = v.dur }},
			{Name: "heartbeat", Nested: KindHeartbeat},
			{Name: "failover", Nested: KindFailover},
		},
		KindHeartbeat: {
			{Name: "every", Required: true, Value: ValDuration, set: func(t any, v *value) { t.(*Heartbeat).Every = v.dur }},
			{Name: "lease", Required: true, Value: ValDuration, set: func(t any, v *value) { t.(*Heartbeat).Lease = v.dur }},
		},
		KindFailover: {
			{Name: "per_worker", Value: ValInt, Min: 0, Max: math.MaxInt32, set: func(t any, v *value) { t.(*Failover).PerWorker = v.n }},
			{Name: "global", Value: ValInt, Min: 0, Max: math.MaxInt32, set: func(t any, v *value) { t.(*Failover).Global = v.n }},
		},
		KindCheck: {
			{Name: "input", Required: true, Value: ValRef, RefKind: "artifact", set: func(t any, v *value) { t.(*Check).Input = *v.ref }},
			{Name: "row_count_min", Value: ValInt, Min: 0, Max: math.MaxInt, set: func(t any, v *value) { n := v.n; t.(*Check).RowCountMin = &n }},
			{Name: "row_count_max", Value: ValInt, Min: 0, Max: math.MaxInt, set: func(t any, v *value) { n := v.n; t.(*Check).RowCountMax = &n }},
			{Name: "unique", Value: ValStrings, set: func(t any, v *value) { t.(*Check).Unique = v.strs }},
			{Name: "not_null", Value: ValStrings, set: func(t any, v *value) { t.(*Check).NotNull = v.strs }},
			{Name: "columns", Value: ValStrings, set: func(t any, v *value) { t.(*Check).Columns = v.strs }},
			{Name: "code_version_column", Value: ValColumn, set: func(t any, v *value) { t.(*Check).CodeVersionColumn = v.str }},
			{Name: "command", Value: ValCommand, set: func(t any, v *value) { t.(*Check).Command = v.strs }},
		},
		KindSink: {
			{Name: "type", Required: true, Value: ValString, set: func(t any, v *value) { t.(*Sink).Type = v.str }},
			{Name: "path", Required: true, Value: ValString, set: func(t any, v *value) { t.(*Sink).Path = v.str }},
			{Name: "fencing", Value: ValEnum, Enum: []string{"token", "none"}, set: func(t any, v *value) { t.(*Sink).Fencing = Fencing(v.str) }},
		},
		KindPublish: {
			{Name: "artifact", Required: true, Value: ValRef, RefKind: "artifact", set: func(t any, v *value) { t.(*Publish).Artifact = *v.ref }},
			{Name: "sink", Required: true, Value: ValRef, RefKind: "sink", set: func(t any, v *value) { t.(*Publish).Sink = *v.ref }},
		},
	}
}

// SchemaDefinitions maps each element kind to the definition that declares it
// in schema/pipeline.cue, for code that reads the schema by kind (the
// language server's hover, the schema test). A fresh map on each call.
func SchemaDefinitions() map[string]string {
	return map[string]string{
		KindPipeline:    "#Pipeline",
		KindSchedule:    "#Schedule",
		KindRetryBudget: "#RetryBudget",
		KindPool:        "#Pool",
		KindError:       "#ErrorClass",
		KindRetry:       "#RetryPolicy",
		KindTask:        "#Task",
		KindHeartbeat:   "#Heartbeat",
		KindFailover:    "#Failover",
		KindCheck:       "#Check",
		KindSink:        "#Sink",
		KindPublish:     "#Publish",
	}
}
