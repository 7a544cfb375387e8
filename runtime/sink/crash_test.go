package sink

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

// childEnv makes the test binary a publisher process (see TestMain).
const childEnv = "PIPEC_SINK_TEST_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(publishForever(dir))
	}
	if dir := os.Getenv(s3ChildEnv); dir != "" {
		os.Exit(publishStopped(dir))
	}
	os.Exit(m.Run())
}

// publishForever produces and publishes versions of one interval in the
// fixture directory dir until it is killed, printing each published token.
func publishForever(dir string) int {
	ctx := context.Background()
	f := &fixture{dir: dir, db: filepath.Join(dir, ".pipec", "state.db")}
	st, err := sqlite.Open(ctx, f.db, sqlite.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	f.st = st
	// A run of its own, as a rerun after a crash would have.
	f.run, err = st.CreateRun(ctx, store.NewRun{Pipeline: "orders", Interval: "2024-01-01", CodeVersion: "c"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	d := &Directory{Name: "warehouse", Path: filepath.Join(dir, "warehouse", "orders"), Fencing: FencingToken, Store: st}
	for i := 0; ; i++ {
		v, err := f.tryProduce(st, "clean", "2024-01-01", map[string]string{
			"part-0.csv": fmt.Sprintf("run %s version %d\n", f.run.ID, i),
			"part-1.csv": fmt.Sprintf("run %s version %d\n", f.run.ID, i),
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		res, err := d.Publish(ctx, v)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(res.Outcome, v.Token)
	}
}

// TestKill9DuringPublish kills a publishing process with SIGKILL at random
// moments, 10 times. After each kill, one ReconcileAll makes the visible
// version the one the store's pointer names, whole; no token the killed
// process saw published is ever above the pointer; temporary links are gone;
// the database passes its integrity check.
func TestKill9DuringPublish(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := f.sink(t, f.st, FencingToken)
	rng := rand.New(rand.NewPCG(4, 2))
	for round := 0; round < 10; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+f.dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		var seen int64
		for n := 3 + rng.IntN(5); n > 0; n-- {
			line, ok := <-lines
			if !ok {
				cmd.Wait()
				t.Fatalf("round %d: publisher ended: %s", round, stderr.String())
			}
			var outcome string
			var tok int64
			fmt.Sscan(line, &outcome, &tok)
			seen = tok
		}
		// Somewhere inside the next publish: copying, swapping or linking.
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		cmd.Process.Kill()
		for line := range lines {
			var outcome string
			fmt.Sscan(line, &outcome, &seen)
		}
		cmd.Wait()

		if _, err := d.ReconcileAll(ctx); err != nil {
			t.Fatalf("round %d: reconcile: %v", round, err)
		}
		p, err := f.st.Pointer(ctx, "orders", "warehouse", "orders_clean", "2024-01-01")
		if err != nil {
			t.Fatal(err)
		}
		if p.Token < seen {
			t.Fatalf("round %d: pointer token %d below the published %d", round, p.Token, seen)
		}
		v, err := f.st.GetVersion(ctx, p.Version)
		if err != nil {
			t.Fatal(err)
		}
		vis, err := d.Visible("2024-01-01")
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if filepath.Base(vis) != VersionName(v) {
			t.Fatalf("round %d: visible %s, store says %s", round, filepath.Base(vis), VersionName(v))
		}
		if got, err := ContentDigest(vis); err != nil || got != v.Digest {
			t.Fatalf("round %d: visible copy digest %s (%v), accepted %s", round, got, err, v.Digest)
		}
		if stale, _ := filepath.Glob(filepath.Join(d.Path, ".link-*")); len(stale) > 0 {
			t.Fatalf("round %d: temporary links left: %v", round, stale)
		}
	}
	if err := f.st.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
}
