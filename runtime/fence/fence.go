// Package fence holds the fencing decisions and the attempt state machine as
// pure functions, so that every store (SQLite, PostgreSQL) and every sink
// (the directory sink, later others) decides the same way: a backend only
// reads the current value and writes the outcome, it never re-derives the
// rule.
package fence

// Outcome is a fencing decision on a publish.
type Outcome string

const (
	// Accept: the publish goes ahead; its token becomes the held one.
	Accept Outcome = "won"
	// Idempotent: the same version with the same token is already held (a
	// repeated publish after a lost response); nothing changes, success.
	Idempotent Outcome = "idempotent"
	// Fenced: a newer token is held (or the same token with another
	// version); nothing changes and the publish is refused.
	Fenced Outcome = "fenced"
)

// Held is what a fenced resource (a store pointer, a sink's record) holds
// now. Exists is false when nothing was ever accepted.
type Held struct {
	Exists  bool
	Token   int64
	Version string
}

// Decide judges a publish of version with token against what is held. With
// fenced false (a sink with fencing = "none") the token is not compared:
// anything but the identical publish is accepted, at-least-once.
//
// The rule, with fencing: strictly above the held token wins; the same token
// and version is an idempotent success; anything else is fenced. The same
// token with another version is fenced because a token names one attempt,
// and one attempt publishes one version of an artifact.
func Decide(held Held, token int64, version string, fenced bool) Outcome {
	switch {
	case !held.Exists:
		return Accept
	case held.Token == token && held.Version == version:
		return Idempotent
	case !fenced || token > held.Token:
		return Accept
	}
	return Fenced
}

// FencedAtGrant reports whether a publish carrying token must be refused
// because an attempt producing the same artifact for the same interval was
// granted a higher token: that attempt is the artifact's current producer,
// whether or not it published yet. This is what makes an unknown attempt
// that wakes up before its successor publishes lose anyway (fence at grant,
// as Chubby's sequencers and Kafka's producer epochs do).
func FencedAtGrant(token, highestGranted int64) bool { return highestGranted > token }

// State is an attempt's state. The store's AttemptState values are these.
type State string

const (
	Queued    State = "queued"
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Unknown   State = "unknown"
)

// Finished reports whether the state is terminal.
func (s State) Finished() bool { return s == Succeeded || s == Failed }

// CanTransition reports whether an attempt may move from one state to
// another:
//
//	queued  -> running | failed (cancelled before it started) | unknown (its run was abandoned)
//	running -> running (renewal, pid) | succeeded | failed | unknown (lease expired)
//	unknown -> succeeded | failed (its process came back and ended)
//
// A finished attempt never moves (repeating the same outcome is the caller's
// idempotent no-op), and an unknown one is never revived to running: its
// successor already holds a higher token.
func CanTransition(from, to State) bool {
	switch from {
	case Queued:
		return to == Running || to == Failed || to == Unknown
	case Running:
		return to == Running || to == Succeeded || to == Failed || to == Unknown
	case Unknown:
		return to == Succeeded || to == Failed
	}
	return false
}
