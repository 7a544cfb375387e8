package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pipec/pipec/internal/atomicfile"
)

// writeUserFile writes data to a path the user named (compile -o, report -o,
// the specs fmt rewrites), as a shell redirection would, never destroying
// what is not a file of ours:
//   - a regular file (or a link to one) is replaced atomically, keeping its
//     mode: readers see the old content or the new, never half; a link stays
//     a link and its target gets the new content;
//   - a new path is created atomically with perm (through a dangling link,
//     its target);
//   - a device, a pipe or a socket is opened and written through (-o
//     /dev/null discards, -o /dev/stdout prints, a FIFO feeds its reader);
//     it is never replaced by a regular file;
//   - a folder is refused.
//
// Every error is a usage error (exit code 2) that names path.
func writeUserFile(path string, data []byte, perm os.FileMode) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, lerr := os.Lstat(path); lerr == nil {
			// A dangling link: create its target through it, as `>` does.
			return writeThrough(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm, data)
		}
		return writeAtomic(path, path, data, perm)
	case err != nil:
		return usageErr("%v", unwrapPathError(err))
	case st.IsDir():
		return usageErr("%s is a folder: name a file to write to", path)
	case st.Mode().IsRegular():
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return usageErr("%v", unwrapPathError(err))
		}
		return writeAtomic(path, real, data, st.Mode().Perm())
	default:
		// Not a regular file: write through it, never replace it.
		return writeThrough(path, os.O_WRONLY, 0, data)
	}
}

// refuseInput is a usage error when output names one of the files the
// command reads (the same file, through links): compile -o SPEC or report
// -o STATE would replace what it came from.
func refuseInput(output string, inputs ...string) error {
	out, err := os.Stat(output)
	if err != nil {
		return nil // a new file, or one writeUserFile reports
	}
	for _, in := range inputs {
		if st, err := os.Stat(in); err == nil && os.SameFile(out, st) {
			return usageErr("%s is what this command reads (%s): name another file to write to", output, in)
		}
	}
	return nil
}

// writeThrough opens path (following a link) and writes data to it.
func writeThrough(path string, flag int, perm os.FileMode, data []byte) error {
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return usageErr("%v", unwrapPathError(err))
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return usageErr("%v", unwrapPathError(werr))
	}
	return nil
}

// writeAtomic replaces real (path, or the file a link at path points to)
// with data; errors name path, the user's name, not a temporary file's.
func writeAtomic(path, real string, data []byte, perm os.FileMode) error {
	if err := atomicfile.Write(real, data, perm); err != nil {
		var pe *fs.PathError
		var le *os.LinkError
		switch {
		case errors.As(err, &pe):
			err = pe.Err
		case errors.As(err, &le):
			err = le.Err
		}
		return usageErr("%s: %v", path, fmt.Errorf("cannot write: %w", err))
	}
	return nil
}
