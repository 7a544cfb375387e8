package runtime

import (
	"fmt"
	"slices"
	"sync"

	"github.com/pipec/pipec/compiler"
)

// The DAG scheduler of a local run
//
// A local run is two parts: this scheduler, which walks the plan's DAG and
// decides when each task may start (every task it needs is done) or never
// will (one failed, was not run, or its outcome is unknown); and the task
// engine (runOne: prior.go, task.go, publish.go), which runs one task the
// same way whoever dispatches it. A worker runs the engine alone (RunVisit):
// the store's queue is the scheduler of a submitted run (runtime/queue),
// and spreads a failure downstream as this one does.

// dag is a run's tasks as the scheduler sees them: what each waits for and
// what waits for it. It knows nothing of processes or the store.
type dag struct {
	order      []string // the plan's order: upstream first
	dependents map[string][]string

	// mu guards waiting and resolved: the scheduler changes them, and a
	// running task asks which tasks it will let start (readyAfter).
	mu       sync.Mutex
	waiting  map[string]int
	resolved map[string]bool // started, or known never to start
}

// newDAG is the DAG of the plan's tasks.
func newDAG(p *compiler.Plan) *dag {
	g := &dag{waiting: map[string]int{}, dependents: map[string][]string{}, resolved: map[string]bool{}}
	for _, id := range p.Order {
		if name, ok := cutKind(id, compiler.KindTask); ok {
			g.order = append(g.order, name)
		}
	}
	for i := range p.Tasks {
		t := &p.Tasks[i]
		g.waiting[t.Name] = len(t.Needs)
		for _, need := range t.Needs {
			g.dependents[need] = append(g.dependents[need], t.Name)
		}
	}
	return g
}

// engine is what the scheduler asks of the task engine: run a task to its
// end (start, concurrently, on a goroutine of spawn's), record one that
// will not run (notRun), and say how one ended (ended: its state and error
// class).
type engine struct {
	start  func(task string)
	spawn  func(func())
	notRun func(task, why string)
	ended  func(task string) (state, class string)
}

// run starts every task once its needs are done, tells the engine of each
// that will never start, and returns when every task is resolved.
func (g *dag) run(e engine) {
	done := make(chan string)
	running := 0
	start := func(name string) {
		running++
		e.spawn(func() {
			e.start(name)
			done <- name
		})
	}
	var finish func(name string)
	finish = func(name string) {
		state, class := e.ended(name)
		ok := state == TaskSucceeded || state == TaskReused
		for _, dn := range g.dependents[name] {
			g.mu.Lock()
			if g.resolved[dn] {
				g.mu.Unlock()
				continue
			}
			if !ok {
				g.resolved[dn] = true
				g.mu.Unlock()
				e.notRun(dn, needsWhy(name, state, class))
				finish(dn)
				continue
			}
			g.waiting[dn]--
			ready := g.waiting[dn] == 0
			g.resolved[dn] = ready
			g.mu.Unlock()
			if ready {
				start(dn)
			}
		}
	}
	for _, name := range g.order {
		g.mu.Lock()
		ready := g.waiting[name] == 0 && !g.resolved[name]
		g.resolved[name] = g.resolved[name] || ready
		g.mu.Unlock()
		if ready {
			start(name)
		}
	}
	for running > 0 {
		name := <-done
		running--
		finish(name)
	}
	// Tasks never reached (only possible with a plan whose needs name
	// missing tasks) are not run.
	for _, name := range g.order {
		if !g.resolved[name] {
			e.notRun(name, "its needs were never satisfied")
		}
	}
}

// readyAfter names the tasks that wait for the running task name alone:
// the scheduler starts them once name ends succeeded. Only name's end can
// make them ready, so the answer holds until then; a task whose other
// needs end meanwhile is simply not named (it starts the usual way).
func (g *dag) readyAfter(name string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for i, dn := range g.dependents[name] {
		if g.resolved[dn] || slices.Contains(g.dependents[name][:i], dn) {
			continue
		}
		// A need named twice is waited for twice.
		if g.waiting[dn] == count(g.dependents[name], dn) {
			out = append(out, dn)
		}
	}
	return out
}

// count is how many times s holds v.
func count(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// needsWhy is why a task does not run when a task it needs ended in state.
func needsWhy(need, state, class string) string {
	switch state {
	case TaskUnknown:
		return fmt.Sprintf("needs %s, whose outcome is unknown", need)
	case TaskFailed:
		if class != "" {
			return fmt.Sprintf("needs %s, which failed (%s)", need, class)
		}
		return fmt.Sprintf("needs %s, which failed", need)
	}
	return fmt.Sprintf("needs %s, which was not run", need)
}
