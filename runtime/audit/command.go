package audit

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/exec"
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
// output as the reason ("exit code 3", "timed out after 10m"). The command
// runs in its own process group, and the whole group is killed on timeout,
// on cancellation and when the command exits.
func runCommand(ctx context.Context, c compiler.PlanCheck, dir string, opt Options) ([]string, error) {
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	// The one process runner of the runtime (package exec): own process
	// group, the group killed on timeout and cancellation, and whatever the
	// command leaves running killed when it exits.
	p, err := exec.Start(ctx, exec.Spec{
		Argv:      c.Command,
		Dir:       opt.Dir,
		Env:       append(slices.Clip(opt.Env), "PIPEC_CHECK_INPUT="+dir, "PIPEC_CHECK_NAME="+c.Name, "PIPEC_CHECK_ARTIFACT="+c.Input),
		Timeout:   timeout,
		TailBytes: tailBytes,
	})
	reason := "command " + strings.Join(c.Command, " ") + ": "
	if err != nil {
		return []string{redact(opt, reason+"did not start: "+err.Error())}, nil
	}
	res := p.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err() // cancelled by the caller: no verdict
	}
	if res.Success() {
		return nil, nil
	}
	reason += res.Describe()
	text := strings.TrimSpace(string(bytes.ToValidUTF8([]byte(res.Tail), []byte("?"))))
	if len(res.Tail) >= tailBytes {
		text = "…" + text
	}
	if text != "" {
		reason += "\n" + text
	}
	return []string{redact(opt, reason)}, nil
}

func redact(opt Options, s string) string {
	if opt.Redact != nil {
		return opt.Redact(s)
	}
	return s
}
