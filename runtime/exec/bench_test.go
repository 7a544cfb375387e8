//go:build linux

package exec

import (
	"context"
	"io"
	"os"
	osexec "os/exec"
	"syscall"
	"testing"
	"time"
)

// BenchmarkStart is the cost of running one `true`, the task of
// bench/run1k.sh: through Start (a pipe for the output, its own group, its
// identity read at the start, or not at all with IdentifyLater as the
// process is over before anyone asks, the output copied and the group
// checked at the end), and through os/exec with the same pipe and group,
// as Start ran it before it forked by itself (see child): what a Go program
// usually pays to run a command and read its output; and bare, forked and
// reaped with its output not read, the least Go pays for a command.
// Reported per process: this process's CPU (self-cpu-us/op) and the
// children's (child-cpu-us/op).
func BenchmarkStart(b *testing.B) {
	env := os.Environ()
	for _, later := range []bool{false, true} {
		name := "exec"
		if later {
			name = "exec-identify-later" // as a run starts an idempotent task
		}
		b.Run(name, func(b *testing.B) {
			paths := &Paths{} // as a run does: PATH searched once
			measure(b, func() {
				p, err := Start(context.Background(), Spec{Argv: []string{"true"}, Env: env, Paths: paths, IdentifyLater: later})
				if err != nil {
					b.Fatal(err)
				}
				if res := p.Wait(); !res.Success() {
					b.Fatal(res.Describe())
				}
			})
		})
	}
	b.Run("osexec", func(b *testing.B) {
		path, err := osexec.LookPath("true")
		if err != nil {
			b.Skip(err)
		}
		measure(b, func() {
			pr, pw, err := os.Pipe()
			if err != nil {
				b.Fatal(err)
			}
			cmd := &osexec.Cmd{Path: path, Args: []string{"true"}, Env: env, Stdout: pw, Stderr: pw,
				SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			pw.Close()
			_, _ = io.Copy(io.Discard, pr)
			pr.Close()
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
		})
	})
	// The floor in docs/performance.md: fork, exec and reap in one goroutine.
	b.Run("bare", func(b *testing.B) {
		path, err := osexec.LookPath("true")
		if err != nil {
			b.Skip(err)
		}
		attr := &syscall.ProcAttr{Env: env, Files: []uintptr{0, 1, 2}, Sys: &syscall.SysProcAttr{Setpgid: true}}
		measure(b, func() {
			pid, err := syscall.ForkExec(path, []string{"true"}, attr)
			if err != nil {
				b.Fatal(err)
			}
			if ws, err := wait4(pid); err != nil || ws.ExitStatus() != 0 {
				b.Fatal(ws, err)
			}
		})
	})
}

// measure runs once b.N times and reports CPU per run, this process's and
// its children's.
func measure(b *testing.B, once func()) {
	self, children := rusage(syscall.RUSAGE_SELF), rusage(syscall.RUSAGE_CHILDREN)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		once()
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e3 }
	b.ReportMetric(per(rusage(syscall.RUSAGE_SELF)-self), "self-cpu-us/op")
	b.ReportMetric(per(rusage(syscall.RUSAGE_CHILDREN)-children), "child-cpu-us/op")
}

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
