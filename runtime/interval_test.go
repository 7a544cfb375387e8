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
// contains it and the next. An interval a state cannot record (before
// 1677-09-21 or after 2262-04-11) is refused, aligned or not.
func TestResolveIntervalFarBeyondStart(t *testing.T) {
	daily := &compiler.PlanSchedule{Every: "24h", Start: "1700-01-01T00:00:00Z"}
	sixHourly := &compiler.PlanSchedule{Every: "6h", Start: "1700-01-01T03:00:00Z"}
	weekly := &compiler.PlanSchedule{Every: "168h", Start: "1700-01-04T00:00:00Z"} // a Monday
	recent := &compiler.PlanSchedule{Every: "24h", Start: "2024-01-01T00:00:00Z"}
	for _, tc := range []struct {
		sched  *compiler.PlanSchedule
		in     string
		key    string // when it resolves
		errHas []string
	}{
		{sched: daily, in: "2200-01-01", key: "2200-01-01"},
		{sched: daily, in: "2262-04-10", key: "2262-04-10"},
		{sched: daily, in: "2200-01-01T06:00:00Z",
			errHas: []string{"the interval containing it starts at 2200-01-01T00:00:00Z, the next at 2200-01-02T00:00:00Z"}},
		{sched: daily, in: "2200-01-01T23:59:59.5Z",
			errHas: []string{"containing it starts at 2200-01-01T00:00:00Z,"}},
		{sched: sixHourly, in: "2100-06-01T04:00:00Z",
			errHas: []string{"containing it starts at 2100-06-01T03:00:00Z, the next at 2100-06-01T09:00:00Z"}},
		{sched: sixHourly, in: "2100-06-01T09:00:00Z", key: "2100-06-01T09:00:00Z"},
		// 2200-01-06 is a Monday, as 1700-01-04 was: 26,089 weeks later.
		{sched: weekly, in: "2200-01-06", key: "2200-01-06"},
		{sched: weekly, in: "2200-01-01",
			errHas: []string{"containing it starts at 2199-12-30T00:00:00Z, the next at 2200-01-06T00:00:00Z"}},
		// Near the start the message is the same.
		{sched: recent, in: "2024-03-01T06:00:00Z",
			errHas: []string{"containing it starts at 2024-03-01T00:00:00Z, the next at 2024-03-02T00:00:00Z"}},
		// Before the start: the first interval is named.
		{sched: recent, in: "1800-01-01", errHas: []string{"before the schedule's start 2024-01-01T00:00:00Z", "the first interval starts there"}},
		// Beyond what a state records: its times would wrap around.
		{sched: recent, in: "9999-12-31", errHas: []string{"interval 9999-12-31 (9999-12-31T00:00:00Z to 10000-01-01T00:00:00Z) is not between 1677-09-21T00:12:43Z and 2262-04-11T23:47:16Z"}},
		{sched: daily, in: "2262-04-11", errHas: []string{"the times a state records"}},
		{sched: daily, in: "2400-01-01T06:00:00Z", errHas: []string{"the times a state records"}},
		{sched: nil, in: "1600-01-01", errHas: []string{"the times a state records"}},
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
