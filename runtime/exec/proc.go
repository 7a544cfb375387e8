package exec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// Identity names one process for as long as the machine runs, and after.
// A pid alone is not a name: the kernel reuses pids, so a rerun that kills
// "pid 4711" from an old record may hit an unrelated program. The pair (pid,
// start time in clock ticks after boot) is unique within one boot, and the
// boot id tells boots apart; the host tells machines apart. An identity is
// recorded in the store for every attempt, so a rerun after a kill -9 of
// pipec can find the attempt's orphaned processes and end them.
type Identity struct {
	// Host is the machine's hostname.
	Host string
	// Boot is /proc/sys/kernel/random/boot_id: it changes with every boot,
	// so a process of an earlier boot is known to be gone.
	Boot string
	// PID is the process id; PGID its process group (the same: every task
	// leads its own group).
	PID  int
	PGID int
	// Start is the process's start time in clock ticks after boot
	// (/proc/PID/stat, field 22).
	Start uint64
}

// Known reports whether the identity names a process (a pid and a start
// time were recorded).
func (id Identity) Known() bool { return id.PID > 0 && id.Start > 0 }

// Marker names the environment entries that every process of one attempt
// carries (the runtime sets them, children inherit them): it finds an
// attempt's processes whose pid was never recorded (pipec died between
// starting the process and recording it) and the children of a leader that
// already exited. Both entries must be present, as "KEY=value".
type Marker []string

// ErrUnsupported: this platform has no way to look at other processes
// (everything but Linux).
var ErrUnsupported = errors.New("process identities need Linux /proc")

// Self is the identity of the running process's machine: host and boot id,
// with no process.
func Self() (Identity, error) {
	host, err := os.Hostname()
	if err != nil {
		return Identity{}, err
	}
	boot, err := BootID()
	if err != nil {
		return Identity{Host: host}, err
	}
	return Identity{Host: host, Boot: boot}, nil
}

// Orphans is what EndOrphans found and did.
type Orphans struct {
	// Found is how many live processes belonged to the attempt.
	Found int
	// Killed is how many of them needed SIGKILL after the grace.
	Killed int
	// Elsewhere: the attempt ran on another host, so nothing here can be
	// known about it.
	Elsewhere bool
	// Rebooted: the attempt ran in an earlier boot of this host; its
	// processes are certainly gone.
	Rebooted bool
}

// Target is one attempt whose processes may have outlived their pipec.
type Target struct {
	ID     Identity
	Marker Marker
}

// EndOrphans ends every live process of the attempts recorded as targets on
// this machine and waits until they are gone: SIGTERM (and SIGCONT, so a
// stopped process sees it), then SIGKILL after grace. A process belongs to an
// attempt when it is the recorded one (same pid AND same start time, same
// boot), when it is in the recorded process group with a later start time
// while that leader is verified alive, or when its environment carries every
// entry of the marker and it started no earlier than the attempt. Each
// process is held by a pidfd while it is verified and signalled, so a pid
// reused in between is never hit. /proc is read once for all targets (a
// process seen in the middle of an execve, with no environment yet, is read
// again).
//
// An attempt of another host (or of no recorded host) is reported as
// Elsewhere and one of an earlier boot as Rebooted; neither is touched. The result has one entry per target;
// the error says the processes could not be looked at or did not end.
func EndOrphans(ctx context.Context, targets []Target, grace time.Duration) ([]Orphans, error) {
	res := make([]Orphans, len(targets))
	self, err := Self()
	if err != nil {
		return res, err
	}
	var local []int
	for i, t := range targets {
		switch {
		case t.ID.Host == "" || t.ID.Host != self.Host:
			// Another machine, or a record that does not say (written
			// before pipec recorded hosts): nothing here can tell.
			res[i].Elsewhere = true
		case t.ID.Boot != self.Boot:
			res[i].Rebooted = true
		default:
			local = append(local, i)
		}
	}
	if len(local) == 0 {
		return res, nil
	}
	var want []Target
	for _, i := range local {
		want = append(want, targets[i])
	}
	owned, err := findProcs(want)
	if err != nil {
		return res, err
	}
	var all []*heldProc
	for k, procs := range owned {
		res[local[k]].Found = len(procs)
		all = append(all, procs...)
	}
	defer func() {
		for _, p := range all {
			p.close()
		}
	}()
	if len(all) == 0 {
		return res, nil
	}
	for _, p := range all {
		_ = p.signal(sigTERM)
		_ = p.signal(sigCONT)
	}
	if waitGone(ctx, all, grace) {
		return res, nil
	}
	for k, procs := range owned {
		for _, p := range procs {
			if p.alive() {
				res[local[k]].Killed++
				_ = p.signal(sigKILL)
			}
		}
	}
	if waitGone(ctx, all, 10*time.Second) {
		return res, nil
	}
	return res, fmt.Errorf("%d orphaned process(es) did not end after SIGKILL", countAlive(all))
}

// waitGone polls until every process ended, for at most d.
func waitGone(ctx context.Context, procs []*heldProc, d time.Duration) bool {
	deadline := time.Now().Add(d)
	pause := time.Millisecond
	for {
		if countAlive(procs) == 0 {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

func countAlive(procs []*heldProc) int {
	n := 0
	for _, p := range procs {
		if p.alive() {
			n++
		}
	}
	return n
}
