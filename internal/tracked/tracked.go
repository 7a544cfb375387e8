// Package tracked gives tests the repository's own files under a folder
// (examples/ above all) and nothing that a run, the README's tour or a user
// left there: a run's state (.pipec/), a directory sink's data (warehouse/,
// marts/), a rendered graph (*.svg), a scratch spec.
//
// In a git checkout the rule is exact: the files `git ls-files` lists (those
// tracked, still on disk, with their working-tree content). Outside one (a
// source archive), or where git is missing, Files falls back to a filter
// that skips what pipec and the tour write: hidden names, warehouse/,
// marts/, and *.svg, *.db, *.tmp files.
package tracked

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Files returns the repository's files under dir, as slash-separated paths
// relative to dir, sorted.
func Files(dir string) ([]string, error) {
	if files, ok := gitFiles(dir); ok {
		return files, nil
	}
	return filtered(dir)
}

// gitFiles lists the tracked files under dir that are on disk; ok is false
// when dir is not in a git checkout or git cannot be run.
func gitFiles(dir string) ([]string, bool) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, false
	}
	out, err := Git(dir, "ls-files", "-z", "--cached", "--", ".")
	if err != nil {
		return nil, false
	}
	var files []string
	for _, name := range strings.Split(strings.TrimRight(out, "\x00"), "\x00") {
		if name == "" {
			continue
		}
		// A tracked file deleted in the working tree is not there to copy.
		if fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(name))); err != nil || fi.IsDir() {
			continue
		}
		files = append(files, name)
	}
	if len(files) == 0 {
		// Not a folder of this repository (a copy inside some other
		// checkout, say): the filter is the better rule there.
		return nil, false
	}
	slices.Sort(files)
	return slices.Compact(files), true
}

// Untracked reports whether a name (one path element) is something pipec,
// the tour or a run leaves behind rather than a file of the repository.
func Untracked(name string, isDir bool) bool {
	if strings.HasPrefix(name, ".") {
		return true // .pipec/ (the state beside a spec), editor and temp files
	}
	if isDir {
		return name == "warehouse" || name == "marts"
	}
	switch filepath.Ext(name) {
	case ".svg", ".db", ".tmp":
		return true
	}
	return false
}

func filtered(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == dir {
			return nil
		}
		if Untracked(d.Name(), d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	slices.Sort(files)
	return files, err
}

// Copy copies the repository's files under src into dst (created if need
// be), keeping their relative paths and modes.
func Copy(t testing.TB, src, dst string) {
	t.Helper()
	files, err := Files(src)
	if err != nil {
		t.Fatalf("listing %s: %v", src, err)
	}
	if len(files) == 0 {
		t.Fatalf("no repository files under %s", src)
	}
	for _, name := range files {
		if err := copyFile(filepath.Join(src, filepath.FromSlash(name)), filepath.Join(dst, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
}

// Glob is filepath.Glob restricted to the repository's files: what matches
// the pattern and is one of Files(root), as paths joined to root.
func Glob(t testing.TB, root, pattern string) []string {
	t.Helper()
	files, err := Files(root)
	if err != nil {
		t.Fatalf("listing %s: %v", root, err)
	}
	var out []string
	for _, name := range files {
		ok, err := filepath.Match(filepath.FromSlash(pattern), filepath.FromSlash(name))
		if err != nil {
			t.Fatalf("pattern %q: %v", pattern, err)
		}
		if ok {
			out = append(out, filepath.Join(root, filepath.FromSlash(name)))
		}
	}
	return out
}

func copyFile(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

// InitRepo makes dir a git repository with every file now in it added (not
// committed), for tests that need a checkout of their own. The commands run
// without the caller's GIT_* variables, so a test run from a git hook never
// touches the repository the hook runs for. It skips the test without git.
func InitRepo(t testing.TB, dir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}} {
		if out, err := Git(dir, args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// Git runs git in dir without the caller's GIT_* variables and returns its
// standard output.
func Git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return stderr.String(), err
	}
	return string(out), nil
}
