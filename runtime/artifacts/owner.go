package artifacts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Owner is the state a pipeline's versions in a store belong to.
//
// A version's key names its pipeline, not the state that accepted it, and
// a state's gc removes the versions of its pipelines that are not its
// current accepted ones: two states that ran one pipeline into one store
// (staging beside production, a state deleted and made again) would each
// remove what the other accepted, and the other's next run would find its
// inputs gone. So the first state to put or collect a pipeline's versions
// in a store records itself as their owner, create-only (of two states
// racing, one wins), and the store refuses every other state's put and
// collection of them (Own). Each store keeps the record beside the
// versions, under a name no pipeline or artifact can have: a Folder's
// ROOT/.owners/<pipeline>.json, an S3 store's PREFIX/.owners/<pipeline>.
type Owner struct {
	// State is the owning state's identity (store.Store.StateID).
	State string `json:"state"`
	// StatePath is where that state was when it took the versions: a hint
	// for the person told about it, not an identity.
	StatePath string `json:"state_path,omitempty"`
	// Adoptions are the takeovers of the versions from another state, in
	// order (Adopt).
	Adoptions []Adoption `json:"adoptions,omitempty"`
	// Record is where the store keeps this record, for messages; it is
	// not stored.
	Record string `json:"-"`
}

// Adoption is one takeover of a pipeline's versions by a state.
type Adoption struct {
	From     string `json:"from"`
	FromPath string `json:"from_path,omitempty"`
	To       string `json:"to"`
	ToPath   string `json:"to_path,omitempty"`
	Reason   string `json:"reason,omitempty"`
	At       string `json:"at"`
}

// ownersDir is the folder (prefix) of the owner records in a store: a
// name that starts with a dot is never a pipeline's.
const ownersDir = ".owners"

// OwnerOf returns the owner recorded for pipeline's versions in s; ok is
// false when none is. A record that cannot be read is an error, never no
// owner (which would let any state collect the versions).
func OwnerOf(ctx context.Context, s Store, pipeline string) (o Owner, ok bool, err error) {
	if !nameRE.MatchString(pipeline) {
		return Owner{}, false, fmt.Errorf("artifact store: %q is not a pipeline name", pipeline)
	}
	data, where, err := s.ReadOwner(ctx, pipeline)
	if errors.Is(err, ErrNotFound) {
		return Owner{}, false, nil
	} else if err != nil {
		return Owner{}, false, fmt.Errorf("artifact store %s: read which state owns the versions of pipeline %s: %w", s, pipeline, err)
	}
	if err := json.Unmarshal(data, &o); err != nil {
		return Owner{}, false, fmt.Errorf("artifact store %s: owner record %s: %w", s, where, err)
	}
	if o.State == "" {
		return Owner{}, false, fmt.Errorf("artifact store %s: owner record %s names no state", s, where)
	}
	o.Record = where
	return o, true, nil
}

// Own makes sure that pipeline's versions in s belong to the state o:
// recorded as theirs if no state was (create-only: of states racing, one
// wins), else refused, with a *ForeignOwnerError, when another state's.
func Own(ctx context.Context, s Store, pipeline string, o Owner) error {
	if o.State == "" {
		return errNoState
	}
	got, ok, err := OwnerOf(ctx, s, pipeline)
	if err != nil {
		return err
	}
	if !ok {
		created, err := writeOwner(ctx, s, pipeline, o, false)
		if err != nil {
			return err
		}
		if created {
			return nil
		}
		// Another state's, written since it was read.
		if got, ok, err = OwnerOf(ctx, s, pipeline); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("artifact store %s: the owner record of pipeline %s was there and is gone", s, pipeline)
		}
	}
	if got.State != o.State {
		return &ForeignOwnerError{Store: s.String(), Pipeline: pipeline, Owner: got, This: o}
	}
	return nil
}

// errNoState refuses an owner record without a state.
var errNoState = errors.New("artifact store: no state to own the versions")

// writeOwner writes o as the owner record of pipeline's versions in s:
// create-only unless replace (Store.WriteOwner).
func writeOwner(ctx context.Context, s Store, pipeline string, o Owner, replace bool) (created bool, err error) {
	if o.State == "" {
		return false, errNoState
	}
	data, err := json.Marshal(o)
	if err == nil {
		created, err = s.WriteOwner(ctx, pipeline, append(data, '\n'), replace)
	}
	if err != nil {
		return false, fmt.Errorf("artifact store %s: record which state owns the versions of pipeline %s: %w", s, pipeline, err)
	}
	return created, nil
}

// Adopt makes the state o the owner of pipeline's versions in s, whichever
// state owned them, the takeover recorded in the owner record with reason
// (pipec artifacts adopt: the state moved, or another must take over). It
// returns the owner before (had: one was recorded); when that is o's state
// already, nothing is written. From then on the previous owner's puts and
// collections are refused, and o's gc removes the versions it did not
// accept.
func Adopt(ctx context.Context, s Store, pipeline string, o Owner, reason string, now time.Time) (prev Owner, had bool, err error) {
	if prev, had, err = OwnerOf(ctx, s, pipeline); err != nil {
		return Owner{}, false, err
	}
	if had && prev.State == o.State {
		return prev, true, nil
	}
	if had {
		o.Adoptions = append(slices.Clip(prev.Adoptions), Adoption{From: prev.State, FromPath: prev.StatePath,
			To: o.State, ToPath: o.StatePath, Reason: reason, At: now.UTC().Format(time.RFC3339)})
	}
	if _, err := writeOwner(ctx, s, pipeline, o, true); err != nil {
		return Owner{}, false, err
	}
	return prev, had, nil
}

// ForeignOwnerError refuses a state the versions of a pipeline in a store
// do not belong to.
type ForeignOwnerError struct {
	Store, Pipeline string
	Owner, This     Owner
}

func (e *ForeignOwnerError) Error() string {
	owner := e.Owner.State
	if e.Owner.StatePath != "" {
		owner += " (" + e.Owner.StatePath + ")"
	}
	this := e.This.State
	if e.This.StatePath != "" {
		this += " (" + e.This.StatePath + ")"
	}
	made := ""
	if e.This.StatePath != "" && e.This.StatePath == e.Owner.StatePath {
		made = ", which was at this state's place before this state was made again"
	}
	return fmt.Sprintf("artifact store %s holds the versions of pipeline %s for state %s%s, not for this state %s: "+
		"two states that run one pipeline must not share an artifact store, each one's gc would remove the versions "+
		"the other accepted. Give this state a store of its own (another folder, or another prefix of the bucket: "+
		"artifacts in the spec, or --artifacts); or, if this state replaces that one, take the versions over with "+
		"`pipec artifacts adopt SPEC --state %s` (recorded in %s; this state's gc then removes the versions it did "+
		"not accept)",
		e.Store, e.Pipeline, owner, made, this, orID(e.This), e.Owner.Record)
}

// orID names a state for a command line: its path, else its identity.
func orID(o Owner) string {
	if o.StatePath != "" {
		return o.StatePath
	}
	return "<the state with id " + o.State + ">"
}
