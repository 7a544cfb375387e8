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
//
// It also remembers the generation of each sink's pointers
// (store.Store.PointersGeneration) at which all its links were seen
// settled: while the store's generation is still that one, no pointer
// moved, and a run's start reads that one row and nothing else of the
// sink. A publish of this process that moves the next generation and
// settles its own link keeps it so (swapped). A swap of any other process
// moves the generation, so a crash after it is repaired as before; what a
// settled sink's runs leave for the next process is what no swap made: a
// link changed by hand, and the hidden temporary link (PATH/.link-*) of a
// reconcile that crashed in another process.
type Shown struct {
	mu      sync.Mutex
	seen    map[shownKey]shownAs
	settled map[sinkKey]settledAt
}

// sinkKey is one sink of one pipeline: its folder, the pipeline and the
// sink's name scope the store's pointers.
type sinkKey struct{ path, pipeline, sink string }

// settledAt is when a sink's links were last seen all settled: the
// generation of its pointers, and its binding's adoptions then (a sink
// adopted by another state and back again was published to by that one).
type settledAt struct {
	generation int64
	adoptions  int
}

func (d *Directory) sinkKey() sinkKey { return sinkKey{d.Path, d.Pipeline, d.Name} }

// isSettled says every link of d was seen settled at at (the generation,
// the binding's adoptions as now).
func (s *Shown) isSettled(d *Directory, at settledAt) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	got, ok := s.settled[d.sinkKey()]
	return ok && got == at
}

// settle records that every link of d was seen settled at at, read before
// the links were.
func (s *Shown) settle(d *Directory, at settledAt) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.settled == nil {
		s.settled = map[sinkKey]settledAt{}
	}
	s.settled[d.sinkKey()] = at
}

// swapped records a publish of this process that moved d's pointer p to
// generation and settled p's link: a sink seen settled at the generation
// before is settled at this one. After any other generation, some swap in
// between was not seen here, and the next run's start reads the sink.
func (s *Shown) swapped(d *Directory, p store.Pointer, generation int64) {
	if s == nil {
		return
	}
	s.saw(d, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := d.sinkKey()
	if at, ok := s.settled[k]; ok && at.generation == generation-1 {
		at.generation = generation
		s.settled[k] = at
	}
}

// shownKey is one interval of one sink.
type shownKey struct {
	sinkKey
	interval string
}

// shownAs is the pointer a link was seen showing.
type shownAs struct {
	artifact       string
	version, token int64
}

func (d *Directory) shownKey(p store.Pointer) shownKey {
	return shownKey{d.sinkKey(), p.Interval}
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
