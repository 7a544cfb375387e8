package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pipec/pipec/internal/atomicfile"
)

// DefaultPath is where pipec keeps its state, relative to the working
// directory.
const DefaultPath = ".pipec/state.db"

// ScratchDir is the folder where the users of a state file keep what they
// write beside it: attempts' logs, staging and heartbeat files, and the
// default artifact store (versions/). A state named state.db (the default,
// .pipec/state.db) has its folder to itself and uses it; any other name
// gets <name>.d beside it, so two states in one folder never share their
// scratch (nor does one's pipec gc remove the other's versions).
func ScratchDir(statePath string) string {
	if filepath.Base(statePath) == filepath.Base(DefaultPath) {
		return filepath.Dir(statePath)
	}
	return statePath + ".d"
}

// scratchOf names, in a scratch folder, the state it belongs to.
const scratchOf = "scratch-of.json"

// scratchClaim is that record.
type scratchClaim struct {
	State     string `json:"state"`
	StatePath string `json:"state_path,omitempty"`
}

// ClaimScratch binds the scratch folder dir to the state with identity id
// (StateID), found at where (its file's absolute path, or its server's URL
// without the password). Two states must not share one: each numbers its
// runs r1, r2, …, so their attempts' staging, logs and heartbeat files
// would be the same folders, and an attempt of one would empty the output
// folder of the other's running task. The first state to use dir records
// itself there (create-only); a state file at the recorded path with
// another identity is that file made again, and takes the folder over;
// any other state is refused with a *ScratchInUseError (a server's URL may
// name another database through the environment: PGDATABASE, PGHOST).
func ClaimScratch(dir, id, where string) error { return claimScratch(dir, id, where, true) }

// CheckScratch is ClaimScratch without writing (a dry run's): nil when the
// folder is the state's, or would be.
func CheckScratch(dir, id, where string) error { return claimScratch(dir, id, where, false) }

func claimScratch(dir, id, where string, write bool) error {
	if id == "" {
		return errors.New("scratch folder: no state identity")
	}
	if !write {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	} else if err := atomicfile.MkdirAll(dir); err != nil {
		return fmt.Errorf("scratch folder %s: %w", dir, err)
	}
	p := filepath.Join(dir, scratchOf)
	data, err := json.Marshal(scratchClaim{State: id, StatePath: where})
	if err != nil {
		return err
	}
	data = append(data, '\n')
	for range 2 {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			if !write {
				return nil
			}
			if err := atomicfile.Create(p, data, 0o644); !errors.Is(err, fs.ErrExist) {
				return err // made, or could not be
			}
			continue // another state's, made meanwhile: read it
		} else if err != nil {
			return fmt.Errorf("scratch folder %s: %w", dir, err)
		}
		var c scratchClaim
		if err := json.Unmarshal(b, &c); err != nil || c.State == "" {
			return fmt.Errorf("scratch folder %s: %s is damaged (%v): it names the state the folder belongs to; "+
				"remove it if no other state uses the folder", dir, p, err)
		}
		switch {
		case c.State == id:
			return nil
		case filepath.IsAbs(where) && c.StatePath == where && write:
			return atomicfile.Write(p, data, 0o644)
		case filepath.IsAbs(where) && c.StatePath == where:
			return nil
		}
		return &ScratchInUseError{Dir: dir, Owner: c.State, OwnerPath: c.StatePath, State: id, StatePath: where}
	}
	return fmt.Errorf("scratch folder %s: %s keeps changing", dir, p)
}

// ScratchInUseError refuses a state the scratch folder of another.
type ScratchInUseError struct {
	Dir              string
	Owner, OwnerPath string
	State, StatePath string
}

func (e *ScratchInUseError) Error() string {
	return fmt.Sprintf("folder %s holds the staging, logs and heartbeat files of state %s (%s), not of this state %s (%s): "+
		"two states cannot share it (both number their runs r1, r2, …, and one's attempts would empty the other's output "+
		"folders). Give this one a folder of its own: a worker another --workdir (or --name); pipec run a --state that "+
		"names its database in the URL, or another spec folder. If that state is gone for good, remove %s",
		e.Dir, e.Owner, e.OwnerPath, e.State, e.StatePath, filepath.Join(e.Dir, scratchOf))
}
