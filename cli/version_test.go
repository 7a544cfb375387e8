package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionLine(t *testing.T) {
	goVer := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "pipec " + Version + " (revision unknown; " + goVer + ")"},
		{"go install @version", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}},
			"pipec v1.2.3 (revision unknown; " + goVer + ")"},
		{"a clone with local edits", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-30T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"}}},
			"pipec " + Version + " (revision 0123456789ab, modified, 2026-11-30T10:00:00Z; " + goVer + ")"},
	} {
		if got := versionLine(tc.bi); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// TestVersionFromARealBuild builds pipec from this checkout with VCS stamping
// and checks that `pipec --version` names the checkout's commit.
func TestVersionFromARealBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pipec")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skip("not a git checkout")
	}
	// The go command stamps VCS information only when .git is a folder: a
	// git worktree (where .git is a file) builds without it.
	if st, err := os.Stat(filepath.Join("..", ".git")); err != nil || !st.IsDir() {
		t.Skip("../.git is not a folder (a git worktree): go build does not stamp VCS information here")
	}
	bin := filepath.Join(t.TempDir(), "pipec")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "../cmd/pipec")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	rev := strings.TrimSpace(string(head))[:12]
	if !strings.HasPrefix(string(out), "pipec ") || !strings.Contains(string(out), "(revision "+rev) {
		t.Errorf("pipec --version = %q, want revision %s", out, rev)
	}
	if v, _ := exec.Command(bin, "version").Output(); string(v) != string(out) {
		t.Errorf("pipec version %q differs from pipec --version %q", v, out)
	}
	_ = os.Remove(bin)
}
