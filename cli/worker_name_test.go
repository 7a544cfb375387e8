package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestWorkerNameRefused: a worker's name is printed by pipec workers, in
// every worker's log and in the failover counts ("w1 1, w2 0"), handed to
// tasks as PIPEC_WORKER and used in the default workdir's path, so a name
// that could forge a line (a newline, a terminal escape), split a count
// (a space, a comma) or climb out of the temp folder is refused, from
// --name or PIPEC_WORKER alike, before any state is touched (exit 2, the
// name quoted).
func TestWorkerNameRefused(t *testing.T) {
	for _, c := range []struct{ flag, env string }{
		{flag: "a\nworker w9 registered"},
		{flag: "ev\x1b[31mil"},
		{flag: "w 1"},
		{flag: "w1,w2"},
		{flag: "../../x"},
		{flag: strings.Repeat("n", 129)},
		{env: "bad\tname"},
	} {
		var stdout, stderr bytes.Buffer
		env := map[string]string{"PIPEC_WORKER": c.env}
		io := IO{Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string { return env[k] },
			Environ: func() []string { return nil }}
		args := []string{"worker", "--state", "postgres://nobody@127.0.0.1:1/none?connect_timeout=1", "--workdir", t.TempDir()}
		if c.flag != "" {
			args = append(args, "--name", c.flag)
		}
		code := Main(args, io)
		out := stderr.String()
		if code != ExitUsage || !strings.Contains(out, "invalid worker name") || strings.ContainsAny(out, "\x1b\t") ||
			strings.Count(out, "\n") != 1 || stdout.Len() != 0 {
			t.Errorf("name %q (env %q): exit %d, stdout %q, stderr %q", c.flag, c.env, code, stdout.String(), out)
		}
	}
}
