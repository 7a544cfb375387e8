package lsp_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.lsp.dev/protocol"

	"github.com/pipec/pipec/internal/gendag"
)

// BenchmarkChangeToDiagnostics measures, through the protocol, the time from
// a didChange to the publishDiagnostics of that version, with the default
// debounce, on a real `pipec lsp` child process (its stdio, its GC
// settings): the orders example (HCL and CUE) and the 10,000-task spec of
// the benchmark DAG (internal/gendag).
//
//	go test -run '^$' -bench ChangeToDiagnostics -benchtime 20x ./lsp/
func BenchmarkChangeToDiagnostics(b *testing.B) {
	type input struct {
		name, path string
		// inTask edits the middle task's timeout instead of typing a
		// comment at the end: in a CUE spec the chunk holding it is
		// evaluated again (see cuespec.ChunkCache).
		inTask bool
	}
	inputs := []input{
		{"orders.hcl", "../examples/orders/pipeline.hcl", false},
		{"orders.cue", "../examples/orders/pipeline.cue", false},
	}
	dir := gendagDir(b, 10000)
	cue := filepath.Join(dir, "pipeline.cue")
	inputs = append(inputs, input{"gendag10k.hcl", filepath.Join(dir, "pipeline.hcl"), false},
		input{"gendag10k.cue", cue, false}, input{"gendag10k.cue-task-edit", cue, true})
	bin := buildPipec(b)
	for _, in := range inputs {
		src := readFile(b, in.path)
		b.Run(in.name, func(b *testing.B) {
			c, pid := startChild(b, bin)
			u := c.open(filepath.Base(in.path), src)
			c.waitVersion(u, 1)
			v := int32(1)
			cpu0 := childCPU(b, pid)
			b.ResetTimer()
			// The middle task's timeout, for inTask: `timeout: "1m"` on the
			// line of task t<n/2>.
			var at protocol.Range
			if in.inTask {
				lines := strings.Split(src, "\n")
				for i, l := range lines[len(lines)/2:] {
					if c := strings.Index(l, `timeout: "1m"`); c >= 0 {
						c += len(`timeout: "`)
						line := uint32(len(lines)/2 + i)
						at = protocol.Range{Start: protocol.Position{Line: line, Character: uint32(c)}, End: protocol.Position{Line: line, Character: uint32(c + 2)}}
						break
					}
				}
				if at.End.Character == 0 {
					b.Fatal("no task timeout to edit")
				}
			}
			for b.Loop() {
				v++
				if in.inTask {
					// A new value each time: the edited chunk is never one
					// seen before.
					txt := fmt.Sprintf("%dm", 100+v)
					c.edit(u, v, contentChange{Range: &at, Text: txt})
					at.End.Character = at.Start.Character + uint32(len(txt))
					c.waitVersion(u, uint32(v))
					continue
				}
				// A change an author makes, sent as an editor does: a comment
				// line typed at the end, then deleted.
				end := protocol.Position{Line: uint32(strings.Count(src, "\n"))}
				if v%2 == 0 {
					c.edit(u, v, contentChange{Range: &protocol.Range{Start: end, End: end}, Text: "// edited\n"})
				} else {
					c.edit(u, v, contentChange{Range: &protocol.Range{Start: end, End: protocol.Position{Line: end.Line + 1}}, Text: ""})
				}
				c.waitVersion(u, uint32(v))
			}
			b.StopTimer()
			// The server's own CPU time per change: on a shared machine the
			// wall time also counts waiting for a core.
			b.ReportMetric(float64(childCPU(b, pid)-cpu0)/float64(v-1), "server-cpu-ms/op")
		})
	}
}

// BenchmarkServerMemory10k starts `pipec lsp` as a child process, opens the
// 10,000-task spec and waits for its diagnostics, then reports the child's
// peak resident memory (VmHWM) in MB.
//
//	go test -run '^$' -bench ServerMemory10k -benchtime 1x ./lsp/
func BenchmarkServerMemory10k(b *testing.B) {
	dir := gendagDir(b, 10000)
	bin := buildPipec(b)
	for _, file := range []string{"pipeline.hcl", "pipeline.cue"} {
		b.Run(file, func(b *testing.B) {
			var peak float64
			for b.Loop() {
				peak = max(peak, childPeakMB(b, bin, filepath.Join(dir, file)))
			}
			b.ReportMetric(peak, "peak-RSS-MB")
		})
	}
}

func childPeakMB(b *testing.B, bin, path string) float64 {
	c, pid := startChild(b, bin)
	u := c.open(filepath.Base(path), readFile(b, path))
	c.waitVersion(u, 1)
	c.change(u, 2, readFile(b, path)+"// edited\n")
	c.waitVersion(u, 2)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	var kb float64
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ = strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
		}
	}
	return kb / 1024
}

// childCPU is a process's user and system CPU time so far, in ms.
func childCPU(b *testing.B, pid int) int64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which is in parentheses): utime and
	// stime are the 12th and 13th, in clock ticks (100 a second on Linux).
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return (ut + st) * 10
}

// startChild runs `pipec lsp` as a child process and connects to its stdio.
func startChild(b *testing.B, bin string) (*client, int) {
	cmd := exec.Command(bin, "lsp")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	c := connect(b, pipeRW{stdout, stdin}, done)
	go func() { done <- cmd.Wait() }()
	return c, cmd.Process.Pid
}

// buildPipec builds pipec from this tree, or returns $PIPEC_BENCH_BIN when set,
// so that another build (the one before a change) is measured by the same
// benchmark, alternately:
//
//	PIPEC_BENCH_BIN=/tmp/pipec-before go test -run '^$' -bench ChangeToDiagnostics/gendag10k.cue ./lsp/
func buildPipec(b *testing.B) string {
	if bin := os.Getenv("PIPEC_BENCH_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(b.TempDir(), "pipec")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/pipec/pipec/cmd/pipec").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// gendagDir writes the benchmark DAG of n tasks (seed 42) into a new folder.
func gendagDir(b *testing.B, n int) string {
	d, err := gendag.Generate(n, 42)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := d.WriteFiles(dir); err != nil {
		b.Fatal(err)
	}
	return dir
}
