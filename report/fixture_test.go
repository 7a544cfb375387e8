package report

import (
	"path/filepath"
	"testing"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/golden"
)

// The fixture is a fixed set of findings over two small sources. It covers
// what printers get wrong: tabs and non-ASCII text before a range, a range
// spanning lines, a finding with no file, a file name with a comma and a space,
// and messages with characters that workflow commands must escape.
var fixtureSources = Sources{
	"examples/orders/pipeline.hcl": []byte(`pipeline "orders" {
	retry "default" {
		max_attempts = 0
		on           = ["schema"]
	}
  publish "orders_mart" { artifact = "orders_clean", sink = "warehouse" }
  task "näive" { command = ["./x.sh"], outputs = ["tmp"] }
}
`),
	"specs/a b,c.cue": []byte("pipeline: orders: {\n\tsink: s: {type: \"directory\", path: \"/dev/shm/out\", fencing: \"none\"}\n\ttask: t: {env: {PASSWORD: \"hunter2\"}}\n}\n"),
}

var fixtureRules = []Rule{
	{ID: "unbounded-retry", Severity: diag.Error, Summary: "A retry policy with no bound on attempts",
		Help:    "A policy with max_attempts = 0 retries forever.\n\nBad:\n\n    max_attempts = 0\n\nFixed:\n\n    max_attempts = 4\n",
		HelpURI: "https://github.com/pipec/pipec/blob/main/docs/rules/unbounded-retry.md"},
	{ID: "bypassed-validation", Severity: diag.Error, Summary: "A publish that can happen before a check accepted its artifact.",
		Help: "Every path from the producer to a publish must pass a check on the published artifact."},
	{ID: "local-artifact", Severity: diag.Warning, Summary: "An output on worker-local storage",
		Help: "Another worker cannot read /tmp."},
	{ID: "unused-artifact", Severity: diag.Info, Summary: "An artifact nothing reads"},
	{ID: "secret-literal", Severity: diag.Error, Summary: "A credential written in the spec"},
}

func fixtureDiagnostics() diag.Diagnostics {
	hcl := "examples/orders/pipeline.hcl"
	cue := "specs/a b,c.cue"
	rng := func(file string, l1, c1, l2, c2 int) diag.Range {
		return diag.Range{Filename: file, Start: diag.Pos{Line: l1, Column: c1}, End: diag.Pos{Line: l2, Column: c2}}
	}
	ds := diag.Diagnostics{
		{Rule: "unbounded-retry", Severity: diag.Error, Message: `retry policy "default" has max_attempts = 0: it retries forever`,
			Detail: "Set max_attempts to a bound such as 4.", Range: rng(hcl, 3, 3, 3, 19)},
		{Rule: "retry-deterministic", Severity: diag.Error, Message: `retry policy "default" retries class "schema", which is deterministic`,
			Range: rng(hcl, 4, 18, 4, 28)},
		{Rule: "bypassed-validation", Severity: diag.Error, Message: `publish "orders_mart" of "orders_clean" can happen with no check on "orders_clean": 100% unvalidated`,
			Range: rng(hcl, 6, 3, 6, 24)},
		{Rule: "unused-artifact", Severity: diag.Info, Message: `artifact "tmp" is never read or published`,
			Range: rng(hcl, 7, 50, 7, 55)},
		{Rule: "cycle", Severity: diag.Error, Message: "a spanning range", Range: rng(hcl, 2, 2, 5, 3)},
		{Rule: "local-artifact", Severity: diag.Warning, Message: "sink \"s\" writes to /dev/shm/out, which is local to one worker,\nso another worker cannot read it",
			Range: rng(cue, 2, 41, 2, 55)},
		{Rule: "secret-literal", Severity: diag.Error, Message: "PASSWORD holds a literal value",
			Range: rng(cue, 3, 18, 3, 27)},
		{Rule: "syntax", Severity: diag.Error, Message: "cannot read input: permission denied"},
	}
	return ds.Sort()
}

// checkGolden compares got with testdata/NAME (PIPEC_UPDATE_GOLDEN=1 rewrites it).
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}

// fixtureOptions run the fixture as if pipec ran at the root of a repository
// checked out at /src/repo.
func fixtureOptions(tool ToolInfo) SARIFOptions {
	return SARIFOptions{Tool: tool, Rules: fixtureRules, Root: "/src/repo", WorkDir: "/src/repo", Sources: fixtureSources}
}
