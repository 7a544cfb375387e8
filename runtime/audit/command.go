package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pipec/pipec/compiler"
)

// tailBytes is how much of a command check's output a reason keeps: the end,
// where the error usually is.
const tailBytes = 2048

// runCommand runs a check's command: argv exactly as written (no shell
// unless the author writes one, nothing appended), in opt.Dir, with the
// version's directory in the environment:
//
//	PIPEC_CHECK_INPUT     the version directory to audit (read it, do not write)
//	PIPEC_CHECK_NAME      the check's name
//	PIPEC_CHECK_ARTIFACT  the artifact's name
//
// The version is passed in the environment rather than as an argument so that
// an author's argv means what it says (`["sh", "-c", "..."]` gets no stray
// operand). Exit status 0 accepts; anything else, a timeout, or a command that
// cannot start rejects, with the exit status and the tail of the combined
// output as the reason. The command runs in its own process group, and the
// whole group is killed on timeout or cancellation.
func runCommand(ctx context.Context, c compiler.PlanCheck, dir string, opt Options) ([]string, error) {
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cmd := exec.CommandContext(cctx, c.Command[0], c.Command[1:]...)
	cmd.Dir = opt.Dir
	cmd.Env = append(slices.Clip(opt.Env), "PIPEC_CHECK_INPUT="+dir, "PIPEC_CHECK_NAME="+c.Name, "PIPEC_CHECK_ARTIFACT="+c.Input)
	out := &tail{limit: tailBytes}
	cmd.Stdout, cmd.Stderr = out, out
	ownProcessGroup(cmd)
	// A grandchild holding the output pipe must not keep us waiting forever.
	cmd.WaitDelay = 5 * time.Second

	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, ctx.Err() // cancelled by the caller: no verdict
	}
	if err == nil {
		return nil, nil
	}
	var what string
	var ee *exec.ExitError
	switch {
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		what = fmt.Sprintf("timed out after %s", timeout)
	case errors.As(err, &ee):
		what = ee.ProcessState.String() // "exit status 3", "signal: killed"
	default:
		what = "did not start: " + err.Error()
	}
	text := strings.TrimSpace(out.String())
	if opt.Redact != nil {
		text = opt.Redact(text)
	}
	reason := fmt.Sprintf("command %s: %s", strings.Join(c.Command, " "), what)
	if text != "" {
		reason += "\n" + text
	}
	return []string{reason}, nil
}

// tail keeps the last limit bytes written to it.
type tail struct {
	mu      sync.Mutex
	limit   int
	buf     []byte
	dropped bool
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.limit; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.dropped = true
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(bytes.ToValidUTF8(t.buf, []byte("?")))
	if t.dropped {
		s = "…" + s
	}
	return s
}
