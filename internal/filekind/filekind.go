// Package filekind names what a path is, for messages that refuse one: a
// state that is a device, an output that holds a symbolic link.
package filekind

import "io/fs"

// Of names the kind of file a mode's type bits describe, with its article:
// "a file", "a folder", "a symbolic link", "a device", "a named pipe", "a
// socket", else "a special file".
func Of(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a file"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
}
