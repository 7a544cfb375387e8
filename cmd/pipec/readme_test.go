package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"

	"github.com/pipec/pipec/internal/tracked"
	"github.com/pipec/pipec/spec"
)

const repoRoot = "../.."

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the first ```sh block after a README heading.
func section(t *testing.T, readme, heading string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(readme, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README has no %q section", heading)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatalf("%q has no sh block", heading)
	}
	block, _, _ := strings.Cut(rest, "```")
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if i := strings.Index(l, "  #"); i >= 0 {
			l = l[:i]
		}
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestReadmeTourRunsAsWritten runs every line of the README's tour, in a
// copy of the examples, with this test binary as pipec on PATH: no line may
// be a usage error (exit 2), and only lint of a folder with the broken
// examples may find errors (exit 1). Without Graphviz a stand-in `dot` lets
// the graph line run (and write its file). The copy is a git repository
// with the README's .gitignore: every file the tour writes must be ignored,
// so none shows as untracked in a clone.
func TestReadmeTourRunsAsWritten(t *testing.T) {
	lines := section(t, readRepoFile(t, "README.md"), "## A five-minute tour")
	dir := t.TempDir()
	tracked.Copy(t, filepath.Join(repoRoot, "examples"), filepath.Join(dir, "examples"))
	bin := t.TempDir()
	if err := os.Symlink(os.Args[0], filepath.Join(bin, "pipec")); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("dot"); err != nil {
		stub := "#!/bin/sh\ncat >/dev/null\necho '<svg xmlns=\"http://www.w3.org/2000/svg\"/>'\n"
		if err := os.WriteFile(filepath.Join(bin, "dot"), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Log("no Graphviz: a stand-in dot renders the graph line")
	}
	_, gitErr := exec.LookPath("git")
	if gitErr == nil {
		if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(readRepoFile(t, ".gitignore")), 0o644); err != nil {
			t.Fatal(err)
		}
		tracked.InitRepo(t, dir)
	}
	for _, line := range lines {
		server := strings.HasPrefix(line, "pipec ui ")
		if server {
			// A server runs until stopped: on a free port, it must still
			// be serving after a moment, and is then stopped.
			line = "exec " + line + " --listen 127.0.0.1:0"
		}
		cmd := exec.Command("sh", "-ec", line)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PIPEC_TEST_MAIN=1", "NO_COLOR=1", "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Stdout = new(bytes.Buffer)
		if server {
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				t.Errorf("%s: exited (%v) instead of serving; stderr:\n%s", line, err, stderr.String())
			case <-time.After(2 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			continue
		}
		code := exitCode(t, cmd.Run())
		want := 0
		if strings.HasPrefix(line, "pipec lint ") && (strings.Contains(line, "examples/broken") || strings.HasSuffix(line, " examples/")) {
			want = 1 // examples/broken is there to fail
		}
		if code != want {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", line, code, want, stderr.String())
		}
	}
	if gitErr != nil {
		t.Skip("no git: what the tour wrote is not checked against .gitignore")
	}
	if untracked := git(t, dir, "ls-files", "--others", "--exclude-standard"); untracked != "" {
		t.Errorf("the tour writes files .gitignore does not cover:\n%s", untracked)
	}
	ignored := git(t, dir, "ls-files", "--others", "--ignored", "--exclude-standard", "--directory")
	t.Logf("ignored, as they should be:\n%s", ignored)
	if ignored == "" {
		t.Error("the tour wrote nothing that .gitignore ignores; is the check still looking?")
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := tracked.Git(dir, args...)
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return out
}

// TestReadmeFacts: the Go version named is go.mod's, every relative link
// points into the repository, and install instructions do not promise a
// `go install …@latest` of a module that is not published.
func TestReadmeFacts(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	mf, err := modfile.Parse("go.mod", []byte(readRepoFile(t, "go.mod")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(readme, "Go "+mf.Go.Version) {
		t.Errorf("README does not name go.mod's Go version %s", mf.Go.Version)
	}
	if strings.Contains(readme, "@latest") {
		t.Error("README tells readers to go install @latest, but the module is not published; install from a clone")
	}
	for _, doc := range []string{"README.md", "docs/spec.md", "docs/config.md", "docs/rules/README.md"} {
		text := readRepoFile(t, doc)
		for _, m := range regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`).FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			if _, err := os.Stat(filepath.Join(repoRoot, filepath.Dir(doc), target)); err != nil {
				t.Errorf("%s links %s, which is not in the repository", doc, target)
			}
		}
	}
}

// TestSpecReferenceIsComplete: docs/spec.md documents every field of every
// element in the loaders' field table.
func TestSpecReferenceIsComplete(t *testing.T) {
	doc := readRepoFile(t, "docs/spec.md")
	for kind, fields := range spec.Fields() {
		if !strings.Contains(doc, "`"+kind) {
			t.Errorf("docs/spec.md does not document %s", kind)
		}
		for _, f := range fields {
			if !strings.Contains(doc, "`"+f.Name+"`") {
				t.Errorf("docs/spec.md does not document %s.%s", kind, f.Name)
			}
		}
	}
}

// TestShippedExamplesAreFormatted: every example that parses is in pipec
// fmt's layout (the broken syntax examples cannot be formatted by design).
func TestShippedExamplesAreFormatted(t *testing.T) {
	var files []string
	for _, pat := range []string{"examples/*/*.hcl", "examples/*/*.cue"} {
		files = append(files, tracked.Glob(t, repoRoot, pat)...)
	}
	if len(files) == 0 {
		t.Fatal("no examples found")
	}
	var args []string
	for _, f := range files {
		if !strings.Contains(filepath.Base(f), "syntax") {
			args = append(args, f)
		}
	}
	cmd := pipec(t, ".", append([]string{"fmt", "--check"}, args...)...)
	out, err := cmd.CombinedOutput()
	if code := exitCode(t, err); code != 0 {
		t.Errorf("pipec fmt --check: exit %d\n%s", code, out)
	}
}
