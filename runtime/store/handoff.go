package store

import "context"

// Handoff is implemented by a store that records an attempt's end and the
// starts of the attempts it lets start (the tasks that waited for it alone)
// in one transaction: a run of short tasks then pays about one commit per
// task instead of two. It is optional; FinishAndStart falls back to one
// write each.
//
// The ordering a run relies on holds either way: the end commits no later
// than the starts, and a started attempt is only queued (its token granted);
// its process starts after FinishAndStart returned.
type Handoff interface {
	// FinishAndStart records o on ref, as FinishAttempt does, then starts
	// an attempt for each spec, as StartAttempt does, in the same
	// transaction. If the end cannot be recorded nothing is written and
	// the error is returned. A start refused on its own (its run is no
	// longer running) is left out alone: its Started holds the error.
	FinishAndStart(ctx context.Context, ref AttemptRef, o Outcome, next []AttemptSpec) ([]Started, error)
}

// Started is one attempt FinishAndStart started, or why it did not.
type Started struct {
	Attempt Attempt
	Err     error
}

// FinishAndStart is st's Handoff when it has one, else FinishThenStart.
func FinishAndStart(ctx context.Context, st Store, ref AttemptRef, o Outcome, next []AttemptSpec) ([]Started, error) {
	if h, ok := st.(Handoff); ok && len(next) > 0 {
		return h.FinishAndStart(ctx, ref, o, next)
	}
	return FinishThenStart(ctx, st, ref, o, next)
}

// FinishThenStart is Handoff's FinishAndStart in one write each: the end
// with FinishAttempt, then each start with StartAttempt.
func FinishThenStart(ctx context.Context, st Store, ref AttemptRef, o Outcome, next []AttemptSpec) ([]Started, error) {
	if err := st.FinishAttempt(ctx, ref, o); err != nil {
		return nil, err
	}
	out := make([]Started, len(next))
	for i, spec := range next {
		out[i].Attempt, out[i].Err = st.StartAttempt(ctx, spec)
	}
	return out, nil
}
