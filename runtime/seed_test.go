package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
)

// seedHCL has five independent tasks that fail transiently on their first
// two attempts (a counter file per task) and are retried with full jitter.
func seedHCL() string {
	var b strings.Builder
	b.WriteString(`
pipeline "seeded" {
  error "transient" {
    exit_codes = [75]
  }
  retry "r" {
    max_attempts = 3
    initial      = "150ms"
    multiplier   = 2
    max_delay    = "1s"
    jitter       = "full"
    on           = ["transient"]
  }
`)
	for i := range 5 {
		fmt.Fprintf(&b, "  task \"t%d\" {\n    command = [\"./flaky.sh\", \"t%d\"]\n    retry   = \"r\"\n  }\n", i, i)
	}
	b.WriteString("}\n")
	return b.String()
}

const flakySh = `n=$(cat "count-$1" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > "count-$1"
[ "$n" -ge 3 ] || exit 75
`

// TestSeedReproducesDelays is point 15: with one seed, every task's retry
// after every attempt waits the same time in two runs whose scheduling
// differs (five tasks at once, then one at a time in fresh folders), as the
// recorded attempt.retry events show; another seed changes the delays.
func TestSeedReproducesDelays(t *testing.T) {
	delays := func(seed uint64, parallel int) map[string]int64 {
		f := newFixture(t, seedHCL(), map[string]string{"flaky.sh": flakySh})
		o := f.options("2024-01-01")
		o.Seed, o.Parallel = seed, parallel
		sum := f.run(o)
		if sum.Failed {
			t.Fatalf("run failed:\n%s", sum.text())
		}
		evs, err := f.st.Events(context.Background(), sum.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, e := range evs {
			if e.Kind != EventAttemptRetry {
				continue
			}
			var p struct {
				DelayMS int64 `json:"delay_ms"`
			}
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			out[fmt.Sprintf("%s#%d", e.Task, e.Attempt)] = p.DelayMS
		}
		if len(out) != 10 {
			t.Fatalf("seed %d parallel %d: %d retries recorded, want 10: %v", seed, parallel, len(out), out)
		}
		return out
	}
	wide, narrow := delays(7, 5), delays(7, 1)
	if !maps.Equal(wide, narrow) {
		t.Errorf("seed 7: delays differ with the scheduling order:\nparallel 5: %v\nparallel 1: %v", wide, narrow)
	}
	distinct := map[int64]bool{}
	for _, d := range wide {
		distinct[d] = true
	}
	if len(distinct) < 5 {
		t.Errorf("seed 7 drew only %d distinct delays for 10 retries: %v", len(distinct), wide)
	}
	if other := delays(8, 5); maps.Equal(other, wide) {
		t.Errorf("seeds 7 and 8 drew the same delays: %v", wide)
	}
}
