package runtime

import (
	"reflect"
	"slices"
	"testing"

	"github.com/pipec/pipec/compiler"
)

// TestPlanSetup: a visit's runner made with its plan's PlanSetup is made as
// one without, and a setup made from other options is not used.
func TestPlanSetup(t *testing.T) {
	dir := t.TempDir()
	p := &compiler.Plan{Pipeline: "p", Tasks: []compiler.PlanTask{
		{Name: "a", SecretEnv: []string{"TOKEN"}},
		{Name: "b", SecretEnv: []string{"KEY", "EMPTY"}},
	}}
	o := Options{Plan: p, BaseDir: dir, StatePath: "state.db", Scratch: dir, Interval: "2024-01-01",
		Environ: []string{"PATH=/bin", "TOKEN=s3cret", "KEY=k3y", "EMPTY=", "OTHER=x"}}
	iv := Interval{Key: "2024-01-01"}
	setup, err := PreparePlan(o)
	if err != nil {
		t.Fatal(err)
	}
	same := func(t *testing.T, got, want *runner) {
		t.Helper()
		if got.o.StatePath != want.o.StatePath || got.o.BaseDir != want.o.BaseDir || got.stateDir != want.stateDir {
			t.Errorf("paths %q %q %q, want %q %q %q", got.o.StatePath, got.o.BaseDir, got.stateDir,
				want.o.StatePath, want.o.BaseDir, want.stateDir)
		}
		if !reflect.DeepEqual(got.baseEnv, want.baseEnv) || !reflect.DeepEqual(got.parentEnv, want.parentEnv) {
			t.Errorf("environment %v %v, want %v %v", got.baseEnv, got.parentEnv, want.baseEnv, want.parentEnv)
		}
		if !slices.Equal(got.red.Secrets(), want.red.Secrets()) {
			t.Errorf("secrets %q, want %q", got.red.Secrets(), want.red.Secrets())
		}
		if len(got.tasks) != len(want.tasks) {
			t.Errorf("%d tasks, want %d", len(got.tasks), len(want.tasks))
		}
		for name, ts := range want.tasks {
			if g := got.tasks[name]; g == nil || g.t != ts.t {
				t.Errorf("task %s: %+v, want %+v", name, g, ts)
			}
		}
	}
	for _, only := range []string{"b", "missing", ""} {
		want, err := newRunner(o, iv, only, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := newRunner(o, iv, only, setup)
		if err != nil {
			t.Fatal(err)
		}
		same(t, got, want)
	}
	if want, err := ResolveInterval(nil, o.Interval); err != nil || !setup.resolved || setup.iv != want {
		t.Fatalf("interval %+v (resolved %v), want %+v (%v)", setup.iv, setup.resolved, want, err)
	}
	// Another interval (a backfill's next run): the setup fits, but its
	// interval is not that one's.
	next := o
	next.Interval = "2024-01-02"
	if !setup.fits(next) {
		t.Fatal("a setup does not fit the options of another interval")
	}
	if got, ok := setup.intervalOf(o); !ok || got != setup.iv {
		t.Fatalf("interval of its own options: %+v, %v", got, ok)
	}
	if got, ok := setup.intervalOf(next); ok {
		t.Fatalf("interval of another interval's options: %+v", got)
	}
	if got := setup.secrets; !slices.Equal(got, []string{"s3cret", "k3y"}) {
		t.Fatalf("plan secrets %q", got)
	}
	// Another environment: the setup does not fit, the runner derives its own.
	other := o
	other.Environ = []string{"TOKEN=other"}
	want, err := newRunner(other, iv, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := newRunner(other, iv, "a", setup)
	if err != nil {
		t.Fatal(err)
	}
	same(t, got, want)
	if !slices.Equal(got.red.Secrets(), []string{"other"}) {
		t.Fatalf("secrets %q from a setup that does not fit", got.red.Secrets())
	}
}
