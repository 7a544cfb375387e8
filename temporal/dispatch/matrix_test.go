package dispatch_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/pipec/pipec/internal/proctest"
	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/temporal/dispatch"
)

// Temporal's column of the guarantee matrix (runtime/worker/matrix_test.go
// holds the local, workers-sqlite and workers-postgres columns): secrets
// and lineage, with the matrix's own pipeline (scenario.Matrix), submitted
// through pipec submit --engine and run by a pipec worker on Temporal.

// matrixFiles are the matrix's scripts, with mail also noting the input
// folder it was given (the accepted receipt it was built from).
func matrixFiles() map[string]string {
	fs := scenario.MatrixFiles()
	fs["mail.sh"] = "#!/bin/sh\necho \"mail $PIPEC_RUN_ID $PIPEC_INPUT_receipt\" >> mails\n"
	return fs
}

// matrixRun runs the matrix's pipeline for 2024-01-01 through pipec submit
// --engine --wait on a fresh Temporal server and state, with one worker,
// and returns the env, the worker, the run and submit's output.
func matrixRun(t *testing.T) (e *env, w *proc, run, out string) {
	t.Setenv("PIPEC_TEST_SECRET", scenario.MatrixSecret)
	e = newEnv(t, scenario.Matrix("1"), matrixFiles())
	w = e.worker("w0")
	code, out := e.run(pipecBin, "submit", "pipeline.hcl", "--interval", "2024-01-01", "--engine", e.engine, "--state", e.url, "--wait")
	if i := strings.Index(out, "submitted "); i >= 0 {
		run = strings.Fields(out[i:])[1]
	}
	if code != 0 || run == "" {
		t.Fatalf("submit --engine --wait: exit %d\n%s", code, out)
	}
	return e, w, run, out
}

// A secret_env value reaches the task (its log shows it masked: the
// runtime saw the value in the output) and appears in no output of pipec
// or pipec-temporal, no event, no status, no log, no byte of the state,
// and nowhere in the run's Temporal history (the workers take it from
// their own environment; it never travels through Temporal).
func TestMatrixTemporalSecretsMasked(t *testing.T) {
	e, w, run, out := matrixRun(t)
	texts := map[string]string{"submit's output": out, "worker's output": w.Output()}
	for what, args := range map[string][]string{
		"events":        {"events", run, "--json"},
		"status":        {"status"},
		"status --json": {"status", "--json"},
	} {
		code, s := e.run(pipecBin, append(args, "--state", e.url)...)
		if code != 0 {
			t.Fatalf("pipec %s: exit %d\n%s", strings.Join(args, " "), code, s)
		}
		texts[what] = s
	}
	logs := ""
	_ = filepath.WalkDir(e.dir, func(path string, de os.DirEntry, err error) error {
		if err == nil && !de.IsDir() && strings.HasSuffix(path, ".log") {
			b, _ := os.ReadFile(path)
			logs += string(b)
		}
		return nil
	})
	texts["logs"] = logs
	state := ""
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, _ := os.ReadFile(e.url + suffix)
		state += string(b)
	}
	texts["state"] = state
	texts["workflow history"] = e.history("pay", "2024-01-01")
	if h := texts["workflow history"]; !strings.Contains(h, "PIPEC_TEST_SECRET") || !strings.Contains(h, dispatch.ActivityVisit) {
		t.Fatalf("the history read lacks the plan (the secret's name) or the visits:\n%.2000s", h)
	}
	for what, text := range texts {
		if strings.Contains(text, scenario.MatrixSecret) {
			t.Errorf("the secret is in the %s", what)
		}
	}
	if !strings.Contains(logs, "paying with ***") {
		t.Errorf("the task's log does not show the masked secret:\n%s", logs)
	}
}

// history is the text of every event of the interval's workflow, and its
// plan ungzipped (the rest of its input and every activity's input and
// result are in the events as they travel).
func (e *env) history(pipeline, interval string) string {
	e.t.Helper()
	it := e.c.GetWorkflowHistory(context.Background(), e.wid(pipeline, interval), "", false,
		enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var b strings.Builder
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			e.t.Fatal(err)
		}
		b.WriteString(ev.String())
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			var in dispatch.RunInput
			if err := converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &in); err != nil {
				e.t.Fatal(err)
			}
			zr, err := gzip.NewReader(bytes.NewReader(in.Plan))
			if err != nil {
				e.t.Fatal(err)
			}
			plan, err := io.ReadAll(zr)
			if err != nil {
				e.t.Fatal(err)
			}
			b.Write(plan)
		}
	}
	if b.Len() == 0 {
		e.t.Fatalf("workflow %s has no history", e.wid(pipeline, interval))
	}
	return b.String()
}

// lineage is what a run leaves of where its accepted versions came from:
// the visible version's manifest (_pipec.json), the accepted version the
// state records, and the input folder the consumer was given.
type lineage struct {
	Manifest map[string]any
	Version  store.Version
	MailRead string
}

func lineageOf(t *testing.T, dir string, st store.Store) lineage {
	t.Helper()
	var l lineage
	b, err := os.ReadFile(filepath.Join(dir, "warehouse", "2024-01-01", "_pipec.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &l.Manifest); err != nil {
		t.Fatal(err)
	}
	if l.Version, err = st.AcceptedVersion(context.Background(), "pay", "receipt", "2024-01-01"); err != nil {
		t.Fatal(err)
	}
	mails, err := os.ReadFile(filepath.Join(dir, "mails"))
	if err != nil {
		t.Fatal(err)
	}
	if fs := strings.Fields(string(mails)); len(fs) == 3 {
		l.MailRead = fs[2]
	} else {
		t.Fatalf("mails: %q, want one line naming the run and its input", mails)
	}
	return l
}

// The visible version carries its lineage (_pipec.json: run, task,
// attempt, token, checks), pipec show names it, the consumer read the
// accepted version the state records, and all of it is what the same
// pipeline on pipec's own queue (pipec worker and pipec submit, a state of
// its own) records: the same manifest, field for field, the same accepted
// version (digest, location, run, task, attempt, token, code_version) and
// the same input read.
func TestMatrixTemporalLineage(t *testing.T) {
	e, _, run, _ := matrixRun(t)
	got := lineageOf(t, e.dir, e.st)
	m := got.Manifest
	if m["run"] != run || m["task"] != "charge" || m["attempt"] != 1.0 || m["token"] == nil {
		t.Fatalf("lineage %v, want run %s, task charge, attempt 1, a token", m, run)
	}
	checks, _ := m["checks"].([]any)
	if len(checks) != 1 || checks[0].(map[string]any)["name"] != "receipt_ok" || checks[0].(map[string]any)["run"] != run {
		t.Fatalf("lineage checks %v, want receipt_ok of %s", m["checks"], run)
	}
	v := got.Version
	if v.Run != run || v.Task != "charge" || v.State != store.VersionAccepted || v.Digest != m["digest"] || float64(v.Token) != m["token"] {
		t.Fatalf("accepted version %+v, manifest %v: they disagree", v, m)
	}
	if !strings.HasSuffix(got.MailRead, v.Location) {
		t.Fatalf("mail read %s, not the accepted receipt (%s)", got.MailRead, v.Location)
	}
	code, out := e.run(pipecBin, "show", "receipt@2024-01-01", "--spec", "pipeline.hcl", "--state", e.url)
	if code != 0 || !strings.Contains(out, run) {
		t.Fatalf("pipec show: exit %d, want %s named\n%s", code, run, out)
	}

	// The same on the state's own queue.
	q := newEnv(t, scenario.Matrix("1"), matrixFiles())
	q.queueWorker("w0")
	if code, out := q.run(pipecBin, "submit", "pipeline.hcl", "--interval", "2024-01-01", "--state", q.url, "--wait", "--poll", "20ms"); code != 0 {
		t.Fatalf("submit on the queue: exit %d\n%s", code, out)
	}
	want := lineageOf(t, q.dir, q.st)
	for k, wv := range want.Manifest {
		if gv, _ := json.Marshal(m[k]); string(gv) != mustJSON(t, wv) {
			t.Errorf("manifest %s: %s on Temporal, %s on the queue", k, gv, mustJSON(t, wv))
		}
	}
	if len(m) != len(want.Manifest) {
		t.Errorf("manifest on Temporal %v, on the queue %v", m, want.Manifest)
	}
	gv, wv := got.Version, want.Version
	gv.ID, wv.ID, gv.Created, wv.Created = 0, 0, time.Time{}, time.Time{}
	if gv != wv {
		t.Errorf("accepted version on Temporal %+v, on the queue %+v", gv, wv)
	}
	if rel := func(l lineage, arts string) string { r, _ := filepath.Rel(arts, l.MailRead); return r }; rel(got, e.arts) != rel(want, q.arts) {
		t.Errorf("mail read %s on Temporal, %s on the queue", got.MailRead, want.MailRead)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// queueWorker starts a pipec worker on the state's own queue (no engine)
// and waits until it registered.
func (e *env) queueWorker(name string) *proc {
	e.t.Helper()
	cmd := exec.Command(pipecBin, "worker", "--state", e.url, "--name", name,
		"--workdir", filepath.Join(e.dir, "work-"+name), "--lease", "1s", "--artifacts", e.arts)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "PIPEC_STATE=", "PIPEC_ENGINE=")
	return registered(e.t, proctest.Start(e.t, name, cmd, 30*time.Second))
}

// A task that changes an accepted input's bytes fails, with class input,
// once, whichever worker Temporal hands it to: no retry of the activity
// or failover repeats it, what reads the input after it is not run, and
// the changed copy is not left for anyone to read as the version.
func TestMatrixTemporalTaskChangesItsInput(t *testing.T) {
	e := newEnv(t, scenario.InputChange, nil)
	e.worker("w0")
	e.worker("w1")
	code, run, out := e.submit("2024-01-01", true)
	if code != 1 || !strings.Contains(out, "changed its input rows (rows.csv removed, rows.old added)") {
		t.Fatalf("exit %d, want a failed run saying use changed its input\n%s", code, out)
	}
	if as := e.attempts(run, "read"); len(as) != 0 {
		t.Errorf("read ran after use changed its input: %+v", as)
	}
	as := e.attempts(run, "use")
	if len(as) != 1 || as[0].State != store.AttemptFailed || as[0].Class != "input" {
		t.Errorf("use's attempts %+v, want one, failed with class input", as)
	}
	_ = filepath.WalkDir(e.dir, func(p string, _ os.DirEntry, _ error) error {
		if filepath.Base(p) == "rows.old" {
			t.Errorf("the changed copy is still there: %s", p)
		}
		return nil
	})
}

// A check that rejected a non-idempotent task's receipt fails the run,
// and so does a resubmission, without a second charge; once the check is
// edited (it was wrong), the next submission audits the same receipt
// again from the shared artifact store, on whichever worker, and
// publishes it: one charge, one mail.
func TestMatrixTemporalRejectedReceiptAuditedAgain(t *testing.T) {
	t.Setenv("PIPEC_TEST_SECRET", scenario.MatrixSecret)
	e := newEnv(t, scenario.Matrix("5"), matrixFiles())
	e.worker("w0")
	e.worker("w1")
	for _, want := range []string{"receipt_ok", "a check of receipt new or edited since audits this version again"} {
		if code, _, out := e.submit("2024-01-01", true); code != 1 || !strings.Contains(out, want) {
			t.Fatalf("exit %d, want a failed run saying %q\n%s", code, want, out)
		}
	}
	if err := os.WriteFile(filepath.Join(e.dir, "pipeline.hcl"), []byte(scenario.Matrix("1")), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, out := e.submit("2024-01-01", true); code != 0 {
		t.Fatalf("with the check edited: exit %d, want the receipt audited again and published\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "warehouse", "2024-01-01", "r.csv")); err != nil {
		t.Fatalf("the receipt audited again is not published: %v", err)
	}
	if n, m := e.lines("ledger", "charge"), e.lines("mails", "mail"); n != 1 || m != 1 {
		t.Fatalf("%d charges and %d mails, want 1 each", n, m)
	}
}
