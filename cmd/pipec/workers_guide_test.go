package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/pgtest"
)

// fenced returns the first fenced block of the given language after a
// heading (a line of its own) in a Markdown text.
func fenced(t *testing.T, name, text, heading, lang string) string {
	t.Helper()
	_, rest, ok := strings.Cut(text, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", name, heading)
	}
	_, rest, ok = strings.Cut(rest, "```"+lang+"\n")
	if !ok {
		t.Fatalf("%s: %q has no %s block", name, heading, lang)
	}
	block, _, _ := strings.Cut(rest, "```")
	return block
}

// TestWorkersGuideOnPostgres does what docs/workers.md and
// examples/labels/README.md tell a user: create the role and database with
// the guide's SQL, then run the labels example's commands as written
// (workers with their labels and --artifacts, submit --wait), with the
// guide's URL pointed at a throwaway server. Skips without PostgreSQL
// (fails under PIPEC_REQUIRE_POSTGRES=1).
func TestWorkersGuideOnPostgres(t *testing.T) {
	guide := readRepoFile(t, "docs/workers.md")
	srv := pgtest.Start(t)
	ctx := context.Background()
	for _, stmt := range strings.Split(fenced(t, "docs/workers.md", guide, "## Setting up PostgreSQL", "sql"), ";\n") {
		if stmt = strings.TrimSpace(stmt); stmt == "" {
			continue
		}
		if _, err := srv.Psql(ctx, "", stmt); err != nil {
			t.Fatalf("the guide's set-up: %s: %v", stmt, err)
		}
	}
	// The role and database the guide made, over the test server's socket.
	url := "postgres://pipec@/pipec?host=" + srv.SocketDir + "&port=" + strconv.Itoa(srv.Port) + "&sslmode=disable"

	for _, doc := range []struct{ name, heading string }{
		{"docs/workers.md", "### Trying it: `examples/labels`"},
		{"examples/labels/README.md", "From the root of a clone, with a PostgreSQL database set up as in"},
	} {
		t.Run(filepath.Base(filepath.Dir(doc.name))+"/"+filepath.Base(doc.name), func(t *testing.T) {
			text := readRepoFile(t, doc.name)
			_, after, ok := strings.Cut(text, doc.heading)
			if !ok {
				t.Fatalf("%s has no %q", doc.name, doc.heading)
			}
			_, rest, _ := strings.Cut(after, "```sh\n")
			block, _, _ := strings.Cut(rest, "```")
			if !strings.Contains(block, "postgres://pipec@localhost/pipec") {
				t.Fatalf("%s: the commands do not use the guide's URL:\n%s", doc.name, block)
			}
			runLabelsCommands(t, block, url)
		})
	}
}

// runLabelsCommands runs a shell block from the docs in a folder laid out
// as a clone (examples/labels, tracked files only), with this test binary
// as pipec, the state URL and the artifact folder replaced by the test's.
func runLabelsCommands(t *testing.T, block, url string) {
	t.Helper()
	dir := t.TempDir()
	ex := filepath.Join(dir, "examples", "labels")
	if err := os.MkdirAll(ex, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"pipeline.hcl", "pipeline.cue", "extract.sh", "aggregate.sh"} {
		src := filepath.Join(repoRoot, "examples", "labels", f)
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ex, f), b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(os.Args[0], filepath.Join(bin, "pipec")); err != nil {
		t.Fatal(err)
	}
	arts := filepath.Join(dir, "artifacts")
	script := strings.NewReplacer("postgres://pipec@localhost/pipec", url, "/tmp/pipec-labels-artifacts", arts).Replace(block)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-ec", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PIPEC_TEST_MAIN=1", "NO_COLOR=1", "TMPDIR="+dir,
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The output goes to a file, not a pipe: the workers started in the
	// background keep it open, and Run must return when sh does.
	outFile, err := os.Create(filepath.Join(dir, "output"))
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	cmd.Stdout, cmd.Stderr = outFile, outFile
	err = cmd.Run()
	// The workers were told to stop (or, when a command failed, were not):
	// wait a little for them, so the next commands can reuse their names,
	// then kill what is left of the process group.
	if cmd.Process != nil {
		pg := cmd.Process.Pid
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if errors.Is(syscall.Kill(-pg, 0), syscall.ESRCH) || err != nil {
				break
			}
		}
		_ = syscall.Kill(-pg, syscall.SIGKILL)
	}
	out, _ := os.ReadFile(outFile.Name())
	if code := exitCode(t, err); code != 0 {
		t.Fatalf("the commands as written: exit %d\n%s\n--- output:\n%s", code, script, out)
	}
	if !regexp.MustCompile(`aggregate\b.*succeeded|succeeded.*\baggregate\b`).Match(out) {
		t.Errorf("the run's output does not show aggregate succeeded:\n%s", out)
	}
}

// TestWorkersGuideIsAUsersGuide: docs/workers.md says what to do and what
// is guaranteed; it does not read like development notes (figures held
// against an issue's target, the machine's load from other jobs, this or
// that session's changes, test function names, commits, field-report
// numbers a user never saw).
func TestWorkersGuideIsAUsersGuide(t *testing.T) {
	guide := readRepoFile(t, "docs/workers.md")
	for _, bad := range []string{
		`(?i)\bthis session\b`, `(?i)\bthe issue\b`, `(?i)\bissue \d`, `(?i)\bseed \d{3}`, `(?i)\btarget\b`,
		`(?i)engineers`, `(?i)load average`, `(?i)other (people's )?jobs`, `\bTest[A-Z]\w+`, `\bcommit [0-9a-f]{7,}`,
		`(?i)not done yet`, `(?i)\bbefore and after\b`,
	} {
		if m := regexp.MustCompile(bad).FindString(guide); m != "" {
			t.Errorf("docs/workers.md reads like development notes: %q (%s)", m, bad)
		}
	}
	for _, want := range []string{"CREATE ROLE", "CREATE DATABASE", "postgres://", "--artifacts", "go test -run '^$' -bench"} {
		if !strings.Contains(guide, want) {
			t.Errorf("docs/workers.md does not mention %s", want)
		}
	}
}
