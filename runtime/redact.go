package runtime

import (
	"context"

	"github.com/pipec/pipec/runtime/exec"
	"github.com/pipec/pipec/runtime/store"
)

// Secrets never leave
//
// The values of every secret_env name of the plan are masked as *** in
// everything a run writes or prints, by one exec.Redactor applied at the
// boundaries, not at each place that makes text:
//
//   - the store: redactingStore masks every free text before it is written
//     (event payloads, error tails, rejection and abandon reasons), so the
//     state database, pipec events and pipec status never hold a value;
//   - OnEvent (the terminal and pipec run --json): emitStore masks the data;
//   - the summary (terminal and run JSON): summary masks its texts;
//   - task and check output: every process's log and tail is masked with
//     all of the run's secrets, not only those the task declared.
//
// A check that quotes the data (a duplicate key of unique) is masked like
// the rest. What is not masked: the artifact data itself (a task that writes
// a secret into its output publishes it) and text a task writes to files of
// its own.

// redactingStore masks secret values in every text the runtime writes to the
// store. Methods that take no free text pass through the embedded Store.
type redactingStore struct {
	store.Store
	red *exec.Redactor
}

func (s redactingStore) AbandonRun(ctx context.Context, id, reason string) ([]store.Attempt, error) {
	return s.Store.AbandonRun(ctx, id, s.red.String(reason))
}

func (s redactingStore) FinishAttempt(ctx context.Context, ref store.AttemptRef, o store.Outcome) error {
	o.ErrorTail = s.red.String(o.ErrorTail)
	return s.Store.FinishAttempt(ctx, ref, o)
}

func (s redactingStore) ResolveAttempt(ctx context.Context, ref store.AttemptRef, as store.AttemptState, reason, by string) (store.Attempt, error) {
	return s.Store.ResolveAttempt(ctx, ref, as, s.red.String(reason), by)
}

func (s redactingStore) RejectVersion(ctx context.Context, id int64, reason string) error {
	return s.Store.RejectVersion(ctx, id, s.red.String(reason))
}

func (s redactingStore) ReopenVersion(ctx context.Context, id int64, reason string) error {
	return s.Store.ReopenVersion(ctx, id, s.red.String(reason))
}

func (s redactingStore) RaiseTokens(ctx context.Context, resources []string, floor int64, reason string) error {
	return s.Store.RaiseTokens(ctx, resources, floor, s.red.String(reason))
}

func (s redactingStore) AppendEvent(ctx context.Context, e store.Event) (int64, error) {
	e.Payload = s.red.JSON(e.Payload)
	return s.Store.AppendEvent(ctx, e)
}

// redactSummary masks the texts of a summary.
func (r *runner) redactSummary(s *Summary) {
	red := r.red
	for i := range s.Tasks {
		t := &s.Tasks[i]
		t.Error, t.Reason, t.Ending = red.String(t.Error), red.String(t.Reason), red.String(t.Ending)
	}
	for i := range s.Checks {
		s.Checks[i].Reason = red.String(s.Checks[i].Reason)
	}
	for i := range s.Publish {
		s.Publish[i].Error = red.String(s.Publish[i].Error)
	}
}

func (s redactingStore) FinishAndStart(ctx context.Context, ref store.AttemptRef, o store.Outcome, next []store.AttemptSpec) ([]store.Started, error) {
	o.ErrorTail = s.red.String(o.ErrorTail)
	return store.FinishAndStart(ctx, s.Store, ref, o, next)
}
