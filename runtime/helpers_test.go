package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/store/sqlite"
	"github.com/pipec/pipec/spec"
)

// fixture is a pipeline folder with its spec, scripts and a state database.
type fixture struct {
	t     *testing.T
	dir   string
	state string
	plan  *compiler.Plan
	st    *sqlite.Store
}

// newFixture writes pipeline.hcl and executable scripts (name -> body, a
// "#!/bin/sh" line is added) into a fresh folder and compiles the spec.
func newFixture(t *testing.T, hcl string, scripts map[string]string) *fixture {
	t.Helper()
	dir := t.TempDir()
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "pipeline.hcl")
	if err := os.WriteFile(path, []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: dir, state: filepath.Join(dir, ".pipec", "state.db")}
	f.plan = compilePlan(t, path)
	f.open()
	return f
}

func compilePlan(t *testing.T, path string) *compiler.Plan {
	t.Helper()
	p, _, ds, err := spec.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if ds.HasErrors() || p == nil {
		t.Fatalf("spec: %v", ds)
	}
	res, ds := compiler.Compile(p)
	if ds.HasErrors() {
		t.Fatalf("compile: %v", ds)
	}
	return res.Plan
}

func (f *fixture) open() {
	f.t.Helper()
	st, err := sqlite.Open(context.Background(), f.state, sqlite.Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.st = st
	f.t.Cleanup(func() { st.Close() })
}

// options are the defaults of the fixture's runs; mod adjusts them.
func (f *fixture) options(interval string) Options {
	return Options{Plan: f.plan, BaseDir: f.dir, Interval: interval, Store: f.st, StatePath: f.state, Seed: 1,
		Environ: os.Environ(), KillGrace: 500 * time.Millisecond}
}

func (f *fixture) run(o Options) *Summary {
	f.t.Helper()
	sum, err := Run(context.Background(), o)
	if err != nil {
		f.t.Fatal(err)
	}
	return sum
}

func (s *Summary) task(name string) TaskResult {
	for _, t := range s.Tasks {
		if t.Name == name {
			return t
		}
	}
	return TaskResult{}
}

func (s *Summary) text() string {
	var b strings.Builder
	s.WriteText(&b)
	return b.String()
}

// events collects OnEvent calls.
type events struct {
	mu  sync.Mutex
	evs []Event
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
}

func (e *events) kinds(task string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.evs {
		if task == "" || ev.Task == task {
			out = append(out, ev.Kind)
		}
	}
	return out
}
