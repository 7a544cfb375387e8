package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// Process runs pipec as its own process: Main with the process's IO and
// its signals wired in (Interruptible). It returns the exit code.
func Process(args []string) int {
	io, stop := Interruptible(Std(), os.Exit)
	defer stop()
	return Main(args, io)
}

// Interruptible wires the process's signals into io, for a pipec process
// only (Process): it changes process-wide signal handling, so in-process
// tests call Main without it.
//
//   - SIGPIPE is watched, so a write to a closed pipe returns EPIPE (which
//     quietPipe drops) instead of killing pipec; a watched signal, unlike an
//     ignored one, is reset for the tasks pipec starts.
//   - The first Ctrl-C (or SIGTERM, or SIGHUP: the terminal went away, an
//     SSH session dropped) cancels io.Context with ErrInterrupted. A
//     command that stops cleanly (stoppingOf) then records what it
//     stopped and Main returns 130, saying at once on stderr what a second
//     Ctrl-C does; in any other command, and on a second Ctrl-C or
//     SIGTERM, the process exits 130 at once through exit. A hangup never
//     escalates so: nobody at a terminal that is gone chose to, and the
//     shell and the kernel may each send one. Under nohup (SIGHUP ignored
//     from the start) a hangup is left ignored.
//
// Commands stop on io.Context alone, never on a signal handler of their own:
// with two, a worker could stop on its own handler's cancellation and return
// before this one cancelled io.Context, and Main then reported exit 0 for a
// SIGTERM (seen under load with GOMAXPROCS=1).
//
// stop undoes the signal handling.
func Interruptible(io IO, exit func(int)) (_ IO, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	var graceful atomic.Pointer[string] // what a first interrupt does
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
	if !signal.Ignored(syscall.SIGHUP) {
		// Watching a signal the process started with ignored would undo
		// that: a pipec started under nohup keeps running when its
		// terminal goes away, as nohup is for.
		signal.Notify(sigs, syscall.SIGHUP)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case s := <-sigs:
				stopping := graceful.Load()
				if s == syscall.SIGPIPE || s == syscall.SIGHUP && ctx.Err() != nil && stopping != nil {
					continue
				}
				if ctx.Err() != nil || stopping == nil {
					exit(ExitInterrupted)
					return
				}
				// Stopping may take the kill grace, and longer on a state
				// that does not answer: say what a second one does.
				if io.Stderr != nil {
					fmt.Fprintln(io.Stderr, "pipec: stopping: "+*stopping)
				}
				cancel(ErrInterrupted)
			}
		}
	}()
	io.Context = ctx
	io.Graceful = func(stopping string) { graceful.Store(&stopping) }
	return io, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}
