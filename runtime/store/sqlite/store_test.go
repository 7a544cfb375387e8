package sqlite

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
	"syscall"
	"testing"
	"time"

	pclock "github.com/pipec/pipec/runtime/clock"
	"github.com/pipec/pipec/runtime/store"
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

func openTest(t testing.TB, path string, clock store.Clock) *Store {
	t.Helper()
	opt := Options{Clock: clock}
	if clock != nil {
		opt.LeaseClock = pclock.Wall(clock)
	}
	s, err := Open(context.Background(), path, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newRun(t testing.TB, s store.Store, interval string) store.Run {
	t.Helper()
	r, err := s.CreateRun(context.Background(), store.NewRun{
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
	if got.ID != "orders/2024-01-01/r1" || got.State != store.RunRunning || got.CodeVersion != "2024.06.1" ||
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

// A state path that names a device or a named pipe is refused at once, by
// name: SQLite would take /dev/null for a full disk, and a pipe would hang it.
func TestOpenRefusesSpecialFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "state.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]string{os.DevNull: "a device", fifo: "a named pipe"} {
		_, err := Open(context.Background(), path, Options{})
		if want := path + " is " + kind + "; the state must be a regular file"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s): err = %v, want %q", path, err, want)
		}
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
		if epoch := last / store.EpochSpan; epoch != int64(round+1) {
			t.Errorf("round %d: token %d is of epoch %d, want %d", round, last, epoch, round+1)
		}
		other, err := s.NextToken(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(round+1) * store.EpochSpan; other != want {
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
	if err != nil || first != store.EpochSpan {
		t.Fatalf("first token %d, %v; want %d", first, err, store.EpochSpan)
	}
	if _, err := rawDB(t, path).Exec(`UPDATE tokens SET last = ? WHERE resource = 'r'`, 2*store.EpochSpan-1); err != nil {
		t.Fatal(err)
	}
	next, err := s.NextToken(ctx, "r")
	if err != nil || next != 2*store.EpochSpan {
		t.Fatalf("token past the epoch = %d, %v; want %d", next, err, 2*store.EpochSpan)
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
				var a store.Attempt
				a, errs[i] = s.StartAttempt(ctx, store.AttemptSpec{Run: r.ID, Task: "t", Resource: "res"})
				toks[i] = a.Token
				return
			}
			// Fails inside the transaction, after the event insert would
			// have happened for a real run.
			_, errs[i] = s.StartAttempt(ctx, store.AttemptSpec{Run: "missing/run/r1", Task: "t", Resource: "res"})
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i := 0; i < n; i++ {
		if i%2 == 1 {
			if !errors.Is(errs[i], store.ErrNotFound) {
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
	if err := s2.r.QueryRow(`SELECT last FROM tokens WHERE resource = 'res'`).Scan(&last); err != nil || last != store.EpochSpan+n/2-1 {
		t.Errorf("last token %d, %v; want %d: failed writes must not consume tokens", last, err, store.EpochSpan+n/2-1)
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

// TestEventsAppendOnly: the database itself refuses to edit the event log.
func TestEventsAppendOnly(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "state.db"), nil)
	newRun(t, s, "2024-01-01")
	db := rawDB(t, s.Path())
	if _, err := db.Exec(`DELETE FROM events`); err == nil {
		t.Error("deleting events succeeded")
	}
	if _, err := db.Exec(`UPDATE events SET kind = 'x'`); err == nil {
		t.Error("updating events succeeded")
	}
}

// TestPanickingWriteFreesTheHandle: a write that panics fails its batch and
// panics on its caller's goroutine, and the handle keeps working.
func TestPanickingWriteFreesTheHandle(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "state.db"), nil)
	ctx := context.Background()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic was swallowed")
			}
		}()
		s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO tokens (resource, last) VALUES ('half', 1)`); err != nil {
				return err
			}
			panic("bug")
		})
	}()
	if _, err := s.NextToken(ctx, "r"); err != nil {
		t.Fatalf("the handle is stuck after a panic: %v", err)
	}
	var n int
	if err := s.r.QueryRow(`SELECT COUNT(*) FROM tokens WHERE resource = 'half'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the panicking write was committed: %d rows, %v", n, err)
	}
}

// TestCommitModes pins the durability scheme: a durable write and a handle's
// first grant (which records its epoch) run with synchronous=FULL (2), other
// grants and writes with NORMAL (1).
func TestCommitModes(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "state.db"), nil)
	ctx := context.Background()
	syncOf := func(mode commitMode) int {
		t.Helper()
		var n int
		if err := s.write(ctx, mode, func(ctx context.Context, tx *wtx) error {
			return tx.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&n)
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		what string
		mode commitMode
		want int
	}{
		{"first grant", grants, 2},
		{"later grant", grants, 1},
		{"durable", durable, 2},
		{"normal", normal, 1},
	} {
		if got := syncOf(c.mode); got != c.want {
			t.Errorf("%s: synchronous = %d, want %d", c.what, got, c.want)
		}
	}
}

// An event's time never goes backwards against its sequence number, even
// when the clock steps back (NTP, a suspended machine).
func TestEventTimeNeverGoesBack(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2024, 1, 2, 3, 0, 0, 0, time.UTC)
	st, err := Open(ctx, filepath.Join(t.TempDir(), "state.db"), Options{Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.AppendEvent(ctx, store.Event{Run: "r", Kind: "run.created"}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(-time.Hour) // the clock steps back
	if _, err := st.AppendEvent(ctx, store.Event{Run: "r", Kind: "run.finished"}); err != nil {
		t.Fatal(err)
	}
	evs, err := st.Events(ctx, "r")
	if err != nil || len(evs) != 2 {
		t.Fatalf("events %+v, %v", evs, err)
	}
	if evs[1].Time.Before(evs[0].Time) {
		t.Fatalf("event %d at %s, after event %d at %s", evs[1].Seq, evs[1].Time, evs[0].Seq, evs[0].Time)
	}
}
