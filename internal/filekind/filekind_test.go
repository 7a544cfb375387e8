package filekind

import (
	"io/fs"
	"testing"
)

func TestOf(t *testing.T) {
	for m, want := range map[fs.FileMode]string{
		0o644:                             "a file",
		fs.ModeDir | 0o755:                "a folder",
		fs.ModeSymlink:                    "a symbolic link",
		fs.ModeDevice | fs.ModeCharDevice: "a device",
		fs.ModeDevice:                     "a device",
		fs.ModeNamedPipe:                  "a named pipe",
		fs.ModeSocket:                     "a socket",
		fs.ModeIrregular:                  "a special file",
	} {
		if got := Of(m); got != want {
			t.Errorf("Of(%v) = %q, want %q", m, got, want)
		}
	}
}
