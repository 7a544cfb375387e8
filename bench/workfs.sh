# bench/workfs.sh, sourced by the bench scripts: workfs DIR prints which
# file system DIR is on, since a run's figure depends on it as much as on
# pipec (docs/performance.md, "The floor", and the file systems after it):
# tmpfs syncs nothing; an ext4 with a journal commits it at each fsync; one
# without skips every inode freed in the last minutes when it makes a file
# or a folder, so the same build measures slower right after other
# programs deleted files.
workfs() {
	command -v findmnt >/dev/null || return 0
	local src fstype
	read -r src fstype < <(findmnt -no SOURCE,FSTYPE -T "$1" 2>/dev/null) || return 0
	case $fstype in
	tmpfs)
		echo "     work folder on tmpfs: nothing is synced; no durable run (docs/performance.md)" ;;
	ext4)
		# The kernel lists every ext4 journal it runs under /proc/fs/jbd2.
		if compgen -G "/proc/fs/jbd2/${src##*/}-*" >/dev/null; then
			echo "     work folder on ext4 ($src) with a journal: each fsync commits it (docs/performance.md)"
		else
			echo "     work folder on ext4 ($src) without a journal: inodes freed in the last minutes slow every new file and folder (docs/performance.md)"
		fi ;;
	*)
		echo "     work folder on $fstype ($src)" ;;
	esac
}
