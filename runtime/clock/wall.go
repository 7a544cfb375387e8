package clock

import "time"

// Wall makes a lease clock of a wall clock: what tests use to drive leases
// by hand, and the fallback where CLOCK_BOOTTIME does not exist. It steps
// when the wall clock does.
func Wall(now func() time.Time) Lease {
	return func() Reading { return Reading{Boot: "wall", Nanos: now().UnixNano()} }
}
