package store

import (
	"testing"
	"time"
)

// TestRequestChecks: what every store refuses before touching its tables.
func TestRequestChecks(t *testing.T) {
	version := Version{Artifact: "a", Interval: "i", Run: "p/i/r1", Task: "t", Attempt: 1, Digest: "sha256:00"}
	swap := Swap{Pipeline: "p", Sink: "s", Artifact: "a", Interval: "i"}
	for _, tc := range []struct {
		name string
		err  error
		ok   bool
	}{
		{"a run", NewRun{Pipeline: "p", Interval: "i"}.Check(), true},
		{"a run without its interval", NewRun{Pipeline: "p"}.Check(), false},
		{"a run without its pipeline", NewRun{Interval: "i"}.Check(), false},
		{"a run in 2262", NewRun{Pipeline: "p", Interval: "2262-04-10", IntervalStart: day(2262, 4, 10), IntervalEnd: day(2262, 4, 11)}.Check(), true},
		{"a run ending past what a state records", NewRun{Pipeline: "p", Interval: "2262-04-11", IntervalStart: day(2262, 4, 11), IntervalEnd: day(2262, 4, 12)}.Check(), false},
		{"a run before what a state records", NewRun{Pipeline: "p", Interval: "1600-01-01", IntervalStart: day(1600, 1, 1), IntervalEnd: day(1600, 1, 2)}.Check(), false},
		{"an attempt", AttemptSpec{Run: "p/i/r1", Task: "t"}.Check(), true},
		{"an attempt without its task", AttemptSpec{Run: "p/i/r1"}.Check(), false},
		{"an attempt without its run", AttemptSpec{Task: "t"}.Check(), false},
		{"a version", version.CheckRecord(), true},
		{"a version of no attempt", func() error { v := version; v.Attempt = 0; return v.CheckRecord() }(), false},
		{"a version of no task", func() error { v := version; v.Task = ""; return v.CheckRecord() }(), false},
		{"a version with another digest", func() error { v := version; v.Digest = "md5:00"; return v.CheckRecord() }(), false},
		{"a swap", swap.Check(), true},
		{"a swap of no sink", func() error { sw := swap; sw.Sink = ""; return sw.Check() }(), false},
		{"a swap of no pipeline", func() error { sw := swap; sw.Pipeline = ""; return sw.Check() }(), false},
	} {
		if (tc.err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, tc.err, tc.ok)
		}
	}
}

func day(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
