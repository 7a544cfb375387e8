package audit

import (
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pipec/pipec/compiler"
)

func intp(n int) *int { return &n }

// version writes files into a fresh directory, as a staged version.
func version(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBuiltinAssertions(t *testing.T) {
	orders := "order_id,customer,amount\n1,ann,10\n2,bob,\n3,cid,7\n"
	tests := []struct {
		name  string
		check compiler.PlanCheck
		files map[string]string
		want  []string // nil: accepted
		// codeVersion is the run's (Options.CodeVersion).
		codeVersion string
	}{
		{
			name:  "accepted csv",
			check: compiler.PlanCheck{RowCountMin: intp(1), RowCountMax: intp(3), Unique: []string{"order_id"}, NotNull: []string{"customer"}, Columns: []string{"amount"}},
			files: map[string]string{"orders.csv": orders, "README.txt": "not data"},
		},
		{
			name:  "row counts over all files",
			check: compiler.PlanCheck{RowCountMin: intp(5), RowCountMax: intp(10)},
			files: map[string]string{"a.csv": orders, "b/c.jsonl": `{"order_id": 4}` + "\n\n" + `{"order_id": 5}`},
		},
		{
			name:  "too few and too many",
			check: compiler.PlanCheck{RowCountMin: intp(4)},
			files: map[string]string{"orders.csv": orders},
			want:  []string{"row_count_min: 3 row(s), want at least 4"},
		},
		{
			name:  "too many",
			check: compiler.PlanCheck{RowCountMax: intp(2)},
			files: map[string]string{"orders.csv": orders},
			want:  []string{"row_count_max: 3 row(s), want at most 2"},
		},
		{
			name:  "empty version",
			check: compiler.PlanCheck{RowCountMin: intp(1)},
			files: map[string]string{"orders.csv": "order_id\n"},
			want:  []string{"row_count_min: 0 row(s), want at least 1"},
		},
		{
			name:  "no data files",
			check: compiler.PlanCheck{RowCountMin: intp(0)},
			files: map[string]string{"orders.parquet": "PAR1"},
			want:  []string{"no CSV (*.csv) or JSON Lines (*.jsonl, *.ndjson) file in the version"},
		},
		{
			name:  "not null",
			check: compiler.PlanCheck{NotNull: []string{"amount", "customer"}},
			files: map[string]string{"orders.csv": orders, "more.jsonl": `{"amount": null, "customer": "x"}` + "\n" + `{"amount": 0, "customer": ""}` + "\n"},
			want: []string{
				`not_null: column "amount" is null in 2 row(s): more.jsonl:1, orders.csv:3`,
			},
		},
		{
			name:  "unique across files and formats",
			check: compiler.PlanCheck{Unique: []string{"order_id"}},
			files: map[string]string{"a.csv": orders, "b.jsonl": `{"order_id": 4}` + "\n" + `{"order_id": "2"}` + "\n" + `{"order_id": 2}` + "\n"},
			want: []string{
				`unique ("order_id"): 2 duplicate row(s): ["2"] at b.jsonl:2 repeats a.csv:3, ["2"] at b.jsonl:3 repeats a.csv:3`,
			},
		},
		{
			name:  "unique combination, examples capped",
			check: compiler.PlanCheck{Unique: []string{"day", "shop"}},
			files: map[string]string{"sales.csv": "day,shop\n1,a\n1,b\n1,a\n1,a\n2,a\n1,b\n1,a\n"},
			want: []string{
				`unique ("day", "shop"): 4 duplicate row(s): ["1","a"] at sales.csv:4 repeats sales.csv:2, ["1","a"] at sales.csv:5 repeats sales.csv:2, ["1","b"] at sales.csv:7 repeats sales.csv:3 (and 1 more)`,
			},
		},
		{
			name:  "missing columns, once per file, no cascade",
			check: compiler.PlanCheck{Columns: []string{"order_id", "region"}, Unique: []string{"region"}, NotNull: []string{"region"}},
			files: map[string]string{"orders.csv": orders, "x.jsonl": `{"order_id": 1, "region": "eu"}` + "\n" + `{"order_id": 2}` + "\n"},
			want: []string{
				`orders.csv has no column "region"`,
				`x.jsonl: column "region" missing in 1 row(s): x.jsonl:2`,
			},
		},
		{
			name:  "malformed csv",
			check: compiler.PlanCheck{RowCountMin: intp(10), Unique: []string{"order_id"}},
			files: map[string]string{"orders.csv": "order_id,customer\n1,ann\n2\n"},
			want:  []string{"orders.csv:3: wrong number of fields"},
		},
		{
			name:  "malformed json lines",
			check: compiler.PlanCheck{RowCountMin: intp(1)},
			files: map[string]string{"orders.jsonl": `{"a": 1}` + "\n[1, 2]\n"},
			want:  []string{"orders.jsonl:2: not a JSON object"},
		},
		{
			name:  "byte order mark",
			check: compiler.PlanCheck{Columns: []string{"order_id"}},
			files: map[string]string{"orders.csv": "\ufefforder_id\n1\n"},
		},
		{
			name:        "code_version_column stamped",
			check:       compiler.PlanCheck{CodeVersionColumn: "code_version"},
			files:       map[string]string{"a.csv": "id,code_version\n1,2024.06.1\n", "b.jsonl": `{"id": 2, "code_version": "2024.06.1"}` + "\n"},
			codeVersion: "2024.06.1",
		},
		{
			name:        "code_version_column: stale, null and missing",
			check:       compiler.PlanCheck{CodeVersionColumn: "code_version"},
			files:       map[string]string{"a.csv": "id,code_version\n1,2024.06.1\n2,2024.05.9\n3,\n", "b.jsonl": `{"id": 4, "code_version": 2024}` + "\n" + `{"id": 5}` + "\n"},
			codeVersion: "2024.06.1",
			want: []string{
				`b.jsonl: column "code_version" missing in 1 row(s): b.jsonl:2`,
				`code_version_column: column "code_version" is not the run's code_version "2024.06.1" in 3 row(s): a.csv:3 ("2024.05.9"), a.csv:4 (null), b.jsonl:1 ("2024")`,
			},
		},
		{
			name:        "code_version_column absent from a csv",
			check:       compiler.PlanCheck{CodeVersionColumn: "code_version"},
			files:       map[string]string{"a.csv": "id\n1\n"},
			codeVersion: "2024.06.1",
			want:        []string{`a.csv has no column "code_version"`},
		},
		{
			name:  "asserts nothing",
			check: compiler.PlanCheck{},
			files: map[string]string{"orders.csv": orders},
			want:  []string{"the check asserts nothing, so it accepts nothing"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check.Name, tt.check.Input = "ok", "orders_clean"
			res, err := Run(context.Background(), tt.check, version(t, tt.files), Options{CodeVersion: tt.codeVersion})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, res.Reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			if res.Accepted != (tt.want == nil) || res.Check != "ok" || res.Artifact != "orders_clean" {
				t.Errorf("result = %+v", res)
			}
		})
	}
}

func TestCommandCheck(t *testing.T) {
	dir := version(t, map[string]string{"orders.csv": "order_id\n1\n"})
	work := t.TempDir()
	script := filepath.Join(work, "check.sh")
	if err := os.WriteFile(script, []byte(`#!/bin/sh
test -f "$PIPEC_CHECK_INPUT/orders.csv" || { echo "no orders in $PIPEC_CHECK_INPUT"; exit 3; }
test "$PIPEC_CHECK_NAME/$PIPEC_CHECK_ARTIFACT" = "ok/orders_clean" || exit 4
test "$#" -eq 0 || { echo "unexpected arguments: $*"; exit 5; }
echo "password=$SECRET"
exit "$WANT_EXIT"
`), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := compiler.PlanCheck{Name: "ok", Input: "orders_clean", Command: []string{"./check.sh"}}
	redact := func(s string) string { return strings.ReplaceAll(s, "hunter2", "***") }
	env := []string{"SECRET=hunter2"}

	res, err := Run(ctx, check, dir, Options{Dir: work, Env: append(env, "WANT_EXIT=0"), Redact: redact})
	if err != nil || !res.Accepted {
		t.Fatalf("passing command = %+v, %v", res, err)
	}
	res, err = Run(ctx, check, dir, Options{Dir: work, Env: append(env, "WANT_EXIT=7"), Redact: redact})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"command ./check.sh: exit code 7\npassword=***"}; res.Accepted || !cmp.Equal(res.Reasons, want) {
		t.Errorf("failing command = %+v, want reasons %q", res, want)
	}
	// Built-in assertions and the command both report.
	both := check
	both.RowCountMin = intp(2)
	res, err = Run(ctx, both, t.TempDir(), Options{Dir: work, Env: append(env, "WANT_EXIT=0")})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Reasons) != 2 || !strings.HasPrefix(res.Reasons[0], "no CSV") || !strings.Contains(res.Reasons[1], "exit code 3") {
		t.Errorf("both kinds = %q", res.Reasons)
	}

	missing := compiler.PlanCheck{Name: "ok", Input: "orders_clean", Command: []string{"./nope.sh"}}
	res, err = Run(ctx, missing, dir, Options{Dir: work})
	if err != nil || res.Accepted || !strings.Contains(res.Reasons[0], "did not start") {
		t.Errorf("missing command = %+v, %v", res, err)
	}
}

func TestCommandCheckTimeoutKillsGroup(t *testing.T) {
	work := t.TempDir()
	pidFile := filepath.Join(work, "child.pid")
	// The check leaves a grandchild sleeping; the timeout must kill it too.
	check := compiler.PlanCheck{Name: "slow", Input: "a", Command: []string{"sh", "-c", `sleep 60 & echo $! > child.pid; wait`}}
	res, err := Run(context.Background(), check, t.TempDir(), Options{Dir: work, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted || len(res.Reasons) != 1 || !strings.Contains(res.Reasons[0], "timed out after 200ms") {
		t.Fatalf("slow command = %+v", res)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	// The grandchild was sent SIGKILL with its group; it dies as soon as the
	// kernel schedules it (gone from /proc, or a zombie until init reaps it).
	// Without the group kill it would sleep for a minute.
	pid := strings.TrimSpace(string(b))
	for deadline := time.Now().Add(30 * time.Second); ; {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(st), ") Z") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %s still alive: %s", pid, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunAll(t *testing.T) {
	dir := version(t, map[string]string{"orders.csv": "order_id\n1\n1\n"})
	ok, results, err := RunAll(context.Background(), []compiler.PlanCheck{
		{Name: "count", RowCountMin: intp(1)},
		{Name: "keys", Unique: []string{"order_id"}},
	}, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ok || len(results) != 2 || !results[0].Accepted || results[1].Accepted {
		t.Errorf("RunAll = %v, %+v", ok, results)
	}
}

func TestOnlyRegularFilesAreRead(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.csv")
	if err := os.WriteFile(outside, []byte("id\n1\n2\n3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := version(t, map[string]string{"orders.jsonl": `{"id": 1}` + "\r\n" + `{"id": 2}`})
	if err := os.Symlink(outside, filepath.Join(dir, "link.csv")); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), compiler.PlanCheck{Name: "n", RowCountMax: intp(2)}, dir, Options{})
	if err != nil || !res.Accepted {
		t.Errorf("a linked file outside the version was read: %+v, %v", res, err)
	}
}

// FuzzAssertions feeds arbitrary bytes as a CSV and a JSON Lines file: the
// audit never panics, and gives the same verdict twice.
func FuzzAssertions(f *testing.F) {
	f.Add("order_id,amount\n1,2\n1,\n", `{"order_id": 1}`+"\n{}\n")
	f.Add("\"unterminated\n", "[1]\n")
	f.Add("a,b\n1\n", `{"a": {"b": [1, null]}}`)
	check := compiler.PlanCheck{Name: "f", RowCountMin: intp(1), RowCountMax: intp(3), Unique: []string{"order_id", "amount"},
		NotNull: []string{"amount"}, Columns: []string{"order_id"}}
	f.Fuzz(func(t *testing.T, csvText, jsonl string) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "a.csv"), []byte(csvText), 0o644)
		os.WriteFile(filepath.Join(dir, "b.jsonl"), []byte(jsonl), 0o644)
		r1, err := Run(context.Background(), check, dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		r2, _ := Run(context.Background(), check, dir, Options{})
		if !cmp.Equal(r1, r2) {
			t.Fatalf("verdict changed between runs:\n%v\n%v", r1, r2)
		}
		if r1.Accepted != (len(r1.Reasons) == 0) {
			t.Fatalf("accepted %v with reasons %q", r1.Accepted, r1.Reasons)
		}
	})
}

// A CSV field longer than the record bound (a hostile output) rejects the
// version with a reason instead of being held whole in memory: the audit's
// heap stays within a few times the bound, not a multiple of the field.
func TestHugeFieldBounded(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "big.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("id,blob\n1,\""); err != nil {
		t.Fatal(err)
	}
	chunk := strings.Repeat("x", 1<<20)
	for range 100 { // a 100 MiB field
		if _, err := f.WriteString(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.WriteString("\"\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	res, err := Run(context.Background(), compiler.PlanCheck{Name: "count", RowCountMin: intp(1)}, dir, Options{})
	goruntime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted || !strings.Contains(strings.Join(res.Reasons, "\n"), "longer than") {
		t.Fatalf("result %+v, want rejected for a record too long", res)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 10*maxRecord {
		t.Fatalf("the audit allocated %d MiB for one 100 MiB field, want at most %d MiB", grew>>20, 10*maxRecord>>20)
	}
}
