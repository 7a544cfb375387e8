package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/tracked"
)

const repoRoot = "../.."

// build compiles pipec and pipec-lint from this tree into dir.
func build(t *testing.T, dir string) (pipec, pipecLint string) {
	t.Helper()
	pipec, pipecLint = filepath.Join(dir, "pipec"), filepath.Join(dir, "pipec-lint")
	for _, b := range [][2]string{{pipec, "../pipec"}, {pipecLint, "."}} {
		out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput()
		if err != nil {
			t.Fatalf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	return pipec, pipecLint
}

type outcome struct {
	stdout, stderr string
	code           int
}

func runIn(t *testing.T, dir, path string, env []string, stdin string, args ...string) outcome {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return outcome{out.String(), errb.String(), code}
}

// TestSameAsPipecLint: `pipec-lint ARGS` prints what `pipec lint ARGS`
// prints, byte for byte, with the same exit code, on every HCL example and
// lint test spec in every format, on folders, standard input, suppressions,
// colour and the error paths. The runs pipec-lint must finish alone (HCL
// only, no usage error) are made with no pipec anywhere it could find one, so
// they cannot have been handed over; the others (CUE, usage errors, --help)
// with pipec beside it, as go install leaves them.
func TestSameAsPipecLint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pipec")
	}
	bin := t.TempDir()
	pipec, pipecLint := build(t, bin)
	alone := filepath.Join(t.TempDir(), "pipec-lint")
	if err := os.Link(pipecLint, alone); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	base := []string{"HOME=" + empty, "NO_COLOR=", "TERM=dumb"}
	withPipec := append([]string{"PATH=" + empty}, base...) // pipec is found beside pipec-lint
	noPipec := append([]string{"PATH=" + empty}, base...)

	// A copy of the examples and lint specs, with a Terraform file, a
	// configuration that ignores a folder and suppresses a rule.
	work := t.TempDir()
	for _, d := range []string{"examples", "lint/testdata"} {
		tracked.Copy(t, filepath.Join(repoRoot, d), filepath.Join(work, d))
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("infra/main.hcl", "resource \"aws_s3_bucket\" \"b\" {\n  bucket = \"pipeline\"\n}\n")
	write("hcl/a.hcl", readRepo(t, "examples/orders/pipeline.hcl"))
	write("hcl/b/broken.hcl", readRepo(t, "examples/broken/cycle.hcl"))
	write("hcl/legacy/old.hcl", readRepo(t, "examples/broken/missing-artifact.hcl"))
	write("hcl/.pipec.yaml", "ignore:\n  - legacy/\n")
	write("binary.hcl", "pipeline \"x\" {\x00}\n")

	type run struct {
		args  []string
		stdin string
		dir   string
		alone bool // pipec-lint must not need pipec
	}
	var runs []run
	var specs []string
	for _, pat := range []string{"examples/*/*.hcl", "lint/testdata/src/*.hcl", "lint/testdata/golden/specs/*.hcl"} {
		m, _ := filepath.Glob(filepath.Join(work, pat))
		for _, f := range m {
			rel, _ := filepath.Rel(work, f)
			specs = append(specs, rel)
		}
	}
	if len(specs) < 20 {
		t.Fatalf("only %d HCL specs found", len(specs))
	}
	for _, f := range specs {
		for _, format := range []string{"text", "json", "sarif", "github"} {
			runs = append(runs, run{args: []string{"--format", format, "--now", "2026-01-01T00:00:00Z", f}, alone: true})
		}
	}
	src := readRepo(t, "examples/broken/cycle.hcl")
	runs = append(runs,
		run{args: []string{"examples/orders/pipeline.hcl", "examples/broken/cycle.hcl", "infra/main.hcl", "--skip-non-specs"}, alone: true},
		run{args: []string{"--strict", "examples/orders/pipeline.hcl"}, alone: true},
		run{args: []string{"--disable", "heartbeat-lease,unused-artifact", "examples/orders/pipeline.hcl"}, alone: true},
		run{args: []string{"--workers", "3", "--format", "json", "examples/orders/pipeline.hcl"}, alone: true},
		run{args: []string{"--color", "always", "examples/broken/cycle.hcl"}, alone: true},
		run{args: []string{"--format", "sarif", "."}, dir: "hcl", alone: true},
		run{args: []string{"hcl"}, alone: true},
		run{args: []string{"binary.hcl"}, alone: true},
		run{args: []string{"-"}, stdin: src, alone: true},
		run{args: []string{"-", "--stdin-filename", "p/x.hcl", "--format", "github"}, stdin: src, alone: true},
		run{args: []string{"-", "--stdin-filename", "legacy/x.hcl"}, stdin: src, dir: "hcl", alone: true},
		run{args: []string{"-", "--skip-non-specs", "--stdin-filename", "main.hcl"}, stdin: readRepo(t, "examples/orders/pipeline.hcl"), alone: true},
		// Flag spellings pipec-lint parses itself.
		run{args: []string{"examples/broken/cycle.hcl", "--format=json"}, alone: true},
		run{args: []string{"--strict=false", "--disable=heartbeat-lease", "--disable", "unused-artifact,secret-literal", "--", "examples/orders/pipeline.hcl"}, alone: true},
		run{args: []string{"--strict=true", "--skip-non-specs=false", "examples/orders/pipeline.hcl"}, alone: true},
		run{args: []string{"--color=never", "--workers=2", "--format", "sarif", "--format", "github", "examples/orders/pipeline.hcl"}, alone: true},
		run{args: []string{"--disable", "heartbeat-lease, unused-artifact", "examples/orders/pipeline.hcl"}},
		run{args: []string{"--strict", "false", "examples/orders/pipeline.hcl"}},
		run{args: []string{"--strict=TRUE", "examples/orders/pipeline.hcl"}},
		run{args: []string{"--workers", "0x10", "examples/orders/pipeline.hcl"}},
		run{args: []string{"--disable", `"heartbeat-lease"`, "examples/orders/pipeline.hcl"}},
		run{args: []string{"--format"}},
		run{args: []string{"-h"}},
		// Handed to pipec: CUE, usage errors, help.
		run{args: []string{"examples/orders/pipeline.cue"}},
		run{args: []string{"--format", "sarif", "examples/broken/schema.cue", "examples/broken/cycle.hcl"}},
		run{args: []string{"examples"}},
		run{args: []string{"-", "--stdin-filename", "x.cue"}, stdin: readRepo(t, "examples/orders/pipeline.cue")},
		run{args: []string{"-"}, stdin: "pipeline: orders: {\n"},
		run{args: []string{}},
		run{args: []string{"--bogus", "x.hcl"}},
		run{args: []string{"--format", "xml", "examples/orders/pipeline.hcl"}},
		run{args: []string{"--color", "sometimes", "examples/orders/pipeline.hcl"}},
		run{args: []string{"--workers", "0", "examples/orders/pipeline.hcl"}},
		run{args: []string{"no/such/file.hcl"}},
		run{args: []string{"README.md"}, dir: "examples/orders"},
		run{args: []string{"--config", "missing.yaml", "examples/orders/pipeline.hcl"}},
		run{args: []string{"-", "examples/orders/pipeline.hcl"}},
		run{args: []string{"--help"}},
	)
	for _, r := range runs {
		dir := filepath.Join(work, r.dir)
		want := runIn(t, dir, pipec, base, r.stdin, append([]string{"lint"}, r.args...)...)
		lintBin, env := pipecLint, withPipec
		if r.alone {
			lintBin, env = alone, noPipec
		}
		got := runIn(t, dir, lintBin, env, r.stdin, r.args...)
		if got != want {
			t.Errorf("pipec-lint %s (in %s):\n got exit %d, stdout %q, stderr %q\nwant exit %d, stdout %q, stderr %q",
				strings.Join(r.args, " "), r.dir, got.code, clip(got.stdout), clip(got.stderr), want.code, clip(want.stdout), clip(want.stderr))
		}
		if r.alone && want.code > 1 {
			t.Errorf("pipec lint %s: exit %d; a run pipec-lint does alone must not be a usage error", strings.Join(r.args, " "), want.code)
		}
	}

	// A run handed over without reading standard input leaves it to pipec:
	// an open stdin (a terminal, a pipe no one closes) does not keep
	// pipec-lint waiting once pipec is done.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cmd := exec.Command(pipecLint, "examples/orders/pipeline.cue")
	cmd.Dir, cmd.Env, cmd.Stdin = work, withPipec, r
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("pipec-lint of a CUE spec with an open stdin: %v", err)
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Error("pipec-lint of a CUE spec waited on an open stdin after pipec was done")
	}

	// Without pipec, a run that needs it says so (exit 2).
	got := runIn(t, work, alone, noPipec, "", "examples/orders/pipeline.cue")
	if got.code != 2 || !strings.Contains(got.stderr, "needs pipec") || got.stdout != "" {
		t.Errorf("pipec-lint of a CUE spec without pipec: exit %d, stdout %q, stderr %q", got.code, got.stdout, got.stderr)
	}
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}

func readRepo(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestNoCUEOrRuntime: the point of pipec-lint is what it does not link.
func TestNoCUEOrRuntime(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"cuelang.org/", "modernc.org/sqlite", "github.com/jackc/pgx", "github.com/aws/",
			"github.com/pipec/pipec/runtime", "github.com/pipec/pipec/webview", "github.com/pipec/pipec/cli", "github.com/pipec/pipec/spec/cuespec"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("pipec-lint links %s", dep)
			}
		}
	}
}

// TestParsesEveryFlag: every flag `pipec lint --help` lists is one pipec-lint
// parses itself (or, for --help, hands over on purpose), so a flag added to
// pipec lint is not silently handed over on every run.
func TestParsesEveryFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pipec")
	}
	pipec, _ := build(t, t.TempDir())
	out, err := exec.Command(pipec, "lint", "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	flags := regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z-]+)`).FindAllStringSubmatch(string(out), -1)
	if len(flags) < 8 {
		t.Fatalf("only %d flags in pipec lint --help:\n%s", len(flags), out)
	}
	for _, m := range flags {
		name := m[1]
		if name == "help" {
			continue
		}
		arg := "--" + name + "=x"
		if name == "strict" || name == "skip-non-specs" {
			arg = "--" + name
		}
		if name == "color" {
			arg = "--color=never"
		}
		if name == "workers" {
			arg = "--workers=2"
		}
		if _, _, _, ok := parseArgs([]string{arg, "p.hcl"}); !ok {
			t.Errorf("pipec-lint does not parse %s, a flag of pipec lint", arg)
		}
	}
}
