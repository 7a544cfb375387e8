package sink

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing f's data now, without
// waiting: the fsync that follows (unsynced.sync) then waits for writes
// already in flight with those of the other files of its batch, instead of
// starting each file's alone. A failure here is not one: the fsync still
// writes and reports.
func startWriteback(f *os.File) {
	_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}
