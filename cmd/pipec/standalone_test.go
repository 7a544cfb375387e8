package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// outside are references to documents that are not in a clone: the design
// contract and the folder that was kept beside the repository. Both are
// spelled in two pieces so this file does not name them itself.
var outside = []string{"DESIGN" + ".md", ".." + "/shared"}

// TestTrackedFilesStandAlone: no tracked file (docs, help texts, comments,
// scripts, test data) refers to a document or folder outside the repository;
// the design is docs/design.md and the benchmark generator bench/gendag.
func TestTrackedFilesStandAlone(t *testing.T) {
	out, err := exec.Command("git", "-C", repoRoot, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (or no git): %v", err)
	}
	files := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(files) < 10 {
		t.Skipf("git ls-files listed %d files: not this repository's checkout", len(files))
	}
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join(repoRoot, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			t.Error(err)
			continue
		}
		for i, line := range bytes.Split(b, []byte("\n")) {
			for _, ref := range outside {
				if bytes.Contains(line, []byte(ref)) {
					t.Errorf("%s:%d refers to %s, which is not in the repository: %s",
						name, i+1, ref, bytes.TrimSpace(line))
				}
			}
		}
	}
}

// TestDesignDocHasTheCitedSections: code and help texts cite docs/design.md
// by section number ("docs/design.md section 6"); every number cited is a
// section of the page.
func TestDesignDocHasTheCitedSections(t *testing.T) {
	design := readRepoFile(t, "docs/design.md")
	out, err := exec.Command("git", "-C", repoRoot, "grep", "-hoE", `design\.md(\)|\]\([^)]*\))? section [0-9]+`).Output()
	if err != nil {
		t.Skipf("git grep: %v", err)
	}
	for _, cite := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		n := cite[strings.LastIndex(cite, " ")+1:]
		if !strings.Contains(design, "\n## "+n+". ") {
			t.Errorf("%q: docs/design.md has no section %s", cite, n)
		}
	}
}

// TestDocLinksResolve: every relative link in a tracked Markdown file names
// a file of the repository and, with #anchor, a heading of that file (as
// GitHub makes heading anchors), so the docs can be read from a clone.
func TestDocLinksResolve(t *testing.T) {
	out, err := exec.Command("git", "-C", repoRoot, "ls-files", "-z", "*.md").Output()
	if err != nil {
		t.Skipf("not a git checkout (or no git): %v", err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]*)\)`)
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		text, err := os.ReadFile(filepath.Join(repoRoot, name))
		if err != nil {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			target, anchor, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, ":") || (target == "" && anchor == "") {
				continue // a URL, or not a link
			}
			file := name
			if target != "" {
				file = filepath.Join(filepath.Dir(name), target)
				if _, err := os.Stat(filepath.Join(repoRoot, file)); err != nil {
					t.Errorf("%s links %s, which is not in the repository", name, m[1])
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(repoRoot, file))
			if err != nil {
				continue // a folder
			}
			if !slices.Contains(headingAnchors(string(b)), anchor) {
				t.Errorf("%s links %s: %s has no heading with the anchor #%s", name, m[1], file, anchor)
			}
		}
	}
}

// headingAnchors are the anchors GitHub gives a Markdown file's headings:
// lower case, punctuation dropped, spaces as hyphens.
func headingAnchors(text string) []string {
	var out []string
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}
