//go:build unix

package artifacts

import (
	"os"
	"syscall"
)

// sameFilesystem reports whether the existing paths a and b are on one
// filesystem (one device); false when either cannot be read.
func sameFilesystem(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA != nil || errB != nil {
		return false
	}
	sa, okA := fa.Sys().(*syscall.Stat_t)
	sb, okB := fb.Sys().(*syscall.Stat_t)
	return okA && okB && sa.Dev == sb.Dev
}
