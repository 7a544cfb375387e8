package compiler

// APIVersion is written at the top of every plan.
const APIVersion = "pipec/v1"

// Plan is the compiled, validated form of a pipeline: deterministic JSON with no
// file names or source positions, so the HCL and CUE forms of one pipeline give
// the same bytes. Slices are sorted by name unless documented otherwise.
type Plan struct {
	APIVersion string `json:"apiVersion"`
	Pipeline   string `json:"pipeline"`
	// Digest is "sha256:<hex>" over the canonical JSON of the plan with Digest empty.
	Digest      string `json:"digest"`
	CodeVersion string `json:"code_version,omitempty"`
	// Workers is the worker pool size the spec states (0: not stated).
	Workers int `json:"workers,omitempty"`
	// ArtifactStore is the spec's artifacts field as written: the folder of
	// the shared artifact store (relative: to the spec's folder); "" when
	// the spec does not say.
	ArtifactStore string         `json:"artifact_store,omitempty"`
	Schedule      *PlanSchedule  `json:"schedule,omitempty"`
	RetryBudget   *PlanBudget    `json:"retry_budget,omitempty"`
	Pools         []PlanPool     `json:"pools"`
	Errors        []PlanError    `json:"error_classes"`
	Tasks         []PlanTask     `json:"tasks"`
	Checks        []PlanCheck    `json:"checks"`
	Sinks         []PlanSink     `json:"sinks"`
	Publishes     []PlanPublish  `json:"publishes"`
	Artifacts     []PlanArtifact `json:"artifacts"`
	// Order is a topological order of every node id (see NodeID), ties broken by id.
	Order []string `json:"order"`
}

// Node kinds, used as prefixes of node ids in Plan.Order and graph output.
const (
	KindTask    = "task"
	KindCheck   = "check"
	KindPublish = "publish"
)

// NodeID names a node of the DAG: "task.extract", "check.ok", "publish.mart".
func NodeID(kind, name string) string { return kind + "." + name }

// PlanSchedule is the resolved schedule. Durations are Go duration strings.
type PlanSchedule struct {
	Every         string `json:"every"`
	Start         string `json:"start"`
	Catchup       bool   `json:"catchup"`
	MaxActiveRuns int    `json:"max_active_runs"`
}

// PlanBudget is the pipeline's retry budget.
type PlanBudget struct {
	Ratio float64 `json:"ratio"`
	Min   int     `json:"min"`
}

// PlanPool is a concurrency pool.
type PlanPool struct {
	Name  string `json:"name"`
	Slots int    `json:"slots"`
}

// PlanError is an error class.
type PlanError struct {
	Name          string   `json:"name"`
	ExitCodes     []int    `json:"exit_codes"`
	Match         []string `json:"match"`
	Deterministic bool     `json:"deterministic"`
}

// PlanRetry is a task's retry policy with defaults applied.
type PlanRetry struct {
	Policy string `json:"policy"`
	// MaxAttempts counts the first attempt; 0 means unlimited.
	MaxAttempts int     `json:"max_attempts"`
	Initial     string  `json:"initial"`
	Multiplier  float64 `json:"multiplier"`
	MaxDelay    string  `json:"max_delay"`
	Jitter      string  `json:"jitter"`
	MaxElapsed  string  `json:"max_elapsed,omitempty"`
	// On lists the retried classes; empty means every failure.
	On []string `json:"on"`
}

// PlanInput binds an artifact of the run's interval (Offset 0) or another one.
type PlanInput struct {
	Artifact string `json:"artifact"`
	Offset   int    `json:"offset"`
	Producer string `json:"producer"`
}

// PlanHeartbeat is a task's lease.
type PlanHeartbeat struct {
	Every string `json:"every"`
	Lease string `json:"lease"`
}

// PlanFailover is a task's failover limits.
type PlanFailover struct {
	// PerWorker is how many visits one worker gets (the first start counts);
	// 0 is unlimited.
	PerWorker int `json:"per_worker"`
	// Global is how many failovers are allowed before the task stops; nil
	// (global not set) is unlimited, which is not the same as 0 (never fail
	// over). The linter and the runtime read it alike (internal/failover).
	Global *int `json:"global,omitempty"`
}

// PlanTask is one task, with its upstream resolved.
type PlanTask struct {
	Name      string      `json:"name"`
	Command   []string    `json:"command"`
	Inputs    []PlanInput `json:"inputs"`
	Outputs   []string    `json:"outputs"`
	DependsOn []string    `json:"depends_on"`
	// Needs is every task this one waits for (explicit and through artifacts), sorted.
	Needs     []string          `json:"needs"`
	Env       map[string]string `json:"env,omitempty"`
	SecretEnv []string          `json:"secret_env"`
	Effects   []string          `json:"effects"`
	// Labels are the worker labels the task requires (sorted, without
	// duplicates); omitted when none, so plans without labels read as
	// before.
	Labels     []string `json:"labels,omitempty"`
	Idempotent bool     `json:"idempotent"`
	// Retry is nil when the task is not retried.
	Retry     *PlanRetry     `json:"retry,omitempty"`
	Pool      string         `json:"pool,omitempty"`
	Timeout   string         `json:"timeout,omitempty"`
	Heartbeat *PlanHeartbeat `json:"heartbeat,omitempty"`
	Failover  *PlanFailover  `json:"failover,omitempty"`
}

// ReadsOtherIntervals says whether the task has an input of another
// interval than its run's (raw@-1): what it read there is recorded with
// each attempt, and a rerun reuses its result only while that is still
// the other interval's accepted content.
func (t *PlanTask) ReadsOtherIntervals() bool {
	for _, in := range t.Inputs {
		if in.Offset != 0 {
			return true
		}
	}
	return false
}

// PlanCheck is an audit of one artifact.
type PlanCheck struct {
	Name        string   `json:"name"`
	Input       string   `json:"input"`
	RowCountMin *int     `json:"row_count_min,omitempty"`
	RowCountMax *int     `json:"row_count_max,omitempty"`
	Unique      []string `json:"unique"`
	NotNull     []string `json:"not_null"`
	Columns     []string `json:"columns"`
	// CodeVersionColumn must hold the plan's code_version in every row.
	CodeVersionColumn string   `json:"code_version_column,omitempty"`
	Command           []string `json:"command"`
}

// PlanSink is a publication target.
type PlanSink struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Path    string `json:"path"`
	Fencing string `json:"fencing"`
}

// PlanPublish publishes an artifact to a sink after its checks.
type PlanPublish struct {
	Name     string `json:"name"`
	Artifact string `json:"artifact"`
	Sink     string `json:"sink"`
	// Checks are the checks on the artifact this publish waits for.
	Checks []string `json:"checks"`
}

// PlanArtifact ties an artifact to its producer, readers, checks and publishes.
type PlanArtifact struct {
	Name      string   `json:"name"`
	Producer  string   `json:"producer"`
	Readers   []string `json:"readers"`
	Checks    []string `json:"checks"`
	Publishes []string `json:"publishes"`
}
