//go:build linux

package sqlite

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// networkFilesystems are the filesystems, by statfs magic, on which a
// state file shared by workers is refused: SQLite's locks are not reliable
// over them, and the processes sharing the file may be on several
// machines, whose lease clocks (CLOCK_BOOTTIME of one boot) do not compare.
var networkFilesystems = map[int64]string{
	unix.NFS_SUPER_MAGIC:   "NFS",
	unix.SMB_SUPER_MAGIC:   "SMB",
	0xFF534D42:             "CIFS",
	0xFE534D42:             "SMB2",
	unix.AFS_SUPER_MAGIC:   "AFS",
	unix.AFS_FS_MAGIC:      "AFS",
	unix.CODA_SUPER_MAGIC:  "Coda",
	unix.V9FS_MAGIC:        "9P",
	unix.CEPH_SUPER_MAGIC:  "Ceph",
	unix.OCFS2_SUPER_MAGIC: "OCFS2",
	0x01161970:             "GFS2",
	0x0BD00BD0:             "Lustre",
}

// CheckLocal refuses a state file that several workers would share over a
// network filesystem (see networkFilesystems): workers on one machine share
// an SQLite file; workers on several share a PostgreSQL database. It looks
// at the file's folder, which exists once the store was opened.
func CheckLocal(path string) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &fs); err != nil {
		return fmt.Errorf("state %s: %w", path, err)
	}
	return localType(path, int64(fs.Type))
}

// localType refuses the filesystem type (a statfs magic) of path's folder
// when it is a network filesystem.
func localType(path string, fsType int64) error {
	if name, ok := networkFilesystems[fsType]; ok {
		return fmt.Errorf("state %s is on a network filesystem (%s): workers share an SQLite file on one machine only "+
			"(give --state postgres://… for workers on several)", path, name)
	}
	return nil
}
