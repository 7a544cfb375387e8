package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/compiler"
)

func TestResolveInterval(t *testing.T) {
	daily := &compiler.PlanSchedule{Every: "24h", Start: "2024-01-01T00:00:00Z"}
	hourly := &compiler.PlanSchedule{Every: "1h", Start: "2024-01-01T00:00:00Z"}
	for _, tc := range []struct {
		sched      *compiler.PlanSchedule
		in         string
		key, end   string
		errHas     string
		prevKey    string
		prevExists bool
	}{
		{sched: daily, in: "2024-01-01", key: "2024-01-01", end: "2024-01-02T00:00:00Z", prevKey: "2023-12-31"},
		{sched: daily, in: "2024-03-05T00:00:00Z", key: "2024-03-05", end: "2024-03-06T00:00:00Z", prevKey: "2024-03-04", prevExists: true},
		{sched: nil, in: "2023-06-01", key: "2023-06-01", end: "2023-06-02T00:00:00Z", prevKey: "2023-05-31", prevExists: true},
		{sched: hourly, in: "2024-01-01T05:00:00Z", key: "2024-01-01T05:00:00Z", end: "2024-01-01T06:00:00Z", prevKey: "2024-01-01T04:00:00Z", prevExists: true},
		{sched: daily, in: "2024-01-01T05:00:00Z", errHas: "the interval containing it starts at 2024-01-01T00:00:00Z"},
		{sched: daily, in: "2023-12-31", errHas: "before the schedule's start"},
		{sched: daily, in: "yesterday", errHas: "invalid interval"},
	} {
		iv, err := ResolveInterval(tc.sched, tc.in)
		if tc.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("%s: err = %v, want %q", tc.in, err, tc.errHas)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if iv.Key != tc.key || iv.End.Format(time.RFC3339) != tc.end {
			t.Errorf("%s: key %s end %s", tc.in, iv.Key, iv.End.Format(time.RFC3339))
		}
		prev, ok := iv.Offset(-1)
		if prev.Key != tc.prevKey || ok != tc.prevExists {
			t.Errorf("%s: previous = %s (exists %v), want %s (%v)", tc.in, prev.Key, ok, tc.prevKey, tc.prevExists)
		}
	}
}

const behaviourHCL = `
pipeline "beh" {
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  pool "one" { slots = 1 }
  retry "any" {
    max_attempts = 2
    initial      = "10ms"
    jitter       = "none"
  }
  task "p1" {
    command = ["./excl.sh"]
    pool    = "one"
  }
  task "p2" {
    command = ["./excl.sh"]
    pool    = "one"
  }
  task "p3" {
    command = ["./excl.sh"]
    pool    = "one"
  }
  task "secret" {
    command    = ["./secret.sh"]
    secret_env = ["PIPEC_TEST_PASSWORD"]
    retry      = "any"
  }
  task "slow" {
    command = ["sleep", "5"]
    timeout = "100ms"
    retry   = "any"
  }
  task "charge" {
    command = ["sh", "-c", "exit 1"]
    effects = ["charge"]
    retry   = "any"
  }
  task "loose" {
    command = ["./loose.sh"]
    outputs = ["loose"]
  }
  sink "bucket" {
    type    = "directory"
    path    = "bucket"
    fencing = "none"
  }
  check "loose_ok" {
    input         = "loose"
    row_count_min = 1
  }
  publish "loose_out" {
    artifact = "loose"
    sink     = "bucket"
  }
}
`

// TestBehaviour covers what the fault tests do not: pool slots, secret
// redaction, the timeout class, non-idempotent tasks, unfenced sinks.
func TestBehaviour(t *testing.T) {
	f := newFixture(t, behaviourHCL, map[string]string{
		// A pool of one slot: two of these at once would find the lock taken.
		"excl.sh":   `mkdir "$PWD/lock" || exit 9; sleep 0.05; rmdir "$PWD/lock"`,
		"secret.sh": `echo "connecting with $PIPEC_TEST_PASSWORD"; echo "token=$PIPEC_TEST_PASSWORD failed" >&2; exit 1`,
		"loose.sh":  `echo "id" > "$PIPEC_OUTPUT_loose/loose.csv"; echo 1 >> "$PIPEC_OUTPUT_loose/loose.csv"`,
	})
	o := f.options("2024-01-01")
	o.Parallel = 8
	o.Environ = append(os.Environ(), "PIPEC_TEST_PASSWORD=hunter2-xyz")
	sum := f.run(o)
	for _, name := range []string{"p1", "p2", "p3"} {
		if tr := sum.task(name); tr.State != TaskSucceeded {
			t.Errorf("pool task %s = %+v (two ran at once?)", name, tr)
		}
	}
	sec := sum.task("secret")
	if sec.State != TaskFailed || sec.Attempts != 2 || sec.Class != "unclassified" {
		t.Errorf("secret = %+v", sec)
	}
	if strings.Contains(sec.Error, "hunter2") || !strings.Contains(sec.Error, "token=*** failed") {
		t.Errorf("secret not redacted in the error: %q", sec.Error)
	}
	for n := 1; n <= 2; n++ {
		b, err := os.ReadFile(filepath.Join(f.dir, ".pipec/logs/beh/2024-01-01/r1/secret", []string{"", "1.log", "2.log"}[n]))
		if err != nil || strings.Contains(string(b), "hunter2") || !strings.Contains(string(b), "connecting with ***") {
			t.Errorf("log %d = %q, %v", n, b, err)
		}
	}
	evs, err := f.st.Events(context.Background(), sum.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if strings.Contains(string(e.Payload), "hunter2") {
			t.Errorf("secret in event %s: %s", e.Kind, e.Payload)
		}
	}
	if s := sum.task("slow"); s.State != TaskFailed || s.Class != "timeout" || s.Attempts != 2 {
		t.Errorf("slow = %+v", s)
	}
	if c := sum.task("charge"); c.State != TaskFailed || c.Attempts != 1 || !strings.Contains(c.Reason, "not idempotent") {
		t.Errorf("charge = %+v", c)
	}
	if len(sum.AtLeastOnce) != 1 || sum.AtLeastOnce[0] != "bucket" || !strings.Contains(sum.text(), `sink bucket has fencing = "none"`) {
		t.Errorf("at-least-once sinks = %v\n%s", sum.AtLeastOnce, sum.text())
	}
	var pub PublishResult
	for _, p := range sum.Publish {
		if p.Name == "loose_out" {
			pub = p
		}
	}
	if pub.Outcome != "won" || !pub.AtLeastOnce {
		t.Errorf("loose_out = %+v", pub)
	}
}

// TestMissingSecret: a secret_env name pipec does not have fails the task
// before it starts, and says which.
func TestMissingSecret(t *testing.T) {
	f := newFixture(t, `pipeline "m" {
  task "needs" {
    command    = ["true"]
    secret_env = ["PIPEC_TEST_NOT_SET_ANYWHERE"]
  }
}`, nil)
	o := f.options("2024-01-01")
	sum := f.run(o)
	if tr := sum.task("needs"); tr.State != TaskFailed || !strings.Contains(tr.Error, "secret_env PIPEC_TEST_NOT_SET_ANYWHERE is not set") {
		t.Errorf("needs = %+v", tr)
	}
}
