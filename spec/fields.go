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
	// messages say it ("retry policy"); EnvVarKind for environment variables.
	RefKind string
	// Enum lists the values a ValEnum allows (checked by the HCL loader; in
	// CUE, by the schema).
	Enum []string

	// set stores a value read for the field into target, a pointer to the
	// element being decoded (*Task, *Schedule, ...). Loaders call it only
	// when the value was read.
	set func(target any, v *Value)
}

// Set stores v, read for the field, into target: a pointer to the element
// being decoded (*Task, *Schedule, ...). Loaders call it only when the value
// was read.
func (f *Field) Set(target any, v *Value) { f.set(target, v) }

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

// Value is a field's value as a loader read it, whatever the source syntax;
// the member Field.Value names holds it. Loaders keep one and reuse it.
type Value struct {
	Str    string
	Bool   bool
	Int    int
	Float  float64
	Dur    Duration
	Time   time.Time
	Ref    *Ref
	Refs   []Ref
	Strs   []string
	Ints   []int
	Inputs []Input
	Env    map[string]string
}

// fieldTable is Fields, built once for the loaders, which only read it.
var fieldTable = Fields()

// LookupField returns the field name of kind, if it has one.
func LookupField(kind, name string) (*Field, bool) {
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
			{Name: "code_version", Value: ValString, set: func(t any, v *Value) { t.(*Pipeline).CodeVersion = v.Str }},
			{Name: "workers", Value: ValInt, Min: 1, Max: math.MaxInt32, set: func(t any, v *Value) { t.(*Pipeline).Workers = v.Int }},
			{Name: "artifacts", Value: ValString, set: func(t any, v *Value) { t.(*Pipeline).Artifacts = v.Str }},
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
			{Name: "every", Value: ValDuration, set: func(t any, v *Value) { t.(*Schedule).Every = v.Dur }},
			{Name: "start", Value: ValTime, set: func(t any, v *Value) { t.(*Schedule).Start = v.Time }},
			{Name: "catchup", Value: ValBool, set: func(t any, v *Value) { t.(*Schedule).Catchup = v.Bool }},
			{Name: "max_active_runs", Value: ValInt, Min: 0, Max: math.MaxInt32, set: func(t any, v *Value) { t.(*Schedule).MaxActiveRuns = v.Int }},
		},
		KindRetryBudget: {
			{Name: "ratio", Value: ValFloat, set: func(t any, v *Value) { t.(*RetryBudget).Ratio = v.Float }},
			{Name: "min", Value: ValInt, Min: 0, Max: math.MaxInt32, set: func(t any, v *Value) { t.(*RetryBudget).Min = v.Int }},
		},
		KindPool: {
			{Name: "slots", Value: ValInt, Min: 1, Max: math.MaxInt32, set: func(t any, v *Value) { t.(*Pool).Slots = v.Int }},
		},
		KindError: {
			{Name: "exit_codes", Value: ValInts, Min: 1, Max: 255, set: func(t any, v *Value) { t.(*ErrorClass).ExitCodes = v.Ints }},
			{Name: "match", Value: ValStrings, set: func(t any, v *Value) { t.(*ErrorClass).Match = v.Strs }},
			{Name: "deterministic", Value: ValBool, set: func(t any, v *Value) { t.(*ErrorClass).Deterministic = v.Bool }},
		},
		KindRetry: {
			{Name: "max_attempts", Value: ValInt, Min: 0, Max: math.MaxInt32, set: func(t any, v *Value) { t.(*RetryPolicy).MaxAttempts = v.Int }},
			{Name: "initial", Value: ValDuration, set: func(t any, v *Value) { t.(*RetryPolicy).Initial = v.Dur }},
			{Name: "multiplier", Value: ValFloat, set: func(t any, v *Value) { t.(*RetryPolicy).Multiplier = v.Float }},
			{Name: "max_delay", Value: ValDuration, set: func(t any, v *Value) { t.(*RetryPolicy).MaxDelay = v.Dur }},
			{Name: "jitter", Value: ValEnum, Enum: []string{"full", "equal", "none"}, set: func(t any, v *Value) { t.(*RetryPolicy).Jitter = Jitter(v.Str) }},
			{Name: "max_elapsed", Value: ValDuration, set: func(t any, v *Value) { t.(*RetryPolicy).MaxElapsed = v.Dur }},
			{Name: "on", Value: ValRefs, RefKind: "error class", set: func(t any, v *Value) { t.(*RetryPolicy).On = v.Refs }},
		},
		KindTask: {
			{Name: "command", Required: true, Value: ValCommand, set: func(t any, v *Value) { t.(*Task).Command = v.Strs }},
			{Name: "inputs", Value: ValInputs, set: func(t any, v *Value) { t.(*Task).Inputs = v.Inputs }},
			{Name: "outputs", Value: ValRefs, RefKind: "artifact", set: func(t any, v *Value) { t.(*Task).Outputs = v.Refs }},
			{Name: "depends_on", Value: ValRefs, RefKind: "task", set: func(t any, v *Value) { t.(*Task).DependsOn = v.Refs }},
			{Name: "env", Value: ValEnv, set: func(t any, v *Value) { t.(*Task).Env = v.Env }},
			{Name: "secret_env", Value: ValRefs, RefKind: EnvVarKind, set: func(t any, v *Value) { t.(*Task).SecretEnv = v.Refs }},
			{Name: "effects", Value: ValRefs, RefKind: "effect", set: func(t any, v *Value) { t.(*Task).Effects = v.Refs }},
			{Name: "labels", Value: ValRefs, RefKind: LabelKind, set: func(t any, v *Value) { t.(*Task).Labels = v.Refs }},
			{Name: "idempotent", Value: ValBool, set: func(t any, v *Value) { b := v.Bool; t.(*Task).Idempotent = &b }},
			{Name: "retry", Value: ValRef, RefKind: "retry policy", set: func(t any, v *Value) { t.(*Task).Retry = v.Ref }},
			{Name: "pool", Value: ValRef, RefKind: "pool", set: func(t any, v *Value) { t.(*Task).Pool = v.Ref }},
			{Name: "timeout", Value: ValDuration, set: func(t any, v *Value) { t.(*Task).Timeout = v.Dur }},
			{Name: "heartbeat", Nested: KindHeartbeat},
			{Name: "failover", Nested: KindFailover},
		},
		KindHeartbeat: {
			{Name: "every", Required: true, Value: ValDuration, set: func(t any, v *Value) { t.(*Heartbeat).Every = v.Dur }},
			{Name: "lease", Required: true, Value: ValDuration, set: func(t any, v *Value) { t.(*Heartbeat).Lease = v.Dur }},
		},
		KindFailover: {
			{Name: "per_worker", Value: ValInt, Min: 0, Max: math.MaxInt32, set: func(t any, v *Value) { t.(*Failover).PerWorker = v.Int }},
			{Name: "global", Value: ValInt, Min: 0, Max: math.MaxInt32, set: func(t any, v *Value) { t.(*Failover).Global = v.Int }},
		},
		KindCheck: {
			{Name: "input", Required: true, Value: ValRef, RefKind: "artifact", set: func(t any, v *Value) { t.(*Check).Input = *v.Ref }},
			{Name: "row_count_min", Value: ValInt, Min: 0, Max: math.MaxInt, set: func(t any, v *Value) { n := v.Int; t.(*Check).RowCountMin = &n }},
			{Name: "row_count_max", Value: ValInt, Min: 0, Max: math.MaxInt, set: func(t any, v *Value) { n := v.Int; t.(*Check).RowCountMax = &n }},
			{Name: "unique", Value: ValStrings, set: func(t any, v *Value) { t.(*Check).Unique = v.Strs }},
			{Name: "not_null", Value: ValStrings, set: func(t any, v *Value) { t.(*Check).NotNull = v.Strs }},
			{Name: "columns", Value: ValStrings, set: func(t any, v *Value) { t.(*Check).Columns = v.Strs }},
			{Name: "code_version_column", Value: ValColumn, set: func(t any, v *Value) { t.(*Check).CodeVersionColumn = v.Str }},
			{Name: "command", Value: ValCommand, set: func(t any, v *Value) { t.(*Check).Command = v.Strs }},
		},
		KindSink: {
			{Name: "type", Required: true, Value: ValString, set: func(t any, v *Value) { t.(*Sink).Type = v.Str }},
			{Name: "path", Required: true, Value: ValString, set: func(t any, v *Value) { t.(*Sink).Path = v.Str }},
			{Name: "fencing", Value: ValEnum, Enum: []string{"token", "none"}, set: func(t any, v *Value) { t.(*Sink).Fencing = Fencing(v.Str) }},
		},
		KindPublish: {
			{Name: "artifact", Required: true, Value: ValRef, RefKind: "artifact", set: func(t any, v *Value) { t.(*Publish).Artifact = *v.Ref }},
			{Name: "sink", Required: true, Value: ValRef, RefKind: "sink", set: func(t any, v *Value) { t.(*Publish).Sink = *v.Ref }},
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
