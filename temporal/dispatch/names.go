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

// Names are the Temporal names of one state's runs: its task queues and
// its workflows' IDs, each ending in "@" and the state's identity
// (store.Store.StateID). The workers of two states on one namespace
// (staging beside production) thus never take each other's work: a
// workflow's local activities write its run's end into the state of the
// worker that runs it, and a visit runs in its worker's state; and two
// states' runs of one interval, or the cancel of one, never meet.
//
// Every pipec worker on Temporal polls WorkflowQueue (the workflows), the
// activity queue of every set of its labels (TasksQueue of that set: a
// task's first start goes to the queue of its labels, where Temporal hands
// it to any eligible worker), its own queue (WorkerQueue: a failover's next
// start goes there, to the worker pipec's failover model picked), and
// StateQueue.
type Names struct{ State string }

func (n Names) scoped(name string) string { return name + "@" + n.State }

// WorkflowQueue is the workflows' queue.
func (n Names) WorkflowQueue() string { return n.scoped("pipec") }

// StateQueue is the queue of the activities that judge a lost visit in
// the state (Activities.Lost, LostInBatch). Every worker polls it beside
// its slots: they are short writes, never a task's process, and must not
// wait for a visit to end. They are activities, not local activities, for
// the reason markLost gives.
func (n Names) StateQueue() string { return n.scoped("pipec.state") }

// TasksQueue is the activity queue of tasks requiring labels (sorted).
// Tasks without labels share the workflows' queue: the worker that
// completes the workflow task which starts them may take them at once
// (Temporal's eager activity dispatch), a round trip fewer per task.
func (n Names) TasksQueue(labels []string) string {
	if len(labels) == 0 {
		return n.WorkflowQueue()
	}
	return n.scoped("pipec.tasks+" + strings.Join(queue.NormalLabels(labels), "+"))
}

// WorkerQueue is the worker's own activity queue.
func (n Names) WorkerQueue(worker string) string { return n.scoped("pipec.worker." + worker) }

// WorkflowID is the workflow of the runs of one interval of one pipeline:
// Temporal refuses a second workflow of that ID while one is open.
func (n Names) WorkflowID(pipeline, interval string) string {
	return n.scoped("pipec/" + pipeline + "/" + interval)
}

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
