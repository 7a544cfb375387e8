package lsp_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNeovim attaches `pipec lsp` to a spec in a real Neovim (headless,
// with testdata/nvim/e2e.lua), waits for its diagnostics and jumps to a
// definition. Without nvim the test skips, unless PIPEC_REQUIRE_NVIM=1 (set
// by .ci/run, which installs Debian's neovim) makes a missing nvim a failure.
func TestNeovim(t *testing.T) {
	nvim, err := exec.LookPath("nvim")
	if err != nil {
		if os.Getenv("PIPEC_REQUIRE_NVIM") == "1" {
			t.Fatal("nvim not found, and PIPEC_REQUIRE_NVIM=1 requires it (apt-get install neovim)")
		}
		t.Skip("nvim not found: install neovim (Debian package) to run the editor end-to-end test")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "pipec")
	build := exec.Command("go", "build", "-o", bin, "github.com/pipec/pipec/cmd/pipec")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	src := readFile(t, "testdata/refs.hcl")
	spec := filepath.Join(dir, "pipeline.hcl")
	if err := os.WriteFile(spec, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := at(t, src, "depends_on", "extract", 2)
	script, err := filepath.Abs("testdata/nvim/e2e.lua")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "seen.txt")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a deadlock guard
	defer cancel()
	cmd := exec.CommandContext(ctx, nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", "luafile "+script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PIPEC_BIN="+bin, "PIPEC_E2E_SPEC="+spec, "PIPEC_E2E_OUT="+out,
		"PIPEC_E2E_LINE="+itoa(int(ref.Line)+1), "PIPEC_E2E_COL="+itoa(int(ref.Character)+1), "XDG_STATE_HOME="+dir, "XDG_DATA_HOME="+dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nvim: %v\n%s", err, b)
	}
	got := readFile(t, out)
	def := at(t, src, `task "`, "extract", 0)
	want := strings.Join([]string{
		"diagnostic 11:13 heartbeat-lease pipec",
		"diagnostic 16:22 interval-mismatch pipec",
		"definition " + itoa(int(def.Line)+1) + ":" + itoa(int(def.Character)+1) + `   task "extract" {`,
	}, "\n") + "\n"
	if got != want {
		t.Fatalf("Neovim saw:\n%s\nwant:\n%s", got, want)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
