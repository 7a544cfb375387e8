package runtime

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/artifacts"
	"github.com/pipec/pipec/runtime/retry"
	"github.com/pipec/pipec/runtime/sink"
)

// Inputs a task changed
//
// A task reads each input from the version's own folder: the artifact
// store's, or this machine's cached copy of an object store's. Its files
// are read-only, but its folders are not (so that a store can be removed
// with rm -r), and a task running as root writes wherever it likes: a task
// that gzips or moves an input file in place, or rewrites one, changes the
// accepted version every later reader gets. So once an attempt's process
// ended, each of its inputs is compared with what this process first saw of
// it (a listing of names, sizes, modes and times, read again: no bytes);
// one that differs is digested, and one whose bytes no longer have the
// version's digest is damaged. Its copy is dropped (artifacts.Store.Drop),
// so that nobody reads it as the version, and the attempt fails with class
// ClassInput, which is deterministic: no retry, no failover repeats it. A
// change that left the bytes as they were (a touch, a chmod, a file made and
// removed) is no failure.
//
// Tasks reading the same folder at once share the blame: the first to find
// it changed names the others reading it then, and the others say it was
// changed while they ran (class input too: what they read is suspect).
// What it does not catch: a reader on another worker that read the changed
// bytes before the task ended (this process saw that reader's folder for
// the first time already changed).

// ClassInput is the class of an attempt that changed an input's bytes.
const ClassInput = "input"

// folderState is a folder's entries as a listing sees them, by slash path.
type folderState map[string]entryState

type entryState struct {
	mode  fs.FileMode
	size  int64
	mtime int64
}

// listFolder reads dir's entries (not their bytes).
func listFolder(dir string) (folderState, error) {
	st := folderState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		st[filepath.ToSlash(rel)] = entryState{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
		return nil
	})
	return st, err
}

// changes names what differs from before to after, at most three entries.
func (before folderState) changes(after folderState) string {
	var out []string
	for _, rel := range slices.Sorted(mapKeys(before)) {
		if a, ok := after[rel]; !ok {
			out = append(out, rel+" removed")
		} else if a != before[rel] {
			out = append(out, rel+" changed")
		}
	}
	for _, rel := range slices.Sorted(mapKeys(after)) {
		if _, ok := before[rel]; !ok {
			out = append(out, rel+" added")
		}
	}
	if len(out) > 3 {
		out = append(out[:3], fmt.Sprintf("%d more", len(out)-3))
	}
	return strings.Join(out, ", ")
}

// folderChanged says what changed in dir, a version of digest, since it
// was listed as before (nil: not listed), when its bytes no longer have
// that digest ("": they have), and how it lists now (nil: it does not).
// Only a listing that moved is digested, which reads every byte.
func folderChanged(dir, digest string, before folderState) (string, folderState) {
	after, err := listFolder(dir)
	if err != nil {
		after = nil
	}
	if after != nil && before != nil && before.changes(after) == "" {
		return "", after
	}
	if d, err := sink.Digest(dir); err == nil && d == digest {
		return "", after
	}
	if after == nil || before == nil {
		return "its files can no longer be read", after
	}
	return before.changes(after), after
}

// seeInput returns what this process first saw of an input's folder: read
// now, the first time.
func (r *runner) seeInput(dir string) (folderState, error) {
	r.mu.Lock()
	st, ok := r.inputsSeen[dir]
	r.mu.Unlock()
	if ok {
		return st, nil
	}
	st, err := listFolder(dir)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if first, ok := r.inputsSeen[dir]; ok {
		return first, nil
	}
	r.inputsSeen[dir] = st
	return st, nil
}

// reading counts the attempts of task reading each input folder now
// (readInputs), by folder and task.
type reading map[string]map[string]int

// readInputs counts an attempt of t among the readers of its inputs until
// done is called.
func (r *runner) readInputs(t string, inputs []boundInput) (done func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, in := range inputs {
		if in.dir == "" {
			continue
		}
		if r.inputsRead[in.dir] == nil {
			r.inputsRead[in.dir] = map[string]int{}
		}
		r.inputsRead[in.dir][t]++
	}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, in := range inputs {
			if in.dir == "" {
				continue
			}
			if r.inputsRead[in.dir][t]--; r.inputsRead[in.dir][t] <= 0 {
				delete(r.inputsRead[in.dir], t)
			}
		}
	}
}

// suspects says who else may have changed input folder dir than t: the
// task whose attempt found it changed first, or the other tasks reading it
// now ("", "": nobody but t).
func (r *runner) suspects(dir, t string) (found string, others []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if by, ok := r.inputsChanged[dir]; ok {
		return by, nil
	}
	for _, other := range slices.Sorted(mapKeys(r.inputsRead[dir])) {
		if other != t {
			others = append(others, other)
		}
	}
	r.inputsChanged[dir] = t
	return "", others
}

// changedInputs says how an ended attempt of t damaged one of its inputs,
// at length and in short ("": none), having dropped that input's copy.
func (r *runner) changedInputs(ctx context.Context, t *compiler.PlanTask, inputs []boundInput) (why, short string) {
	for _, in := range inputs {
		if in.dir == "" {
			continue
		}
		before, _ := r.seeInput(in.dir)
		what, after := folderChanged(in.dir, in.digest, before)
		if what == "" {
			if after != nil {
				r.mu.Lock()
				r.inputsSeen[in.dir] = after // the same bytes: what later attempts compare with
				r.mu.Unlock()
			}
			continue
		}
		first, others := r.suspects(in.dir, t.Name)
		if first != "" {
			// Found first by another attempt, which dropped the copy: this
			// one read what was changed, or nothing.
			why = fmt.Sprintf("its input %s (%s) was changed while %s ran, as task %s found first (see %s)", in.name, in.label, t.Name, first, first)
			return why, fmt.Sprintf("its input %s was changed while it ran (see %s): not retried", in.name, first)
		}
		who := "task " + t.Name + " changed its input"
		if len(others) > 0 {
			who = fmt.Sprintf("task %s, or %s reading it at the same time, changed its input", t.Name, strings.Join(others, ", "))
		}
		dropped := "its copy could not be told apart from the version's (" + in.location + "), and was left"
		if key, kerr := artifacts.ParseKey(in.location); kerr == nil {
			if derr := r.arts.Drop(ctx, key); derr != nil {
				dropped = "dropping its changed copy failed: " + derr.Error()
			} else {
				dropped = "its changed copy (" + in.dir + ") was removed, so nothing reads it as the version"
			}
		}
		why = fmt.Sprintf("%s %s (%s): %s; %s. A task writes only into its outputs "+
			"(and folders of its own): once it no longer writes into its inputs, the next run makes %s again",
			who, in.name, in.label, what, dropped, in.name)
		return why, fmt.Sprintf("it changed its input %s (%s): not retried", in.name, what)
	}
	return "", ""
}

// inputVerdict is the verdict of an attempt that changed an input; short
// is the reason its task is not retried.
func inputVerdict(short string) retry.Verdict {
	return retry.Verdict{Class: ClassInput, Deterministic: true, Reason: short}
}
