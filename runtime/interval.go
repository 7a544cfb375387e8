package runtime

import (
	"fmt"
	"math/big"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/store"
)

// DefaultEvery is the interval length of a pipeline without a schedule.
const DefaultEvery = 24 * time.Hour

// Interval is one logical data interval [Start, End) of a schedule.
type Interval struct {
	Start time.Time
	End   time.Time
	// Key names the interval in run ids, artifact versions, pointers and sink
	// paths: "2024-01-01" for day-aligned intervals, the RFC 3339 start
	// otherwise.
	Key string
	// Every is the schedule's interval length.
	Every time.Duration
	// First is the schedule's start (zero without a schedule).
	First time.Time
}

// ResolveInterval finds the interval that starts at s ("2024-01-01" or an RFC
// 3339 time) in the plan's schedule (every = 24h without one). A time that is
// not the start of an interval of the schedule is an error that names the
// interval containing it and the next one; a time before the schedule's
// start names the first interval. Both hold however far the date is from
// the schedule's start (see offsetInto); an interval a state cannot record
// (store.CheckInterval) is refused first.
func ResolveInterval(sched *compiler.PlanSchedule, s string) (Interval, error) {
	start, err := parseIntervalStart(s)
	if err != nil {
		return Interval{}, err
	}
	iv := Interval{Start: start, Every: DefaultEvery}
	if sched != nil {
		if sched.Every != "" {
			d, err := time.ParseDuration(sched.Every)
			if err != nil || d <= 0 {
				return Interval{}, fmt.Errorf("the plan's schedule has an invalid every %q", sched.Every)
			}
			iv.Every = d
		}
		if sched.Start != "" {
			first, err := time.Parse(time.RFC3339, sched.Start)
			if err != nil {
				return Interval{}, fmt.Errorf("the plan's schedule has an invalid start %q", sched.Start)
			}
			iv.First = first.UTC()
		}
	}
	// First, so that no interval is named that could never run.
	if err := store.CheckInterval(s, start, start.Add(iv.Every)); err != nil {
		return Interval{}, err
	}
	if !iv.First.IsZero() {
		if start.Before(iv.First) {
			return Interval{}, fmt.Errorf("interval %s is before the schedule's start %s: the first interval starts there",
				s, iv.First.Format(time.RFC3339))
		}
		if off := offsetInto(iv.First, start, iv.Every); off != 0 {
			near := start.Add(-off)
			return Interval{}, fmt.Errorf("%s is not the start of an interval of the schedule (every %s from %s); the interval containing it starts at %s, the next at %s",
				s, iv.Every, iv.First.Format(time.RFC3339), near.Format(time.RFC3339), near.Add(iv.Every).Format(time.RFC3339))
		}
	}
	iv.End = start.Add(iv.Every)
	iv.Key = intervalKey(start, iv.Every)
	return iv, nil
}

// offsetInto is how far t lies into its interval of a schedule of every
// from first (t not before first): (t − first) mod every. It is computed on
// whole nanoseconds in a big integer because t.Sub(first) saturates at
// about 292 years, which made the remainder (and the interval an error
// named) wrong for dates far beyond the schedule's start.
func offsetInto(first, t time.Time, every time.Duration) time.Duration {
	d := big.NewInt(t.Unix() - first.Unix())
	d.Mul(d, big.NewInt(int64(time.Second)))
	d.Add(d, big.NewInt(int64(t.Nanosecond()-first.Nanosecond())))
	return time.Duration(d.Mod(d, big.NewInt(int64(every))).Int64())
}

// Offset returns the interval n steps away (-1: the previous one). ok is false
// when that interval is before the schedule's start, so it cannot exist.
func (iv Interval) Offset(n int) (Interval, bool) {
	o := iv
	o.Start = iv.Start.Add(time.Duration(n) * iv.Every)
	o.End = o.Start.Add(iv.Every)
	o.Key = intervalKey(o.Start, iv.Every)
	if !iv.First.IsZero() && o.Start.Before(iv.First) {
		return o, false
	}
	return o, true
}

// String is "start/end" in RFC 3339.
func (iv Interval) String() string {
	return iv.Start.Format(time.RFC3339) + "/" + iv.End.Format(time.RFC3339)
}

func parseIntervalStart(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("invalid interval %q: give the interval's start as a date (2024-01-01) or an RFC 3339 time (2024-01-01T06:00:00Z)", s)
}

func intervalKey(start time.Time, every time.Duration) string {
	if every%(24*time.Hour) == 0 && start.Equal(start.Truncate(24*time.Hour)) {
		return start.Format(time.DateOnly)
	}
	return start.Format("2006-01-02T15:04:05Z")
}
