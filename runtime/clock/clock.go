// Package clock is the clock leases are judged on: one that only moves
// forward. Wall-clock time steps (an NTP correction, an operator's date
// command, a VM resumed from suspend with its clock set forward): a lease
// judged on it expires healthy attempts, or never expires dead ones.
// CLOCK_BOOTTIME counts nanoseconds since boot, suspend included, and is
// never set; with the boot id beside every reading, readings of two boots
// are never compared, and a reboot expires every lease of the boot before.
//
// Within one machine that is exact. Across machines no local clock is
// shared; a store serving several machines judges leases on its server's
// clock instead (see the PostgreSQL store).
package clock

// Reading is one reading of a lease clock: nanoseconds on the clock of one
// boot. Readings of different boots do not compare.
type Reading struct {
	// Boot names the boot (/proc/sys/kernel/random/boot_id), or the kind
	// of clock where there is none ("wall" for the wall-clock fallback).
	Boot string
	// Nanos counts on that boot's clock.
	Nanos int64
}

// Lease reads a clock that only moves forward.
type Lease func() Reading

// Expired reports whether a lease lasting until `until` has expired at
// `now`: on another boot it has (the holder died with its boot), on the same
// boot when now reached until.
func Expired(until, now Reading) bool {
	return until.Boot != now.Boot || now.Nanos >= until.Nanos
}
