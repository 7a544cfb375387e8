package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pipec/pipec/internal/atomicfile"
	"github.com/pipec/pipec/runtime/store"
)

// FenceDir is the folder under a sink's path where the sink keeps its own
// fencing state: one record per interval (the highest token it accepted, the
// version and the state that issued the token) and the binding to one
// state. The sink, not the state database, has the last word on what it
// shows: a state that lost its database, or a second state pointed at the
// same folder, cannot make it go back.
const FenceDir = ".fence"

// bindingFile is the binding's name in FenceDir (a dot-name: no interval
// can be called that).
const bindingFile = ".binding.json"

// Record is a sink's fencing record for one interval: what it shows there
// and the token that put it there. One directory sink path holds one
// artifact of one pipeline, so Pipeline and Artifact never change once set.
type Record struct {
	Pipeline string `json:"pipeline"`
	Artifact string `json:"artifact"`
	Interval string `json:"interval"`
	// Token is the highest token the sink accepted for the interval.
	Token int64 `json:"token"`
	// Version is the folder under .versions/ the link shows.
	Version string `json:"version"`
	Digest  string `json:"digest"`
	// State is the id of the state database that issued Token.
	State   string `json:"state"`
	Run     string `json:"run"`
	Attempt int    `json:"attempt"`
	// URL is where the version's files are, in an object store sink (whose
	// pointer object is this record): s3://bucket/prefix/.versions/<Version>/.
	URL string `json:"url,omitempty"`
}

// Binding says which state database a sink takes publishes from.
type Binding struct {
	State string `json:"state"`
	// StatePath is where that state was when it bound or adopted the sink:
	// a hint for the person told to use it, not an identity.
	StatePath string `json:"state_path,omitempty"`
	// Pipeline and Artifact are what the sink holds, for every interval:
	// one publication place, one artifact of one pipeline. Empty in a
	// binding written before they were recorded (then the sink's records
	// say it, and the next publish records them).
	Pipeline  string     `json:"pipeline,omitempty"`
	Artifact  string     `json:"artifact,omitempty"`
	Adoptions []Adoption `json:"adoptions,omitempty"`
}

// judgeBinding is what a sink's binding b (nil: none yet) says of publishing
// v from stateID, for every kind of sink: refused from another state, and
// refused for another pipeline's or artifact's version, in any interval
// (what the sink holds: b, or for a binding written before it recorded
// that, the sink's records, read only then). write, when not nil, is the
// binding to record (an unbound sink bound, or what it holds recorded).
func judgeBinding(sinkName, path, stateID, statePath string, b *Binding, records func() ([]Record, error),
	v store.Version) (write *Binding, err error) {
	if err := foreignState(sinkName, path, stateID, statePath, b); err != nil {
		return nil, err
	}
	if b != nil && b.Pipeline == v.Pipeline && b.Artifact == v.Artifact {
		return nil, nil
	}
	var recs []Record
	if b == nil || b.Pipeline == "" {
		if recs, err = records(); err != nil {
			return nil, err
		}
	}
	if held, ok := holder(b, recs); ok && (held.Pipeline != v.Pipeline || held.Artifact != v.Artifact) {
		return nil, &OtherArtifactError{Sink: sinkName, Path: path, Held: held, Pipeline: v.Pipeline, Artifact: v.Artifact}
	}
	nb := Binding{State: stateID, StatePath: statePath}
	if b != nil {
		nb = *b
	}
	nb.Pipeline, nb.Artifact = v.Pipeline, v.Artifact
	return &nb, nil
}

// foreignState refuses a sink bound to another state than stateID (b nil:
// bound to none yet, which takes any): judgeBinding's first refusal, which
// a run also makes before it runs a task that publishes into the sink
// (TakesState).
func foreignState(sinkName, path, stateID, statePath string, b *Binding) error {
	if b != nil && b.State != stateID {
		return &ForeignStateError{Sink: sinkName, Path: path, Bound: *b, State: stateID, StatePath: statePath}
	}
	return nil
}

// holder is the pipeline and artifact a sink holds, from its binding or,
// for a binding that does not record them, from any of its interval
// records (ok false when it holds nothing yet).
func holder(b *Binding, records []Record) (held Record, ok bool) {
	if b != nil && b.Pipeline != "" {
		return Record{Pipeline: b.Pipeline, Artifact: b.Artifact}, true
	}
	if len(records) > 0 {
		return records[0], true
	}
	return Record{}, false
}

// Adoption is one recorded move of a sink to another state.
type Adoption struct {
	From, To          string
	FromPath, ToPath  string `json:",omitempty"`
	Floor             int64
	Reason            string `json:",omitempty"`
	At                string
	IntervalsRecorded int
}

// ForeignStateError refuses a publish from a state the sink is not bound to.
type ForeignStateError struct {
	Sink, Path       string
	Bound            Binding
	State, StatePath string
}

func (e *ForeignStateError) Error() string {
	bound := e.Bound.State
	if e.Bound.StatePath != "" {
		bound += " (" + e.Bound.StatePath + ")"
	}
	this := e.State
	if e.StatePath != "" {
		this += " (" + e.StatePath + ")"
	}
	if e.StatePath != "" && e.StatePath == e.Bound.StatePath {
		// The same file, another identity: the state was deleted and
		// made again (a newcomer's "start over"), or restored from
		// another state's copy. --state names nothing else to run with.
		return fmt.Sprintf("sink %s (%s) is bound to state %s, which %s was before it was made again: this state %s is new. "+
			"If the old state is gone for good, move the sink to this one with `pipec sink adopt SPEC %s --state %s`, which is "+
			"recorded and makes this state's tokens start above every token the sink has seen; if it was replaced by mistake, "+
			"put the old file back", e.Sink, e.Path, e.Bound.State, e.StatePath, e.State, e.Sink, e.StatePath)
	}
	return fmt.Sprintf("sink %s (%s) is bound to state %s, not to this run's state %s: run with --state %s, "+
		"or move the sink to this state with `pipec sink adopt SPEC %s --state %s`, which is recorded and makes "+
		"this state's tokens start above every token the sink has seen",
		e.Sink, e.Path, bound, this, orID(e.Bound.StatePath, e.Bound.State), e.Sink, orID(e.StatePath, e.State))
}

func orID(path, id string) string {
	if path != "" {
		return path
	}
	return "<the state with id " + id + ">"
}

// OtherArtifactError refuses a publish into an interval of a sink that holds
// another pipeline's or another artifact's data there.
type OtherArtifactError struct {
	Sink, Path         string
	Held               Record
	Pipeline, Artifact string
}

func (e *OtherArtifactError) Error() string {
	at := ""
	if e.Held.Interval != "" {
		at = " at interval " + e.Held.Interval
	}
	return fmt.Sprintf("sink %s (%s) holds %s of pipeline %s%s; it cannot also take %s of pipeline %s "+
		"(one publication place, one artifact of one pipeline, for every interval: give the publish its own sink path)",
		e.Sink, e.Path, e.Held.Artifact, e.Held.Pipeline, at, e.Artifact, e.Pipeline)
}

func (d *Directory) fenceDir() string { return filepath.Join(d.Path, FenceDir) }

// StateBound is a sink bound to one state (the directory and S3 sinks),
// which says whether it takes publishes from another.
type StateBound interface {
	TakesState(ctx context.Context, stateID string) error
}

// RefusesState is the *ForeignStateError s answers for stateID when it is
// bound to another state (every publish into it would be refused), asked
// before anything runs; nil otherwise: a sink bound to none, not bound at
// all, or whose binding cannot be read here (its publish says why).
func RefusesState(ctx context.Context, s Sink, stateID string) error {
	b, ok := s.(StateBound)
	if !ok {
		return nil
	}
	var foreign *ForeignStateError
	if err := b.TakesState(ctx, stateID); errors.As(err, &foreign) {
		return err
	}
	return nil
}

// TakesState says whether the sink takes publishes from stateID: a
// *ForeignStateError when it is bound to another state, as each publish
// would be told, asked before a task that publishes here runs.
func (d *Directory) TakesState(_ context.Context, stateID string) error {
	b, err := d.readBinding()
	if err != nil {
		return err
	}
	return foreignState(d.Name, d.Path, stateID, d.StatePath, b)
}

// readBinding returns the sink's binding, nil when it has none yet.
func (d *Directory) readBinding() (*Binding, error) {
	var b Binding
	ok, err := readJSON(filepath.Join(d.fenceDir(), bindingFile), &b)
	if err != nil || !ok {
		return nil, err
	}
	if b.State == "" {
		return nil, fmt.Errorf("sink %s: %s has no state id", d.Name, filepath.Join(d.fenceDir(), bindingFile))
	}
	return &b, nil
}

func (d *Directory) writeBinding(b Binding) error {
	return writeJSONDurable(d.fenceDir(), bindingFile, b)
}

// Record returns the fence record of one interval (the highest token the
// sink accepted there, and from which state), nil when it has none.
func (d *Directory) Record(_ context.Context, interval string) (*Record, error) {
	return d.readRecord(interval)
}

// readRecord returns the interval's record, nil when the sink never accepted
// anything for it.
func (d *Directory) readRecord(interval string) (*Record, error) {
	var r Record
	ok, err := readJSON(filepath.Join(d.fenceDir(), interval+".json"), &r)
	if err != nil || !ok {
		return nil, err
	}
	return &r, nil
}

func (d *Directory) writeRecord(r Record) error {
	return writeJSONDurable(d.fenceDir(), r.Interval+".json", r)
}

// Records returns every fencing record of the sink, by interval.
func (d *Directory) Records() ([]Record, error) {
	intervals, err := d.recordedIntervals()
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, iv := range intervals {
		r, err := d.readRecord(iv)
		if err != nil {
			return nil, err
		}
		if r != nil {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.Interval, b.Interval) })
	return out, nil
}

// recordedIntervals lists the intervals the sink has a record file for, by
// their names alone, in order.
func (d *Directory) recordedIntervals() ([]string, error) {
	return namesIn(d.fenceDir(), func(e fs.DirEntry) (string, bool) {
		name := e.Name()
		iv, ok := strings.CutSuffix(name, ".json")
		return iv, ok && !strings.HasPrefix(name, ".")
	})
}

// Binding returns the sink's binding, nil when no state published to it yet.
func (d *Directory) Binding() (*Binding, error) { return d.readBinding() }

func readJSON(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s is damaged: %v", path, err)
	}
	return true, nil
}

// writeJSONDurable replaces dir/name with the JSON of v with the durability
// of the link swap: write a temporary file, fsync it, rename it over the
// name, fsync the folder. A crash leaves the old file or the new one.
func writeJSONDurable(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-"+name+"-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return atomicfile.SyncDir(dir)
}

func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }
