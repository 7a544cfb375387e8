package sink

import (
	"sync"

	"github.com/pipec/pipec/runtime/store"
)

// Shown remembers, across the runs of one process (a backfill's), which of
// the store's pointers each directory sink's links were seen showing, so
// that a run's start (ReconcileAll) reads again only the links whose
// pointer changed since: without it, each run read every interval's link
// and version folder, and a backfill's runs cost more the more intervals
// it had published (at 300 intervals, a sixth of the run's CPU).
//
// A pointer unchanged since its link was seen showing it is shown still:
// pipec moves a link only to the version of the sink's record, which it
// writes after the store's pointer (Publish, settle), so any later move
// came with a new pointer, which is read again (a crashed publish in
// another process included). A fenced pointer never takes a value it had
// before; one taken back to it by a publish that skipped the token check
// (another spec's fencing = "none") and left unlinked by a crash is missed,
// as is a link changed or removed by something other than pipec: the next
// process's first run repairs them, or the interval's next publish. The
// zero value is ready; a nil *Shown remembers nothing.
type Shown struct {
	mu   sync.Mutex
	seen map[shownKey]shownAs
}

// shownKey is one interval of one sink: its folder, the pipeline and the
// sink's name scope the store's pointers.
type shownKey struct{ path, pipeline, sink, interval string }

// shownAs is the pointer a link was seen showing.
type shownAs struct {
	artifact       string
	version, token int64
}

func (d *Directory) shownKey(p store.Pointer) shownKey {
	return shownKey{d.Path, d.Pipeline, d.Name, p.Interval}
}

// known says the link of p's interval was seen showing p.
func (s *Shown) known(d *Directory, p store.Pointer) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	as, ok := s.seen[d.shownKey(p)]
	return ok && as == shownAs{p.Artifact, p.Version, p.Token}
}

// saw records that the link of p's interval shows p.
func (s *Shown) saw(d *Directory, p store.Pointer) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[shownKey]shownAs{}
	}
	s.seen[d.shownKey(p)] = shownAs{p.Artifact, p.Version, p.Token}
}
