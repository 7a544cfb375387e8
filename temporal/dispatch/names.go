// Package dispatch runs pipec's submitted runs on Temporal: one workflow per
// run, which walks the compiled plan's DAG, and one activity per visit of a
// task, which runs runtime.RunVisit (the one task engine) on a pipec worker
// polling Temporal. Temporal carries the dispatch (durable history, task
// queues, heartbeats, cancellation); pipec's state still grants the tokens,
// records the attempts, versions and pointers, and the failover decisions
// are pipec's (internal/failover through runtime/queue's pure decisions),
// taken in the workflow and routed to worker-specific task queues.
package dispatch

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/pipec/pipec/runtime/queue"
)

// Task queues. Every pipec worker on Temporal polls WorkflowQueue (the
// workflows), the activity queue of every set of its labels (TasksQueue of
// that set: a task's first start goes to the queue of its labels, where
// Temporal hands it to any eligible worker), and its own queue
// (WorkerQueue): a failover's next start goes there, to the worker pipec's
// failover model picked.
const WorkflowQueue = "pipec"

// StateQueue is the queue of the activities that judge a lost visit in
// the state (Activities.Lost, LostInBatch). Every worker polls it beside
// its slots: they are short writes, never a task's process, and must not
// wait for a visit to end. They are activities, not local activities, for
// the reason markLost gives.
const StateQueue = "pipec.state"

// TasksQueue is the activity queue of tasks requiring labels (sorted).
// Tasks without labels share the workflows' queue: the worker that
// completes the workflow task which starts them may take them at once
// (Temporal's eager activity dispatch), a round trip fewer per task.
func TasksQueue(labels []string) string {
	if len(labels) == 0 {
		return WorkflowQueue
	}
	return "pipec.tasks+" + strings.Join(queue.NormalLabels(labels), "+")
}

// WorkerQueue is the worker's own activity queue.
func WorkerQueue(worker string) string { return "pipec.worker." + worker }

// WorkflowID is the workflow of the runs of one interval of one pipeline:
// Temporal refuses a second workflow of that ID while one is open.
func WorkflowID(pipeline, interval string) string { return "pipec/" + pipeline + "/" + interval }

// EngineLabel is the label a pipec worker on Temporal registers with in the
// state, besides its own: the workflow routes failovers to the live
// workers that carry it.
const EngineLabel = "temporal"

// Engine is a parsed --engine temporal://HOST:PORT[?namespace=NS].
type Engine struct {
	HostPort  string
	Namespace string
}

// ParseEngine parses an --engine value.
func ParseEngine(v string) (Engine, error) {
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "temporal" || u.Host == "" {
		return Engine{}, fmt.Errorf("--engine %q: want temporal://HOST:PORT[?namespace=NS]", v)
	}
	e := Engine{HostPort: u.Host, Namespace: u.Query().Get("namespace")}
	if e.Namespace == "" {
		e.Namespace = "default"
	}
	return e, nil
}

func (e Engine) String() string {
	return "temporal://" + e.HostPort + "?namespace=" + e.Namespace
}

// Activity and workflow names, as registered.
const (
	WorkflowName        = "pipec.run"
	ActivityVisit       = "pipec.visit"
	ActivityVisits      = "pipec.visits"
	ActivityEndRun      = "pipec.end_run"
	ActivityLive        = "pipec.live_workers"
	ActivityLost        = "pipec.lost_visit"
	ActivityLostInBatch = "pipec.lost_in_batch"
	ActivityNotes       = "pipec.notes"
	QueryStatus         = "status"
	DefaultHeartbeat    = 10 * time.Second
	defaultRouteWait    = time.Minute
	defaultWaitRecheck  = 2 * time.Second
)
