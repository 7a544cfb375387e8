package exec

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogIsCapped: a task that prints 2 MB with a 64 KiB log limit leaves a
// log of the first 64 KiB, a marker where it was cut and the count of what
// was dropped; the tail still holds the output's end.
func TestLogIsCapped(t *testing.T) {
	dir := t.TempDir()
	script(t, dir, "task.sh", `i=0; while [ $i -lt 20000 ]; do printf 'line %05d %s\n' $i 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'; i=$((i+1)); done; echo the-end`)
	log := filepath.Join(dir, "logs", "1.log")
	const limit = 64 << 10
	p, err := Start(context.Background(), Spec{Argv: []string{"./task.sh"}, Dir: dir, Env: env(), LogPath: log, LogLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	r := p.Wait()
	if !r.Success() {
		t.Fatalf("result = %+v", r)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	head, rest, cut := strings.Cut(s, "\n[pipec: log cut here at 65536 bytes")
	if !cut {
		t.Fatalf("no cut marker in a %d-byte log", len(b))
	}
	if len(head) != limit || !strings.HasPrefix(head, "line 00000 ") {
		t.Errorf("kept %d bytes before the marker, want %d from the start", len(head), limit)
	}
	if !strings.Contains(rest, "bytes of output dropped after the cut]\n") || strings.Contains(s, "the-end") {
		t.Errorf("log after the cut = %q", rest)
	}
	if len(b) > limit+512 {
		t.Errorf("log is %d bytes, limit %d", len(b), limit)
	}
	if !strings.HasSuffix(r.Tail, "the-end\n") {
		t.Errorf("tail does not end with the output's end: %q", r.Tail[max(0, len(r.Tail)-80):])
	}
	// Under the limit nothing is marked.
	script(t, dir, "small.sh", `echo small`)
	small := filepath.Join(dir, "logs", "2.log")
	p, err = Start(context.Background(), Spec{Argv: []string{"./small.sh"}, Dir: dir, Env: env(), LogPath: small, LogLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	p.Wait()
	if b, err := os.ReadFile(small); err != nil || string(b) != "small\n" {
		t.Errorf("small log = %q, %v", b, err)
	}
}
