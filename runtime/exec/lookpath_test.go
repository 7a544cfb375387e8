package exec

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPathsRemembersHitsOnly: a found command is remembered per PATH (it
// is not looked at again), a missing one is searched again at the next start,
// and a different PATH is a search of its own.
func TestPathsRemembersHitsOnly(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	pathEnv := []string{"PATH=" + a + ":" + b}
	var c Paths
	if _, err := c.look("cmd", "", pathEnv); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("missing command: %v", err)
	}
	script(t, b, "cmd", "exit 0\n")
	got, err := c.look("cmd", "", pathEnv)
	if err != nil || got != filepath.Join(b, "cmd") {
		t.Fatalf("after install: %q, %v (a miss must not be remembered)", got, err)
	}
	// A hit is not searched again: the earlier directory's new command
	// stays unseen for this PATH...
	script(t, a, "cmd", "exit 0\n")
	if got, err := c.look("cmd", "", pathEnv); err != nil || got != filepath.Join(b, "cmd") {
		t.Fatalf("remembered: %q, %v", got, err)
	}
	// ...but another PATH searches afresh.
	if got, err := c.look("cmd", "", []string{"PATH=" + a}); err != nil || got != filepath.Join(a, "cmd") {
		t.Fatalf("other PATH: %q, %v", got, err)
	}
	// A name with a slash is never remembered.
	if err := os.Remove(filepath.Join(a, "cmd")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.look("./cmd", a, pathEnv); err == nil {
		t.Fatal("./cmd was removed but found")
	}
}

// TestStartWithPathsRemovedCommand: a remembered command removed before the
// next start fails that start with an error, and nothing runs.
func TestStartWithPathsRemovedCommand(t *testing.T) {
	dir := t.TempDir()
	script(t, dir, "cmd", "exit 3\n")
	e := append(env(), "PATH="+dir+":"+os.Getenv("PATH"))
	var c Paths
	p, err := Start(context.Background(), Spec{Argv: []string{"cmd"}, Dir: dir, Env: e, Paths: &c})
	if err != nil {
		t.Fatal(err)
	}
	if res := p.Wait(); res.ExitCode != 3 {
		t.Fatalf("exit %d, want 3", res.ExitCode)
	}
	if err := os.Remove(filepath.Join(dir, "cmd")); err != nil {
		t.Fatal(err)
	}
	if p, err := Start(context.Background(), Spec{Argv: []string{"cmd"}, Dir: dir, Env: e, Paths: &c}); err == nil {
		p.Wait()
		t.Fatal("a removed command started")
	}
}
