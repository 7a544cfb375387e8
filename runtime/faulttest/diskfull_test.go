package faulttest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pipec/pipec/internal/spectest"
	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store/sqlite"
)

// chainHCL is a chain of n tasks, each with an output, a check and a publish
// to its own directory sink, so the state database grows all through a run.
func chainHCL(n int) string { return spectest.Chain{Pipeline: "df", N: n, Daily: true}.HCL() }

// TestStoreFullMidRun is point 11 with a real limit on a real process:
// pipec runs under RLIMIT_FSIZE (prlimit --fsize) a little above the state
// database's size, so SQLite's writes fail with EFBIG partway through the
// run, at a different point for each limit. Each such run must exit 1 (never
// the usage code 2, never killed by SIGXFSZ) with a summary whose store line
// says what failed; every interval link in every sink must show a whole,
// audited version with its manifest (nothing half-published); and the next
// run without the limit must resume and publish everything.
func TestStoreFullMidRun(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) is not installed; .ci/run installs it")
	}
	const n = 30
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.hcl"), []byte(chainHCL(n)), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, ".pipec", "state.db")
	// A state that cannot even be created: a store failure (exit 1), not a
	// usage error, and nothing runs.
	cmd := exec.Command(prlimit, "--fsize=8192:8192", pipecBin, "run", "p.hcl", "--interval", "2024-01-01")
	cmd.Dir = dir
	outb, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(outb), "disk full, a file size limit or a read-only file?") {
		t.Fatalf("creating the state under an 8 KiB limit: %v\n%s", err, outb)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("something was published without a state: %v", err)
	}
	if err := os.RemoveAll(filepath.Join(dir, ".pipec")); err != nil {
		t.Fatal(err)
	}
	if out, code := pipec(t, dir, "run", "p.hcl", "--interval", "2024-01-01"); code != 0 {
		t.Fatalf("first run exited %d:\n%s", code, out)
	}
	hit := 0
	for i, margin := range []int64{6 << 10, 14 << 10, 24 << 10, 36 << 10} {
		day := fmt.Sprintf("2024-01-%02d", i+2)
		fi, err := os.Stat(db)
		if err != nil {
			t.Fatal(err)
		}
		limit := fi.Size() + margin
		cmd := exec.Command(prlimit, fmt.Sprintf("--fsize=%d:%d", limit, limit), pipecBin, "run", "p.hcl", "--interval", day)
		cmd.Dir = dir
		outb, err := cmd.CombinedOutput()
		out := string(outb)
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				t.Fatalf("%s: pipec was killed by %v under the file size limit:\n%s", day, ws.Signal(), out)
			}
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		switch code {
		case 0:
			t.Logf("%s: the limit %d was not reached", day, limit)
		case 1:
			hit++
			if !strings.Contains(out, "  store   the state database failed") {
				t.Errorf("%s: exit 1 without a store line in the summary:\n%s", day, out)
			}
		default:
			t.Fatalf("%s: exit %d under a full store, want 1:\n%s", day, code, out)
		}
		checkWhole(t, dir, day, n)
		// The next run, with room again, resumes and publishes everything.
		out, code = pipec(t, dir, "run", "p.hcl", "--interval", day)
		if code != 0 {
			t.Fatalf("%s: rerun exited %d:\n%s", day, code, out)
		}
		if checkWhole(t, dir, day, n) != n {
			t.Errorf("%s: the rerun did not publish all %d artifacts:\n%s", day, n, out)
		}
		checkPointers(t, db, dir, day, n)
	}
	if hit < 3 {
		t.Errorf("only %d of 4 limited runs hit the limit: the test does not test much", hit)
	}
}

// checkWhole requires every published link of day to name a complete,
// audited version folder with its manifest, and returns how many there are.
func checkWhole(t *testing.T, dir, day string, n int) int {
	t.Helper()
	published := 0
	for i := 0; i < n; i++ {
		d := &sink.Directory{Name: fmt.Sprintf("s%d", i), Path: filepath.Join(dir, "out", fmt.Sprintf("a%d", i))}
		vis, err := d.Visible(day)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatalf("a%d@%s: %v", i, day, err)
		}
		m, err := sink.ReadManifest(vis)
		if err != nil {
			t.Errorf("a%d@%s: visible folder without a manifest: %v", i, day, err)
			continue
		}
		if got, err := sink.ContentDigest(vis); err != nil || got != m.Digest {
			t.Errorf("a%d@%s: content %s (%v), manifest says %s", i, day, got, err, m.Digest)
		}
		if b, err := os.ReadFile(filepath.Join(vis, "a.csv")); err != nil || string(b) != fmt.Sprintf("id\n%d\n", i) {
			t.Errorf("a%d@%s: a.csv = %q, %v", i, day, b, err)
		}
		published++
	}
	return published
}

// checkPointers requires the store's pointers to name what the links show.
func checkPointers(t *testing.T, db, dir, day string, n int) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := 0; i < n; i++ {
		p, err := st.Pointer(context.Background(), "df", fmt.Sprintf("s%d", i), fmt.Sprintf("a%d", i), day)
		if err != nil {
			t.Errorf("a%d@%s: no pointer: %v", i, day, err)
			continue
		}
		v, err := st.GetVersion(context.Background(), p.Version)
		if err != nil {
			t.Fatal(err)
		}
		vis, err := (&sink.Directory{Path: filepath.Join(dir, "out", fmt.Sprintf("a%d", i))}).Visible(day)
		if err != nil || filepath.Base(vis) != sink.VersionName(v) {
			t.Errorf("a%d@%s: link shows %s (%v), store says %s", i, day, filepath.Base(vis), err, sink.VersionName(v))
		}
	}
}
