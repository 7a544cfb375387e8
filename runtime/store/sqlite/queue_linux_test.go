//go:build linux

package sqlite

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The filesystems a shared state file is refused on, by their statfs magic;
// local ones (ext4, tmpfs, xfs, btrfs, overlay) pass.
func TestLocalType(t *testing.T) {
	for _, fs := range []int64{unix.NFS_SUPER_MAGIC, 0xFF534D42, 0xFE534D42, unix.SMB_SUPER_MAGIC, unix.V9FS_MAGIC, unix.CEPH_SUPER_MAGIC} {
		err := localType("/mnt/x/state.db", fs)
		if err == nil || !strings.Contains(err.Error(), "state /mnt/x/state.db is on a network filesystem") ||
			!strings.Contains(err.Error(), "postgres://") {
			t.Errorf("type %#x: %v", fs, err)
		}
	}
	for _, fs := range []int64{unix.EXT4_SUPER_MAGIC, unix.TMPFS_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.OVERLAYFS_SUPER_MAGIC} {
		if err := localType("/srv/state.db", fs); err != nil {
			t.Errorf("type %#x refused: %v", fs, err)
		}
	}
}
