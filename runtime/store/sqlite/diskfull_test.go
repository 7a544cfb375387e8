package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pipec/pipec/runtime/store"
)

// TestDiskFullIsTyped: a write the database cannot make room for fails with
// store.ErrDiskFull (errors.Is), from SQLite's result code: the file is held
// to its current size with PRAGMA max_page_count, so the next write that
// needs a page gets SQLITE_FULL, as on a full disk. The handle goes on
// working once there is room again.
func TestDiskFullIsTyped(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "state.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, err := s.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: "2024-01-01", CodeVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	var pages int64
	if err := s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		if err := tx.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	big := fmt.Sprintf(`{"x":%q}`, strings.Repeat("x", 64<<10))
	_, err = s.AppendEvent(ctx, store.Event{Run: run.ID, Kind: "test.big", Payload: []byte(big)})
	if !errors.Is(err, store.ErrDiskFull) {
		t.Fatalf("a write past max_page_count (%d pages): %v, want store.ErrDiskFull", pages, err)
	}
	t.Logf("refused: %v", err)
	if err := s.write(ctx, normal, func(ctx context.Context, tx *wtx) error {
		_, err := tx.ExecContext(ctx, `PRAGMA max_page_count = 1073741823`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvent(ctx, store.Event{Run: run.ID, Kind: "test.big", Payload: []byte(big)}); err != nil {
		t.Fatalf("the same write with room again: %v", err)
	}
	// Any other failure is not a full disk.
	if _, err := s.GetRun(ctx, "nope"); errors.Is(err, store.ErrDiskFull) {
		t.Errorf("a missing run is %v", err)
	}
}

// TestDiskFullFromTheSystem: before SQLite has the file (its folder, the
// file itself), the system's own codes for a disk that refuses writes are
// store.ErrDiskFull too; others are not.
func TestDiskFullFromTheSystem(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG, syscall.EROFS} {
		err := diskFull(&os.PathError{Op: "open", Path: "state.db", Err: errno})
		if !errors.Is(err, store.ErrDiskFull) || !errors.Is(err, errno) {
			t.Errorf("%v: %v, want store.ErrDiskFull wrapping it", errno, err)
		}
	}
	if err := diskFull(&os.PathError{Op: "open", Path: "state.db", Err: syscall.EACCES}); errors.Is(err, store.ErrDiskFull) {
		t.Errorf("EACCES: %v", err)
	}
	if diskFull(nil) != nil {
		t.Error("diskFull(nil) is not nil")
	}
}
