// Package scenario holds the pipelines the tests of every dispatcher run
// (pipec's own workers on either store, with a folder or an object store,
// and Temporal), so they all attack the same work: the chaos scenario, a
// non-idempotent charge, the guarantee matrix's pipeline, a scheduled
// pipeline for due runs and backfills, a task taken over from a visit
// that was given up (Stale), and a run-wide outage under a retry budget
// (Storm).
package scenario

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/pipec/pipec/runtime/objstore"
	"github.com/pipec/pipec/runtime/store"
)

// Chaos is a pipeline of layers layers of 10 tasks: every task writes an
// output naming its interval and task (after a short sleep, so workers are
// caught mid-task), tasks of a layer read one output of the layer before,
// and the 10 tasks of every other layer publish, each to a fenced sink of
// its own after a check. sink gives a published task's sink block body
// (DirectorySink, S3Sink). published lists the tasks that publish.
func Chaos(layers int, sink func(task string) string) (spec string, published []string) {
	var b strings.Builder
	b.WriteString(`pipeline "chaos" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
`)
	for layer := range layers {
		for i := range 10 {
			name := fmt.Sprintf("t%02d_%d", layer, i)
			fmt.Fprintf(&b, "  task %q {\n    command = [\"./step.sh\", %q]\n    outputs = [\"a_%s\"]\n    timeout = \"2m\"\n", name, name, name)
			if layer > 0 {
				fmt.Fprintf(&b, "    inputs  = [\"a_t%02d_%d\"]\n", layer-1, (i+layer)%10)
			}
			b.WriteString("  }\n")
			if layer%2 == 1 {
				fmt.Fprintf(&b, "  check \"c_%s\" {\n    input         = \"a_%s\"\n    row_count_min = 1\n  }\n", name, name)
				fmt.Fprintf(&b, "  sink \"s_%s\" {\n%s  }\n", name, sink(name))
				fmt.Fprintf(&b, "  publish \"p_%s\" {\n    artifact = \"a_%s\"\n    sink     = \"s_%s\"\n  }\n", name, name, name)
				published = append(published, name)
			}
		}
	}
	b.WriteString("}\n")
	return b.String(), published
}

// DirectorySink is a fenced directory sink at warehouse/<task>.
func DirectorySink(task string) string {
	return fmt.Sprintf("    type    = \"directory\"\n    path    = \"warehouse/%s\"\n    fencing = \"token\"\n", task)
}

// S3Sink is an s3 sink (fenced by token, its default) at s3://lake/<task>.
func S3Sink(task string) string {
	return fmt.Sprintf("    type = \"s3\"\n    path = \"s3://lake/%s\"\n", task)
}

// S3PointersAgree checks, for the chaos pipeline's published tasks and
// interval day with S3Sink's sinks, that the pointer each sink shows in
// the lake bucket names the token of the state's pointer: nil, or the
// first that does not.
func S3PointersAgree(ctx context.Context, c *objstore.Client, st store.Store, published []string, day string) error {
	for _, name := range published {
		sp, err := st.Pointer(ctx, "chaos", "s_"+name, "a_"+name, day)
		if err != nil {
			return err
		}
		b, _, err := c.Get(ctx, "lake", name+"/"+day)
		var p struct {
			Token int64 `json:"token"`
		}
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		if err != nil || p.Token != sp.Token {
			return fmt.Errorf("%s: visible token %d (%v), the state's pointer %d", name, p.Token, err, sp.Token)
		}
	}
	return nil
}

// ChaosStep is the task command (step.sh TASK): its one output's data.csv names
// the interval and the task.
const ChaosStep = `#!/bin/sh
sleep 0.02
out=$(env | sed -n 's/^PIPEC_OUTPUT_[^=]*=//p' | head -1)
printf 'id,interval,task\n1,%s,%s\n' "$PIPEC_INTERVAL_START" "$1" > "$out/data.csv"
`

// Reader reads every published file of the pipeline (in the Directory
// sinks under dir/warehouse) of the chaos pipeline over and over, as a consumer would while the
// runs go on, and keeps every read that was not whole, right or current:
// another interval's or task's data, a partial file, or a token older than
// one it saw visible before.
type Reader struct {
	stop  chan struct{}
	done  chan struct{}
	reads int
	bad   []string
}

// StartReader starts reading the published tasks' files of days.
func StartReader(dir string, published, days []string) *Reader {
	r := &Reader{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		seen := map[string]int64{} // folder -> highest token seen
		for {
			select {
			case <-r.stop:
				return
			default:
			}
			for _, name := range published {
				for _, d := range days {
					r.read(filepath.Join(dir, "warehouse", name, d), d, name, seen)
				}
			}
		}
	}()
	return r
}

func (r *Reader) read(dir, day, task string, seen map[string]int64) {
	b, err := os.ReadFile(filepath.Join(dir, "data.csv"))
	if os.IsNotExist(err) {
		return // not published yet
	}
	r.reads++
	want := fmt.Sprintf("id,interval,task\n1,%sT00:00:00Z,%s\n", day, task)
	if err != nil || string(b) != want {
		r.bad = append(r.bad, fmt.Sprintf("%s: read %q, %v; want %q", dir, b, err, want))
		return
	}
	var m struct{ Token int64 }
	if mb, err := os.ReadFile(filepath.Join(dir, "_pipec.json")); err == nil && json.Unmarshal(mb, &m) == nil {
		if m.Token < seen[dir] {
			r.bad = append(r.bad, fmt.Sprintf("%s: token %d visible after %d", dir, m.Token, seen[dir]))
		}
		seen[dir] = max(seen[dir], m.Token)
	}
}

// Stop stops the reader and returns how many files it read and the bad
// reads.
func (r *Reader) Stop() (reads int, bad []string) {
	close(r.stop)
	<-r.done
	return r.reads, r.bad
}

// CheckVisible checks, once the runs ended, that each published task's
// visible version (under dir/warehouse) is the one the state's pointer names
// and the newest accepted version of its interval.
func CheckVisible(ctx context.Context, st store.Store, dir string, published, days []string) error {
	for _, name := range published {
		for _, d := range days {
			folder := filepath.Join(dir, "warehouse", name, d)
			p, err := st.Pointer(ctx, "chaos", "s_"+name, "a_"+name, d)
			if err != nil {
				return fmt.Errorf("%s: %w", folder, err)
			}
			var m struct{ Token int64 }
			mb, err := os.ReadFile(filepath.Join(folder, "_pipec.json"))
			if err != nil || json.Unmarshal(mb, &m) != nil || m.Token != p.Token {
				return fmt.Errorf("%s: visible token %d (%v), the state's pointer %d", folder, m.Token, err, p.Token)
			}
			v, err := st.AcceptedVersion(ctx, "chaos", "a_"+name, d)
			if err != nil || v.Token != p.Token {
				return fmt.Errorf("%s: the newest accepted version has token %d (%v), the visible one %d", folder, v.Token, err, p.Token)
			}
		}
	}
	return nil
}

// Pay is a non-idempotent charge (one line in the ledger per effect) whose
// receipt is checked and published, and what reads the receipt (one line
// in mails per run).
const Pay = `
pipeline "pay" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "charge" {
    command    = ["./charge.sh"]
    effects    = ["charge"]
    idempotent = false
    outputs    = ["receipt"]
  }
  check "receipt_ok" {
    input         = "receipt"
    row_count_min = 1
  }
  task "mail" {
    command = ["./mail.sh"]
    inputs  = ["receipt"]
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
}
`

// PayFiles are Pay's scripts: on the worker named w1 the charge holds,
// its pid in started-w1, until the file release exists.
func PayFiles() map[string]string {
	return map[string]string{
		"charge.sh": `#!/bin/sh
echo "charge $PIPEC_RUN_ID $PIPEC_WORKER" >> ledger
if [ "$PIPEC_WORKER" = w1 ] && [ ! -f release ]; then
  echo $$ > started-w1.tmp && mv started-w1.tmp started-w1
  while [ ! -f release ] && [ -f charge.sh ]; do sleep 0.05; done
fi
printf 'id\n1\n' > "$PIPEC_OUTPUT_receipt/r.csv"
`,
		"mail.sh": "#!/bin/sh\necho \"mail $PIPEC_RUN_ID\" >> mails\n",
	}
}

// Delta is a daily pipeline whose delta reads raw of its own day and of
// the day before (raw@-1), checked and published; extract copies the
// day's source file, source-<day>, which a test corrects afterwards.
const Delta = `
pipeline "days" {
  code_version = "1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw"]
  }
  check "raw_ok" {
    input         = "raw"
    row_count_min = 1
  }
  task "delta" {
    command = ["./delta.sh"]
    inputs  = ["raw", "raw@-1"]
    outputs = ["delta"]
  }
  check "delta_ok" {
    input         = "delta"
    row_count_min = 1
  }
  sink "warehouse" {
    type    = "directory"
    path    = "warehouse"
    fencing = "token"
  }
  publish "deltas" {
    artifact = "delta"
    sink     = "warehouse"
  }
}
`

// DeltaFiles are Delta's scripts and the sources of its first two days
// (10 and 20); delta.csv holds "prev,cur" and one row.
func DeltaFiles() map[string]string {
	return map[string]string{
		"extract.sh": `#!/bin/sh
day=$(echo "$PIPEC_INTERVAL_START" | cut -c1-10)
printf 'n\n%s\n' "$(cat "source-$day")" > "$PIPEC_OUTPUT_raw/raw.csv"
`,
		"delta.sh": `#!/bin/sh
prev=0
[ -n "${PIPEC_INPUT_raw_PREV:-}" ] && prev=$(tail -n1 "$PIPEC_INPUT_raw_PREV/raw.csv")
printf 'prev,cur\n%s,%s\n' "$prev" "$(tail -n1 "$PIPEC_INPUT_raw/raw.csv")" > "$PIPEC_OUTPUT_delta/delta.csv"
`,
		"source-2024-01-01": "10\n",
		"source-2024-01-02": "20\n",
	}
}

// LeftOutput is a non-idempotent charge whose receipt's command check
// holds (audit.sh waits for the file release, after touching auditing),
// so that a test can stop the worker or run auditing it in the middle;
// mail reads the receipt, and it is published to the fenced directory
// sink warehouse. A left output's tests on every dispatcher run it.
const LeftOutput = `
pipeline "pay" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "charge" {
    command    = ["./charge.sh"]
    effects    = ["charge"]
    idempotent = false
    outputs    = ["receipt"]
  }
  check "receipt_ok" {
    input   = "receipt"
    command = ["./audit.sh"]
  }
  task "mail" {
    command = ["./mail.sh"]
    inputs  = ["receipt"]
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
}
`

// LeftOutputFiles are LeftOutput's scripts: charge appends a line to
// ledger and writes the receipt (its one row names $PIPEC_WORKER); each
// audit appends a line to audits, each mail one to mails.
func LeftOutputFiles() map[string]string {
	return map[string]string{
		"charge.sh": "#!/bin/sh\necho \"charge $PIPEC_RUN_ID\" >> ledger\nprintf 'id,worker\\n1,%s\\n' \"$PIPEC_WORKER\" > \"$PIPEC_OUTPUT_receipt/data.csv\"\n",
		"audit.sh": `#!/bin/sh
echo "audit" >> audits
touch auditing
while [ ! -f release ]; do sleep 0.05; done
grep -q '^1,' "$PIPEC_CHECK_INPUT/data.csv"
`,
		"mail.sh": "#!/bin/sh\necho \"mail $PIPEC_RUN_ID\" >> mails\n",
	}
}

// Matrix is the guarantee matrix's pipeline (runtime/worker/matrix_test.go,
// and Temporal's column in temporal/dispatch): a non-idempotent charge (one
// ledger line per effect; the first one holds until "release" exists when
// "hold" does) whose receipt is checked (at least rows rows) and
// published, and a consumer of the receipt; charge declares a secret
// (MatrixSecret in PIPEC_TEST_SECRET) and prints it.
func Matrix(rows string) string { return strings.Replace(matrixSpec, "ROWS", rows, 1) }

const matrixSpec = `
pipeline "pay" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "charge" {
    command    = ["./charge.sh"]
    effects    = ["charge"]
    idempotent = false
    outputs    = ["receipt"]
    secret_env = ["PIPEC_TEST_SECRET"]
  }
  check "receipt_ok" {
    input         = "receipt"
    row_count_min = ROWS
  }
  task "mail" {
    command = ["./mail.sh"]
    inputs  = ["receipt"]
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
}
`

// MatrixFiles are Matrix's scripts.
func MatrixFiles() map[string]string {
	return map[string]string{
		"charge.sh": `#!/bin/sh
echo "charge $PIPEC_RUN_ID" >> ledger
echo "paying with $PIPEC_TEST_SECRET"
if [ -f hold ] && [ ! -f held ]; then
  touch held
  while [ ! -f release ] && [ -f charge.sh ]; do sleep 0.05; done
fi
printf 'id\n1\n' > "$PIPEC_OUTPUT_receipt/r.csv"
`,
		"mail.sh": "#!/bin/sh\necho \"mail $PIPEC_RUN_ID\" >> mails\n",
	}
}

// InputChange: use moves a file of its input in place, as a gzip or an mv
// of an input file does; read reads the input after it. Run by the matrix
// of every dispatcher.
const InputChange = `pipeline "inchange" {
  task "make" {
    command = ["sh", "-c", "seq 1 5 > \"$PIPEC_OUTPUT_rows/rows.csv\""]
    outputs = ["rows"]
  }
  task "use" {
    command = ["sh", "-c", "mv \"$PIPEC_INPUT_rows/rows.csv\" \"$PIPEC_INPUT_rows/rows.old\""]
    inputs  = ["rows"]
  }
  task "read" {
    command    = ["sh", "-c", "cat \"$PIPEC_INPUT_rows/rows.csv\""]
    inputs     = ["rows"]
    depends_on = ["use"]
  }
}
`

// MatrixSecret is the value the matrix's tests give PIPEC_TEST_SECRET: it
// must appear in no output of pipec, no event, no log.
const MatrixSecret = "hunter2-matrix-secret"

// Due is due daily since 2024-01-01, catches up, at most 2 runs at
// once; its one task appends "<ns> start|end <interval>" to times.log in
// the spec's folder, which every worker shares here. The run of 2024-01-08
// waits for the file release.
const Due = `
pipeline "due" {
  code_version = "v1"
  schedule {
    every           = "24h"
    start           = "2024-01-01T00:00:00Z"
    catchup         = true
    max_active_runs = 2
  }
  task "record" {
    command = ["./record.sh"]
    timeout = "1m"
  }
}
`

// DueFiles are Due's scripts.
func DueFiles() map[string]string {
	return map[string]string{
		"record.sh": "#!/bin/sh\nset -eu\necho \"$(date +%s%N) start $PIPEC_INTERVAL\" >> times.log\nsleep 0.3\n" +
			"if [ \"$PIPEC_INTERVAL\" = 2024-01-08 ]; then while [ ! -e release ]; do sleep 0.02; done; fi\n" +
			"echo \"$(date +%s%N) end $PIPEC_INTERVAL\" >> times.log\n",
	}
}

// MostAtOnce reads times.log and returns how many runs started and the
// most that were between their start and their end at one moment: +1 at
// each start, -1 at each end, in the order of the recorded times.
func MostAtOnce(path string) (runs, top int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	type rec struct {
		ns    int64
		start bool
	}
	var recs []rec
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 {
			return 0, 0, fmt.Errorf("%s: line %q", path, sc.Text())
		}
		ns, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: line %q: %w", path, sc.Text(), err)
		}
		recs = append(recs, rec{ns, fs[1] == "start"})
	}
	// Ends before starts at one instant: touching runs do not overlap.
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].ns != recs[j].ns {
			return recs[i].ns < recs[j].ns
		}
		return !recs[i].start && recs[j].start
	})
	n := 0
	for _, r := range recs {
		if r.start {
			runs++
			n++
			top = max(top, n)
		} else {
			n--
		}
	}
	return runs, top, sc.Err()
}

// Stale is one task, load, whose process (StaleLoad, as load.sh) says in
// the file ran on which worker it started and ended, and runs long enough
// to be found running: the pipeline of the tests where a worker whose
// visit was given up resumes beside the worker that took the task over.
const Stale = `
pipeline "stale" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  task "load" {
    command = ["./load.sh"]
  }
}
`

// StaleLoad is Stale's task command.
const StaleLoad = `#!/bin/sh
echo "$PIPEC_WORKER start" >> ran
sleep 1.5
echo "$PIPEC_WORKER end" >> ran
`

// CheckTakeover checks what Stale's run left in dir and the state, as (its
// task's attempts): the task's process ran to its end once, on takeover,
// never on stale, and takeover's attempts succeeded.
func CheckTakeover(dir, stale, takeover string, as []store.Attempt) error {
	b, err := os.ReadFile(filepath.Join(dir, "ran"))
	if err != nil {
		return err
	}
	var errs []string
	ended := 0
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		switch {
		case strings.HasPrefix(l, stale+" "):
			errs = append(errs, "the task's process ran on "+stale+" ("+l+")")
		case l == takeover+" end":
			ended++
		}
	}
	if ended != 1 {
		errs = append(errs, fmt.Sprintf("%s's process ended %d times, want once", takeover, ended))
	}
	for _, a := range as {
		if a.Worker == takeover && a.State != store.AttemptSucceeded {
			errs = append(errs, fmt.Sprintf("%s's attempt %d: %s (%s), want succeeded", takeover, a.Number, a.State, a.ErrorTail))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// StormTasks is how many tasks Storm has; its budget allows the run
// StormRetries retries at most (0.25 × 12 first attempts, at least 1).
const (
	StormTasks   = 12
	StormRetries = 3
)

// StormRun is Storm's run of 2024-01-01, submitted once.
const StormRun = "storm/2024-01-01/r1"

// Storm is an outage every task of a run meets: twelve tasks that fail
// with a retried class (exit 75), up to 3 attempts a visit and one
// failover (a visit on each of two workers), under a retry budget of 0.25
// retries per first attempt, at least 1.
func Storm() string {
	var b strings.Builder
	b.WriteString(`pipeline "storm" {
  code_version = "1"
  retry_budget {
    ratio = 0.25
    min   = 1
  }
  error "transient" {
    exit_codes = [75]
  }
  retry "r" {
    max_attempts = 3
    initial      = "1ms"
    jitter       = "none"
    on           = ["transient"]
  }
`)
	for i := range StormTasks {
		fmt.Fprintf(&b, `  task "t%02d" {
    command = ["sh", "-c", "echo upstream down >&2; exit 75"]
    retry   = "r"
    failover {
      per_worker = 1
      global     = 1
    }
  }
`, i)
	}
	b.WriteString("}\n")
	return b.String()
}

// CheckStorm says what is wrong with StormRun's attempts (as): every task
// ran and failed with its class, and the whole run retried at least once
// and no more than its budget allows, whichever processes ran its tasks.
func CheckStorm(as []store.Attempt) error {
	per := map[string]int{}
	for _, a := range as {
		if a.State != store.AttemptFailed || a.Class != "transient" {
			return fmt.Errorf("%s#%d: %s, class %q; want failed, transient", a.Task, a.Number, a.State, a.Class)
		}
		per[a.Task]++
	}
	if len(per) != StormTasks {
		return fmt.Errorf("%d tasks ran, want %d", len(per), StormTasks)
	}
	if retries := len(as) - StormTasks; retries < 1 || retries > StormRetries {
		return fmt.Errorf("%d attempts (%v): %d retries, want 1 to %d (the run's budget)", len(as), per, retries, StormRetries)
	}
	return nil
}

// FullDisk's task make writes a 350 kB output, checked, which use reads:
// a worker whose --workdir has room to stage it but not to freeze a copy
// meets a full disk there. how is what make declares besides
// (FullDiskFailover, FullDiskNotIdempotent).
func FullDisk(how string) string { return strings.Replace(fullDiskSpec, "HOW", how, 1) }

// What FullDisk's task make declares: a failover block, or that it is not
// idempotent.
const (
	FullDiskFailover = `failover {
      per_worker = 1
      global     = 2
    }`
	FullDiskNotIdempotent = `idempotent = false
    effects    = ["ledger"]`
)

const fullDiskSpec = `
pipeline "full" {
  task "make" {
    command = ["sh", "-c", "echo made >> ledger; head -c 350000 /dev/zero | tr '\\0' a > \"$PIPEC_OUTPUT_rows/rows.txt\""]
    outputs = ["rows"]
    HOW
  }
  check "rows_ok" {
    input   = "rows"
    command = ["sh", "-c", "test -s \"$PIPEC_CHECK_INPUT/rows.txt\""]
  }
  task "use" {
    command = ["sh", "-c", "test -s \"$PIPEC_INPUT_rows/rows.txt\""]
    inputs  = ["rows"]
  }
}
`
