package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
