package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// TestServerStateHasNoPassword: what tasks get as PIPEC_STATE under a
// server's state keeps where the state is and drops every password.
func TestServerStateHasNoPassword(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://pipec:s3cret@db.internal:5432/pipec?sslmode=require", "postgres://pipec@db.internal:5432/pipec?sslmode=require"},
		{"postgresql://db/pipec?password=s3cret&sslpassword=s3cret&application_name=x", "postgresql://db/pipec?application_name=x"},
		{"postgres://pipec@/pipec?host=/run/pg", "postgres://pipec@/pipec?host=%2Frun%2Fpg"},
		{"host=/run/pg user=u password=s3cret dbname=d", "host=/run/pg user=u dbname=d"},
		{"host = db port=5432 password='s3cret s3cret' sslpassword=s3cret dbname='my db'", "host=db port=5432 dbname='my db'"},
	} {
		loc, err := store.ParseLocation(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := serverState(loc); got != c.want || strings.Contains(got, "s3cret") {
			t.Errorf("serverState(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := serverState(store.Location{Value: "x/state.db", Path: "x/state.db"}); got != "" {
		t.Errorf("a file state gave %q", got)
	}
}

// TestHeartbeatThroughTheFile: under a server's state pipec heartbeat never
// opens the database; it advances the heartbeat file, reports a lost lease
// (exit 1) when the runtime marked the file, and is a usage error without
// a heartbeat file.
func TestHeartbeatThroughTheFile(t *testing.T) {
	dir := t.TempDir()
	hb := filepath.Join(dir, "1")
	if err := os.WriteFile(hb, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(hb, old, old); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		// Nothing listens there: opening it would fail the command.
		"PIPEC_STATE":  "postgres://pipec@127.0.0.1:1/none?connect_timeout=1",
		"PIPEC_RUN_ID": "p/2024-01-01/r1", "PIPEC_TASK": "long", "PIPEC_ATTEMPT": "1", "PIPEC_TOKEN": "1000000001",
		"PIPEC_HEARTBEAT": hb,
	}
	beat := func() (int, string) {
		var stderr bytes.Buffer
		io := IO{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(k string) string { return env[k] },
			Environ: func() []string { return nil }}
		code := Main([]string{"heartbeat"}, io)
		return code, stderr.String()
	}
	if code, errs := beat(); code != 0 {
		t.Fatalf("heartbeat: exit %d: %s", code, errs)
	}
	st, err := os.Stat(hb)
	if err != nil || !st.ModTime().After(old.Add(time.Minute)) {
		t.Fatalf("the heartbeat file did not advance: %v %v", st, err)
	}
	if err := os.WriteFile(hb, []byte("lost\n"), 0o600); err != nil { // as the runtime marks it
		t.Fatal(err)
	}
	if code, errs := beat(); code != ExitFindings || !strings.Contains(errs, "lease lost for long attempt 1 (token 1000000001)") {
		t.Fatalf("heartbeat of a lost lease: exit %d: %s", code, errs)
	}
	if err := os.Remove(hb); err != nil {
		t.Fatal(err)
	}
	if code, errs := beat(); code != ExitFindings || !strings.Contains(errs, "lease lost") {
		t.Fatalf("heartbeat without its file: exit %d: %s", code, errs)
	}
	delete(env, "PIPEC_HEARTBEAT")
	if code, errs := beat(); code != ExitUsage || !strings.Contains(errs, "PIPEC_HEARTBEAT is not set") {
		t.Fatalf("heartbeat without a heartbeat block: exit %d: %s", code, errs)
	}
}

// TestHeartbeatBeforeTheStartIsRecorded: a task that runs pipec heartbeat at
// once can beat before the runtime recorded its process (the attempt still
// queued, with the task's token): that is no lost lease. Another token, or
// an attempt that ended, is.
func TestHeartbeatBeforeTheStartIsRecorded(t *testing.T) {
	ctx := context.Background()
	path, st, r, a := newQueuedAttempt(t)
	defer st.Close()
	beat := func(token int64) (int, string) {
		env := map[string]string{"PIPEC_STATE": path, "PIPEC_RUN_ID": r.ID, "PIPEC_TASK": "long", "PIPEC_ATTEMPT": "1",
			"PIPEC_TOKEN": strconv.FormatInt(token, 10)}
		var stderr bytes.Buffer
		code := Main([]string{"heartbeat"}, IO{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(k string) string { return env[k] },
			Environ: func() []string { return nil }})
		return code, stderr.String()
	}
	if code, errs := beat(a.Token); code != 0 {
		t.Fatalf("heartbeat before the start was recorded: exit %d: %s", code, errs)
	}
	if code, errs := beat(a.Token + 1); code != ExitFindings || !strings.Contains(errs, "lease lost") {
		t.Fatalf("heartbeat with another token: exit %d: %s", code, errs)
	}
	if _, err := st.MarkRunning(ctx, a.AttemptRef, os.Getpid(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if code, errs := beat(a.Token); code != 0 {
		t.Fatalf("heartbeat of a running attempt: exit %d: %s", code, errs)
	}
	if err := st.FinishAttempt(ctx, a.AttemptRef, store.Outcome{State: store.AttemptSucceeded}); err != nil {
		t.Fatal(err)
	}
	if code, errs := beat(a.Token); code != ExitFindings || !strings.Contains(errs, "lease lost") {
		t.Fatalf("heartbeat of an ended attempt: exit %d: %s", code, errs)
	}
}

// startRecordedMeanwhile is the state a beat meets when the runtime records
// the task's start (MarkRunning) just after refusing the beat's renewal of
// the still-queued attempt, and before the beat reads the attempt.
type startRecordedMeanwhile struct {
	store.Store
	recorded bool
}

func (s *startRecordedMeanwhile) RenewLease(ctx context.Context, ref store.AttemptRef, token int64, lease time.Duration) error {
	err := s.Store.RenewLease(ctx, ref, token, lease)
	if errors.Is(err, store.ErrLeaseLost) && !s.recorded {
		s.recorded = true
		if _, merr := s.Store.MarkRunning(ctx, ref, os.Getpid(), time.Minute); merr != nil {
			return merr
		}
	}
	return err
}

// A beat whose renewal was refused while the attempt was queued, and which
// then finds it running with its token (the start recorded in between), is
// no lost lease: the lease is renewed (a worker run failed so, the task's
// first beat saying "lease lost" 7 ms after its start was recorded).
func TestHeartbeatAsTheStartIsRecorded(t *testing.T) {
	ctx := context.Background()
	_, st, _, a := newQueuedAttempt(t)
	defer st.Close()
	meanwhile := &startRecordedMeanwhile{Store: st}
	if err := renewBeat(ctx, meanwhile, a.AttemptRef, a.Token); err != nil || !meanwhile.recorded {
		t.Fatalf("beat as the start was recorded: %v (recorded %v)", err, meanwhile.recorded)
	}
	got, err := st.GetAttempt(ctx, a.AttemptRef)
	if err != nil || got.State != store.AttemptRunning {
		t.Fatalf("attempt %+v, %v", got, err)
	}
	if err := renewBeat(ctx, st, a.AttemptRef, a.Token+1); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("beat with another token: %v, want the lease lost", err)
	}
}
