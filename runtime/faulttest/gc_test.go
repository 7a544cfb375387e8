package faulttest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

// gcHCL is one task whose output is the file content, read by a second.
const gcHCL = `
pipeline "g" {
  task "t" {
    command = ["sh", "-c", "cp content \"$PIPEC_OUTPUT_out/data.txt\""]
    outputs = ["out"]
  }
  task "u" {
    command = ["sh", "-c", "cat \"$PIPEC_INPUT_out/data.txt\""]
    inputs  = ["out"]
  }
}
`

// TestGCBesideARun: pipec gc removes the artifact store's versions that are
// not the current accepted one of their interval, while a run, started
// after gc read the state, produces an output whose bytes are one of those
// versions (an interval rerun that gives back its content of two runs ago),
// so the run finds that version in the store and accepts it. gc is stopped
// (SIGSTOP) once it has begun removing, the run goes on, and gc is
// continued; the current accepted version must still be in the store.
// Either the run waits for gc to end, or, when gc stays stopped past its
// hold on the versions, the run goes on and gc removes no version after.
func TestGCBesideARun(t *testing.T) {
	t.Run("gc continued while the run waits", func(t *testing.T) { gcBesideARun(t, false) })
	t.Run("gc stopped past its hold", func(t *testing.T) { gcBesideARun(t, true) })
}

func gcBesideARun(t *testing.T, pastHold bool) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("p.hcl", gcHCL)
	for _, c := range []string{"A", "B"} {
		write("content", c+"\n")
		if out, code := pipec(t, dir, "run", "p.hcl", "--interval", "2024-01-01", "--force"); code != 0 {
			t.Fatalf("run with %s exited %d:\n%s", c, code, out)
		}
	}
	// Versions gc removes before A's, keys sorting first, so it is
	// stopped while removing them.
	store := filepath.Join(dir, ".pipec", "versions")
	filler := filepath.Join(store, "g", "aaa")
	const fillers = 5000
	for i := range fillers {
		if err := os.MkdirAll(filepath.Join(filler, fmt.Sprintf("%064x", i+1)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dir, ".pipec", "state.db")
	gc, gcOut := started(t, dir, "gc", "--state", db)
	for {
		left, err := os.ReadDir(filler)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) < fillers-10 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := gc.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filler); len(left) == 0 {
		t.Fatal("gc removed every filler before it was stopped: the test needs more of them")
	}

	// The rerun gives back A, a version gc read as superseded.
	write("content", "A\n")
	run := exec.Command(pipecBin, "run", "p.hcl", "--interval", "2024-01-01", "--force")
	run.Dir = dir
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	run.Stdout, run.Stderr = pw, pw
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	defer run.Process.Kill()
	lines := make(chan string)
	var runOut strings.Builder
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	waited := false
	readUntil := func(stop func(string) bool) {
		for line := range lines {
			runOut.WriteString(line + "\n")
			waited = waited || strings.HasPrefix(line, "waiting: task t: pipec gc on ")
			if stop(line) {
				return
			}
		}
	}
	if pastHold {
		readUntil(func(string) bool { return false }) // the run's end
	} else {
		readUntil(func(line string) bool { return strings.HasPrefix(line, "waiting: ") })
	}
	if err := gc.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	gcErr := gc.Wait()
	readUntil(func(string) bool { return false })
	runErr := run.Wait()
	t.Logf("run:\n%sgc:\n%s", runOut.String(), tail(gcOut.String(), 3))
	if runErr != nil {
		t.Errorf("the run: %v", runErr)
	}
	if !waited {
		t.Error("the run did not say it waits for pipec gc")
	}
	if pastHold {
		if gcErr == nil || !strings.Contains(gcOut.String(), "stopped removing versions from the artifact store: its hold on the artifact versions lapsed") {
			t.Errorf("gc stopped past its hold: %v, without saying it stopped removing versions", gcErr)
		}
	} else if gcErr != nil {
		t.Errorf("gc: %v", gcErr)
	}

	st, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := st.AcceptedVersion(context.Background(), "g", "out", "2024-01-01")
	if err != nil {
		t.Fatal(err)
	}
	key, err := artifacts.ParseKey(v.Location)
	if err != nil {
		t.Fatal(err)
	}
	f := &artifacts.Folder{Root: store}
	data, err := os.ReadFile(filepath.Join(f.Path(key), "data.txt"))
	if err != nil {
		t.Fatalf("the current accepted version %s is gone from the artifact store: %v", v.Label(), err)
	}
	if string(data) != "A\n" {
		t.Errorf("the current accepted version holds %q, want A", data)
	}
	// And what reads it still can.
	if out, code := pipec(t, dir, "run", "p.hcl", "--interval", "2024-01-01", "--force"); code != 0 {
		t.Errorf("a run after gc exited %d:\n%s", code, out)
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.SplitAfter(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "") + "\n"
}

// emptyHCL: write makes a version with an empty partition folder, none a
// version with no files at all; slow waits for the file "go" before it
// writes its output, so that its output folder is empty until then.
const emptyHCL = `
pipeline "e" {
  task "write" {
    command = ["sh", "-c", "mkdir -p \"$PIPEC_OUTPUT_parts/day=1\" \"$PIPEC_OUTPUT_parts/day=2\"; echo a > \"$PIPEC_OUTPUT_parts/day=1/x.csv\""]
    outputs = ["parts"]
  }
  task "none" {
    command = ["true"]
    outputs = ["nothing"]
  }
  task "slow" {
    command = ["sh", "-c", "until [ -e go ]; do sleep 0.01; done; echo a > \"$PIPEC_OUTPUT_late/x.csv\""]
    outputs = ["late"]
  }
}
`

// TestGCKeepsEmptyFolders: pipec gc removed every empty folder under the
// state's folder: the output folder of a task still running, made empty
// before the task starts (the task then failed: "Directory nonexistent"),
// an accepted version with no files, and an empty partition inside an
// accepted version (whose bytes then no longer had its digest). It removes
// only the empty folders that hold attempts or versions.
func TestGCKeepsEmptyFolders(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.hcl"), []byte(emptyHCL), 0o644); err != nil {
		t.Fatal(err)
	}
	run, runOut := started(t, dir, "run", "p.hcl", "--interval", "2024-01-01")
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, ".pipec", "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// whole checks that the current accepted versions of arts still read
	// as their digests.
	whole := func(when string, arts ...string) {
		t.Helper()
		for _, art := range arts {
			v, err := st.AcceptedVersion(context.Background(), "e", art, "2024-01-01")
			if err != nil {
				t.Fatalf("%s: %s: %v", when, art, err)
			}
			key, err := artifacts.ParseKey(v.Location)
			if err != nil {
				t.Fatal(err)
			}
			folder := (&artifacts.Folder{Root: filepath.Join(dir, ".pipec", "versions")}).Path(key)
			if d, err := sink.Digest(folder); err != nil || d != v.Digest {
				t.Errorf("%s, the current accepted version %s reads %s, %v", when, v.Label(), d, err)
			}
		}
	}
	late := filepath.Join(dir, ".pipec", "staging", "e", "2024-01-01", "r1", "slow", "1", "late")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, lateErr := os.Stat(late)
		_, partsErr := st.AcceptedVersion(context.Background(), "e", "parts", "2024-01-01")
		_, nothingErr := st.AcceptedVersion(context.Background(), "e", "nothing", "2024-01-01")
		if lateErr == nil && partsErr == nil && nothingErr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slow's output folder %s (%v), or the versions of write and none (%v, %v), never came", late, lateErr, partsErr, nothingErr)
		}
	}
	if out, code := pipec(t, dir, "gc"); code != 0 {
		t.Fatalf("gc while slow runs exited %d:\n%s", code, out)
	}
	whole("after gc while slow ran", "parts", "nothing")
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run.Wait(); err != nil {
		t.Fatalf("the run, after gc while slow ran: %v\n%s", err, runOut.String())
	}
	if out, code := pipec(t, dir, "gc"); code != 0 {
		t.Fatalf("gc after the run exited %d:\n%s", code, out)
	}
	whole("after gc", "parts", "nothing", "late")
}
