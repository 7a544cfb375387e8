package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pipec/pipec/runtime/exec"
)

// DefaultRecordWithin is Options.RecordWithin's default: as long as pipec
// waits for a state server that restarts (a local run rides out a restart
// that long), past the kill grace its tasks get to stop.
const DefaultRecordWithin = 30 * time.Second

// errStateSilent is why a stopped run's records were given up: the state
// had not answered them within that long of the stop (the kill grace and
// RecordWithin).
type errStateSilent struct{ within time.Duration }

func (e errStateSilent) Error() string {
	return fmt.Sprintf("the state did not answer within %s of the stop: what this run stopped is not recorded there, "+
		"and the next run of the interval settles it", e.within)
}

// startRecords makes r.records, the context of what the run records
// whatever ends ctx (its tasks' ends, the run's end, its events): ctx's
// end does not cancel them, so a Ctrl-C still leaves an honest account,
// but once ctx ended they get the kill grace and Options.RecordWithin to
// be answered (AfterStop). Call the returned func when the run returns.
func (r *runner) startRecords(ctx context.Context) (done func()) {
	rec, done := AfterStop(ctx, cmp.Or(r.o.KillGrace, exec.DefaultKillGrace), cmp.Or(r.o.RecordWithin, DefaultRecordWithin))
	r.records = rec
	return done
}

// AfterStop is the context of what is still written to the state, or read
// from it, once ctx ended (a Ctrl-C; what a run stopped is recorded after
// it): ctx's end does not cancel it, but grace plus within later it ends,
// its cause an error that says the state did not answer by then. A state
// that stopped answering, its connections open (a frozen server, a network
// that drops packets), would otherwise hold a stopped run for ever. Call
// done once nothing uses the context any more: it ends it.
func AfterStop(ctx context.Context, grace, within time.Duration) (_ context.Context, done func()) {
	rec, giveUp := context.WithCancelCause(context.WithoutCancel(ctx))
	stopWatch := context.AfterFunc(ctx, func() {
		t := time.NewTimer(grace + within)
		defer t.Stop()
		select {
		case <-t.C:
			giveUp(errStateSilent{grace + within})
		case <-rec.Done(): // done
		}
	})
	return rec, func() {
		stopWatch()
		giveUp(nil)
	}
}

// recordsGivenUp is why the run's records were given up (errStateSilent),
// or nil.
func (r *runner) recordsGivenUp() error {
	var silent errStateSilent
	if cause := context.Cause(r.records); errors.As(cause, &silent) {
		return cause
	}
	return nil
}
