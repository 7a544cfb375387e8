package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/compiler"
)

// TestResolveIntervalFarBeyondStart: a date more than ~292 years after the
// schedule's start (where time.Time.Sub saturates) is judged exactly: an
// aligned one resolves, an unaligned one names the interval that really
// contains it and the next.
func TestResolveIntervalFarBeyondStart(t *testing.T) {
	daily := &compiler.PlanSchedule{Every: "24h", Start: "2024-01-01T00:00:00Z"}
	sixHourly := &compiler.PlanSchedule{Every: "6h", Start: "2024-01-01T03:00:00Z"}
	weekly := &compiler.PlanSchedule{Every: "168h", Start: "2024-01-01T00:00:00Z"} // a Monday
	for _, tc := range []struct {
		sched  *compiler.PlanSchedule
		in     string
		key    string // when it resolves
		errHas []string
	}{
		{sched: daily, in: "2400-01-01", key: "2400-01-01"},
		{sched: daily, in: "9999-12-31", key: "9999-12-31"},
		{sched: daily, in: "2400-01-01T06:00:00Z",
			errHas: []string{"the interval containing it starts at 2400-01-01T00:00:00Z, the next at 2400-01-02T00:00:00Z"}},
		{sched: daily, in: "2400-01-01T23:59:59.5Z",
			errHas: []string{"containing it starts at 2400-01-01T00:00:00Z,"}},
		{sched: sixHourly, in: "2500-06-01T04:00:00Z",
			errHas: []string{"containing it starts at 2500-06-01T03:00:00Z, the next at 2500-06-01T09:00:00Z"}},
		{sched: sixHourly, in: "2500-06-01T09:00:00Z", key: "2500-06-01T09:00:00Z"},
		// 2400-01-03 is a Monday: 376 years of 7 days each, exactly.
		{sched: weekly, in: "2400-01-03", key: "2400-01-03"},
		{sched: weekly, in: "2400-01-01",
			errHas: []string{"containing it starts at 2399-12-27T00:00:00Z, the next at 2400-01-03T00:00:00Z"}},
		// Near the start the message is the same.
		{sched: daily, in: "2024-03-01T06:00:00Z",
			errHas: []string{"containing it starts at 2024-03-01T00:00:00Z, the next at 2024-03-02T00:00:00Z"}},
		// Far before the start: the first interval is named.
		{sched: daily, in: "1600-01-01", errHas: []string{"before the schedule's start 2024-01-01T00:00:00Z", "the first interval starts there"}},
	} {
		iv, err := ResolveInterval(tc.sched, tc.in)
		if tc.errHas != nil {
			if err == nil {
				t.Errorf("%s: resolved to %s, want an error", tc.in, iv.Key)
				continue
			}
			for _, want := range tc.errHas {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: err = %v, want %q", tc.in, err, want)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if iv.Key != tc.key || !iv.End.Equal(iv.Start.Add(iv.Every)) {
			t.Errorf("%s: key %s, end %s; want key %s", tc.in, iv.Key, iv.End.Format(time.RFC3339), tc.key)
		}
	}
}
