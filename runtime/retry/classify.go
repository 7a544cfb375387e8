// Package retry decides what happens after an attempt fails: which error class
// the failure belongs to, whether the task's policy retries that class, how
// long to wait (exponential backoff with jitter from a seedable source), and
// whether the run's retry budget still allows it.
//
// Retrying is valid only for transient failures: a deterministic class fails
// the task at once with its original error, a class the policy does not name is
// not retried, and a task declared non-idempotent is never retried.
package retry

import (
	"fmt"
	"slices"
	"strings"
)

// Built-in classes. Timeout and Killed are transient: a task that ran out of
// time or was killed by a signal nobody in the spec explained may well succeed
// on another try. Unclassified is a failure no class of the spec matched.
const (
	Timeout      = "timeout"
	Killed       = "killed"
	Unclassified = "unclassified"
	// LeaseExpired names the relaunch of a task whose attempt stopped
	// renewing its lease; the old attempt is unknown, not failed.
	LeaseExpired = "lease_expired"
	// Store names an attempt whose state change the state database could
	// not record (disk full, a file size limit, a read-only file). It is
	// never retried: the next attempt would need the same database, and the
	// next run of the interval resumes once the disk is fixed.
	Store = "store"
)

// Class is one error class of the spec.
type Class struct {
	Name      string
	ExitCodes []int
	// Match holds substrings looked for in the attempt's output.
	Match         []string
	Deterministic bool
}

// Ending is how an attempt ended, as far as classification cares.
type Ending struct {
	ExitCode int
	// TimedOut: the runtime killed the attempt at its timeout.
	TimedOut bool
	// Signaled: a signal the runtime did not send ended the attempt.
	Signaled bool
	// Output is the end of the attempt's output (redacted).
	Output string
}

// Verdict is the class of a failure and why it was chosen.
type Verdict struct {
	Class         string
	Deterministic bool
	// Reason says what matched: "exit code 65", "output contains \"503\"".
	Reason string
}

// Classifier matches failures against the spec's classes.
type Classifier struct {
	classes []Class
}

// NewClassifier keeps the classes in the order given (the plan's, by name).
func NewClassifier(classes []Class) *Classifier {
	return &Classifier{classes: slices.Clone(classes)}
}

// Classify returns the class of a failed attempt.
//
// A timeout is class Timeout and an unexplained signal class Killed, unless
// the spec's own classes match the output. Otherwise exit codes are matched
// first, then output patterns; when several classes match, a deterministic one
// wins (retrying a failure that also looks deterministic wastes the retries),
// then the first in plan order. Nothing matched: Unclassified.
func (c *Classifier) Classify(e Ending) Verdict {
	var byCode, byMatch []Verdict
	for _, cl := range c.classes {
		if !e.TimedOut && !e.Signaled && slices.Contains(cl.ExitCodes, e.ExitCode) {
			byCode = append(byCode, Verdict{Class: cl.Name, Deterministic: cl.Deterministic,
				Reason: fmt.Sprintf("exit code %d", e.ExitCode)})
			continue
		}
		for _, m := range cl.Match {
			if m != "" && strings.Contains(e.Output, m) {
				byMatch = append(byMatch, Verdict{Class: cl.Name, Deterministic: cl.Deterministic,
					Reason: fmt.Sprintf("output contains %q", m)})
				break
			}
		}
	}
	for _, vs := range [][]Verdict{byCode, byMatch} {
		for _, v := range vs {
			if v.Deterministic {
				return v
			}
		}
	}
	switch {
	case len(byCode) > 0:
		return byCode[0]
	case len(byMatch) > 0:
		return byMatch[0]
	case e.TimedOut:
		return Verdict{Class: Timeout, Reason: "timed out"}
	case e.Signaled:
		return Verdict{Class: Killed, Reason: "killed by a signal"}
	}
	return Verdict{Class: Unclassified, Reason: fmt.Sprintf("exit code %d matched no error class", e.ExitCode)}
}

// Deterministic reports whether the named class is deterministic.
func (c *Classifier) Deterministic(class string) bool {
	for _, cl := range c.classes {
		if cl.Name == class {
			return cl.Deterministic
		}
	}
	return false
}
