package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/pipec/pipec/runtime/store"
)

var _ store.Handoff = (*Store)(nil)

// FinishAndStart implements store.Handoff: the end and the starts in one
// write, so in one transaction and one commit. Each start runs in its own
// savepoint, so a refused start undoes only itself; a refused end fails
// the write, which undoes everything. An end that must be on stable storage
// before it returns (Outcome.Ran.Durable) is written alone, as
// FinishAttempt would, and the starts after it.
func (s *Store) FinishAndStart(ctx context.Context, ref store.AttemptRef, o store.Outcome, next []store.AttemptSpec) ([]store.Started, error) {
	if !o.State.Recordable() {
		return nil, fmt.Errorf("finish attempt %s: state %q is not an end", ref, o.State)
	}
	if o.Ran != nil && o.Ran.Durable {
		return store.FinishThenStart(ctx, s, ref, o, next)
	}
	out := make([]store.Started, len(next))
	err := s.write(ctx, grants, func(ctx context.Context, tx *wtx) error {
		if err := s.finishAttempt(ctx, tx, ref, o); err != nil {
			return err
		}
		for i, spec := range next {
			out[i] = store.Started{}
			if spec.Run == "" || spec.Task == "" {
				out[i].Err = fmt.Errorf("start attempt: run and task are required")
				continue
			}
			if _, err := tx.ExecContext(ctx, `SAVEPOINT start`); err != nil {
				return err
			}
			err := s.startAttempt(ctx, tx, spec, &out[i].Attempt)
			if errors.Is(err, errEpochSpent) {
				return err // the whole write is retried with a new epoch
			}
			if err != nil {
				out[i] = store.Started{Err: fmt.Errorf("start attempt of %s in %s: %w", spec.Task, spec.Run, err)}
				if _, err := tx.ExecContext(ctx, `ROLLBACK TO start`); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, `RELEASE start`); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
