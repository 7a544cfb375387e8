package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const ordersHCL = `
pipeline "orders" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
  error "transient" {
    exit_codes = [75]
  }
  error "schema" {
    exit_codes    = [65]
    deterministic = true
  }
  retry "default" {
    max_attempts = 3
    initial      = "10ms"
    multiplier   = 2
    max_delay    = "1s"
    jitter       = "none"
    on           = ["transient"]
  }
  task "extract" {
    command = ["./extract.sh"]
    outputs = ["raw"]
    retry   = "default"
    timeout = "10s"
    env     = { MODE = "full" }
  }
  task "clean" {
    command = ["./clean.sh"]
    inputs  = ["raw"]
    outputs = ["clean"]
    retry   = "default"
  }
  task "side" {
    command = ["./side.sh"]
  }
  check "clean_ok" {
    input         = "clean"
    row_count_min = 1
    unique        = ["id"]
  }
  sink "wh" {
    type    = "directory"
    path    = "warehouse/clean"
    fencing = "token"
  }
  publish "mart" {
    artifact = "clean"
    sink     = "wh"
  }
}
`

var ordersScripts = map[string]string{
	"extract.sh": `set -eu
printf 'id,v\n1,a\n2,b\n2,b\n' > "$PIPEC_OUTPUT_raw/raw.csv"
echo "extract $PIPEC_RUN_ID $PIPEC_TASK $PIPEC_ATTEMPT $PIPEC_INTERVAL_START $PIPEC_INTERVAL_END $PIPEC_CODE_VERSION $MODE"
`,
	"clean.sh": `set -eu
sort -u "$PIPEC_INPUT_raw/raw.csv" | sort -r > "$PIPEC_OUTPUT_clean/clean.csv"
`,
	"side.sh": `echo side`,
}

func TestRunEndToEnd(t *testing.T) {
	f := newFixture(t, ordersHCL, ordersScripts)
	var ev events
	o := f.options("2024-01-01")
	o.OnEvent = ev.add
	sum := f.run(o)
	if sum.Failed {
		t.Fatalf("run failed:\n%s", sum.text())
	}
	if sum.Run.ID != "orders/2024-01-01/r1" {
		t.Errorf("run id = %s", sum.Run.ID)
	}
	for _, name := range []string{"extract", "clean", "side"} {
		if tr := sum.task(name); tr.State != TaskSucceeded || tr.Attempts != 1 {
			t.Errorf("task %s: %+v", name, tr)
		}
	}
	b, err := os.ReadFile(filepath.Join(f.dir, "warehouse/clean/2024-01-01/clean.csv"))
	if err != nil || string(b) != "id,v\n2,b\n1,a\n" {
		t.Fatalf("published = %q, %v", b, err)
	}
	log, err := os.ReadFile(filepath.Join(f.dir, ".pipec/logs/orders/2024-01-01/r1/extract/1.log"))
	if err != nil {
		t.Fatal(err)
	}
	want := "extract orders/2024-01-01/r1 extract 1 2024-01-01T00:00:00Z 2024-01-02T00:00:00Z v1 full\n"
	if string(log) != want {
		t.Errorf("log = %q, want %q", log, want)
	}
	if len(sum.Publish) != 1 || sum.Publish[0].Outcome != "won" {
		t.Errorf("publishes = %+v", sum.Publish)
	}
	text := sum.text()
	if !strings.Contains(text, "visible at "+filepath.Join(f.dir, "warehouse/clean/2024-01-01")) {
		t.Errorf("summary does not say where the data is:\n%s", text)
	}

	// A rerun of the same interval reuses everything and publishes nothing new.
	sum2 := f.run(f.options("2024-01-01"))
	if sum2.Failed || sum2.Run.ID != "orders/2024-01-01/r2" {
		t.Fatalf("rerun:\n%s", sum2.text())
	}
	for _, name := range []string{"extract", "clean", "side"} {
		if tr := sum2.task(name); tr.State != TaskReused {
			t.Errorf("rerun task %s: %+v", name, tr)
		}
	}
	if sum2.Publish[0].Outcome != "idempotent" {
		t.Errorf("rerun publish = %+v", sum2.Publish)
	}
	// --force runs everything again: a new version with a higher token.
	o3 := f.options("2024-01-01")
	o3.Force = true
	sum3 := f.run(o3)
	if sum3.task("extract").State != TaskSucceeded || sum3.Publish[0].Outcome != "won" || sum3.Publish[0].Token <= sum.Publish[0].Token {
		t.Errorf("forced rerun:\n%s", sum3.text())
	}
}

// TestOutputWithALinkIsRejected: an output whose folder holds a symbolic
// link (to a file outside it), or whose folder the task removed or put a
// link or a file in place of, never becomes a version, and says so in the
// log, in the reason its reader is not run and in the summary, which fails
// the run as a failed check would; before, the run only said that the
// reader's input had no accepted version, or nothing at all.
func TestOutputWithALinkIsRejected(t *testing.T) {
	for _, tc := range []struct{ script, why string }{
		{`echo ok > "$PIPEC_OUTPUT_raw/a.csv" && ln -s /etc/hostname "$PIPEC_OUTPUT_raw/leak"`,
			"output raw: leak is a symbolic link (to /etc/hostname): an output holds files and folders only"},
		{`rmdir "$PIPEC_OUTPUT_raw" && ln -s /etc "$PIPEC_OUTPUT_raw"`,
			"output raw: the output's folder is a symbolic link (to /etc): an output holds files and folders only"},
		{`rmdir "$PIPEC_OUTPUT_raw" && echo x > "$PIPEC_OUTPUT_raw"`,
			"output raw: the output's folder is a file: an output holds files and folders only"},
		{`rm -r "$PIPEC_OUTPUT_raw"`,
			"output raw: the output's folder was removed: a task leaves it in place (empty, for an empty output)"},
	} {
		f := newFixture(t, `pipeline "p" {
  task "make" {
    command = ["./make.sh"]
    outputs = ["raw"]
  }
  task "use" {
    command = ["true"]
    inputs  = ["raw"]
  }
}
`, map[string]string{"make.sh": tc.script})
		sum := f.run(f.options("2024-01-01"))
		if !sum.Failed || len(sum.Unreadable) != 1 || sum.Unreadable[0] != "raw of make#1 was not accepted: "+tc.why {
			t.Errorf("%s: summary: failed %v, unreadable %q", tc.script, sum.Failed, sum.Unreadable)
		}
		if use := sum.task("use"); use.State != TaskNotRun || use.Reason != "input raw was not accepted in this run: "+tc.why {
			t.Errorf("%s: use: %+v", tc.script, use)
		}
		if !strings.Contains(sum.text(), "  output  raw of make#1 was not accepted: "+tc.why+"\n") {
			t.Errorf("%s: the summary's text does not say it:\n%s", tc.script, sum.text())
		}
		evs, err := f.st.Events(context.Background(), sum.RunID)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, ev := range evs {
			found = found || ev.Kind == EventOutputRejected && ev.Task == "make" && strings.Contains(string(ev.Payload), `"artifact":"raw"`)
		}
		if !found {
			t.Errorf("%s: no %s event in the log", tc.script, EventOutputRejected)
		}
	}
}
