//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// writeLock is a queue in front of SQLite's write lock. Handles waiting for
// SQLite's lock can only poll it, and a poll that sleeps past the moment the
// lock is freed wastes that time on every hand-over; with several processes
// publishing at once that made most of the cost. Waiters on this flock sleep
// in the kernel and wake when it is released. It is only an aid: BEGIN
// IMMEDIATE still takes SQLite's lock, which alone guarantees correctness
// (against any other SQLite client too).
type writeLock struct {
	f *os.File
}

func openWriteLock(dbPath string) (*writeLock, error) {
	f, err := os.OpenFile(dbPath+"-lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("write lock: %w", err)
	}
	return &writeLock{f: f}, nil
}

// lock takes the lock, waiting at most timeout; the error says it timed out.
func (l *writeLock) lock(timeout time.Duration) error {
	fd := int(l.f.Fd())
	err := flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil || !errors.Is(err, syscall.EWOULDBLOCK) {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- flock(fd, syscall.LOCK_EX) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		// The waiting flock cannot be cancelled; release the lock as soon
		// as it arrives. (If a later lock of this handle overlaps, it merely
		// loses the queue's help: SQLite's lock still serializes.)
		go func() {
			if <-done == nil {
				flock(fd, syscall.LOCK_UN)
			}
		}()
		return fmt.Errorf("waited %s for another writer of the state database", timeout)
	}
}

func (l *writeLock) unlock() { flock(int(l.f.Fd()), syscall.LOCK_UN) }

func (l *writeLock) close() error { return l.f.Close() }

// flock retries on EINTR.
func flock(fd, how int) error {
	for {
		err := syscall.Flock(fd, how)
		if err != syscall.EINTR {
			return err
		}
	}
}
