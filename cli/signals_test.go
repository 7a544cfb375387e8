package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// interrupt sends SIGINT to this test process; Interruptible has it watched,
// so the process is not killed.
func interrupt(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
}

// TestInterruptNotGraceful: in a command that does not stop cleanly (lint,
// compile, lsp), Ctrl-C ends pipec at once with 130.
func TestInterruptNotGraceful(t *testing.T) {
	codes := make(chan int, 1)
	io, stop := Interruptible(IO{}, func(code int) { codes <- code })
	defer stop()
	interrupt(t)
	if code := <-codes; code != ExitInterrupted {
		t.Errorf("exit %d, want %d", code, ExitInterrupted)
	}
	if io.Context.Err() != nil {
		t.Error("the context was cancelled although nothing stops on it")
	}
}

// TestInterruptGraceful: in run or backfill, the first Ctrl-C cancels the
// context (the command records what it stops) and says what a second one
// does; a second one exits at once.
func TestInterruptGraceful(t *testing.T) {
	codes := make(chan int, 1)
	var errb bytes.Buffer
	io, stop := Interruptible(IO{Stderr: &errb}, func(code int) { codes <- code })
	defer stop()
	io.Graceful(StoppingRun)
	interrupt(t)
	<-io.Context.Done()
	if !strings.Contains(errb.String(), "Ctrl-C again exits at once") {
		t.Errorf("the first Ctrl-C does not say what a second one does: %q", errb.String())
	}
	if cause := context.Cause(io.Context); !errors.Is(cause, ErrInterrupted) {
		t.Errorf("cancelled by %v, want ErrInterrupted", cause)
	}
	select {
	case code := <-codes:
		t.Fatalf("exited %d on the first Ctrl-C of a graceful command", code)
	default:
	}
	interrupt(t)
	if code := <-codes; code != ExitInterrupted {
		t.Errorf("second Ctrl-C: exit %d, want %d", code, ExitInterrupted)
	}
}

// TestHangupGraceful: a hangup (SIGHUP: the terminal went away) stops a
// run or a worker as the first Ctrl-C does; more hangups do not exit at
// once (nobody chose to), a second Ctrl-C does. In any other command a
// hangup exits at once.
func TestHangupGraceful(t *testing.T) {
	// As a process started with SIGHUP at its default, even when this test
	// runs under nohup (Interruptible leaves an ignored SIGHUP ignored).
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	codes := make(chan int, 1)
	var errb bytes.Buffer
	io, stop := Interruptible(IO{Stderr: &errb}, func(code int) { codes <- code })
	io.Graceful(StoppingRun)
	hangup := func() {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	hangup()
	<-io.Context.Done()
	if cause := context.Cause(io.Context); !errors.Is(cause, ErrInterrupted) {
		t.Errorf("cancelled by %v, want ErrInterrupted", cause)
	}
	hangup()
	hangup()
	select {
	case code := <-codes:
		t.Fatalf("exited %d on a hangup after the first", code)
	case <-time.After(100 * time.Millisecond):
	}
	interrupt(t)
	if code := <-codes; code != ExitInterrupted {
		t.Errorf("Ctrl-C after a hangup: exit %d, want %d", code, ExitInterrupted)
	}
	stop()

	_, stop = Interruptible(IO{}, func(code int) { codes <- code })
	defer stop()
	hangup()
	if code := <-codes; code != ExitInterrupted {
		t.Errorf("a hangup of a command that does not stop cleanly: exit %d, want %d", code, ExitInterrupted)
	}
}

// TestMainReports130 runs a command whose context was interrupted: Main says
// so and returns 130 whatever the command returned.
func TestMainReports130(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrInterrupted)
	var out, errb bytes.Buffer
	code := Main([]string{"explain"}, IO{Stdout: &out, Stderr: &errb, Context: ctx, Getenv: func(string) string { return "" }})
	if code != ExitInterrupted || errb.String() != "pipec: interrupted\n" {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}

// TestQuietPipeDropsEPIPE: a write to a reader that went away succeeds
// silently; other errors still surface.
func TestQuietPipeDropsEPIPE(t *testing.T) {
	if n, err := (quietPipe{w: failWriter{syscall.EPIPE}}).Write([]byte("abc")); n != 3 || err != nil {
		t.Errorf("EPIPE: %d, %v", n, err)
	}
	if _, err := (quietPipe{w: failWriter{syscall.ENOSPC}}).Write([]byte("abc")); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("ENOSPC was hidden: %v", err)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) {
	return 0, &os.PathError{Op: "write", Path: "/dev/stdout", Err: f.err}
}
