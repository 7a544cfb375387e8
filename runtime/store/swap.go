package store

import (
	"fmt"

	"github.com/pipec/pipec/runtime/fence"
)

// SwapDecision is a compare-and-swap decided from what a store read under
// its lock: the result (for a Won swap, all but the pointer it writes and
// the generation it takes, which the store fills in with its writes) and
// the publish event the store appends in the same transaction.
type SwapDecision struct {
	Result  CASResult
	Event   Event // the version's run, task and attempt; the kind its outcome's
	Payload map[string]any
}

// DecideSwap is the publish rule every store applies to sw, so that none
// derives it again: the version v it names must be of sw's pipeline,
// artifact and interval, accepted, and produced with sw.Token (else an
// ErrConflict); then the pointer as read decides (cur; its zero value
// when there is none, as no pointer names version 0) by fence.Decide, a fenced swap it would accept is refused
// when the version's task was granted a higher token since (fence at
// grant; granted is asked only then), and sw.Expect is compared last.
func DecideSwap(sw Swap, v Version, cur Pointer, granted func() (int64, error)) (SwapDecision, error) {
	switch {
	case v.Pipeline != sw.Pipeline || v.Artifact != sw.Artifact || v.Interval != sw.Interval:
		return SwapDecision{}, fmt.Errorf("version %s of pipeline %s is not of %s@%s in pipeline %s: %w", v.Label(), v.Pipeline,
			sw.Artifact, sw.Interval, sw.Pipeline, ErrConflict)
	case v.State != VersionAccepted:
		return SwapDecision{}, fmt.Errorf("version %s is %s, only an accepted version is published: %w", v.Label(), v.State, ErrConflict)
	case v.Token != sw.Token:
		return SwapDecision{}, fmt.Errorf("version %s was produced with token %d, not %d: %w", v.Label(), v.Token, sw.Token, ErrConflict)
	}
	d := SwapDecision{
		Result: CASResult{Previous: cur},
		Event:  Event{Run: v.Run, Task: v.Task, Attempt: v.Attempt},
		Payload: map[string]any{
			"sink": sw.Sink, "artifact": sw.Artifact, "interval": sw.Interval,
			"version": sw.Version, "label": v.Label(), "token": sw.Token,
		},
	}
	if sw.Unfenced {
		d.Payload["unfenced"] = true
	}
	if cur.Version != 0 {
		d.Payload["current_version"] = cur.Version
		d.Payload["current_token"] = cur.Token
	}
	decision := sw.Against(cur)
	if decision == fence.Accept && !sw.Unfenced {
		g, err := granted()
		if err != nil {
			return SwapDecision{}, err
		}
		if fence.FencedAtGrant(sw.Token, g) {
			// The producing task's newest attempt in the version's fenced
			// resource holds the artifact, published or not.
			decision = fence.Fenced
			d.Result.GrantedToken = g
			d.Payload["granted_token"] = g
			d.Payload["fenced_by"] = "grant"
		}
	}
	switch {
	case decision == fence.Idempotent:
		d.Result.Outcome, d.Result.Pointer, d.Event.Kind = Idempotent, cur, EventPublishIdempotent
	case decision == fence.Fenced:
		d.Result.Outcome, d.Result.Pointer, d.Event.Kind = Fenced, cur, EventPublishFenced
	case sw.Expect != nil && *sw.Expect != cur.Token:
		d.Result.Outcome, d.Result.Pointer, d.Event.Kind = Conflict, cur, EventPublishConflict
		d.Payload["expected_token"] = *sw.Expect
	default:
		d.Result.Outcome, d.Event.Kind = Won, EventPublishWon
	}
	return d, nil
}

// Against is fence.Decide of sw against the pointer cur alone (a version
// is named by its id in the store). A swap it does not accept changes
// nothing whatever the version and the grants say.
func (sw Swap) Against(cur Pointer) fence.Outcome {
	held := fence.Held{Exists: cur.Version != 0, Token: cur.Token, Version: fmt.Sprint(cur.Version)}
	return fence.Decide(held, sw.Token, fmt.Sprint(sw.Version), !sw.Unfenced)
}
