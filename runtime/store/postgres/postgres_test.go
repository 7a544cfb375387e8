package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pipec/pipec/internal/failover"
	"github.com/pipec/pipec/internal/pgtest"
	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/postgres"
	"github.com/pipec/pipec/runtime/store/storetest"
)

// pg is the package's PostgreSQL server.
var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pg.Main(m)) }

// open opens a store on a fresh schema of srv.
func open(t testing.TB, srv *pgtest.Server, clock store.Clock) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), srv.NewSchema(t), postgres.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance runs the backends' conformance suite (the store, run
// slots, the queue and the capabilities) against a real PostgreSQL server,
// each check on its own schema; every handle of a check has its own
// connection pool, as workers on several machines do.
func TestConformance(t *testing.T) {
	srv := pg.Server(t)
	storetest.Run(t, func(t *testing.T, clock store.Clock) func(*testing.T) storetest.Handle {
		url := srv.NewSchema(t)
		return func(t *testing.T) storetest.Handle {
			s, err := postgres.Open(context.Background(), url, postgres.Options{Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	})
}

// TestTokensAcrossConnections grants tokens of one resource from several
// store handles at once, each with its own connection pool (as workers on
// several machines): all distinct, each caller's strictly increasing, and,
// since a grant is durable before it returns, a grant that returned before
// another began is smaller.
func TestTokensAcrossConnections(t *testing.T) {
	srv := pg.Server(t)
	url := srv.NewSchema(t)
	ctx := context.Background()
	const handles, callers, each = 4, 3, 40
	stores := make([]*postgres.Store, handles)
	for i := range stores {
		s, err := postgres.Open(ctx, url, postgres.Options{MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	var wg sync.WaitGroup
	got := make([][]int64, handles*callers)
	errs := make([]error, handles*callers)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[i%handles]
			for range each {
				tok, err := s.NextToken(ctx, "orders@2024-01-01")
				if err != nil {
					errs[i] = err
					return
				}
				got[i] = append(got[i], tok)
			}
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		for j, tok := range got[i] {
			if j > 0 && tok <= got[i][j-1] {
				t.Errorf("caller %d: token %d after %d", i, tok, got[i][j-1])
			}
			if seen[tok] {
				t.Errorf("token %d granted twice", tok)
			}
			seen[tok] = true
		}
	}
	if len(seen) != handles*callers*each {
		t.Fatalf("%d tokens, want %d", len(seen), handles*callers*each)
	}
	var highest int64
	for tok := range seen {
		highest = max(highest, tok)
	}
	// A new handle (a restarted worker) continues above every grant.
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	next, err := s.NextToken(ctx, "orders@2024-01-01")
	if err != nil || next <= highest {
		t.Fatalf("token after restart = %d, %v; want above %d", next, err, highest)
	}
}

// TestLeasesOnServerClock: with no test clock, lease times come from the
// server's clock_timestamp() (bracketed by two reads of it), and an expired
// lease is reported once the server's clock, not the caller's, passed it.
func TestLeasesOnServerClock(t *testing.T) {
	srv := pg.Server(t)
	s := open(t, srv, nil)
	ctx := context.Background()
	serverNow := func() time.Time {
		var now time.Time
		if err := s.Pool().QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
			t.Fatal(err)
		}
		return now
	}
	r, err := s.CreateRun(ctx, store.NewRun{Pipeline: "orders", Interval: "2024-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	before := serverNow()
	a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: r.ID, Task: "extract", Resource: "orders@2024-01-01", Lease: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	after := serverNow()
	if a.Started.Before(before) || a.Started.After(after) {
		t.Fatalf("started %s not within the server's clock [%s, %s]", a.Started, before, after)
	}
	if got := a.LeaseExpiry.Sub(a.Started); got != 50*time.Millisecond {
		t.Fatalf("lease expiry - started = %s, want 50ms", got)
	}
	// Wait on the server's clock (not ours) until the lease is over.
	for !serverNow().After(a.LeaseExpiry) {
		time.Sleep(5 * time.Millisecond)
	}
	got, err := s.MarkUnknown(ctx)
	if err != nil || len(got) != 1 || got[0].AttemptRef != a.AttemptRef {
		t.Fatalf("MarkUnknown = %+v, %v", got, err)
	}
	if err := s.RenewLease(ctx, a.AttemptRef, a.Token, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("renewing after expiry: %v, want ErrLeaseLost", err)
	}
}

// TestMigrateConcurrently opens one empty schema from several handles at
// once: the advisory lock makes exactly one migrate, the others see it done.
func TestMigrateConcurrently(t *testing.T) {
	srv := pg.Server(t)
	url := srv.NewSchema(t)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(context.Background(), url, postgres.Options{})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	out, err := srv.Psql(context.Background(), "", fmt.Sprintf("SELECT count(*) FROM %s.schema_version", schemaOf(t, url)))
	if err != nil || out != fmt.Sprintf("%d\n", postgres.SchemaVersion()) {
		t.Fatalf("schema_version rows = %q, %v", out, err)
	}
}

// TestEventsAppendOnly: the database itself refuses to edit the event log.
func TestEventsAppendOnly(t *testing.T) {
	srv := pg.Server(t)
	s := open(t, srv, nil)
	ctx := context.Background()
	if _, err := s.AppendEvent(ctx, store.Event{Run: "x", Kind: "note"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE events SET kind = 'forged'`); err == nil {
		t.Fatal("UPDATE of events succeeded")
	}
	if _, err := s.Pool().Exec(ctx, `DELETE FROM events`); err == nil {
		t.Fatal("DELETE of events succeeded")
	}
}

// TestOpenErrorHidesPassword: a bad URL's error never shows its password.
func TestOpenErrorHidesPassword(t *testing.T) {
	for _, url := range []string{
		"postgres://u:hunter2secret@/db?host=/nonexistent-socket-dir&connect_timeout=1",
		"postgres://u:hunter2secret@host:notaport/db",
	} {
		_, err := postgres.Open(context.Background(), url, postgres.Options{})
		if err == nil {
			t.Fatalf("Open(%q) succeeded", url)
		}
		if s := err.Error(); strings.Contains(s, "hunter2secret") {
			t.Fatalf("error shows the password: %s", s)
		}
	}
}

// schemaOf is the search_path of a pgtest schema URL.
func schemaOf(t *testing.T, url string) string {
	i := strings.Index(url, "search_path=")
	if i < 0 {
		t.Fatalf("no search_path in %s", url)
	}
	return strings.SplitN(url[i+len("search_path="):], "&", 2)[0]
}

// TestRunLeaseAcrossHandles: several handles (machines) create a run of one
// interval at once with a lease: exactly one gets it, the others are told
// who holds it; once it finishes, the next creator gets the interval.
func TestRunLeaseAcrossHandles(t *testing.T) {
	srv := pg.Server(t)
	url := srv.NewSchema(t)
	ctx := context.Background()
	const n = 6
	stores := make([]*postgres.Store, n)
	for i := range stores {
		s, err := postgres.Open(ctx, url, postgres.Options{MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	var wg sync.WaitGroup
	runs := make([]store.Run, n)
	errs := make([]error, n)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i], errs[i] = stores[i].CreateRun(ctx, store.NewRun{Pipeline: "orders", Interval: "2024-01-01",
				Owner: store.RunOwner{Host: fmt.Sprintf("m%d", i), PID: 100 + i}, Lease: time.Minute})
		}()
	}
	wg.Wait()
	var winner store.Run
	won := 0
	for i, err := range errs {
		var busy *store.RunBusyError
		switch {
		case err == nil:
			won++
			winner = runs[i]
		case errors.As(err, &busy) && errors.Is(err, store.ErrRunBusy):
		default:
			t.Fatalf("creator %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d runs got the interval, want 1 (%v)", won, errs)
	}
	for i, err := range errs {
		var busy *store.RunBusyError
		if errors.As(err, &busy) && busy.Run != winner.ID {
			t.Errorf("creator %d told %s holds it, want %s", i, busy.Run, winner.ID)
		}
	}
	if err := stores[0].RenewRunLease(ctx, winner.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := stores[1].FinishRun(ctx, winner.ID, store.RunSucceeded); err != nil {
		t.Fatal(err)
	}
	if err := stores[2].RenewRunLease(ctx, winner.ID, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("renewing a finished run's lease: %v, want ErrLeaseLost", err)
	}
	next, err := stores[3].CreateRun(ctx, store.NewRun{Pipeline: "orders", Interval: "2024-01-01", Lease: time.Minute})
	if err != nil || next.ID == winner.ID {
		t.Fatalf("after the holder finished: %+v, %v", next, err)
	}
}

// TestGrantsAfterServerCrash: tokens granted before a crash of the server
// (immediate shutdown, then crash recovery) are all below every token
// granted after it, by the same handle and by a new one, although the
// grants themselves commit asynchronously: crash recovery empties the
// unlogged mark of the handle's epoch, and the handle records a new one.
func TestGrantsAfterServerCrash(t *testing.T) {
	srv := pgtest.Start(t) // its own server: this test crashes it
	url := srv.NewSchema(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var before int64
	for range 50 {
		if before, err = s.NextToken(ctx, "r"); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Crash(); err != nil {
		t.Fatal(err)
	}
	// The pool's connections died with the server; the next calls reconnect.
	var after int64
	for try := 0; ; try++ {
		after, err = s.NextToken(ctx, "r")
		if err == nil || try > 20 {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if after <= before || after/1_000_000_000 <= before/1_000_000_000 {
		t.Fatalf("token after the crash %d, before %d: want a higher epoch", after, before)
	}
	other, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if tok, err := other.NextToken(ctx, "r"); err != nil || tok <= after {
		t.Fatalf("a new handle's token %d, %v: want above %d", tok, err, after)
	}
}

// A run's creation (CreateRun, Submit) and its end (FinishRun, CancelRun)
// outlive a crash of the server right after them (an immediate shutdown,
// then crash recovery, which takes back the last asynchronous commits): a
// Temporal workflow ends its run once, and a run whose end the crash took
// back stayed running for good; a run reported submitted was gone.
func TestRunsAfterServerCrash(t *testing.T) {
	srv := pgtest.Start(t) // its own server: this test crashes it
	ctx := context.Background()
	s, err := postgres.Open(ctx, srv.NewSchema(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	create := func(iv string) string {
		r, err := s.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: iv, CodeVersion: "v"})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	finished, cancelled := create("2024-01-01"), create("2024-01-02")
	// A synchronous commit (a new handle's first grant records its epoch)
	// puts those runs on disk whatever their own commits were.
	if _, err := s.NextToken(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, finished, store.RunSucceeded); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CancelRun(ctx, cancelled, "enough", "test"); err != nil {
		t.Fatal(err)
	}
	created := create("2024-01-03")
	sub, err := s.Submit(ctx, queue.Submission{Run: store.NewRun{Pipeline: "q", Interval: "2024-01-01", CodeVersion: "v"},
		Plan: []byte(`{}`), BaseDir: "/spec", Interval: "2024-01-01", Tasks: []queue.Task{{Name: "t"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Crash(); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]store.RunState{finished: store.RunSucceeded, cancelled: store.RunCancelled,
		created: store.RunRunning, sub.ID: store.RunRunning} {
		var r store.Run
		for try := 0; ; try++ { // the pool's connections died with the server
			if r, err = s.GetRun(ctx, id); !errors.Is(err, store.ErrUnreachable) || try > 20 {
				break
			}
		}
		if err != nil || r.State != want {
			t.Errorf("run %s after the crash: %s, %v; want %s", id, r.State, err, want)
		}
	}
}

// TestStoppedClientReleasesLocks: a client that stops inside a transaction
// (a SIGSTOPped worker) holding a row lock is cut off by the server after
// IdleInTransaction, so the others go on instead of waiting for it forever.
func TestStoppedClientReleasesLocks(t *testing.T) {
	srv := pg.Server(t)
	url := srv.NewSchema(t)
	ctx := context.Background()
	stopped, err := postgres.Open(ctx, url, postgres.Options{IdleInTransaction: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer stopped.Close()
	other, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.NextToken(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	tx, err := stopped.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT last FROM tokens WHERE resource = 'r' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// The holder now says nothing more, as a stopped process would; the
	// other's grant waits for the lock, then gets it once the server ended
	// the silent session.
	if _, err := other.NextToken(ctx, "r"); err != nil {
		t.Fatalf("grant behind a stopped client: %v", err)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("the silent transaction committed after the server should have ended it")
	}
}

// An event's time never goes backwards against its sequence number, even
// when the server's clock steps back.
func TestEventTimeNeverGoesBack(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2024, 1, 2, 3, 0, 0, 0, time.UTC)
	s := open(t, pg.Server(t), func() time.Time { return now })
	if _, err := s.AppendEvent(ctx, store.Event{Run: "r", Kind: "run.created"}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(-time.Hour) // the clock steps back
	if _, err := s.AppendEvent(ctx, store.Event{Run: "r", Kind: "run.finished"}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, "r")
	if err != nil || len(evs) != 2 {
		t.Fatalf("events %+v, %v", evs, err)
	}
	if evs[1].Time.Before(evs[0].Time) {
		t.Fatalf("event %d at %s, after event %d at %s", evs[1].Seq, evs[1].Time, evs[0].Seq, evs[0].Time)
	}
}

// Every statement of the queue that writes events keeps their times in
// order when the clock steps back before it: a submit, claims with and
// without an attempt, an attempt's end read before it is written and one
// written as the worker left it (each with the DAG's step and the next
// claim), and the run's end.
func TestEventTimeNeverGoesBackInTheQueue(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2024, 1, 2, 3, 0, 0, 0, time.UTC)
	s := open(t, pg.Server(t), func() time.Time {
		now = now.Add(-time.Minute) // the clock steps back at each transaction
		return now
	})
	run := submitWith(t, s, queue.Task{Name: "a"}, queue.Task{Name: "b", Needs: []string{"a"}},
		queue.Task{Name: "c", Needs: []string{"b"}}, queue.Task{Name: "d", Needs: []string{"c"}})
	spec := store.AttemptSpec{Worker: "w1", Host: "h", Boot: "boot"}
	cl, err := s.ClaimStarting(ctx, "w1", time.Minute, spec)
	if err != nil || cl == nil || cl.Attempt == nil {
		t.Fatalf("claim: %+v, %v", cl, err)
	}
	ran := &store.Running{Process: store.Process{PID: 4242, Host: "h", Boot: "boot"}}
	for i, was := range []bool{true, false, true} {
		a := *cl.Attempt
		e := &queue.AttemptEnd{Ref: a.AttemptRef, Outcome: store.Outcome{State: store.AttemptSucceeded, Ran: ran}}
		if was {
			e.Outcome.Was = &a
		}
		if cl, err = s.FinishClaiming(ctx, "w1", cl.Ref, queue.Result{Ending: queue.Succeeded, End: e}, time.Minute, spec); err != nil || cl == nil || cl.Attempt == nil {
			t.Fatalf("finish %d: next %+v, %v", i, cl, err)
		}
	}
	a := *cl.Attempt
	if err := s.Finish(ctx, "w1", cl.Ref, queue.Result{Ending: queue.Succeeded, End: &queue.AttemptEnd{Ref: a.AttemptRef,
		Outcome: store.Outcome{State: store.AttemptSucceeded, Ran: ran, Was: &a}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.GetRun(ctx, run.ID); err != nil || r.State != store.RunSucceeded {
		t.Fatalf("the run: %+v, %v; want succeeded", r, err)
	}
	evs, err := s.Events(ctx, run.ID)
	if err != nil || len(evs) < 4*5 {
		t.Fatalf("%d events, %v; want five a task at least", len(evs), err)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Time.Before(evs[i-1].Time) {
			t.Fatalf("event %d (%s) at %s, before event %d (%s) at %s", evs[i].Seq, evs[i].Kind, evs[i].Time,
				evs[i-1].Seq, evs[i-1].Kind, evs[i-1].Time)
		}
	}
}

// A claim reads the ready tasks, not every task left to do, whatever the
// table's statistics say. Here they were taken (ANALYZE, as autovacuum
// does) while every task in the table was done, then a 3,000-task chain was
// submitted: to the planner a task left to do is a rarity, and the index
// of those left to do looks empty. A claim that walked that index would
// read all 3,000 (and a run of n tasks n²/2 rows over its claims).
func TestAClaimReadsOnlyReadyTasks(t *testing.T) {
	ctx := context.Background()
	s := open(t, pg.Server(t), nil)
	chain := func(interval string) queue.Submission {
		sub := queue.Submission{Run: store.NewRun{Pipeline: "p", Interval: interval, CodeVersion: "1"},
			Plan: []byte(`{}`), BaseDir: "/spec", Interval: interval, Tasks: []queue.Task{{Name: "t0000"}}}
		for i := 1; i < 3000; i++ {
			sub.Tasks = append(sub.Tasks, queue.Task{Name: fmt.Sprintf("t%04d", i), Needs: []string{fmt.Sprintf("t%04d", i-1)}})
		}
		return sub
	}
	done, err := s.Submit(ctx, chain("2024-01-01"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `UPDATE work SET state = 'succeeded', waiting_on = 0 WHERE run = $1`, done.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE work`); err != nil {
		t.Fatal(err)
	}
	next, err := s.Submit(ctx, chain("2024-01-02"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register(ctx, queue.WorkerInfo{Name: "w1", Host: "h", PID: 1, Slots: 1}, time.Minute); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if read := workRowsRead(t, tx, postgres.CandidatesSQL(), "4, 'w1'"); read > 100 {
		t.Fatalf("the claim read %.0f rows of work for one ready task", read)
	}
	// And whether the run has a task left is a probe, not a walk.
	if read := workRowsRead(t, tx, postgres.RunEndSQL(), "'"+next.ID+"', 'succeeded', 'failed', 'run.finished'"); read > 10 {
		t.Fatalf("whether the run has a task left read %.0f rows of work", read)
	}
}

// A claim reads a page of the ready tasks, however many are ready: with
// 3,000 ready in one run and 3,000 in another (a backfill submitted at
// once), the plan the store runs walks the ready tasks in the claim's
// order and stops, where it read and sorted all 6,000 for a page of four;
// on a table the server has no statistics of yet (a new store's first big
// submit) and on one it has analyzed since.
func TestAClaimReadsAPageOfManyReadyTasks(t *testing.T) {
	ctx := context.Background()
	s := open(t, pg.Server(t), nil)
	var runs []string
	for _, interval := range []string{"2024-01-01", "2024-01-02"} {
		sub := queue.Submission{Run: store.NewRun{Pipeline: "p", Interval: interval, CodeVersion: "1"},
			Plan: []byte(`{}`), BaseDir: "/spec", Interval: interval}
		for i := range 3000 {
			sub.Tasks = append(sub.Tasks, queue.Task{Name: fmt.Sprintf("t%04d", i)})
		}
		r, err := s.Submit(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r.ID)
	}
	if err := s.Register(ctx, queue.WorkerInfo{Name: "w1", Host: "h", PID: 1, Slots: 1}, time.Minute); err != nil {
		t.Fatal(err)
	}
	onBothStatistics(t, s, func(stats string, tx pgx.Tx) {
		if read := workRowsRead(t, tx, postgres.CandidatesSQL(), "4, 'w1'"); read > 40 {
			t.Fatalf("after %q the claim read %.0f rows of work for a page of 4", stats, read)
		}
		// Nothing blocked or claimed: whether the run has a task left
		// asks for a ready one, a probe too.
		if left := workRowsRead(t, tx, postgres.RunEndSQL(), "'"+runs[0]+"', 'succeeded', 'failed', 'run.finished'"); left > 10 {
			t.Fatalf("after %q whether the run has a task left read %.0f rows of work", stats, left)
		}
	})
}

// onBothStatistics calls read in a transaction of a fresh connection, on
// the statistics of work as the test's writes left them (none taken since),
// then again after ANALYZE work. Each transaction is rolled back and its
// connection closed: its statement cache no longer matches the server's.
func onBothStatistics(t *testing.T, s *postgres.Store, read func(stats string, tx pgx.Tx)) {
	t.Helper()
	ctx := context.Background()
	for _, stats := range []string{"", "ANALYZE work"} {
		if stats != "" {
			if _, err := s.Pool().Exec(ctx, stats); err != nil {
				t.Fatal(err)
			}
		}
		conn, err := s.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() { conn.Hijack().Close(ctx) }()
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			read(stats, tx)
		}()
	}
}

// TestAFinishProbesItsOwnClaim: with 400 tasks of one run claimed by 100
// workers of 4 slots (a backfill's run), a visit's end reads its own
// claimed row, not the run's other claims, on a table whose statistics
// predate the claims and on one analyzed since.
func TestAFinishProbesItsOwnClaim(t *testing.T) {
	ctx := context.Background()
	s := open(t, pg.Server(t), nil)
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("t%04d", i)
	}
	r := submitTasks(t, s, names...)
	if _, err := s.Pool().Exec(ctx, "ANALYZE work"); err != nil {
		t.Fatal(err)
	}
	// 100 workers of 4 slots each.
	var last, worker string
	for w := range 100 {
		worker = fmt.Sprintf("w%03d", w)
		if err := s.Register(ctx, queue.WorkerInfo{Name: worker, Host: "h", PID: w + 1, Slots: 4}, time.Minute); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			c, err := s.Claim(ctx, worker, time.Minute)
			if err != nil || c == nil {
				t.Fatalf("claim: %v, %v", c, err)
			}
			last = c.Task
		}
	}
	onBothStatistics(t, s, func(stats string, tx pgx.Tx) {
		read := workRowsRead(t, tx, postgres.StepSQL(), "'"+r.ID+"', '"+last+"', '"+worker+"', 'succeeded', 'work.succeeded', '{}', false, ''")
		// Its row and its update; at most its worker's other claims.
		if read > 8 {
			t.Fatalf("with statistics from before the claims (then %q), a finish read %.0f rows of work", stats, read)
		}
	})
}

// workRowsRead is how many rows of work the plan the store runs for query
// (prepared once, generic: Open's settings) read, executed in tx with args
// (SQL literals).
func workRowsRead(t *testing.T, tx pgx.Tx, query, args string) float64 {
	t.Helper()
	ctx := context.Background()
	if _, err := tx.Exec(ctx, `DEALLOCATE ALL`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `PREPARE q AS `+query); err != nil {
		t.Fatal(err)
	}
	var plan string
	if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE q(`+args+`)`).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	var nodes []struct{ Plan explainNode }
	if err := json.Unmarshal([]byte(plan), &nodes); err != nil || len(nodes) != 1 {
		t.Fatalf("plan %s: %v", plan, err)
	}
	read := nodes[0].Plan.workRowsRead()
	if read > 10 {
		t.Logf("%.0f rows of work read by\n%s\nplan:\n%s", read, query, plan)
	}
	return read
}

// explainNode is a node of EXPLAIN (ANALYZE, FORMAT JSON).
type explainNode struct {
	Type     string        `json:"Node Type"`
	Index    string        `json:"Index Name"`
	Relation string        `json:"Relation Name"`
	Rows     float64       `json:"Actual Rows"`
	Loops    float64       `json:"Actual Loops"`
	Removed  float64       `json:"Rows Removed by Filter"`
	Rechecks float64       `json:"Rows Removed by Index Recheck"`
	Plans    []explainNode `json:"Plans"`
}

// workRowsRead is how many rows of work the nodes under n read: those they
// returned and those their filters dropped, and the entries a bitmap read
// from an index of work (a bitmap is read whole, however few rows of it
// the heap scan above returns).
func (n explainNode) workRowsRead() float64 {
	read := 0.0
	if n.Relation == "work" || n.Type == "Bitmap Index Scan" && strings.HasPrefix(n.Index, "work") {
		read = (n.Rows + n.Removed + n.Rechecks) * max(n.Loops, 1)
	}
	for _, c := range n.Plans {
		read += c.workRowsRead()
	}
	return read
}

// FollowStatus reads only the rows written since its last read, and still
// misses none: not a row written by a transaction that was open during
// the last read and committed after it (its writer is below the read's
// xmax but not visible to it), nor one of a transaction begun after.
func TestFollowStatusSeesLateCommits(t *testing.T) {
	ctx := context.Background()
	s := open(t, pg.Server(t), nil)
	r := submitTasks(t, s, "a", "b", "c")
	var memo queue.StatusMemo
	reasons := func() string {
		t.Helper()
		rs, err := s.FollowStatus(ctx, r.ID, &memo)
		if err != nil {
			t.Fatal(err)
		}
		var b []string
		for _, ts := range rs.Tasks {
			b = append(b, ts.Task+"="+ts.Reason)
		}
		return strings.Join(b, " ")
	}
	write := func(tx pgx.Tx, task, reason string) {
		t.Helper()
		if _, err := tx.Exec(ctx, `UPDATE work SET reason = $1 WHERE run = $2 AND task = $3`, reason, r.ID, task); err != nil {
			t.Fatal(err)
		}
	}
	// committed writes in a transaction of its own, begun and committed now.
	committed := func(task, reason string) {
		t.Helper()
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		write(tx, task, reason)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := reasons(); got != "a= b= c=" {
		t.Fatalf("first read: %s", got)
	}
	// An older transaction writes a, stays open across the next read, and
	// commits after it; a younger one writes b and commits before it.
	older, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer older.Rollback(ctx)
	write(older, "a", "late")
	committed("b", "early")
	if got := reasons(); got != "a= b=early c=" {
		t.Fatalf("with a's writer open: %s", got)
	}
	if err := older.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := reasons(); got != "a=late b=early c=" {
		t.Fatalf("after a's writer committed: %s (its row was missed)", got)
	}
	committed("c", "later")
	if got := reasons(); got != "a=late b=early c=later" {
		t.Fatalf("after a write begun after the last read: %s", got)
	}
	if got := reasons(); got != "a=late b=early c=later" {
		t.Fatalf("with nothing written: %s", got)
	}
}

// submitTasks submits a run of tasks that need nothing.
func submitTasks(t testing.TB, s *postgres.Store, names ...string) store.Run {
	t.Helper()
	once := failover.Limits{Attempts: 1, Global: failover.NoLimit, NoFailover: true}
	sub := queue.Submission{
		Run: store.NewRun{Pipeline: "orders", Interval: "2024-01-01",
			IntervalStart: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), IntervalEnd: time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC),
			CodeVersion: "v1", PlanDigest: "sha256:plan"},
		Plan: []byte(`{"pipeline":"orders"}`), BaseDir: "/specs/orders", Interval: "2024-01-01",
	}
	for _, n := range names {
		sub.Tasks = append(sub.Tasks, queue.Task{Name: n, Limits: once})
	}
	r, err := s.Submit(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// BenchmarkFollowStatus is what pipec submit --wait costs at each look at
// a 10,000-task run of which 20 tasks changed since the last: Status (every
// row read and decoded, the reference) beside FollowStatus (the rows
// written since the last look read, and decoded when changed).
//
//	go test -run '^$' -bench FollowStatus ./runtime/store/postgres/
func BenchmarkFollowStatus(b *testing.B) {
	ctx := context.Background()
	s := open(b, pg.Server(b), nil)
	names := make([]string, 10000)
	for i := range names {
		names[i] = fmt.Sprintf("t%05d", i)
	}
	r := submitTasks(b, s, names...)
	step := 0
	change := func(b *testing.B) {
		b.StopTimer()
		defer b.StartTimer()
		for range 20 {
			step++
			if _, err := s.Pool().Exec(ctx, `UPDATE work SET reason = $1 WHERE run = $2 AND task = $3`,
				fmt.Sprint(step), r.ID, names[step*7919%len(names)]); err != nil {
				b.Fatal(err)
			}
		}
	}
	read := func(b *testing.B, look func() (queue.RunStatus, error)) {
		for b.Loop() {
			change(b)
			rs, err := look()
			if err != nil || len(rs.Tasks) != len(names) {
				b.Fatalf("%d tasks, %v", len(rs.Tasks), err)
			}
		}
	}
	b.Run("Status", func(b *testing.B) {
		read(b, func() (queue.RunStatus, error) { return s.Status(ctx, r.ID) })
	})
	b.Run("FollowStatus", func(b *testing.B) {
		var memo queue.StatusMemo
		read(b, func() (queue.RunStatus, error) { return s.FollowStatus(ctx, r.ID, &memo) })
	})
}

// TestPipelinedDurableCommitsSynchronously: a pipelined transaction that
// must survive a crash of the server (a pointer swap) commits with
// synchronous_commit on, as txDurable's; the others asynchronously.
func TestPipelinedDurableCommitsSynchronously(t *testing.T) {
	s := open(t, pg.Server(t), nil)
	for durable, want := range map[bool]string{true: "on", false: "off"} {
		got, err := s.PipelinedCommitSetting(context.Background(), durable)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("durable %v: synchronous_commit is %q, want %q", durable, got, want)
		}
	}
}

// A restart closes every pooled connection; a write right after it (before
// the pool would ping a connection idle that long) used to take a closed
// one and fail ("broken pipe"), failing a task whose end it recorded. A
// write that failed before sending anything is tried again on another
// connection: nothing of it can have committed.
func TestWriteRightAfterRestart(t *testing.T) {
	srv := pgtest.Start(t) // its own server: this test restarts it
	st := open(t, srv, nil)
	ctx := context.Background()
	for i := range 10 {
		if _, err := st.CreateRun(ctx, store.NewRun{Pipeline: "before", Interval: fmt.Sprintf("2024-01-%02d", i+1)}); err != nil {
			t.Fatal(err) // a pooled connection, used a moment ago
		}
		if err := srv.Restart(0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // the server is up again
		if _, err := st.CreateRun(ctx, store.NewRun{Pipeline: "after", Interval: fmt.Sprintf("2024-01-%02d", i+1)}); err != nil {
			t.Fatalf("a write right after restart %d: %v", i+1, err)
		}
	}
	// While the server is down, a write fails as the state's reach
	// (store.ErrUnreachable: a worker hands its task back), not as a
	// refusal of what it asked.
	restarted := make(chan error, 1)
	go func() { restarted <- srv.Restart(time.Second) }()
	time.Sleep(300 * time.Millisecond)
	_, err := st.CreateRun(ctx, store.NewRun{Pipeline: "down", Interval: "2024-01-01"})
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	if !errors.Is(err, store.ErrUnreachable) {
		t.Fatalf("a write while the server is down: %v, want store.ErrUnreachable", err)
	}
}

// Close returns on a server that stopped answering (frozen with SIGSTOP,
// its connections open). A connection whose call was given up is closed
// by asking the server to cancel it first, which pgx waits 15 seconds for:
// a pipec stopped on such a server waited that long more to exit.
func TestCloseOnAFrozenServer(t *testing.T) {
	srv := pgtest.Start(t) // its own server: this test freezes it
	s, err := postgres.Open(context.Background(), srv.NewSchema(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRun(t.Context(), "p/2024-01-01/r1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	thaw := srv.Frozen(t)
	defer thaw()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := s.GetRun(ctx, "p/2024-01-01/r1"); err == nil {
		t.Fatal("a frozen server answered")
	}
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second): // Close's bound is 2 s; pgx's own wait 15 s
		t.Fatal("Close waits for a frozen server")
	}
}

// A read after a restart answers: the pool's connections from before it
// are closed, and a read sent on one fails before its first row; it is
// sent again on another. It failed before, as "the state database does
// not answer", with the server up: a row (GetRun), rows (Events), and a
// look of submit --wait (FollowStatus, a batch), and listening for a
// run's end or for work (RunEnded, Wakeups). An attempt or a version read
// by its key (GetAttempt, which a task's lease watch reads, and
// GetVersion, which a sink reads) failed so too.
func TestReadAfterRestart(t *testing.T) {
	srv := pgtest.Start(t) // its own server: this test restarts it
	ctx := t.Context()
	s, err := postgres.Open(ctx, srv.NewSchema(t), postgres.Options{WaitForServer: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, err := s.Submit(ctx, queue.Submission{Run: store.NewRun{Pipeline: "p", Interval: "2024-01-01"},
		Plan: []byte(`{"pipeline":"p"}`), Interval: "2024-01-01", Tasks: []queue.Task{{Name: "a", Limits: failover.Limits{Attempts: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	var memo queue.StatusMemo
	for _, read := range []struct {
		name string
		read func() error
	}{
		{"a row", func() error { _, err := s.GetRun(ctx, run.ID); return err }},
		{"an attempt", func() error { return found(s.GetAttempt(ctx, store.AttemptRef{Run: run.ID, Task: "a", Number: 1})) }},
		{"a version", func() error { return found(s.GetVersion(ctx, 1)) }},
		{"rows", func() error {
			events, err := s.Events(ctx, run.ID)
			if err == nil && len(events) == 0 {
				err = errors.New("no events")
			}
			return err
		}},
		{"listening", func() error {
			lctx, stop := context.WithCancel(ctx)
			defer stop()
			_, err := s.RunEnded(lctx, run.ID)
			return err
		}},
		{"a follower's look", func() error {
			rs, err := s.FollowStatus(ctx, run.ID, &memo)
			if err == nil && len(rs.Tasks) != 1 {
				err = fmt.Errorf("tasks %+v", rs.Tasks)
			}
			return err
		}},
	} {
		if err := read.read(); err != nil {
			t.Fatal(err)
		}
		if err := srv.Restart(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := read.read(); err != nil {
			t.Errorf("%s, read after a restart: %v", read.name, err)
		}
	}
}

// found is a read's error, but for ErrNotFound: the read was answered.
func found[T any](_ T, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// A restart that ends a session under a statement (a fast shutdown: the
// waiting statement fails with 57P01) fails its transaction before its
// COMMIT ran: nothing of it committed, so it is run again once the server
// is back (Options.WaitForServer). It failed the write before, and with it
// a local run's task. Each case holds, in another session, what one shape
// of transaction waits for: a statement of its own round trip, a pipelined
// batch before the one that carries the COMMIT, and a statement in the
// batch that carries it (which the server skips, COMMIT included, once a
// statement before it failed).
func TestRestartUnderAStatement(t *testing.T) {
	srv := pgtest.Start(t) // its own server: this test restarts it
	url := srv.NewSchema(t)
	ctx := t.Context()
	s, err := postgres.Open(ctx, url, postgres.Options{WaitForServer: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, err := s.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: "2024-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "clean", Resource: store.FenceResource("p", "2024-01-01")})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.RecordVersion(ctx, store.Version{Artifact: "clean", Interval: "2024-01-01", Digest: "sha256:" + strings.Repeat("0", 64),
		Run: run.ID, Task: "clean", Attempt: a.Number, Location: "p/clean/0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		hold  string // the statement that holds what the call waits for
		arg   any
		call  func() error
		check func() error
	}{{
		name: "a transaction's statement (FinishRun)",
		hold: "SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", arg: run.ID,
		call: func() error { return s.FinishRun(ctx, run.ID, store.RunSucceeded) },
		check: func() error {
			got, err := s.GetRun(ctx, run.ID)
			if err == nil && got.State != store.RunSucceeded {
				err = fmt.Errorf("run %+v", got)
			}
			return err
		},
	}, {
		name: "a statement in the batch with the COMMIT (AcceptVersion)",
		hold: "SELECT 1 FROM versions WHERE id = $1 FOR UPDATE", arg: v.ID,
		call: func() error { return s.AcceptVersion(ctx, v.ID) },
		check: func() error {
			got, err := s.GetVersion(ctx, v.ID)
			if err == nil && got.State != store.VersionAccepted {
				err = fmt.Errorf("version %+v", got)
			}
			return err
		},
	}, {
		name: "a batch before the COMMIT's (CompareAndSwapPointer)",
		hold: "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", arg: "pointer\x1fp\x1fwarehouse\x1fclean\x1f2024-01-01",
		call: func() error {
			res, err := s.CompareAndSwapPointer(ctx, store.Swap{Pipeline: "p", Sink: "warehouse", Artifact: "clean", Interval: "2024-01-01", Version: v.ID, Token: v.Token})
			if err == nil && res.Outcome != store.Won && res.Outcome != store.Idempotent { // Idempotent: its first run committed
				err = fmt.Errorf("swap %+v", res)
			}
			return err
		},
		check: func() error {
			got, err := s.Pointer(ctx, "p", "warehouse", "clean", "2024-01-01")
			if err == nil && got.Version != v.ID {
				err = fmt.Errorf("pointer %+v", got)
			}
			return err
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			holder, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Close(context.WithoutCancel(ctx))
			lock, err := holder.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lock.Exec(ctx, c.hold, c.arg); err != nil {
				t.Fatal(err)
			}
			ended := make(chan error, 1)
			go func() { ended <- c.call() }()
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
				var waiting int
				if err := holder.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name = 'pipec'").Scan(&waiting); err != nil {
					t.Fatal(err)
				}
				if waiting == 1 {
					break
				}
				select {
				case err := <-ended:
					t.Fatalf("the call ended before the restart: %v", err)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatal("the call never waited for the lock")
				}
			}
			if err := srv.Restart(500 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-ended:
				if err != nil {
					t.Fatalf("its statement ended by the restart: %v", err)
				}
			case <-time.After(2 * time.Minute):
				t.Fatal("the call did not return")
			}
			if err := c.check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A connection the server refuses for a reason no restart ends (a database
// or a role that does not exist) is said at once, as such: not waited for
// as a server that is restarting (Options.WaitForServer), and not called
// unreachable. It was waited for (30 s for pipec's commands) and then said
// "the state database does not answer".
func TestRefusedConnectionIsNotWaitedFor(t *testing.T) {
	srv := pg.Server(t)
	for _, tc := range []struct{ url, says string }{
		{srv.URL("nosuchdb"), `database "nosuchdb" does not exist`},
		{strings.Replace(srv.URL(""), "postgres@", "nosuchrole@", 1), `role "nosuchrole" does not exist`},
	} {
		start := time.Now()
		s, err := postgres.Open(context.Background(), tc.url, postgres.Options{WaitForServer: time.Minute})
		if err == nil {
			s.Close()
			t.Fatalf("%s: opened", tc.says)
		}
		if errors.Is(err, store.ErrUnreachable) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want the server's refusal, not unreachable", tc.says, err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s: said after %s: waited for as a restart", tc.says, d.Round(time.Second))
		}
	}
}

// TestPoolSizeFromTheURL: a URL's pool_max_conns bounds the connections a
// store holds on the server, its listener's among them, and a store
// listening for wakeups with a pool of MinConns still answers many callers
// at once; a pool too small to listen and write is refused when opened.
func TestPoolSizeFromTheURL(t *testing.T) {
	srv := pg.Server(t)
	url := srv.NewSchema(t)
	if _, err := postgres.Open(context.Background(), url+"&pool_max_conns=1", postgres.Options{}); err == nil ||
		!strings.Contains(err.Error(), "pool_max_conns=1 is below 2") {
		t.Fatalf("pool_max_conns=1: %v, want it refused", err)
	}
	for _, tc := range []struct {
		param string
		most  int
	}{
		{"&pool_max_conns=2", 2},
		{"", postgres.DefaultMaxConns},
	} {
		s, err := postgres.Open(context.Background(), url+tc.param, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, err := s.Wakeups(ctx); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Go(func() {
				for range 200 {
					if _, err := s.GetRun(ctx, "none"); !errors.Is(err, store.ErrNotFound) {
						errs <- err
						return
					}
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		held := 0
		for busy := true; busy; {
			out, err := srv.Psql(ctx, "postgres", "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pipec'")
			if err != nil {
				t.Fatal(err)
			}
			n, _ := strconv.Atoi(strings.TrimSpace(out))
			held = max(held, n)
			select {
			case <-done:
				busy = false
			default:
			}
		}
		close(errs)
		for err := range errs {
			t.Errorf("pool %q: %v", tc.param, err)
		}
		t.Logf("pool %q: %d connections", tc.param, held)
		cancel()
		s.Close()
		if held > tc.most || held < 2 {
			t.Errorf("pool %q: the server saw %d connections of the store, want 2 to %d", tc.param, held, tc.most)
		}
	}
}
