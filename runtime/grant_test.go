package runtime

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/sink"
	"github.com/pipec/pipec/runtime/store"
)

// grantScript: attempt 1 writes half its rows, announces its pid and waits
// for "go" (so only a SIGSTOP makes its lease expire); attempt 2 announces
// itself and waits for "go2", heartbeating, so attempt 1 can finish first.
const grantScript = `set -eu
out="$PIPEC_OUTPUT_part/part.csv"
echo "id,attempt" > "$out"
i=0
while [ $i -lt 50 ]; do echo "$i,$PIPEC_ATTEMPT" >> "$out"; i=$((i+1)); done
touch "$PIPEC_HEARTBEAT"
if [ "$PIPEC_ATTEMPT" = 1 ]; then
  echo $$ > half.tmp && mv half.tmp half
  while [ ! -e go ]; do touch "$PIPEC_HEARTBEAT"; sleep 0.02; done
else
  echo $$ > a2.tmp && mv a2.tmp a2
  while [ ! -e go2 ]; do touch "$PIPEC_HEARTBEAT"; sleep 0.02; done
fi
while [ $i -lt 100 ]; do echo "$i,$PIPEC_ATTEMPT" >> "$out"; i=$((i+1)); done
`

// TestUnknownAttemptFencedAtGrant is the regression test of issue 7 point 2:
// attempt 1 is stopped with SIGSTOP, its lease expires and attempt 2 is
// granted a higher token; attempt 1 is resumed and finishes (and passes its
// audit) *before* attempt 2 publishes. Its publish is refused at grant,
// recorded as fenced, and nothing is visible until attempt 2 publishes.
func TestUnknownAttemptFencedAtGrant(t *testing.T) {
	f := newFixture(t, strings.ReplaceAll(tornHCL, `"torn"`, `"grant"`), map[string]string{"write.sh": grantScript})
	o := f.options("2024-01-01")
	o.ZombieGrace = 20 * time.Second
	var ev events
	o.OnEvent = ev.add
	done := runAsync(t, o)
	touch := func(name string) {
		if err := os.WriteFile(filepath.Join(f.dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pid1 := waitPID(t, filepath.Join(f.dir, "half"))
	if err := syscall.Kill(-pid1, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-pid1, syscall.SIGCONT)
	touch("go")
	waitPID(t, filepath.Join(f.dir, "a2")) // attempt 2 holds its token
	if err := syscall.Kill(-pid1, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	// Attempt 1 finishes, is audited, publishes first: fenced at grant.
	ctx := context.Background()
	runID := "grant/2024-01-01/r1"
	var fenced store.Event
	deadline := time.Now().Add(30 * time.Second)
	for fenced.Kind == "" {
		evs, err := f.st.Events(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Kind == store.EventPublishFenced && e.Attempt == 1 {
				fenced = e
			}
			if e.Kind == store.EventPublishWon && e.Attempt == 1 {
				touch("go2")
				t.Fatal("the unknown attempt 1 won the publish before its successor published")
			}
		}
		if time.Now().After(deadline) {
			touch("go2")
			t.Fatalf("attempt 1 never tried to publish; events: %v", ev.kinds(""))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(string(fenced.Payload), `"fenced_by":"grant"`) {
		t.Errorf("fenced event = %s, want fenced_by grant", fenced.Payload)
	}
	d, err := sink.NewDirectory("out", filepath.Join(f.dir, "out"), "token", f.st)
	if err != nil {
		t.Fatal(err)
	}
	if dir, err := d.Visible("2024-01-01"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("something is visible before attempt 2 published: %s, %v", dir, err)
	}
	if _, err := f.st.Pointer(ctx, "grant", "out", "part", "2024-01-01"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the store has a pointer before attempt 2 published: %v", err)
	}

	touch("go2")
	var sum *Summary
	select {
	case sum = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not end")
	}
	if sum == nil {
		return
	}
	if sum.Failed {
		t.Fatalf("run failed:\n%s", sum.text())
	}
	if len(sum.Fenced) != 1 || sum.Fenced[0].Attempt != 1 || sum.Fenced[0].FencedBy != "grant" ||
		sum.Fenced[0].HeldBy <= sum.Fenced[0].Token {
		t.Fatalf("fenced = %+v\n%s", sum.Fenced, sum.text())
	}
	dir, err := d.Visible("2024-01-01")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "part.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if att, err := wholeVersion(string(b)); err != nil || att != "2" {
		t.Fatalf("visible output is attempt %q's (%v)", att, err)
	}
}
