package store

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// childEnv makes the test binary act as a second process on a database (see
// TestMain); its value is the role.
const childEnv = "PIPEC_STORE_TEST_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(child(role))
	}
	os.Exit(m.Run())
}

// child grants tokens from the database at $PIPEC_STORE_TEST_DB and prints
// them, one a line.
func child(role string) int {
	ctx := context.Background()
	s, err := Open(ctx, os.Getenv("PIPEC_STORE_TEST_DB"), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	switch role {
	case "grant-forever":
		// Grants until killed, printing each token once NextToken returned.
		for {
			tok, err := s.NextToken(ctx, "shared")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Println(tok)
		}
	case "tokens":
		n, _ := strconv.Atoi(os.Getenv("PIPEC_STORE_TEST_N"))
		for i := 0; i < n; i++ {
			tok, err := s.NextToken(ctx, "shared")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Println(tok)
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 2
}

// fakeClock is a store clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2024, 1, 2, 3, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// rawDB is a plain connection to a store's file, for what the API does not
// offer (tampering, checking).
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func openTest(t testing.TB, path string, clock Clock) *SQLite {
	t.Helper()
	s, err := Open(context.Background(), path, Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newRun(t testing.TB, s Store, interval string) Run {
	t.Helper()
	r, err := s.CreateRun(context.Background(), NewRun{
		Pipeline: "orders", Interval: interval,
		IntervalStart: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		IntervalEnd:   time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC),
		CodeVersion:   "2024.06.1", PlanDigest: "sha256:plan",
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOpenCreatesPrivateFileAndMigrates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".pipec")
	path := filepath.Join(dir, "state.db")
	s := openTest(t, path, nil)
	ctx := context.Background()

	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", p, got, want)
		}
	}
	// Ask the write connection itself, inside a write.
	var mode string
	var fk, sync int
	err := s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		if err := tx.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync)
	})
	if err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || fk != 1 || sync != 1 {
		t.Errorf("journal_mode %q, foreign_keys %d, synchronous %d; want wal, 1, 1 (NORMAL between durable writes)", mode, fk, sync)
	}

	r := newRun(t, s, "2024-01-01")
	for _, side := range []string{path + "-wal", path + "-shm", path + "-lock"} {
		if fi, err := os.Stat(side); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 600", side, fi.Mode(), err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopening applies no migration twice and keeps the data.
	s2 := openTest(t, path, nil)
	var versions int
	if err := s2.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_version`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if versions != len(migrations) {
		t.Errorf("schema_version has %d rows, want %d", versions, len(migrations))
	}
	got, err := s2.GetRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "orders/2024-01-01/r1" || got.State != RunRunning || got.CodeVersion != "2024.06.1" ||
		!got.IntervalStart.Equal(r.IntervalStart) || !got.Created.Equal(r.Created) {
		t.Errorf("reopened run = %+v, want %+v", got, r)
	}
	if err := s2.IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openTest(t, path, nil)
	if _, err := rawDB(t, path).Exec(`INSERT INTO schema_version (version, name) VALUES (?, 'from the future')`, SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(context.Background(), path, Options{}); err == nil || !strings.Contains(err.Error(), "newer than this pipec supports") {
		t.Fatalf("Open on a newer schema: err = %v", err)
	}
}

func TestRunIDsCountPerInterval(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "state.db"), nil)
	ctx := context.Background()
	a := newRun(t, s, "2024-01-01")
	b := newRun(t, s, "2024-01-01")
	c := newRun(t, s, "2024-01-02")
	if a.ID != "orders/2024-01-01/r1" || b.ID != "orders/2024-01-01/r2" || c.ID != "orders/2024-01-02/r1" {
		t.Fatalf("run ids %s %s %s", a.ID, b.ID, c.ID)
	}
	runs, err := s.ListRuns(ctx, RunFilter{Interval: "2024-01-01"})
	if err != nil || len(runs) != 2 || runs[0].ID != a.ID || runs[1].ID != b.ID {
		t.Fatalf("ListRuns = %v, %v", runs, err)
	}
	if err := s.FinishRun(ctx, a.ID, RunFailed); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, a.ID, RunSucceeded); !errors.Is(err, ErrConflict) {
		t.Errorf("finishing a failed run as succeeded: %v, want ErrConflict", err)
	}
	if _, err := s.StartAttempt(ctx, AttemptSpec{Run: a.ID, Task: "t", Resource: "r"}); !errors.Is(err, ErrConflict) {
		t.Errorf("attempt in a finished run: %v, want ErrConflict", err)
	}
	if _, err := s.GetRun(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRun(nope) = %v, want ErrNotFound", err)
	}
}

func TestTokensIncreaseAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	ctx := context.Background()
	var last int64
	for round := 0; round < 3; round++ {
		s := openTest(t, path, nil)
		for i := 0; i < 5; i++ {
			tok, err := s.NextToken(ctx, "orders@2024-01-01")
			if err != nil {
				t.Fatal(err)
			}
			if tok <= last {
				t.Fatalf("round %d: token %d after %d", round, tok, last)
			}
			last = tok
		}
		// Each handle records a new epoch before its first grant.
		if epoch := last / epochSpan; epoch != int64(round+1) {
			t.Errorf("round %d: token %d is of epoch %d, want %d", round, last, epoch, round+1)
		}
		other, err := s.NextToken(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(round+1) * epochSpan; other != want {
			t.Errorf("a second resource counts on its own: got %d, want %d", other, want)
		}
		s.Close()
	}
}

// TestTokenEpochSpent: a handle whose epoch has no tokens left records a new
// epoch (durably) before granting past it.
func TestTokenEpochSpent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openTest(t, path, nil)
	ctx := context.Background()
	first, err := s.NextToken(ctx, "r")
	if err != nil || first != epochSpan {
		t.Fatalf("first token %d, %v; want %d", first, err, epochSpan)
	}
	if _, err := rawDB(t, path).Exec(`UPDATE tokens SET last = ? WHERE resource = 'r'`, 2*epochSpan-1); err != nil {
		t.Fatal(err)
	}
	next, err := s.NextToken(ctx, "r")
	if err != nil || next != 2*epochSpan {
		t.Fatalf("token past the epoch = %d, %v; want %d", next, err, 2*epochSpan)
	}
	var epoch int64
	if err := s.r.QueryRow(`SELECT epoch FROM epochs`).Scan(&epoch); err != nil || epoch != 2 {
		t.Errorf("recorded epoch %d, %v; want 2", epoch, err)
	}
	if again, err := s.NextToken(ctx, "r"); err != nil || again != next+1 {
		t.Errorf("then %d, %v; want %d", again, err, next+1)
	}
}

// TestTokensAcrossProcesses grants tokens from one resource in three
// processes at once, which also race to create and migrate the database:
// every token is granted once, and each process sees its own tokens strictly
// increase.
func TestTokensAcrossProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	// No database yet: the children race to create and migrate it.
	const perChild, children = 200, 3
	var wg sync.WaitGroup
	results := make([][]int64, children)
	errs := make([]error, children)
	for i := 0; i < children; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"=tokens", "PIPEC_STORE_TEST_DB="+path, "PIPEC_STORE_TEST_N="+strconv.Itoa(perChild))
			out, err := cmd.Output()
			if err != nil {
				if ee, ok := err.(*exec.ExitError); ok {
					err = fmt.Errorf("%v: %s", err, ee.Stderr)
				}
				errs[i] = err
				return
			}
			sc := bufio.NewScanner(strings.NewReader(string(out)))
			for sc.Scan() {
				n, err := strconv.ParseInt(sc.Text(), 10, 64)
				if err != nil {
					errs[i] = err
					return
				}
				results[i] = append(results[i], n)
			}
		}()
	}
	wg.Wait()
	seen := map[int64]int{}
	for i, toks := range results {
		if errs[i] != nil {
			t.Fatalf("child %d: %v", i, errs[i])
		}
		if len(toks) != perChild {
			t.Fatalf("child %d printed %d tokens, want %d", i, len(toks), perChild)
		}
		for j, tok := range toks {
			if j > 0 && tok <= toks[j-1] {
				t.Errorf("child %d: token %d after %d", i, tok, toks[j-1])
			}
			if prev, dup := seen[tok]; dup {
				t.Errorf("token %d granted to child %d and child %d", tok, prev, i)
			}
			seen[tok] = i
		}
	}
	s := openTest(t, path, nil)
	next, err := s.NextToken(context.Background(), "shared")
	if err != nil {
		t.Fatal(err)
	}
	for tok := range seen {
		if next <= tok {
			t.Fatalf("next token %d not above %d granted before", next, tok)
		}
	}
}

func TestAttemptsLeasesAndUnknown(t *testing.T) {
	clock := newFakeClock()
	s := openTest(t, filepath.Join(t.TempDir(), "state.db"), clock.Now)
	ctx := context.Background()
	r := newRun(t, s, "2024-01-01")
	res := "orders@2024-01-01"

	a1, err := s.StartAttempt(ctx, AttemptSpec{Run: r.ID, Task: "extract", Resource: res, Lease: time.Second, Worker: "w1", PID: 42})
	if err != nil {
		t.Fatal(err)
	}
	if a1.Number != 1 || a1.Token != epochSpan || a1.State != AttemptRunning || !a1.LeaseExpiry.Equal(clock.Now().Add(time.Second)) {
		t.Fatalf("first attempt = %+v", a1)
	}
	clock.Advance(900 * time.Millisecond)
	if err := s.RenewLease(ctx, a1.AttemptRef, a1.Token, 0); err != nil {
		t.Fatal(err)
	}
	clock.Advance(900 * time.Millisecond)
	if got, err := s.MarkUnknown(ctx); err != nil || len(got) != 0 {
		t.Fatalf("renewed lease reported expired: %v, %v", got, err)
	}
	clock.Advance(100 * time.Millisecond) // exactly at expiry: expired
	got, err := s.MarkUnknown(ctx)
	if err != nil || len(got) != 1 || got[0].AttemptRef != a1.AttemptRef || got[0].State != AttemptUnknown {
		t.Fatalf("MarkUnknown = %+v, %v", got, err)
	}
	if err := s.RenewLease(ctx, a1.AttemptRef, a1.Token, time.Second); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("renewing an unknown attempt: %v, want ErrLeaseLost", err)
	}

	a2, err := s.StartAttempt(ctx, AttemptSpec{Run: r.ID, Task: "extract", Resource: res, Queued: true})
	if err != nil {
		t.Fatal(err)
	}
	if a2.Number != 2 || a2.Token <= a1.Token || a2.State != AttemptQueued || !a2.Started.IsZero() {
		t.Fatalf("second attempt = %+v", a2)
	}
	if err := s.RenewLease(ctx, a2.AttemptRef, a2.Token, time.Second); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("renewing a queued attempt: %v, want ErrLeaseLost", err)
	}
	a2, err = s.MarkRunning(ctx, a2.AttemptRef, 43, time.Minute)
	if err != nil || a2.State != AttemptRunning || a2.PID != 43 || a2.Started.IsZero() {
		t.Fatalf("MarkRunning = %+v, %v", a2, err)
	}
	if err := s.RenewLease(ctx, a2.AttemptRef, a1.Token, time.Second); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("renewing with another attempt's token: %v, want ErrLeaseLost", err)
	}

	ok := Outcome{State: AttemptSucceeded}
	if err := s.FinishAttempt(ctx, a2.AttemptRef, ok); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishAttempt(ctx, a2.AttemptRef, ok); err != nil {
		t.Errorf("repeating the same outcome: %v", err)
	}
	if err := s.FinishAttempt(ctx, a2.AttemptRef, Outcome{State: AttemptFailed, Class: "schema", ExitCode: 65}); !errors.Is(err, ErrConflict) {
		t.Errorf("changing a finished outcome: %v, want ErrConflict", err)
	}
	// The unknown attempt's process came back and failed: recorded as it is.
	fail := Outcome{State: AttemptFailed, Class: "transient", ExitCode: 75, ErrorTail: "connection reset"}
	if err := s.FinishAttempt(ctx, a1.AttemptRef, fail); err != nil {
		t.Fatal(err)
	}
	atts, err := s.Attempts(ctx, r.ID)
	if err != nil || len(atts) != 2 {
		t.Fatalf("Attempts = %v, %v", atts, err)
	}
	if a := atts[0]; a.State != AttemptFailed || a.Class != "transient" || a.ExitCode != 75 || a.ErrorTail != "connection reset" ||
		a.Worker != "w1" || a.PID != 42 || a.Ended.IsZero() || !a.LeaseExpiry.IsZero() {
		t.Errorf("attempt 1 = %+v", a)
	}

	evs, err := s.Events(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for i, e := range evs {
		if i > 0 && e.Seq <= evs[i-1].Seq {
			t.Errorf("event seq %d after %d", e.Seq, evs[i-1].Seq)
		}
		kinds = append(kinds, e.Kind)
	}
	want := "run.created attempt.started attempt.unknown attempt.started attempt.running attempt.finished attempt.finished"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	if _, err := rawDB(t, s.Path()).Exec(`DELETE FROM events`); err == nil {
		t.Error("deleting events succeeded; the log must be append-only")
	}
}

// publishable records an accepted version for a fresh attempt and returns it.
func publishable(t testing.TB, s Store, run, task, artifact, interval, digest string) Version {
	t.Helper()
	ctx := context.Background()
	a, err := s.StartAttempt(ctx, AttemptSpec{Run: run, Task: task, Resource: "orders@" + interval})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.RecordVersion(ctx, Version{Artifact: artifact, Interval: interval, Digest: digest, Run: run, Task: task,
		Attempt: a.Number, StagingPath: "/staging"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AcceptVersion(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	v.State = VersionAccepted
	return v
}

func TestVersionsAcceptedPerInterval(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "state.db"), nil)
	ctx := context.Background()
	r := newRun(t, s, "2024-01-01")
	v1 := publishable(t, s, r.ID, "clean", "orders_clean", "2024-01-01", "sha256:aa")
	if v1.Token != epochSpan || v1.CodeVersion != "2024.06.1" || v1.Run != r.ID {
		t.Errorf("version = %+v", v1)
	}
	again, err := s.RecordVersion(ctx, Version{Artifact: v1.Artifact, Interval: v1.Interval, Digest: v1.Digest, Run: r.ID, Task: "clean", Attempt: 1})
	if err != nil || again.ID != v1.ID || again.State != VersionAccepted {
		t.Errorf("recording the same version again = %+v, %v", again, err)
	}
	if _, err := s.AcceptedVersion(ctx, "orders_clean", "2024-01-02"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another interval's accepted version satisfied 2024-01-02: %v", err)
	}
	v2 := publishable(t, s, r.ID, "clean", "orders_clean", "2024-01-01", "sha256:bb")
	got, err := s.AcceptedVersion(ctx, "orders_clean", "2024-01-01")
	if err != nil || got.ID != v2.ID {
		t.Errorf("AcceptedVersion = %+v, %v; want the newest attempt's %d", got, err, v2.ID)
	}
	a3, err := s.StartAttempt(ctx, AttemptSpec{Run: r.ID, Task: "clean", Resource: "orders@2024-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	v3, err := s.RecordVersion(ctx, Version{Artifact: "orders_clean", Interval: "2024-01-01", Digest: "sha256:cc", Run: r.ID, Task: "clean", Attempt: a3.Number})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RejectVersion(ctx, v3.ID, "row_count_min: 0 rows, want at least 1"); err != nil {
		t.Fatal(err)
	}
	if err := s.AcceptVersion(ctx, v3.ID); !errors.Is(err, ErrConflict) {
		t.Errorf("accepting a rejected version: %v, want ErrConflict", err)
	}
	if got, _ := s.AcceptedVersion(ctx, "orders_clean", "2024-01-01"); got.ID != v2.ID {
		t.Errorf("a rejected version became the accepted one: %+v", got)
	}
	if _, err := s.RecordVersion(ctx, Version{Artifact: "x", Interval: "i", Digest: "sha256:aa", Run: r.ID, Task: "clean", Attempt: 99}); !errors.Is(err, ErrNotFound) {
		t.Errorf("version of a missing attempt: %v, want ErrNotFound", err)
	}
}

func TestCompareAndSwapPointer(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "state.db"), nil)
	ctx := context.Background()
	r := newRun(t, s, "2024-01-01")
	v1 := publishable(t, s, r.ID, "clean", "orders_clean", "2024-01-01", "sha256:aa")
	v2 := publishable(t, s, r.ID, "clean", "orders_clean", "2024-01-01", "sha256:bb")
	swap := func(v Version, tok int64, unfenced bool) (CASResult, error) {
		return s.CompareAndSwapPointer(ctx, Swap{Sink: "warehouse", Artifact: "orders_clean", Interval: "2024-01-01",
			Version: v.ID, Token: tok, Unfenced: unfenced})
	}

	if res, err := swap(v2, v2.Token, false); err != nil || res.Outcome != Won || res.Previous.Version != 0 {
		t.Fatalf("first swap = %+v, %v", res, err)
	}
	if res, err := swap(v2, v2.Token, false); err != nil || res.Outcome != Idempotent {
		t.Fatalf("same token and version again = %+v, %v", res, err)
	}
	res, err := swap(v1, v1.Token, false)
	if err != nil || res.Outcome != Fenced || res.Pointer.Version != v2.ID || res.Pointer.Token != v2.Token {
		t.Fatalf("stale token = %+v, %v", res, err)
	}
	if _, err := swap(v1, v2.Token, false); !errors.Is(err, ErrConflict) {
		t.Errorf("a token that is not the version's own: %v, want ErrConflict", err)
	}
	p, err := s.Pointer(ctx, "warehouse", "orders_clean", "2024-01-01")
	if err != nil || p.Version != v2.ID || p.Token != v2.Token || p.Unfenced {
		t.Fatalf("pointer = %+v, %v", p, err)
	}
	// fencing = "none": the older version wins anyway, and says so.
	res, err = swap(v1, v1.Token, true)
	if err != nil || res.Outcome != Won || !res.Pointer.Unfenced || res.Previous.Version != v2.ID {
		t.Fatalf("unfenced swap = %+v, %v", res, err)
	}
	staged, err := s.StartAttempt(ctx, AttemptSpec{Run: r.ID, Task: "clean", Resource: "orders@2024-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	sv, err := s.RecordVersion(ctx, Version{Artifact: "orders_clean", Interval: "2024-01-01", Digest: "sha256:dd", Run: r.ID, Task: "clean", Attempt: staged.Number})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := swap(sv, sv.Token, false); !errors.Is(err, ErrConflict) {
		t.Errorf("publishing a version that is not accepted: %v, want ErrConflict", err)
	}
	other := publishable(t, s, r.ID, "clean", "orders_clean", "2024-01-02", "sha256:ee")
	if _, err := swap(other, other.Token, false); !errors.Is(err, ErrConflict) {
		t.Errorf("publishing another interval's version: %v, want ErrConflict", err)
	}

	evs, err := s.Events(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var publishes []string
	for _, e := range evs {
		if strings.HasPrefix(e.Kind, "publish.") {
			publishes = append(publishes, e.Kind)
		}
	}
	if got, want := strings.Join(publishes, " "), "publish.won publish.idempotent publish.fenced publish.won"; got != want {
		t.Errorf("publish events %q, want %q", got, want)
	}
	ps, err := s.Pointers(ctx, "warehouse")
	if err != nil || len(ps) != 1 {
		t.Errorf("Pointers = %v, %v", ps, err)
	}
}

// TestGroupCommitIsolatesFailures sends many writes at once through one
// handle, so they share transactions: each failing write is undone alone and
// reports its own error, every other write commits.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openTest(t, path, nil)
	ctx := context.Background()
	r := newRun(t, s, "2024-01-01")
	const n = 64
	var wg sync.WaitGroup
	toks := make([]int64, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				var a Attempt
				a, errs[i] = s.StartAttempt(ctx, AttemptSpec{Run: r.ID, Task: "t", Resource: "res"})
				toks[i] = a.Token
				return
			}
			// Fails inside the transaction, after the event insert would
			// have happened for a real run.
			_, errs[i] = s.StartAttempt(ctx, AttemptSpec{Run: "missing/run/r1", Task: "t", Resource: "res"})
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i := 0; i < n; i++ {
		if i%2 == 1 {
			if !errors.Is(errs[i], ErrNotFound) {
				t.Errorf("write %d: %v, want ErrNotFound", i, errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("write %d: %v", i, errs[i])
		}
		if seen[toks[i]] {
			t.Errorf("token %d granted twice", toks[i])
		}
		seen[toks[i]] = true
	}
	s.Close()
	s2 := openTest(t, path, nil)
	atts, err := s2.Attempts(ctx, r.ID)
	if err != nil || len(atts) != n/2 {
		t.Fatalf("%d attempts survived, want %d (%v)", len(atts), n/2, err)
	}
	var last int64
	if err := s2.r.QueryRow(`SELECT last FROM tokens WHERE resource = 'res'`).Scan(&last); err != nil || last != epochSpan+n/2-1 {
		t.Errorf("last token %d, %v; want %d: failed writes must not consume tokens", last, err, epochSpan+n/2-1)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s2.NextToken(cancelled, "res"); !errors.Is(err, context.Canceled) {
		t.Errorf("write with a cancelled context: %v", err)
	}
	s2.Close()
	if _, err := s2.NextToken(ctx, "res"); !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: %v, want ErrClosed", err)
	}
}

// TestKill9KeepsGrantedTokens kills a process with SIGKILL while it grants
// tokens: every token it reported is still granted after reopening (the next
// one is higher), and the database passes its integrity check.
func TestKill9KeepsGrantedTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	openTest(t, path, nil).Close()
	for round := 0; round < 3; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=grant-forever", "PIPEC_STORE_TEST_DB="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		var last int64
		for i := 0; i < 50+round*37 && sc.Scan(); i++ {
			last, _ = strconv.ParseInt(sc.Text(), 10, 64)
		}
		cmd.Process.Kill()
		for sc.Scan() { // tokens printed before the kill landed
			last, _ = strconv.ParseInt(sc.Text(), 10, 64)
		}
		cmd.Wait()
		if last == 0 {
			t.Fatal("the child granted nothing")
		}
		s := openTest(t, path, nil)
		next, err := s.NextToken(context.Background(), "shared")
		if err != nil {
			t.Fatal(err)
		}
		if next <= last {
			t.Fatalf("round %d: token %d granted again after kill -9 (child saw %d)", round, next, last)
		}
		if err := s.IntegrityCheck(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}

func TestAbandonRun(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "state.db"), nil)
	ctx := context.Background()
	crashed := newRun(t, s, "2024-01-01")
	res := FenceResource("orders", "2024-01-01")
	done, err := s.StartAttempt(ctx, AttemptSpec{Run: crashed.ID, Task: "extract", Resource: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.FinishAttempt(ctx, done.AttemptRef, Outcome{State: AttemptSucceeded}); err != nil {
		t.Fatal(err)
	}
	running, err := s.StartAttempt(ctx, AttemptSpec{Run: crashed.ID, Task: "clean", Resource: res}) // no lease
	if err != nil {
		t.Fatal(err)
	}
	queued, err := s.StartAttempt(ctx, AttemptSpec{Run: crashed.ID, Task: "load", Resource: res, Queued: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.AbandonRun(ctx, crashed.ID, "pipec died; rerun orders/2024-01-01/r2")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].AttemptRef != running.AttemptRef || got[1].AttemptRef != queued.AttemptRef || got[0].State != AttemptUnknown {
		t.Fatalf("AbandonRun = %+v", got)
	}
	if r, _ := s.GetRun(ctx, crashed.ID); r.State != RunFailed || r.Finished.IsZero() {
		t.Errorf("abandoned run = %+v", r)
	}
	if a, _ := s.GetAttempt(ctx, done.AttemptRef); a.State != AttemptSucceeded {
		t.Errorf("a finished attempt changed: %+v", a)
	}
	rerun := newRun(t, s, "2024-01-01")
	next, err := s.StartAttempt(ctx, AttemptSpec{Run: rerun.ID, Task: "clean", Resource: res})
	if err != nil || next.Token <= queued.Token {
		t.Errorf("rerun attempt token %d, %v; want above %d", next.Token, err, queued.Token)
	}
	evs, _ := s.Events(ctx, crashed.ID)
	if last := evs[len(evs)-1]; last.Kind != EventRunAbandoned || !strings.Contains(string(last.Payload), "pipec died") {
		t.Errorf("last event = %+v", last)
	}
	if _, err := s.AbandonRun(ctx, "nope", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("AbandonRun(nope) = %v", err)
	}
}
