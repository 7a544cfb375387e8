package spec

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

// Field is one field a spec element accepts.
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
}

// Fields returns, for each element kind, the fields it accepts, in the order
// the spec reference lists them. It is the single table the HCL loader, the
// CUE loader and schema/pipeline.cue are checked against (a test fails when
// they disagree), so adding a field starts here. A fresh map is built on each
// call: callers may keep or change it.
func Fields() map[string][]Field {
	return map[string][]Field{
		KindPipeline: {
			{Name: "code_version"},
			{Name: "workers"},
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
			{Name: "every"},
			{Name: "start"},
			{Name: "catchup"},
			{Name: "max_active_runs"},
		},
		KindRetryBudget: {
			{Name: "ratio"},
			{Name: "min"},
		},
		KindPool: {
			{Name: "slots"},
		},
		KindError: {
			{Name: "exit_codes"},
			{Name: "match"},
			{Name: "deterministic"},
		},
		KindRetry: {
			{Name: "max_attempts"},
			{Name: "initial"},
			{Name: "multiplier"},
			{Name: "max_delay"},
			{Name: "jitter"},
			{Name: "max_elapsed"},
			{Name: "on"},
		},
		KindTask: {
			{Name: "command", Required: true},
			{Name: "inputs"},
			{Name: "outputs"},
			{Name: "depends_on"},
			{Name: "env"},
			{Name: "secret_env"},
			{Name: "effects"},
			{Name: "idempotent"},
			{Name: "retry"},
			{Name: "pool"},
			{Name: "timeout"},
			{Name: "heartbeat", Nested: KindHeartbeat},
			{Name: "failover", Nested: KindFailover},
		},
		KindHeartbeat: {
			{Name: "every", Required: true},
			{Name: "lease", Required: true},
		},
		KindFailover: {
			{Name: "per_worker"},
			{Name: "global"},
		},
		KindCheck: {
			{Name: "input", Required: true},
			{Name: "row_count_min"},
			{Name: "row_count_max"},
			{Name: "unique"},
			{Name: "not_null"},
			{Name: "columns"},
			{Name: "code_version_column"},
			{Name: "command"},
		},
		KindSink: {
			{Name: "type", Required: true},
			{Name: "path", Required: true},
			{Name: "fencing"},
		},
		KindPublish: {
			{Name: "artifact", Required: true},
			{Name: "sink", Required: true},
		},
	}
}
