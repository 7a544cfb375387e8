package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/internal/fulldisk"
	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/artifacts"
)

// A task that is not idempotent is adopted, never run again; a check of its
// output added since its version was accepted audits that version in the
// rerun (where the rerun said the check had passed, which it never ran):
// passed, the version is published as before; failed, the run fails, and
// the charge is still not made again.
func TestAdoptedOutputAuditedByANewCheck(t *testing.T) {
	f := newScenarioFixture(t, scenario.Pay, scenario.PayFiles())
	f.mustSucceed(f.options("2024-01-01"))

	withCheck := func(assert string) { f.respec(strings.Replace(scenario.Pay, "row_count_min = 1", assert, 1)) }
	withCheck(`row_count_min = 1
    unique        = ["id"]`)
	passed := f.mustSucceed(f.options("2024-01-01"))
	if c := passed.Checks[0]; c.State != CheckPassed || c.Reason != "" {
		t.Errorf("the new unique check on the adopted receipt: %+v, want passed here (not accepted in r1)", c)
	}
	if p := passed.Publish[0]; p.Outcome != "idempotent" {
		t.Errorf("publish after the audit: %+v, want the version published before, idempotent", p)
	}

	withCheck(`row_count_min = 2`)
	failed := f.run(f.options("2024-01-01"))
	if !failed.Failed {
		t.Fatalf("a receipt of one row passed row_count_min = 2:\n%s", failed.text())
	}
	if c := failed.Checks[0]; c.State != CheckFailed || !strings.Contains(c.Reason, "row_count_min: 1 row(s), want at least 2") {
		t.Errorf("the new check on the adopted receipt: %+v", c)
	}
	if p := failed.Publish[0]; p.Outcome != PublishNotRun || !strings.Contains(p.Error, "fails a check new or edited since") {
		t.Errorf("publish of a receipt the new check fails: %+v", p)
	}
	if s := failed.task("charge").State; s != TaskReused {
		t.Errorf("charge = %s, want adopted (reused)", s)
	}
	// A check's command audits a copy: one that writes into what it
	// audits fails, and the accepted version is left as it was.
	withCheck(`row_count_min = 1
    command       = ["sh", "-c", "touch \"$PIPEC_CHECK_INPUT/extra\""]`)
	damaging := f.run(f.options("2024-01-01"))
	if c := damaging.Checks[0]; c.State != CheckFailed || !strings.Contains(c.Reason, "the check changed the version it audits") {
		t.Errorf("a check writing into the adopted receipt: %+v", c)
	}
	v, err := f.st.AcceptedVersion(context.Background(), f.plan.Pipeline, "receipt", "2024-01-01")
	if err != nil {
		t.Fatal(err)
	}
	arts, err := artifacts.NewFolder(filepath.Join(filepath.Dir(f.state), "versions"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := artifacts.Files(context.Background(), arts, v.Location)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "extra")); !os.IsNotExist(err) {
		t.Errorf("the check wrote into the accepted version (%v)", err)
	}

	countIs(t, f, "ledger", "charge", 1)
}

// A task that is not idempotent is not run again when a check rejected its
// output: the same check rejects it again without a second charge, and
// says how to go on; a check edited since (one that was wrong, fixed)
// audits the same version again from the artifact store, which is
// accepted and published, and its readers run, still on one charge.
func TestRejectedOutputAuditedAgainByAnEditedCheck(t *testing.T) {
	f := newScenarioFixture(t, scenario.Pay, scenario.PayFiles())
	f.respec(strings.Replace(scenario.Pay, "row_count_min = 1", "row_count_min = 2", 1))
	for i := range 2 {
		res := f.run(f.options("2024-01-01"))
		if !res.Failed || res.Publish[0].Outcome != PublishNotRun || res.task("mail").State != TaskNotRun {
			t.Fatalf("a receipt of one row passed row_count_min = 2:\n%s", res.text())
		}
		if i == 0 {
			continue
		}
		if s := res.task("charge").State; s != TaskReused {
			t.Errorf("charge = %s in the rerun, want adopted (reused)", s)
		}
		reason := res.Checks[0].Reason
		for _, want := range []string{"was rejected: check receipt_ok failed", "a check of receipt new or edited since audits this version again"} {
			if !strings.Contains(reason, want) {
				t.Errorf("the rerun says %q, want %q", reason, want)
			}
		}
	}
	f.respec(scenario.Pay)
	res := f.mustSucceed(f.options("2024-01-01"))
	if s := res.task("charge").State; s != TaskReused {
		t.Errorf("charge = %s, want adopted (reused)", s)
	}
	if c := res.Checks[0]; c.State != CheckPassed {
		t.Errorf("the edited check on the rejected receipt: %+v, want passed", c)
	}
	if p := res.Publish[0]; p.Outcome != "won" {
		t.Errorf("publish of the receipt audited again: %+v, want won", p)
	}
	if _, err := f.st.AcceptedVersion(context.Background(), f.plan.Pipeline, "receipt", "2024-01-01"); err != nil {
		t.Errorf("no accepted receipt: %v", err)
	}
	chargedAndMailedOnce(t, f)
}

// A check that runs a command may reject a receipt for a reason outside
// its bytes (the database it compares with was away): the same check
// audits the rejected receipt again in the rerun, without a second charge.
func TestRejectedOutputAuditedAgainByACommandCheck(t *testing.T) {
	f := newScenarioFixture(t, scenario.Pay, scenario.PayFiles())
	f.respec(strings.Replace(scenario.Pay, "row_count_min = 1", `row_count_min = 1
    command       = ["sh", "-c", "test ! -e away"]`, 1))
	if err := os.WriteFile(filepath.Join(f.dir, "away"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := f.run(f.options("2024-01-01")); !res.Failed || res.Checks[0].State != CheckFailed {
		t.Fatalf("the check passed with its database away:\n%s", res.text())
	}
	if err := os.Remove(filepath.Join(f.dir, "away")); err != nil {
		t.Fatal(err)
	}
	res := f.mustSucceed(f.options("2024-01-01"))
	if s, c := res.task("charge").State, res.Checks[0].State; s != TaskReused || c != CheckPassed {
		t.Errorf("charge %s, check %s; want adopted (reused), and passed", s, c)
	}
	chargedAndMailedOnce(t, f)
}

// chargedAndMailedOnce fails t unless scenario.Pay charged once and mailed
// once, in f's folder.
func chargedAndMailedOnce(t *testing.T, f *fixture) {
	t.Helper()
	countIs(t, f, "ledger", "charge", 1)
	countIs(t, f, "mails", "mail", 1)
}

// countIs fails t unless file, in f's folder, holds word n times.
func countIs(t *testing.T, f *fixture, file, word string, n int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, file))
	if err != nil || strings.Count(string(b), word) != n {
		t.Errorf("%s %q (%v), want %s %d time(s)", file, b, err, word, n)
	}
}

// An output left unaudited (here: a full disk kept it from being frozen)
// stops its readers in this run, as a rejected one does: a forced run
// charged again, and mail ran on the receipt an earlier run accepted,
// not on the one this charge made.
func TestLeftOutputStopsItsReaders(t *testing.T) {
	f := newScenarioFixture(t, scenario.Pay, scenario.PayFiles())
	f.mustSucceed(f.options("2024-01-01"))
	versions := filepath.Join(filepath.Dir(f.state), "versions")
	fulldisk.Mount(t, versions, "1m")
	fulldisk.Fill(t, versions, 0)
	o := f.options("2024-01-01")
	o.Force = true
	res := f.run(o)
	if !res.Failed {
		t.Fatalf("a run whose receipt could not be frozen succeeded:\n%s", res.text())
	}
	if m := res.task("mail"); m.State != TaskNotRun || !strings.Contains(m.Reason, "could not be frozen on this machine") {
		t.Errorf("mail: %+v, want not run: the receipt of this run's charge was not accepted", m)
	}
	countIs(t, f, "ledger", "charge", 2)
	countIs(t, f, "mails", "mail", 1)
}
