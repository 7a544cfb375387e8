package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

// pipec workers leaves out a worker gone for more than an hour, and says
// so; --all lists it.
func TestWorkersHidesLongGone(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	register := func(name string, at time.Time, stop bool) {
		st, err := sqlite.Open(ctx, path, sqlite.Options{Clock: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.Register(ctx, queue.WorkerInfo{Name: name, Host: "h", PID: 1, Slots: 1}, time.Minute); err != nil {
			t.Fatal(err)
		}
		if stop {
			if err := st.Deregister(ctx, name); err != nil {
				t.Fatal(err)
			}
		}
	}
	register("old", time.Now().Add(-2*time.Hour), true)
	register("recent", time.Now().Add(-time.Minute), true)
	workers := func(args ...string) string {
		var out, errb bytes.Buffer
		if code := Main(append([]string{"workers", "--state", path}, args...), IO{Stdout: &out, Stderr: &errb, Context: ctx,
			Getenv: func(string) string { return "" }}); code != 0 {
			t.Fatalf("workers: exit %d\n%s", code, errb.String())
		}
		return out.String()
	}
	out := workers()
	if strings.Contains(out, "old  host") || !strings.Contains(out, "recent  host") || !strings.Contains(out, "1 worker(s) gone for more than an hour not shown") {
		t.Fatalf("pipec workers:\n%s", out)
	}
	if out := workers("--all"); !strings.Contains(out, "old  host") {
		t.Fatalf("pipec workers --all:\n%s", out)
	}
}
