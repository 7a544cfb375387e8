package audit

import (
	"bufio"
	"bytes"
	"container/heap"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"slices"
)

// uniqueIndex finds repeated keys of a `unique` check without holding the
// keys in memory, so auditing a file much larger than memory is possible and
// a 200 MB CSV costs a few MB.
//
// Each row's key (its JSON text) is hashed to 16 bytes (SHA-256, truncated:
// a false duplicate among n rows has probability below n²/2^129, about 10^-21
// for a billion rows) and paired with the row's place (file index and line).
// The 24-byte records collect in a buffer of at most spillRecords; a full
// buffer is sorted and written to a temporary file as a sorted run. At the
// end the runs are merged: equal hashes are adjacent, in reading order, so
// the first of a group is where the key was first seen and every other one a
// duplicate. Memory is bounded by the buffer plus one read buffer per run;
// the temporary files hold 24 bytes a row and are removed when the audit ends.
type uniqueIndex struct {
	limit int
	buf   []uniqRec
	dir   string     // temporary folder of the runs, once the first spills
	runs  []*os.File // sorted runs, rewound for the merge
}

// uniqRec is one row's key hash and place.
type uniqRec struct {
	h   [16]byte
	loc uint64 // file index << 32 | line
}

const recSize = 24

// spillRecords is the buffer's size in records (6 MB).
const spillRecords = 1 << 18

func newUniqueIndex(limit int) *uniqueIndex {
	return &uniqueIndex{limit: limit, buf: make([]uniqRec, 0, min(limit, 1<<12))}
}

func placeOf(file, line int) uint64 { return uint64(file)<<32 | uint64(uint32(line)) }

func splitPlace(loc uint64) (file, line int) { return int(loc >> 32), int(uint32(loc)) }

// add records one row's key.
func (u *uniqueIndex) add(key []byte, loc uint64) error {
	sum := sha256.Sum256(key)
	var r uniqRec
	copy(r.h[:], sum[:16])
	r.loc = loc
	u.buf = append(u.buf, r)
	if len(u.buf) >= u.limit {
		return u.spill()
	}
	return nil
}

func compareRec(a, b uniqRec) int {
	if c := bytes.Compare(a.h[:], b.h[:]); c != 0 {
		return c
	}
	switch {
	case a.loc < b.loc:
		return -1
	case a.loc > b.loc:
		return 1
	}
	return 0
}

// spill sorts the buffer and writes it as one run.
func (u *uniqueIndex) spill() error {
	if len(u.buf) == 0 {
		return nil
	}
	slices.SortFunc(u.buf, compareRec)
	if u.dir == "" {
		d, err := os.MkdirTemp("", "pipec-unique-")
		if err != nil {
			return err
		}
		u.dir = d
	}
	f, err := os.CreateTemp(u.dir, "run-")
	if err != nil {
		return err
	}
	u.runs = append(u.runs, f)
	w := bufio.NewWriterSize(f, 1<<16)
	var b [recSize]byte
	for _, r := range u.buf {
		copy(b[:16], r.h[:])
		binary.BigEndian.PutUint64(b[16:], r.loc)
		if _, err := w.Write(b[:]); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	u.buf = u.buf[:0]
	return nil
}

// close removes the temporary runs.
func (u *uniqueIndex) close() {
	for _, f := range u.runs {
		f.Close()
	}
	if u.dir != "" {
		os.RemoveAll(u.dir)
	}
	u.runs, u.dir, u.buf = nil, "", nil
}

// duplicate is one row whose key an earlier row already had.
type duplicate struct {
	loc, first uint64
}

// duplicates merges everything recorded and returns how many rows repeat an
// earlier key and the first max of them in reading order.
func (u *uniqueIndex) duplicates(max int) (int, []duplicate, error) {
	var src recSource
	if len(u.runs) == 0 {
		slices.SortFunc(u.buf, compareRec)
		src = &sliceSource{recs: u.buf}
	} else {
		if err := u.spill(); err != nil {
			return 0, nil, err
		}
		m := &mergeSource{}
		for _, f := range u.runs {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return 0, nil, err
			}
			fr := &fileSource{r: bufio.NewReaderSize(f, 1<<16)}
			ok, err := fr.next()
			if err != nil {
				return 0, nil, err
			}
			if ok {
				m.h = append(m.h, fr)
			}
		}
		heap.Init(&m.h)
		src = m
	}
	count := 0
	var firsts []duplicate // the smallest max places, sorted
	var prev uniqRec
	var groupFirst uint64
	have := false
	for {
		r, ok, err := src.pop()
		if err != nil {
			return 0, nil, err
		}
		if !ok {
			break
		}
		if have && r.h == prev.h {
			count++
			d := duplicate{loc: r.loc, first: groupFirst}
			if len(firsts) < max || d.loc < firsts[len(firsts)-1].loc {
				i, _ := slices.BinarySearchFunc(firsts, d, func(a, b duplicate) int { return cmpU64(a.loc, b.loc) })
				firsts = slices.Insert(firsts, i, d)
				if len(firsts) > max {
					firsts = firsts[:max]
				}
			}
		} else {
			groupFirst = r.loc
		}
		prev, have = r, true
	}
	return count, firsts, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// recSource yields records in (hash, place) order.
type recSource interface {
	pop() (uniqRec, bool, error)
}

type sliceSource struct {
	recs []uniqRec
	i    int
}

func (s *sliceSource) pop() (uniqRec, bool, error) {
	if s.i >= len(s.recs) {
		return uniqRec{}, false, nil
	}
	s.i++
	return s.recs[s.i-1], true, nil
}

// fileSource reads one sorted run; cur is its next record.
type fileSource struct {
	r   *bufio.Reader
	cur uniqRec
}

func (f *fileSource) next() (bool, error) {
	var b [recSize]byte
	if _, err := io.ReadFull(f.r, b[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		return false, err
	}
	copy(f.cur.h[:], b[:16])
	f.cur.loc = binary.BigEndian.Uint64(b[16:])
	return true, nil
}

// mergeSource merges sorted runs with a heap on their next records.
type mergeSource struct{ h runHeap }

func (m *mergeSource) pop() (uniqRec, bool, error) {
	if len(m.h) == 0 {
		return uniqRec{}, false, nil
	}
	top := m.h[0]
	r := top.cur
	ok, err := top.next()
	if err != nil {
		return uniqRec{}, false, err
	}
	if ok {
		heap.Fix(&m.h, 0)
	} else {
		heap.Pop(&m.h)
	}
	return r, true, nil
}

type runHeap []*fileSource

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return compareRec(h[i].cur, h[j].cur) < 0 }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*fileSource)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
