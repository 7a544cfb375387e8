package lint

import (
	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/spec"
)

// Index holds the lookups rules share, built once per run in linear time, so
// no rule searches the spec per element. Names are resolved by the compiler
// (compiler.Names): where a name is declared twice the first declaration
// wins there, and the index reuses those maps rather than resolving names a
// second time.
type Index struct {
	// TaskList holds each task once (its first declaration), in spec order:
	// rules iterate it rather than looking every task up.
	TaskList []*spec.Task
	Tasks    map[string]*spec.Task
	Policies map[string]*spec.RetryPolicy
	Classes  map[string]*spec.ErrorClass
	Pools    map[string]*spec.Pool
	Sinks    map[string]*spec.Sink
	// ChecksOf maps an artifact to the checks that audit it, in spec order.
	ChecksOf map[string][]*spec.Check
	// Readers maps an artifact to the tasks that read it, at any offset.
	Readers map[string][]*spec.Task
	// Publishes maps an artifact to the publishes of it.
	Publishes map[string][]*spec.Publish
	// Producer maps an artifact to its producing task (the compiler's choice).
	Producer map[string]*spec.Task
	// RefusedArtifactRef is set when some input, check input or publish
	// artifact was written with a value the loader refused: which artifact
	// it meant is unknown, so rules that need every reader or check of an
	// artifact (unused-artifact, bypassed-validation) do not guess.
	RefusedArtifactRef bool
}

func newIndex(res *compiler.Result) *Index {
	p := res.Spec
	names := res.Names
	if names == nil {
		// A Result not made by Compile: resolve nothing rather than guess.
		names = &compiler.Names{}
	}
	ix := &Index{
		TaskList:  make([]*spec.Task, 0, len(names.Tasks)),
		Tasks:     names.Tasks,
		Policies:  names.Policies,
		Classes:   names.Classes,
		Pools:     names.Pools,
		Sinks:     names.Sinks,
		ChecksOf:  map[string][]*spec.Check{},
		Readers:   map[string][]*spec.Task{},
		Publishes: map[string][]*spec.Publish{},
		Producer:  make(map[string]*spec.Task, len(res.Producer)),
	}
	for i := range p.Tasks {
		t := &p.Tasks[i]
		if names.Tasks[t.Name] != t {
			continue
		}
		ix.TaskList = append(ix.TaskList, t)
		ix.RefusedArtifactRef = ix.RefusedArtifactRef || t.Refused("inputs")
		for _, in := range t.Inputs {
			if n := len(ix.Readers[in.Artifact]); n == 0 || ix.Readers[in.Artifact][n-1] != t {
				ix.Readers[in.Artifact] = append(ix.Readers[in.Artifact], t)
			}
		}
	}
	for i := range p.Checks {
		c := &p.Checks[i]
		if names.Checks[c.Name] != c {
			continue
		}
		ix.RefusedArtifactRef = ix.RefusedArtifactRef || c.Refused("input")
		ix.ChecksOf[c.Input.Name] = append(ix.ChecksOf[c.Input.Name], c)
	}
	for i := range p.Publishes {
		pub := &p.Publishes[i]
		if names.Publishes[pub.Name] != pub {
			continue
		}
		ix.RefusedArtifactRef = ix.RefusedArtifactRef || pub.Refused("artifact")
		ix.Publishes[pub.Artifact.Name] = append(ix.Publishes[pub.Artifact.Name], pub)
	}
	for a, t := range res.Producer {
		ix.Producer[a] = ix.Tasks[t]
	}
	return ix
}

// Policy returns the task's retry policy, or nil when it has none or names an
// undefined one (the compiler reports that).
func (ix *Index) Policy(t *spec.Task) *spec.RetryPolicy {
	if t.Retry == nil {
		return nil
	}
	return ix.Policies[t.Retry.Name]
}

// MaxAttempts is the policy's attempt limit with the compiler's default
// applied: 0 means unlimited, and Unknown that the author wrote a value the
// loader refused (reported under schema; rules must not judge it again).
func MaxAttempts(r *spec.RetryPolicy) int {
	switch {
	case r.Refused("max_attempts"):
		return Unknown
	case !r.Has("max_attempts"):
		return compiler.DefaultMaxAttempts
	}
	return r.MaxAttempts
}

// Unknown is a count the author wrote but the loader refused.
const Unknown = -1

// Retries reports whether a policy retries at all: unlimited, more than one
// attempt, or a max_attempts the loader refused (the author wrote one, and
// only max_attempts = 1 means no retry).
func Retries(r *spec.RetryPolicy) bool {
	return MaxAttempts(r) != 1
}

// RetriesForever reports whether a policy has no bound: unlimited attempts and
// no max_elapsed. A refused value of either is not judged.
func RetriesForever(r *spec.RetryPolicy) bool {
	return MaxAttempts(r) == 0 && !r.Has("max_elapsed")
}

// RetryingPolicy returns the task's policy when it retries, else nil.
func (ix *Index) RetryingPolicy(t *spec.Task) *spec.RetryPolicy {
	if r := ix.Policy(t); r != nil && Retries(r) {
		return r
	}
	return nil
}
