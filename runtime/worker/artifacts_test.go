package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// Artifacts across machines (seed 001: "a task cannot find its upstream
// local file"): every worker has its own --workdir, the shared artifact
// store is one folder (--artifacts), and a task reads its inputs from the
// store, whichever worker produced them and whatever became of that
// worker's disk.

// artSpec is a producer and a consumer. clean records the input folder it
// was given (input-<worker>.txt, in the spec's folder) and, on the worker
// named in the file stall-on, writes its pid to stalled and sleeps, to be
// killed mid-task.
var artSpec = pairSpec("arts", nil, nil)

var artFiles = map[string]string{
	"extract.sh": "#!/bin/sh\nprintf 'id,worker\\n1,%s\\n' \"$PIPEC_WORKER\" > \"$PIPEC_OUTPUT_raw/data.csv\"\n",
	"clean.sh": "#!/bin/sh\necho \"$PIPEC_INPUT_raw\" > \"input-$PIPEC_WORKER.txt\"\n" +
		"if [ -f stall-on ] && [ \"$(cat stall-on)\" = \"$PIPEC_WORKER\" ]; then echo $$ > stalled.tmp && mv stalled.tmp stalled && exec sleep 120; fi\n" +
		"cp \"$PIPEC_INPUT_raw/data.csv\" \"$PIPEC_OUTPUT_clean/data.csv\"\n",
}

// readFile waits for a file the test's tasks write (the deadline only
// bounds a broken test).
func (e *env) readFile(name string) string {
	e.t.Helper()
	for deadline := time.Now().Add(4 * time.Minute); ; {
		if b, err := os.ReadFile(filepath.Join(e.dir, name)); err == nil {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("gave up waiting for %s", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkFromStore checks that the run succeeded with the producer's data
// published, that the consumer on worker read its input inside the shared
// artifact store, and that every version the state recorded is named by a
// location key, not by a path on some worker's disk.
func (e *env) checkFromStore(run, consumer string) {
	e.t.Helper()
	e.checkFromStoreAt(run, consumer, e.arts)
}

func (e *env) checkFromStoreAt(run, consumer, arts string) {
	e.t.Helper()
	if rs := e.until(run, "the run's end", finished); rs.Run.State != store.RunSucceeded {
		e.t.Fatalf("run %s: %+v", run, rs)
	}
	b, err := os.ReadFile(filepath.Join(e.dir, "warehouse", "2024-01-01", "data.csv"))
	if err != nil || !strings.HasPrefix(string(b), "id,worker\n1,") {
		e.t.Fatalf("published data %q, %v", b, err)
	}
	in := e.readFile("input-" + consumer + ".txt")
	if rel, err := filepath.Rel(arts, in); err != nil || strings.HasPrefix(rel, "..") || !strings.HasPrefix(filepath.ToSlash(rel), "arts/raw/") {
		e.t.Errorf("the consumer read its input from %s, not from the artifact store %s", in, arts)
	}
	if _, err := os.Stat(filepath.Join(in, "data.csv")); err != nil {
		e.t.Errorf("the consumer's input is gone from the store: %v", err)
	}
	for _, a := range []string{"raw", "clean"} {
		v, err := e.st.AcceptedVersion(context.Background(), "arts", a, "2024-01-01")
		if err != nil {
			e.t.Fatalf("accepted %s: %v", a, err)
		}
		if want := "arts/" + a + "/" + strings.TrimPrefix(v.Digest, "sha256:"); v.Location != want {
			e.t.Errorf("version %s is recorded at %q, want the key %q", v.Label(), v.Location, want)
		}
	}
}

// TestDifferentWorkers is the seed's different-worker execution: the
// producer and its consumer are forced onto different workers by labels,
// each worker with its own workdir; after the producer's visit finished and
// before the consumer starts, the producer worker's whole workdir is
// removed. The consumer still succeeds and publishes, from its input in the
// shared artifact store.
//
// On PostgreSQL the workers share one --artifacts folder; workers sharing
// an SQLite file are on its machine, and with no --artifacts share the
// store beside it.
func TestDifferentWorkers(t *testing.T) {
	onBoth(t, testDifferentWorkers)
}

func testDifferentWorkers(t *testing.T, b backend) {
	spec := pairSpec("arts", []string{"a"}, []string{"b"})
	e := newEnvOn(t, b, spec, artFiles)
	arts := e.arts
	if b == onSQLite {
		e.arts, arts = "", filepath.Join(e.dir, "versions")
	}
	e.worker("wa", "--label", "a")
	run := e.submit("2024-01-01")
	e.until(run, "extract's end", func(rs queue.RunStatus) bool {
		for _, ts := range rs.Tasks {
			if ts.Task == "extract" {
				return ts.State == queue.WorkSucceeded
			}
		}
		return false
	})
	if err := os.RemoveAll(filepath.Join(e.dir, "work-wa")); err != nil {
		t.Fatal(err)
	}
	e.worker("wb", "--label", "b")
	e.checkFromStoreAt(run, "wb", arts)
	if got := e.starts(run, "extract"); len(got) != 1 || got[0] != "wa" {
		t.Errorf("extract's starts = %v, want [wa]", got)
	}
	if got := e.starts(run, "clean"); len(got) != 1 || got[0] != "wb" {
		t.Errorf("clean's starts = %v, want [wb]", got)
	}
}

// TestArtifactsRestartAfterKill: the consumer's worker (which also
// produced its input) is killed with SIGKILL mid-task and its whole workdir
// removed; a fresh worker with a new, empty workdir takes the task over
// once the claim's lease expires, reads the input from the shared store and
// succeeds.
func TestArtifactsRestartAfterKill(t *testing.T) {
	onBoth(t, testArtifactsRestartAfterKill)
}

func testArtifactsRestartAfterKill(t *testing.T, b backend) {
	e := newEnvOn(t, b, artSpec, artFiles)
	if err := os.WriteFile(filepath.Join(e.dir, "stall-on"), []byte("w1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w1 := e.worker("w1")
	run := e.submit("2024-01-01")
	pid, err := strconv.Atoi(e.readFile("stalled"))
	if err != nil {
		t.Fatal(err)
	}
	// The orphaned task (its process group) outlives its worker; it is
	// fenced, and stopped here so it does not outlive the test.
	t.Cleanup(func() { killIfOurs(pid, e.dir) })
	w1.Signal(t, syscall.SIGKILL)
	if err := os.RemoveAll(filepath.Join(e.dir, "work-w1")); err != nil {
		t.Fatal(err)
	}
	e.worker("w2")
	e.checkFromStore(run, "w2")
	if got := e.starts(run, "clean"); len(got) != 2 || got[0] != "w1" || got[1] != "w2" {
		t.Errorf("clean's starts = %v, want [w1 w2]", got)
	}
	if got := e.starts(run, "extract"); len(got) != 1 || got[0] != "w1" {
		t.Errorf("extract's starts = %v, want [w1]", got)
	}
}

// TestArtifactsHandedOverAfterProducerGone: the producer's worker finished
// the producer, started the consumer and was stopped (SIGTERM hands the
// consumer back); its whole workdir is removed before another worker, with
// its own workdir, runs the consumer, which succeeds from the shared store.
// The store is named by pipec submit --artifacts only: the workers have no
// --artifacts of their own and take the submitted plan's.
func TestArtifactsHandedOverAfterProducerGone(t *testing.T) {
	e := newEnv(t, artSpec, artFiles)
	if err := os.WriteFile(filepath.Join(e.dir, "stall-on"), []byte("w1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	arts := e.arts
	e.arts = ""
	w1 := e.worker("w1")
	code, out := e.pipec("submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", e.url, "--artifacts", arts)
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	run := strings.Fields(out)[1]
	e.readFile("stalled")
	w1.Signal(t, syscall.SIGTERM)
	if err := os.RemoveAll(filepath.Join(e.dir, "work-w1")); err != nil {
		t.Fatal(err)
	}
	e.worker("w2")
	e.checkFromStoreAt(run, "w2", arts)
}

// TestWorkerArtifactsNotMounted: a worker whose --artifacts folder does
// not exist (the share is not mounted) does not start.
func TestWorkerArtifactsNotMounted(t *testing.T) {
	e := newEnv(t, artSpec, artFiles)
	code, out := e.pipec("worker", "--state", e.url, "--name", "w1", "--artifacts", filepath.Join(e.dir, "not-mounted"))
	if code != 2 || !strings.Contains(out, "is the share mounted?") {
		t.Fatalf("worker with a missing --artifacts folder: exit %d\n%s", code, out)
	}
}

// TestWorkerWithoutArtifactsRefuses: workers with no artifact store (no
// --artifacts, none in the spec) refuse, with a message that says what to
// configure, a task whose output another task reads: its version would be
// on one worker's disk only.
func TestWorkerWithoutArtifactsRefuses(t *testing.T) {
	e := newEnv(t, artSpec, artFiles)
	e.arts = ""
	w := e.worker("w1")
	if !strings.Contains(w.Output(), "no --artifacts") {
		t.Errorf("the worker did not warn at start:\n%s", w.Output())
	}
	run := e.submit("2024-01-01")
	rs := e.until(run, "the run's end", finished)
	if rs.Run.State != store.RunFailed {
		t.Fatalf("run %+v, want failed", rs)
	}
	var extract queue.TaskStatus
	for _, ts := range rs.Tasks {
		if ts.Task == "extract" {
			extract = ts
		}
	}
	for _, want := range []string{"no shared artifact store", "task extract writes raw, which task clean reads", "--artifacts"} {
		if !strings.Contains(extract.Reason, want) {
			t.Errorf("extract's reason %q lacks %q", extract.Reason, want)
		}
	}
	if got := e.starts(run, "extract"); len(got) != 1 {
		t.Errorf("extract's starts = %v, want one (a refusal does not fail over)", got)
	}
}

// TestOutputsFrozenIntoTheStore: the shared store is on the workers'
// filesystem, so an output is frozen straight into it: the check audits the
// version's folder in the store, and nothing is frozen beside the staging.
// Where the store cannot take the pipeline's folder (a file has its name),
// the output is frozen beside the staging and the put's refusal is what the
// run reports: the store failed, not the output.
func TestOutputsFrozenIntoTheStore(t *testing.T) {
	spec := strings.Replace(artSpec, "row_count_min = 1", "row_count_min = 1\n    command       = [\"./audit.sh\"]", 1)
	files := map[string]string{"audit.sh": "#!/bin/sh\necho \"$PIPEC_CHECK_INPUT\" > audit-input.txt\n"}
	for name, body := range artFiles {
		files[name] = body
	}
	t.Run("store", func(t *testing.T) {
		e := newEnv(t, spec, files)
		e.worker("w1")
		run := e.submit("2024-01-01")
		e.checkFromStore(run, "w1")
		audited := e.readFile("audit-input.txt")
		if rel, err := filepath.Rel(e.arts, audited); err != nil || !strings.HasPrefix(filepath.ToSlash(rel), "arts/clean/") {
			t.Errorf("the check audited %s, not the version's folder in the store %s", audited, e.arts)
		}
		filepath.WalkDir(filepath.Join(e.dir, "work-w1"), func(path string, d os.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(d.Name(), ".frozen-") {
				t.Errorf("an output was frozen beside its staging too: %s", path)
			}
			return nil
		})
	})
	t.Run("refused", func(t *testing.T) {
		e := newEnv(t, spec, files)
		if err := os.WriteFile(filepath.Join(e.arts, "arts"), []byte("not a folder\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		e.worker("w1")
		run := e.submit("2024-01-01")
		if rs := e.until(run, "the run's end", finished); rs.Run.State == store.RunSucceeded {
			t.Fatalf("run %s succeeded without its artifact store: %+v", run, rs)
		}
		evs, err := e.st.Events(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		said := false
		for _, ev := range evs {
			payload := string(ev.Payload)
			said = said || strings.Contains(payload, "put into the artifact store")
			if strings.Contains(payload, "cannot be read") {
				t.Errorf("the store's refusal was reported as the output's: %s", payload)
			}
		}
		if !said {
			t.Errorf("no event of run %s says the put into the artifact store failed", run)
		}
	})
}

// TestOutputWithALinkFailsTheVisit: on a worker, as in a local run, an
// output that never becomes a version (a symbolic link in its folder) fails
// the task with class output, once (the same task would write the same link
// on another worker), and its reader is not run: the run fails.
func TestOutputWithALinkFailsTheVisit(t *testing.T) {
	e := newEnv(t, `pipeline "p" {
  task "make" {
    command = ["./make.sh"]
    outputs = ["raw"]
  }
}
`, map[string]string{"make.sh": "#!/bin/sh\necho ok > \"$PIPEC_OUTPUT_raw/a.csv\" && ln -s /etc/hostname \"$PIPEC_OUTPUT_raw/leak\"\n"})
	e.worker("w1")
	e.worker("w2")
	run := e.submit("2024-01-01")
	rs := e.until(run, "the run's end", finished)
	if rs.Run.State != store.RunFailed {
		t.Fatalf("run %s is %s, want failed", run, rs.Run.State)
	}
	if st := taskState(rs, "make"); st != queue.WorkFailed {
		t.Errorf("make is %s, want failed", st)
	}
	if got := e.starts(run, "make"); len(got) != 1 {
		t.Errorf("make's starts = %v, want one (no failover for what the task itself wrote)", got)
	}
	evs, err := e.st.Events(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	said := false
	for _, ev := range evs {
		said = said || ev.Kind == runtime.EventOutputRejected && strings.Contains(string(ev.Payload), "leak is a symbolic link (to /etc/hostname)")
	}
	if !said {
		t.Errorf("no %s event of run %s names the link", runtime.EventOutputRejected, run)
	}
}
