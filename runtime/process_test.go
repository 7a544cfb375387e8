package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A timed-out task says after how long, not "exit -1"; a task that cannot
// start says why.
func TestEndingsSayWhatHappened(t *testing.T) {
	f := newFixture(t, `pipeline "endings" {
  task "slow" {
    command = ["sleep", "30"]
    timeout = "200ms"
  }
  task "missing" {
    command = ["./no-such-script.sh"]
  }
}`, nil)
	sum := f.run(f.options("2024-01-01"))
	slow, missing := sum.task("slow"), sum.task("missing")
	if slow.State != TaskFailed || slow.Ending != "timed out after 200ms" || slow.ExitCode != 0 {
		t.Errorf("slow = %+v", slow)
	}
	if missing.State != TaskFailed || !strings.Contains(missing.Ending, "could not start: ./no-such-script.sh: no such file or directory") {
		t.Errorf("missing = %+v", missing)
	}
	text := sum.text()
	if strings.Contains(text, "exit -1") || !strings.Contains(text, "timed out after 200ms") ||
		!strings.Contains(text, "could not start: ./no-such-script.sh") {
		t.Errorf("summary:\n%s", text)
	}
}

// A task that exits 0 but leaves a child appending to its output: the child
// ends with the task, the audit sees the rows as they were when the task
// exited, the publish succeeds, and so does a rerun (no "staging changed
// after the audit").
func TestLeftoverChildEndsWithTheTask(t *testing.T) {
	f := newFixture(t, `pipeline "leftover" {
  task "make" {
    command = ["./make.sh"]
    outputs = ["rows"]
  }
  check "rows_ok" {
    input         = "rows"
    row_count_max = 3
  }
  sink "out" {
    type    = "directory"
    path    = "out"
    fencing = "token"
  }
  publish "rows_pub" {
    artifact = "rows"
    sink     = "out"
  }
}`, map[string]string{
		"make.sh": `f="$PIPEC_OUTPUT_rows/rows.csv"
printf 'id\n1\n2\n3\n' > "$f"
(sleep 0.2; while :; do echo 9 >> "$f"; sleep 0.01; done) & echo $! > appender.pid
sleep 300 & echo $! > sleeper.pid
exit 0`,
	})
	sum := f.run(f.options("2024-01-01"))
	if sum.Failed {
		t.Fatalf("run failed:\n%s", sum.text())
	}
	for _, name := range []string{"appender.pid", "sleeper.pid"} {
		b, err := os.ReadFile(filepath.Join(f.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		// SIGKILL is delivered asynchronously; the bound is not a timing claim.
		deadline := time.Now().Add(10 * time.Second)
		for pid > 0 && alive(pid) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if pid <= 0 || alive(pid) {
			t.Errorf("%s: process %d outlived its task", name, pid)
		}
	}
	time.Sleep(300 * time.Millisecond) // past the appender's start, had it lived
	b, err := os.ReadFile(filepath.Join(f.dir, "out", "2024-01-01", "rows.csv"))
	if err != nil || string(b) != "id\n1\n2\n3\n" {
		t.Errorf("published rows = %q, %v", b, err)
	}
	sum = f.run(f.options("2024-01-01"))
	if sum.Failed {
		t.Fatalf("rerun failed:\n%s", sum.text())
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || len(b) < i+3 || b[i+2] != 'Z'
}

// The version is frozen before the audit reads it: a process that escaped
// the task's group (setsid) appends to the staged output after the task
// exited. The check, the downstream task and the publish all see the frozen
// bytes, which are read-only and content-addressed.
func TestAuditedBytesArePublishedBytes(t *testing.T) {
	f := newFixture(t, `pipeline "frozen" {
  task "make" {
    command = ["./make.sh"]
    outputs = ["rows"]
  }
  task "use" {
    command = ["./use.sh"]
    inputs  = ["rows"]
  }
  check "rows_ok" {
    input         = "rows"
    row_count_max = 3
    command       = ["./slowcheck.sh"]
  }
  sink "out" {
    type    = "directory"
    path    = "out"
    fencing = "token"
  }
  publish "rows_pub" {
    artifact = "rows"
    sink     = "out"
  }
}`, map[string]string{
		"make.sh": `f="$PIPEC_OUTPUT_rows/rows.csv"
printf 'id\n1\n2\n3\n' > "$f"
# Not in the task's group: it outlives the task and keeps writing.
setsid sh -c 'touch escaped; while [ ! -e wrote ]; do sleep 0.01; done; echo 9 >> "$0"; touch appended' "$f" > /dev/null 2>&1 < /dev/null &
while [ ! -e escaped ]; do sleep 0.01; done
exit 0`,
		// The check lets the escaped writer write, then reads its input.
		"slowcheck.sh": `touch wrote
n=0; while [ ! -e appended ] && [ $n -lt 500 ]; do sleep 0.01; n=$((n+1)); done
[ "$(wc -l < "$PIPEC_CHECK_INPUT/rows.csv")" -eq 4 ]`,
		"use.sh": `echo "$PIPEC_INPUT_rows" > use.dir
wc -l < "$PIPEC_INPUT_rows/rows.csv" > use.count`,
	})
	sum := f.run(f.options("2024-01-01"))
	if sum.Failed {
		t.Fatalf("run failed:\n%s", sum.text())
	}
	if _, err := os.Stat(filepath.Join(f.dir, "appended")); err != nil {
		t.Fatalf("the escaped writer never wrote: %v", err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(f.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := read("use.count"); got != "4" {
		t.Errorf("downstream read %s lines, want the frozen 4", got)
	}
	dir := read("use.dir")
	if !strings.Contains(dir, filepath.Join(".pipec", "versions", "frozen", "rows")) {
		t.Errorf("downstream input %s is not the frozen version", dir)
	}
	// Read-only (root ignores modes: the publish re-digests what it copies).
	if fi, err := os.Stat(filepath.Join(dir, "rows.csv")); err != nil || fi.Mode().Perm()&0o222 != 0 {
		t.Errorf("frozen file: %v, %v", fi.Mode(), err)
	}
	if got := read(filepath.Join("out", "2024-01-01", "rows.csv")); got != "id\n1\n2\n3" {
		t.Errorf("published %q, want the audited rows", got)
	}
}

// A run stopped (Ctrl-C) while a non-idempotent task's output is audited
// leaves the output staged, its check not run: the next run adopts the
// task and audits and publishes the output. Before, the check "failed"
// (context canceled), the version was rejected and its staging removed, and
// every later run failed ("not staged any more") until a --force charged
// again.
func TestStoppedAuditLeavesTheOutput(t *testing.T) {
	f := newFixture(t, `pipeline "pay" {
  task "charge" {
    command    = ["sh", "-c", "echo charged >> ledger; printf 'id\\n1\\n' > \"$PIPEC_OUTPUT_receipt/r.csv\""]
    effects    = ["charge"]
    idempotent = false
    outputs    = ["receipt"]
  }
  check "receipt_ok" {
    input   = "receipt"
    command = ["./check.sh"]
  }
  sink "wh" {
    type    = "directory"
    path    = "warehouse"
    fencing = "token"
  }
  publish "receipts" {
    artifact = "receipt"
    sink     = "wh"
  }
}`, map[string]string{"check.sh": `touch checking
while [ ! -e pass ]; do sleep 0.01; done`})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan *Summary, 1)
	go func() {
		sum, err := Run(ctx, f.options("2024-01-01"))
		if err != nil {
			t.Error(err)
		}
		done <- sum
	}()
	waitFor(t, filepath.Join(f.dir, "checking"))
	stop()
	sum := <-done
	if sum == nil {
		return
	}
	if c := sum.Checks[0]; sum.task("charge").State != TaskSucceeded || c.State == CheckFailed || !strings.Contains(c.Reason, "not audited") ||
		sum.StoreError != "" {
		t.Fatalf("the stopped run:\n%s", sum.text())
	}
	if err := os.WriteFile(filepath.Join(f.dir, "pass"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sum = f.run(f.options("2024-01-01"))
	if sum.Failed || sum.task("charge").State != TaskReused || len(sum.Publish) != 1 || sum.Publish[0].Outcome != "won" {
		t.Fatalf("the run after it:\n%s", sum.text())
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "ledger")); string(b) != "charged\n" {
		t.Fatalf("ledger %q: want one charge", b)
	}
}
