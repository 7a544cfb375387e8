package runtime

import (
	"fmt"

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
	waiting    map[string]int
	dependents map[string][]string
}

// newDAG is the DAG of the plan's tasks.
func newDAG(p *compiler.Plan) *dag {
	g := &dag{waiting: map[string]int{}, dependents: map[string][]string{}}
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
// end (start, concurrently), record one that will not run (notRun), and
// say how one ended (ended: its state and error class).
type engine struct {
	start  func(task string)
	notRun func(task, why string)
	ended  func(task string) (state, class string)
}

// run starts every task once its needs are done, tells the engine of each
// that will never start, and returns when every task is resolved.
func (g *dag) run(e engine) {
	done := make(chan string)
	running := 0
	resolved := map[string]bool{}
	start := func(name string) {
		resolved[name] = true
		running++
		go func() {
			e.start(name)
			done <- name
		}()
	}
	var finish func(name string)
	finish = func(name string) {
		state, class := e.ended(name)
		ok := state == TaskSucceeded || state == TaskReused
		for _, dn := range g.dependents[name] {
			if resolved[dn] {
				continue
			}
			if !ok {
				resolved[dn] = true
				e.notRun(dn, needsWhy(name, state, class))
				finish(dn)
				continue
			}
			if g.waiting[dn]--; g.waiting[dn] == 0 {
				start(dn)
			}
		}
	}
	for _, name := range g.order {
		if g.waiting[name] == 0 && !resolved[name] {
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
		if !resolved[name] {
			e.notRun(name, "its needs were never satisfied")
		}
	}
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
