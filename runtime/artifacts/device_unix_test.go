//go:build unix

package artifacts

import (
	"os"
	"syscall"
)

// sameDevice reports whether two files are on one filesystem.
func sameDevice(a, b os.FileInfo) bool {
	sa, okA := a.Sys().(*syscall.Stat_t)
	sb, okB := b.Sys().(*syscall.Stat_t)
	return okA && okB && sa.Dev == sb.Dev
}
