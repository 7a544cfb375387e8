package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/clock"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

const tornHCL = `
pipeline "torn" {
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  retry "relaunch" {
    max_attempts = 3
    initial      = "10ms"
    jitter       = "none"
  }
  task "write" {
    command = ["./write.sh"]
    outputs = ["part"]
    retry   = "relaunch"
    timeout = "30s"
    heartbeat {
      every = "50ms"
      lease = "1s"
    }
  }
  check "part_ok" {
    input         = "part"
    row_count_min = 100
    row_count_max = 100
    unique        = ["id"]
  }
  sink "out" {
    type    = "directory"
    path    = "out"
    fencing = "token"
  }
  publish "part_out" {
    artifact = "part"
    sink     = "out"
  }
}
`

// write.sh writes 100 rows tagged with its attempt number in two halves.
// Attempt 1 announces the middle (with its pid, the process group) and then
// waits for the test's go-ahead while touching its heartbeat file: only a
// SIGSTOP can make its lease expire.
const tornScript = `set -eu
out="$PIPEC_OUTPUT_part/part.csv"
echo "id,attempt" > "$out"
i=0
while [ $i -lt 50 ]; do echo "$i,$PIPEC_ATTEMPT" >> "$out"; i=$((i+1)); done
touch "$PIPEC_HEARTBEAT"
if [ "$PIPEC_ATTEMPT" = 1 ]; then
  echo $$ > half.tmp && mv half.tmp half
  while [ ! -e go ]; do touch "$PIPEC_HEARTBEAT"; sleep 0.02; done
fi
while [ $i -lt 100 ]; do echo "$i,$PIPEC_ATTEMPT" >> "$out"; i=$((i+1)); done
`

// TestTornPartition is fault test 1 (with the reader of test 7): attempt 1
// is stopped with SIGSTOP halfway through its output, its lease expires,
// attempt 2 runs and publishes; attempt 1 is resumed, finishes and tries to
// publish: it is fenced, and the visible output is entirely attempt 2's.
// Readers resolving the sink during all of it only ever see one whole
// audited version. Twenty rounds with varied timing.
func TestTornPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	for i := 0; i < 20; i++ {
		t.Run(fmt.Sprintf("round%02d", i), func(t *testing.T) {
			t.Parallel()
			tornRound(t, i)
		})
	}
}

func tornRound(t *testing.T, round int) {
	f := newFixture(t, tornHCL, map[string]string{"write.sh": tornScript})
	o := f.options("2024-01-01")
	o.ZombieGrace = 20 * time.Second
	var ev events
	o.OnEvent = ev.add
	done := runAsync(t, o)

	// Readers: resolve the visible link once per read and check what it shows.
	d, err := sink.NewDirectory("out", filepath.Join(f.dir, "out"), "token", f.st)
	if err != nil {
		t.Fatal(err)
	}
	stopReaders := make(chan struct{})
	var reads atomic.Int64
	var rwg sync.WaitGroup
	for k := 0; k < 2; k++ {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for {
				select {
				case <-stopReaders:
					return
				default:
				}
				dir, err := d.Visible("2024-01-01")
				if errors.Is(err, fs.ErrNotExist) {
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					t.Errorf("reader: %v", err)
					return
				}
				b, err := os.ReadFile(filepath.Join(dir, "part.csv"))
				if err != nil {
					t.Errorf("reader: %v", err)
					return
				}
				if _, err := wholeVersion(string(b)); err != nil {
					t.Errorf("reader saw a torn or partial version: %v", err)
					return
				}
				// And it is exactly the audited version the folder is named
				// after: its content digest (without the lineage manifest)
				// is the one in the name, before the token.
				digest, err := sink.ContentDigest(dir)
				if err != nil {
					t.Errorf("reader: %v", err)
					return
				}
				if want := "part@2024-01-01#" + strings.Replace(digest, ":", "-", 1) + ".t"; !strings.HasPrefix(filepath.Base(dir), want) {
					t.Errorf("reader: %s holds content %s", filepath.Base(dir), digest)
					return
				}
				reads.Add(1)
			}
		}()
	}
	stop := sync.OnceFunc(func() {
		close(stopReaders)
		rwg.Wait()
	})
	defer stop()

	// Wait for attempt 1 to be halfway, then stop its whole process group.
	pid := waitPID(t, filepath.Join(f.dir, "half"))
	time.Sleep(time.Duration(round%5) * 30 * time.Millisecond)
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Attempt 2 must run and publish while attempt 1 is stopped.
	deadline := time.Now().Add(20 * time.Second)
	for {
		p, err := f.st.Pointer(context.Background(), f.plan.Pipeline, "out", "part", "2024-01-01")
		if err == nil {
			v, err := f.st.GetVersion(context.Background(), p.Version)
			if err != nil {
				t.Fatal(err)
			}
			if v.Attempt == 1 {
				t.Fatal("the stopped attempt 1 published")
			}
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(-pid, syscall.SIGCONT)
			t.Fatalf("attempt 2 never published; events: %v", ev.kinds(""))
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(time.Duration(round%4) * 25 * time.Millisecond)
	if err := syscall.Kill(-pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var sum *Summary
	select {
	case sum = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not end")
	}
	if sum == nil {
		return
	}
	if sum.Failed {
		t.Fatalf("run failed:\n%s", sum.text())
	}
	// Attempt 1 finished, was audited, and its publish was fenced.
	if len(sum.Fenced) != 1 || sum.Fenced[0].Attempt != 1 || sum.Fenced[0].Token >= sum.Fenced[0].HeldBy {
		t.Fatalf("fenced = %+v\n%s", sum.Fenced, sum.text())
	}
	a1, err := f.st.GetAttempt(context.Background(), store.AttemptRef{Run: sum.Run.ID, Task: "write", Number: 1})
	if err != nil || a1.State != store.AttemptSucceeded {
		t.Errorf("attempt 1 = %+v, %v", a1, err)
	}
	evs, err := f.st.Events(context.Background(), sum.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var unknown, fenced bool
	for _, e := range evs {
		unknown = unknown || (e.Kind == store.EventAttemptUnknown && e.Attempt == 1)
		fenced = fenced || (e.Kind == store.EventPublishFenced && e.Attempt == 1)
	}
	if !unknown || !fenced {
		t.Errorf("events lack attempt 1 unknown (%v) or fenced (%v)", unknown, fenced)
	}
	dir, err := d.Visible("2024-01-01")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "part.csv"))
	if err != nil {
		t.Fatal(err)
	}
	att, err := wholeVersion(string(b))
	if err != nil || att == "1" {
		t.Fatalf("visible output is attempt %q's (%v):\n%s", att, err, b)
	}
	// The version is visible now; on a loaded machine the readers may not
	// have been scheduled since it appeared, so give them time to see it.
	for deadline := time.Now().Add(10 * time.Second); reads.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	stop()
	if reads.Load() == 0 {
		t.Error("the readers never saw a published version")
	}
}

// wholeVersion checks that a part.csv is one attempt's complete output and
// returns that attempt.
func wholeVersion(s string) (string, error) {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) != 101 || lines[0] != "id,attempt" {
		return "", fmt.Errorf("%d lines, header %q", len(lines), lines[0])
	}
	att := ""
	for i, l := range lines[1:] {
		id, a, _ := strings.Cut(l, ",")
		if id != strconv.Itoa(i) {
			return "", fmt.Errorf("row %d is %q", i, l)
		}
		if att == "" {
			att = a
		} else if a != att {
			return "", fmt.Errorf("rows from attempts %s and %s", att, a)
		}
	}
	return att, nil
}

// waitPID waits for a file holding a pid.
func waitPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return pid
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
	return 0
}

// TestZombieNeverReturns: an attempt stopped for good does not hold the run
// forever. Its task is relaunched and succeeds; once the grace period after
// the tasks ends, the stopped process group is killed and recorded.
func TestZombieNeverReturns(t *testing.T) {
	f := newFixture(t, tornHCL, map[string]string{"write.sh": tornScript})
	o := f.options("2024-01-01")
	o.ZombieGrace = 300 * time.Millisecond
	var ev events
	o.OnEvent = ev.add
	done := runAsync(t, o)
	pid := waitPID(t, filepath.Join(f.dir, "half"))
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var sum *Summary
	select {
	case sum = <-done:
	case <-time.After(20 * time.Second):
		syscall.Kill(-pid, syscall.SIGKILL)
		t.Fatal("the run waited for a stopped zombie")
	}
	if sum == nil || sum.Failed || sum.task("write").Attempts != 2 {
		t.Fatalf("summary:\n%s", sum.text())
	}
	if !slices.Contains(ev.kinds("write"), EventZombieKilled) {
		t.Errorf("no %s event: %v", EventZombieKilled, ev.kinds("write"))
	}
	a1, err := f.st.GetAttempt(context.Background(), store.AttemptRef{Run: sum.Run.ID, Task: "write", Number: 1})
	if err != nil || a1.State != store.AttemptFailed || a1.Class != "killed" {
		t.Errorf("attempt 1 = %+v, %v", a1, err)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("process %d still exists", pid)
	}
}

// TestLeaseJudgedOnStoreClock: expiry is the store's call on the store's
// lease clock alone. A task with a ten-minute lease is relaunched as soon as
// the store's lease clock (injected here) passes its expiry, though only
// moments went by on the machine's.
func TestLeaseJudgedOnStoreClock(t *testing.T) {
	f := newFixture(t, `pipeline "clock" {
  retry "relaunch" {
    max_attempts = 2
    initial      = "10ms"
  }
  task "slow" {
    command = ["sh", "-c", "echo $$ > started.$PIPEC_ATTEMPT; sleep 1"]
    retry   = "relaunch"
    heartbeat {
      every = "1m"
      lease = "10m"
    }
  }
}`, nil)
	var skew atomic.Int64
	skewed := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	st, err := sqlite.Open(context.Background(), filepath.Join(f.dir, "clock.db"), sqlite.Options{
		Clock: skewed, LeaseClock: clock.Wall(skewed)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o := f.options("2024-01-01")
	o.Store, o.StatePath = st, filepath.Join(f.dir, "clock.db")
	o.LeasePoll = 20 * time.Millisecond
	done := runAsync(t, o)
	waitPID(t, filepath.Join(f.dir, "started.1"))
	// Let the pid (and the lease's start) reach the store, then jump.
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err := st.GetAttempt(context.Background(), store.AttemptRef{Run: "clock/2024-01-01/r1", Task: "slow", Number: 1})
		if err == nil && a.State == store.AttemptRunning && a.PID != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("attempt 1 never ran: %+v %v", a, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	skew.Store(int64(11 * time.Minute))
	sum := <-done
	if sum == nil {
		return
	}
	if tr := sum.task("slow"); tr.State != TaskSucceeded || tr.Attempts != 2 {
		t.Fatalf("slow = %+v\n%s", tr, sum.text())
	}
	if _, err := os.Stat(filepath.Join(f.dir, "started.2")); err != nil {
		t.Error("attempt 2 never started")
	}
}
