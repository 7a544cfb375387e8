package sqlite

import (
	"context"
	"errors"

	"github.com/pipec/pipec/runtime/store"
)

var _ store.Handoff = (*Store)(nil)

// FinishAndStart implements store.Handoff: the end and the starts in one
// write, so in one transaction and one commit. A refused end fails the
// write, which undoes everything. So does a refused start, which is rare
// (its run ended meanwhile): the end and the starts are then written one
// write each (store.FinishThenStart), so that the refused start is left out
// alone. A savepoint around each start would keep the end without a second
// write, at two more statements on the path of every task. An end that
// must be on stable storage before it returns (Outcome.Synchronous) is
// written alone, as FinishAttempt would, and the starts after it.
func (s *Store) FinishAndStart(ctx context.Context, ref store.AttemptRef, o store.Outcome, next []store.AttemptSpec) ([]store.Started, error) {
	if err := o.CheckEnd(ref); err != nil {
		return nil, err
	}
	if o.Synchronous() {
		return store.FinishThenStart(ctx, s, ref, o, next)
	}
	out := make([]store.Started, len(next))
	err := s.write(ctx, grants, func(ctx context.Context, tx *wtx) error {
		if err := s.finishAttempt(ctx, tx, ref, o); err != nil {
			return err
		}
		for i, spec := range next {
			out[i] = store.Started{}
			if out[i].Err = spec.Check(); out[i].Err != nil {
				continue
			}
			err := s.startAttempt(ctx, tx, spec, &out[i].Attempt)
			if errors.Is(err, errEpochSpent) {
				return err // the whole write is retried with a new epoch
			}
			if err != nil {
				return errStartRefused
			}
		}
		return nil
	})
	if errors.Is(err, errStartRefused) {
		return store.FinishThenStart(ctx, s, ref, o, next)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// errStartRefused fails a handoff's write when one of its starts failed,
// so that nothing of it commits; FinishAndStart then writes the end and
// the starts one by one.
var errStartRefused = errors.New("a start of the handoff was refused")
