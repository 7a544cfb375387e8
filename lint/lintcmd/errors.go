package lintcmd

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/pipec/pipec/spec"
)

// Exit codes of a lint run (docs/design.md section 4).
const (
	ExitOK       = 0
	ExitFindings = 1 // error findings (or warnings with --strict)
	ExitUsage    = 2 // usage error, unreadable input or an invalid configuration
)

// ExitError ends a lint run with Code; Err, when not nil, is the message the
// program prints (pipec prints it as "pipec: MESSAGE").
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// usageErr makes an exit-code-2 error.
func usageErr(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// silentExit ends a run with a code after it printed its own output.
func silentExit(code int) error {
	if code == ExitOK {
		return nil
	}
	return &ExitError{Code: code}
}

// UnreadSyntaxError says the program was built without the loader a file
// needs (pipec-lint has no CUE): it hands the whole run to pipec.
type UnreadSyntaxError struct {
	Syntax spec.Syntax
	Path   string
}

func (e *UnreadSyntaxError) Error() string {
	return fmt.Sprintf("%s: this program does not read %s specs; pipec lint does", e.Path, e.Syntax)
}

// unwrapPathError keeps "open x: no such file or directory" readable.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return errors.New(pe.Path + ": " + pe.Err.Error())
	}
	return err
}
