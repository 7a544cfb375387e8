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
	script, err := filepath.Abs("testdata/nvim/e2e.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		syn, defAfter, defLine string
		diags                  []string
	}{
		{"hcl", `task "`, `  task "extract" {`, []string{"11:13 heartbeat-lease", "16:22 interval-mismatch"}},
		{"cue", "task: ", "\ttask: extract: {", []string{"11:10 heartbeat-lease", "16:19 interval-mismatch"}},
	} {
		t.Run(tc.syn, func(t *testing.T) {
			src := readFile(t, "testdata/refs."+tc.syn)
			spec := filepath.Join(dir, "pipeline."+tc.syn)
			if err := os.WriteFile(spec, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			ref := at(t, src, "depends_on", "extract", 2)
			out := filepath.Join(dir, tc.syn+".seen")
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
			def := at(t, src, tc.defAfter, "extract", 0)
			var want []string
			for _, d := range tc.diags {
				want = append(want, "diagnostic "+d+" pipec")
			}
			want = append(want, "definition "+itoa(int(def.Line)+1)+":"+itoa(int(def.Character)+1)+" "+tc.defLine)
			if got != strings.Join(want, "\n")+"\n" {
				t.Fatalf("Neovim saw:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
