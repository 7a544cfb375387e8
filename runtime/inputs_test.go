package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/runtime/artifacts"
)

// inputsHCL: make writes a version of two files; use does to its input
// what use.sh says, and read, after use, reads the input again; make and
// use are idempotent or not (%s).
const inputsHCL = `pipeline "in" {
  task "make" {
    command    = ["sh", "-c", "seq 1 5 > \"$PIPEC_OUTPUT_rows/rows.csv\"; echo x > \"$PIPEC_OUTPUT_rows/note.txt\""]
    outputs    = ["rows"]
    idempotent = %s
  }
  task "use" {
    command    = ["./use.sh"]
    inputs     = ["rows"]
    idempotent = %s
  }
  task "read" {
    command    = ["sh", "-c", "test \"$(cat \"$PIPEC_INPUT_rows/rows.csv\")\" = \"$(seq 1 5)\""]
    inputs     = ["rows"]
    depends_on = ["use"]
  }
}`

// TestTaskThatChangesItsInput: a task that moves, or rewrites (as root),
// a file of its input changed the accepted version every later reader
// gets. It fails with class input, whatever its exit, and is not retried;
// the changed copy leaves the artifact store, so nothing reads it as the
// version; what reads the input after it is not run. A task that changes
// nothing of its input's bytes (touches a file) succeeds. A task that is
// not idempotent keeps its attempt succeeded: its effect happened.
func TestTaskThatChangesItsInput(t *testing.T) {
	for _, c := range []struct {
		name, script string
		idempotent   bool
		rootOnly     bool
		changed      string // "": the bytes were not changed
	}{
		{name: "moves a file", script: `mv "$PIPEC_INPUT_rows/rows.csv" "$PIPEC_INPUT_rows/rows.old"`, idempotent: true,
			changed: "rows.csv removed, rows.old added"},
		{name: "moves a file, not idempotent", script: `mv "$PIPEC_INPUT_rows/note.txt" "$PIPEC_INPUT_rows/n.txt"`,
			changed: "note.txt removed, n.txt added"},
		{name: "rewrites a file and fails", script: `echo 6 >> "$PIPEC_INPUT_rows/rows.csv"; exit 3`, idempotent: true, rootOnly: true,
			changed: "rows.csv changed"},
		{name: "touches a file", script: `touch "$PIPEC_INPUT_rows/rows.csv"`, idempotent: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.rootOnly && os.Geteuid() != 0 {
				t.Skip("only root writes through a read-only file")
			}
			idem := "false"
			if c.idempotent {
				idem = "true"
			}
			f := newFixture(t, strings.ReplaceAll(inputsHCL, "%s", idem), map[string]string{"use.sh": c.script})
			sum := f.run(f.options("2024-01-01"))
			v, err := f.st.AcceptedVersion(context.Background(), "in", "rows", "2024-01-01")
			if err != nil {
				t.Fatal(err)
			}
			key, err := artifacts.ParseKey(v.Location)
			if err != nil {
				t.Fatal(err)
			}
			copyPath := (&artifacts.Folder{Root: filepath.Join(f.dir, ".pipec", "versions")}).Path(key)
			_, statErr := os.Stat(copyPath)
			use, read := sum.task("use"), sum.task("read")
			if c.changed == "" {
				if use.State != TaskSucceeded || read.State != TaskSucceeded || statErr != nil {
					t.Fatalf("use = %+v, read = %+v, the version's copy: %v\n%s", use, read, statErr, sum.text())
				}
				return
			}
			if use.State != TaskFailed || use.Class != ClassInput || use.Attempts != 1 ||
				!strings.Contains(use.Error, "task use changed its input rows ("+v.Label()+"): "+c.changed) {
				t.Errorf("use = %+v", use)
			}
			if read.State != TaskNotRun {
				t.Errorf("read, after use = %+v", read)
			}
			if statErr == nil {
				t.Errorf("the changed copy of %s is still in the artifact store", v.Label())
			}
			atts, err := f.st.Attempts(context.Background(), sum.Run.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range atts {
				if a.Task != "use" {
					continue
				}
				want := "failed"
				if !c.idempotent {
					want = "succeeded" // its effect happened
				}
				if string(a.State) != want {
					t.Errorf("use's attempt is %s, want %s", a.State, want)
				}
			}
			if !sum.Failed {
				t.Error("the run succeeded")
			}
			if !c.idempotent {
				// Its succeeded attempt is adopted in the next run, and
				// make, not idempotent either, is not run again: read
				// fails, saying where it looked for the version.
				sum = f.run(f.options("2024-01-01"))
				if rd := sum.task("read"); rd.State != TaskFailed || rd.Class != ClassArtifacts ||
					!strings.Contains(rd.Error, "not in the artifact store "+filepath.Join(f.dir, ".pipec", "versions")) {
					t.Errorf("the next run: read = %+v\n%s", rd, sum.text())
				}
				return
			}
			// Fixed, the next run makes the version again: what made it is
			// not reused for a version the store no longer holds.
			if err := os.WriteFile(filepath.Join(f.dir, "use.sh"), []byte("#!/bin/sh\ntrue\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			sum = f.run(f.options("2024-01-01"))
			if mk, rd := sum.task("make"), sum.task("read"); mk.State != TaskSucceeded || rd.State != TaskSucceeded || sum.Failed {
				t.Errorf("the next run: make = %+v, read = %+v\n%s", mk, rd, sum.text())
			}
			if _, err := os.Stat(copyPath); err != nil {
				t.Errorf("the version was not made again: %v", err)
			}
		})
	}
}

// TestCheckThatChangesTheVersion: a command check gets the version's own
// folder; one that writes into it (a cache file beside the data) changed
// what would be accepted: the check fails saying so, the version is not
// accepted, and its changed copy is not left in the artifact store, where
// a later put of the same bytes would take it for them. A check that only
// reads passes.
func TestCheckThatChangesTheVersion(t *testing.T) {
	for _, c := range []struct {
		name, check, changed string
	}{
		{"writes a cache file", `echo x > "$PIPEC_CHECK_INPUT/.cache"`, ".cache added"},
		{"reads", `test -s "$PIPEC_CHECK_INPUT/rows.csv"`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, `pipeline "ck" {
  task "make" {
    command = ["sh", "-c", "seq 1 5 > \"$PIPEC_OUTPUT_rows/rows.csv\""]
    outputs = ["rows"]
  }
  check "look" {
    input   = "rows"
    command = ["./check.sh"]
  }
}`, map[string]string{"check.sh": c.check})
			sum := f.run(f.options("2024-01-01"))
			var look CheckResult
			for _, cr := range sum.Checks {
				if cr.Name == "look" {
					look = cr
				}
			}
			versions, _ := filepath.Glob(filepath.Join(f.dir, ".pipec", "versions", "ck", "rows", "*"))
			if c.changed == "" {
				if look.State != CheckPassed || len(versions) != 1 {
					t.Fatalf("look = %+v, versions in the store %v\n%s", look, versions, sum.text())
				}
				return
			}
			if look.State != CheckFailed || !strings.Contains(look.Reason, "the check changed the version it audits ("+c.changed+")") {
				t.Errorf("look = %+v", look)
			}
			if _, err := f.st.AcceptedVersion(context.Background(), "ck", "rows", "2024-01-01"); err == nil {
				t.Error("the changed version was accepted")
			}
			if len(versions) != 0 {
				t.Errorf("the changed copy is still in the artifact store: %v", versions)
			}
		})
	}
}

// TestReadersOfAChangedInput: two tasks read one input at once and one of
// them moves a file of it. The first to end finds the change and names the
// other as reading it then; the other, ending after, says the input was
// changed while it ran, as the first found. Both fail with class input.
func TestReadersOfAChangedInput(t *testing.T) {
	f := newFixture(t, `pipeline "two" {
  task "make" {
    command = ["sh", "-c", "seq 1 5 > \"$PIPEC_OUTPUT_rows/rows.csv\""]
    outputs = ["rows"]
  }
  task "mover" {
    command = ["sh", "-c", "until [ -e peer.started ]; do sleep 0.01; done; mv \"$PIPEC_INPUT_rows/rows.csv\" \"$PIPEC_INPUT_rows/rows.old\"; touch mover.done"]
    inputs  = ["rows"]
  }
  task "peer" {
    command = ["sh", "-c", "touch peer.started; until [ -e mover.done ]; do sleep 0.01; done; sleep 1"]
    inputs  = ["rows"]
  }
}`, nil)
	o := f.options("2024-01-01")
	o.Parallel = 4
	sum := f.run(o)
	mover, peer := sum.task("mover"), sum.task("peer")
	if mover.Class != ClassInput || !strings.Contains(mover.Error, "task mover, or peer reading it at the same time, changed its input rows (") {
		t.Errorf("mover = %+v", mover)
	}
	if peer.Class != ClassInput || !strings.Contains(peer.Error, "its input rows (") ||
		!strings.Contains(peer.Error, "was changed while peer ran, as task mover found first") {
		t.Errorf("peer = %+v", peer)
	}
}
