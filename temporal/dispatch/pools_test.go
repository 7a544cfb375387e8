package dispatch_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/pgtest"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// poolSpec is a pipeline of four independent tasks in pool "backfill"
// (slots 2) and one outside it.
const poolSpec = `
pipeline "pooled" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  pool "backfill" {
    slots = 2
  }
  task "t1" {
    command = ["./probe.sh", "t1"]
    pool    = "backfill"
  }
  task "t2" {
    command = ["./probe.sh", "t2"]
    pool    = "backfill"
  }
  task "t3" {
    command = ["./probe.sh", "t3"]
    pool    = "backfill"
  }
  task "t4" {
    command = ["./probe.sh", "t4"]
    pool    = "backfill"
  }
}
`

// probe.sh notes its start and end (nanoseconds) in the shared file
// probe; until the file "go" exists it does not end, so the test holds
// the pool full while it looks.
var poolFiles = map[string]string{"probe.sh": `#!/bin/sh
echo "start $(date +%s%N) $PIPEC_RUN_ID $1 $PIPEC_WORKER" >> probe
while [ ! -f go ] && [ -f probe.sh ]; do sleep 0.05; done
sleep 0.2
echo "end $(date +%s%N) $PIPEC_RUN_ID $1 $PIPEC_WORKER" >> probe
`}

// TestPoolOnTemporal: a pool bounds the pipeline's tasks in it across runs
// and workers on Temporal, judged by pipec's state. Two runs (two
// intervals) of four pooled tasks on three workers: while the first two
// tasks hold the pool's two slots, pipec status says a third waits for a
// slot; every task runs once, the runs succeed, and the tasks' own notes
// never show more than two running at once. On SQLite and PostgreSQL
// states; on PostgreSQL, a pipec queue worker runs a third run's pooled
// tasks beside them, from the same pool.
func TestPoolOnTemporal(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testPool(t, newEnv(t, poolSpec, poolFiles), false) })
	t.Run("postgres", func(t *testing.T) {
		pg := pgtest.Start(t)
		testPool(t, newEnvAt(t, poolSpec, poolFiles, pg.NewSchema(t)), true)
	})
}

func testPool(t *testing.T, e *env, mixed bool) {
	for _, w := range []string{"w1", "w2", "w3"} {
		e.worker(w)
	}
	var runs []string
	for _, iv := range []string{"2024-01-01", "2024-01-02"} {
		code, run, out := e.submit(iv, false)
		if code != 0 {
			t.Fatalf("submit %s: exit %d\n%s", iv, code, out)
		}
		runs = append(runs, run)
	}
	if mixed {
		// pipec's own queue on the same state: its claims count the
		// Temporal visits' holds, and the visits its claims.
		e.queueWorker("q1")
		code, out := e.run(pipecBin, "submit", "pipeline.hcl", "--interval", "2024-01-03", "--state", e.url)
		if code != 0 {
			t.Fatalf("pipec submit (queue): exit %d\n%s", code, out)
		}
		runs = append(runs, "pooled/2024-01-03/r1")
	}
	const want = "waiting for a slot in pool backfill (2 of 2 busy)"
	e.statusUntil(func(out string) bool { return strings.Contains(out, want) })
	// The two tasks holding the slots have started (or are starting):
	// their notes come first; the check below counts every note.
	for e.lines("probe", "start ") < 2 {
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, run := range runs {
		if r := e.until(run); r.State != store.RunSucceeded {
			t.Errorf("run %s: %s", run, r.State)
		}
	}
	// Every task ran once, and never more than two at once.
	b, err := os.ReadFile(filepath.Join(e.dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	type note struct {
		at    int64
		start bool
		what  string
	}
	var notes []note
	started := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 5 {
			t.Fatalf("probe line %q", l)
		}
		at, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("probe line %q: %v", l, err)
		}
		what := f[2] + " " + f[3]
		notes = append(notes, note{at: at, start: f[0] == "start", what: what})
		if f[0] == "start" {
			started[what]++
		}
	}
	for _, run := range runs {
		for _, task := range []string{"t1", "t2", "t3", "t4"} {
			if n := started[run+" "+task]; n != 1 {
				t.Errorf("%s %s started %d times, want once", run, task, n)
			}
		}
	}
	if len(started) != 4*len(runs) {
		t.Errorf("tasks started: %v", started)
	}
	// In time order; an end before a start at the same instant.
	slices.SortStableFunc(notes, func(a, b note) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		switch {
		case a.start == b.start:
			return 0
		case a.start:
			return 1
		}
		return -1
	})
	running, top := 0, 0
	for _, n := range notes {
		if n.start {
			running++
		} else {
			running--
		}
		top = max(top, running)
	}
	if top > 2 {
		t.Errorf("%d pooled tasks ran at once, pool slots 2:\n%s", top, b)
	}
	t.Logf("at most %d pooled tasks at once", top)
	// The waiting was recorded in the run's log, as a claim records it.
	found := false
	for _, run := range runs {
		evs, err := e.st.Events(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			var p struct{ Waiting string }
			if ev.Kind == queue.EventRunWaiting && json.Unmarshal(ev.Payload, &p) == nil && strings.HasSuffix(p.Waiting, want) {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no %s event says %q", queue.EventRunWaiting, want)
	}
}

// TestPoolReleasedOnCancel: pipec cancel of a run whose tasks hold the
// pool's slots and wait for one gives the slots back when the visits stop,
// not when their holds' leases (5 minutes here) run out: the state then
// grants both slots to another holder.
func TestPoolReleasedOnCancel(t *testing.T) {
	e := newEnv(t, poolSpec, poolFiles)
	for _, w := range []string{"w1", "w2", "w3"} {
		e.worker(w, "--task-lease", "5m")
	}
	_, run, _ := e.submit("2024-01-01", false)
	e.statusUntil(func(out string) bool {
		return strings.Contains(out, "waiting for a slot in pool backfill (2 of 2 busy)")
	})
	if code, out := e.run(bin, "cancel", run, "--engine", e.engine, "--state", e.url); code != 0 {
		t.Fatalf("cancel: exit %d\n%s", code, out)
	}
	if r := e.until(run); r.State != store.RunCancelled {
		t.Fatalf("run %s: %s, want cancelled", run, r.State)
	}
	ps, ok := e.st.(queue.PoolSlots)
	if !ok {
		t.Fatalf("the state (%T) holds no pool slots", e.st)
	}
	key := queue.PoolKey("pooled", "backfill")
	other := queue.PoolHolder{Run: "pooled/2024-01-09/r1", Task: "t1", Worker: "test"}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		busy, held, err := ps.HoldPoolSlot(context.Background(), key, 2, other, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if held && busy == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled run's visits still hold %d slots of the pool", busy)
		}
	}
	if n := e.lines("probe", "end "); n != 0 {
		t.Errorf("%d cancelled tasks ended on their own", n)
	}
}
