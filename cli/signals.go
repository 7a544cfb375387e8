package cli

import (
	"context"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// Interruptible wires the process's signals into io, for cmd/pipec only (it
// changes process-wide signal handling, so tests call Main without it):
//
//   - SIGPIPE is watched, so a write to a closed pipe returns EPIPE (which
//     quietPipe drops) instead of killing pipec; a watched signal, unlike an
//     ignored one, is reset for the tasks pipec starts.
//   - The first Ctrl-C (or SIGTERM) cancels io.Context with ErrInterrupted.
//     A command that stops cleanly (gracefulCommand) then records what it
//     stopped and Main returns 130; in any other command, and on a second
//     Ctrl-C, the process exits 130 at once through exit.
//
// stop undoes the signal handling.
func Interruptible(io IO, exit func(int)) (_ IO, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	var graceful atomic.Bool
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case s := <-sigs:
				if s == syscall.SIGPIPE {
					continue
				}
				if ctx.Err() != nil || !graceful.Load() {
					exit(ExitInterrupted)
					return
				}
				cancel(ErrInterrupted)
			}
		}
	}()
	io.Context = ctx
	io.Graceful = func() { graceful.Store(true) }
	return io, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}
