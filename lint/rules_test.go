package lint

import (
	"strings"
	"testing"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

// findings lints an HCL snippet (a whole pipeline) and returns the findings of one rule.
func findings(t *testing.T, id, src string, opts Options) diag.Diagnostics {
	t.Helper()
	p, ds := spec.Load(spec.SyntaxHCL, "t.hcl", []byte(src))
	if ds.HasErrors() {
		t.Fatalf("load: %v", ds)
	}
	res, _ := compiler.Compile(p)
	if opts.Now.IsZero() {
		opts.Now = fixedNow
	}
	var out diag.Diagnostics
	for _, d := range Run(res, []byte(src), opts) {
		if d.Rule == id {
			out = append(out, d)
		}
	}
	return out
}

func wantMessage(t *testing.T, ds diag.Diagnostics, parts ...string) {
	t.Helper()
	if len(ds) != 1 {
		t.Fatalf("got %d findings, want 1: %v", len(ds), ds)
	}
	for _, p := range parts {
		if !strings.Contains(ds[0].Message, p) {
			t.Errorf("message %q lacks %q", ds[0].Message, p)
		}
	}
}

func TestCatchupEstimate(t *testing.T) {
	src := `pipeline "cs" {
  schedule {
    every   = "24h"
    start   = "2024-01-01T00:00:00Z"
    catchup = true
  }
  pool "backfill" {
    slots = 2
  }
  task "extract" {
    command = ["./extract.sh"]
    pool    = "backfill"
    timeout = "10m"
  }
}
`
	// 2024 is a leap year: 731 complete daily intervals before 2026-01-01.
	ds := findings(t, "catchup-stampede", src, Options{})
	wantMessage(t, ds, "731 runs (every 24h since 2024-01-01T00:00:00Z)", "≈ 61h", `731 runs ÷ 2 slots of pool "backfill" × 10m`)
	if ds[0].Range.Start.Line != 5 {
		t.Errorf("finding on line %d, want the catchup attribute (5)", ds[0].Range.Start.Line)
	}
	// Now is injectable: two years later, twice the runs.
	ds = findings(t, "catchup-stampede", src, Options{Now: fixedNow.AddDate(2, 0, 0)})
	wantMessage(t, ds, "1461 runs", "≈ 122h (5 days)")

	noPool := strings.Replace(strings.Replace(src, `    pool    = "backfill"`+"\n", "", 1), `"10m"`, `"30m"`, 1)
	wantMessage(t, findings(t, "catchup-stampede", noPool, Options{}), "731 runs", "each up to 30m", "no pool")

	untimed := strings.Replace(src, `    timeout = "10m"`+"\n", "", 1)
	wantMessage(t, findings(t, "catchup-stampede", untimed, Options{}), "731 runs", "add task timeouts")
}

func TestRetryDeterministicSeverity(t *testing.T) {
	src := `pipeline "rd" {
  error "schema" {
    exit_codes    = [65]
    deterministic = true
  }
  error "transient" {
    exit_codes = [75]
  }
  retry "all" {
    max_attempts = 3
  }
  retry "bad" {
    on = ["schema"]
  }
}
`
	ds := findings(t, "retry-deterministic", src, Options{})
	if len(ds) != 2 {
		t.Fatalf("got %v", ds)
	}
	if ds[0].Severity != diag.Warning || !strings.Contains(ds[0].Message, `on = ["transient", "killed", "timeout"]`) {
		t.Errorf("no-filter finding: %s", ds[0])
	}
	if ds[1].Severity != diag.Error || !strings.Contains(ds[1].Message, `"schema", which is marked deterministic`) {
		t.Errorf("deterministic finding: %s", ds[1])
	}
}

func TestFailoverMessages(t *testing.T) {
	task := func(global string) string {
		return `pipeline "fl" {
  retry "once" {
    max_attempts = 1
  }
  task "t" {
    command = ["./x.sh"]
    retry   = "once"
    failover {
      per_worker = 2
      global     = ` + global + `
    }
  }
}
`
	}
	two := Options{Workers: 2}
	wantMessage(t, findings(t, "failover-limits", task("4"), two),
		"global = 4 is never reached on 2 workers with per_worker = 2", "(w1, w2, w1, w2, then waiting for a worker)", "3 of 4 failovers", "set global = 3")
	wantMessage(t, findings(t, "failover-limits", task("2"), two),
		"global = 2 stops the job after 3 starts on 2 workers with per_worker = 2 (w1, w2, w1, then stopped)", "set global = 3")
	if ds := findings(t, "failover-limits", task("3"), two); len(ds) != 0 {
		t.Errorf("exact limits reported: %v", ds)
	}
	// With three workers, global = 3 stops before each had its two starts.
	wantMessage(t, findings(t, "failover-limits", task("3"), Options{Workers: 3}),
		"on 3 workers", "(w1, w2, w3, w1, then stopped)", "set global = 5")
	wantMessage(t, findings(t, "failover-limits", task("0"), Options{Workers: 3}),
		"before 2 of 3 workers ever ran it")
}

func TestSecretMessagesNeverRepeatTheValue(t *testing.T) {
	src := `pipeline "sl" {
  task "t" {
    command = ["./x.sh", "--token", "s3cr3t-value", "https://u:pa55word@host/x"]
    env = {
      DB_PASSWORD = "hunter2-value"
      KEY         = "AKIAIOSFODNN7EXAMPLE"
    }
  }
}
`
	ds := findings(t, "secret-literal", src, Options{})
	if len(ds) != 3 {
		t.Fatalf("got %v", ds)
	}
	for _, d := range ds {
		for _, secret := range []string{"s3cr3t", "pa55word", "hunter2", "AKIAIOSFODNN7EXAMPLE"} {
			if strings.Contains(d.Message, secret) {
				t.Errorf("message repeats the secret: %s", d.Message)
			}
		}
	}
}

func TestSecretKeyNames(t *testing.T) {
	for name, want := range map[string]bool{
		"DB_PASSWORD": true, "password": true, "apiKey": true, "API_KEY": true, "aws-secret-access-key": true,
		"GITHUB_TOKEN": true, "client.secret": true, "PRIVATE_KEY": true,
		"PWD": false, "TOKEN_TTL": false, "SORT_KEY": false, "SECRET_NAME": false, "MODE": false, "": false,
	} {
		if got := secretKey(name); got != want {
			t.Errorf("secretKey(%q) = %v, want %v", name, got, want)
		}
	}
}

// bypassPath is a graph search: a hand-built graph where the publish depends
// on its check and, around it, on the producer through another task.
func TestBypassPath(t *testing.T) {
	g := &compiler.Graph{Pred: map[string][]string{
		"publish.p": {"check.c", "task.side"},
		"check.c":   {"task.prod"},
		"task.side": {"task.prod"},
	}}
	path := bypassPath(g, "publish.p", "task.prod", map[string]bool{"check.c": true})
	if got := strings.Join(path, " -> "); got != "task.prod -> task.side -> publish.p" {
		t.Fatalf("path = %q", got)
	}
	g.Pred["publish.p"] = []string{"check.c"}
	if path := bypassPath(g, "publish.p", "task.prod", map[string]bool{"check.c": true}); path != nil {
		t.Fatalf("found a bypass through the check: %v", path)
	}
}

func TestRunIsDeterministic(t *testing.T) {
	ds1, _ := lintFile(t, "testdata/src/suppression.hcl")
	for range 5 {
		ds2, _ := lintFile(t, "testdata/src/suppression.hcl")
		if len(ds1) != len(ds2) {
			t.Fatal("different findings between runs")
		}
		for i := range ds1 {
			if ds1[i] != ds2[i] {
				t.Fatalf("different findings between runs: %s vs %s", ds1[i], ds2[i])
			}
		}
	}
}

// The pool size comes from Options (pipec lint --workers, the configuration
// file), else from the spec's workers; without either only limits wrong for
// every pool size are reported.
func TestFailoverWorkersSource(t *testing.T) {
	src := func(workers, global string) string {
		return `pipeline "fw" {
  ` + workers + `
  retry "once" {
    max_attempts = 1
  }
  task "t" {
    command = ["./x.sh"]
    retry   = "once"
    timeout = "1m"
    failover {
      per_worker = 2
      global     = ` + global + `
    }
  }
}
`
	}
	// Right on 3 workers, as the spec says: nothing to report.
	if ds := findings(t, "failover-limits", src("workers = 3", "5"), Options{}); len(ds) != 0 {
		t.Errorf("limits right on the spec's 3 workers reported: %v", ds)
	}
	// The option overrides the spec.
	wantMessage(t, findings(t, "failover-limits", src("workers = 3", "5"), Options{Workers: 2}), "on 2 workers", "set global = 3")
	wantMessage(t, findings(t, "failover-limits", src("workers = 2", "5"), Options{}), "on 2 workers")
	// Unknown pool: global = 3 is right on 2 workers, global = 5 on 3.
	for _, g := range []string{"1", "3", "5", "100"} {
		if ds := findings(t, "failover-limits", src("", g), Options{}); len(ds) != 0 {
			t.Errorf("global = %s reported without a pool size: %v", g, ds)
		}
	}
	// Wrong for every pool size: not even one worker gets its two starts.
	wantMessage(t, findings(t, "failover-limits", src("", "0"), Options{}),
		"global = 0 stops the job after 1 start(s), fewer than per_worker = 2", "whatever the number of workers", "at least 1")
}
