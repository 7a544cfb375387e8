package sink

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
)

// versionFiles are the files of every version in the racing tests; each holds
// the same line naming the version, so a read that mixes two versions shows
// two different lines.
var versionFiles = []string{"part-0.csv", "part-1.csv"}

func versionContent(round, publisher int) string {
	return fmt.Sprintf("id,round,publisher\n%d,%d,%d\n", round*100+publisher, round, publisher)
}

func filesOf(content string) map[string]string {
	m := map[string]string{}
	for _, f := range versionFiles {
		m[f] = content
	}
	return m
}

// reader is fault test 7's concurrent reader: it reads PATH/<interval> over
// and over, resolving the link once per read as Visible documents, and checks
// that every read is exactly one audited version, whole.
type reader struct {
	d        *Directory
	interval string
	audited  *sync.Map // content -> struct{}, stored before the version is published
	reads    atomic.Int64
	errs     chan error
}

func (r *reader) run(stop <-chan struct{}, done *sync.WaitGroup) {
	defer done.Done()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if err := r.readOnce(); err != nil {
			select {
			case r.errs <- err:
			default:
			}
			return
		}
		// Leave the shared CPUs to the publishers; thousands of reads still
		// land inside publishes.
		time.Sleep(200 * time.Microsecond)
	}
}

func (r *reader) readOnce() error {
	dir, err := r.d.Visible(r.interval)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing published yet
	}
	if err != nil {
		return err
	}
	var first string
	for i, name := range versionFiles {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		if i == 0 {
			first = string(b)
			if _, ok := r.audited.Load(first); !ok {
				return fmt.Errorf("read %q from %s: not an audited version", first, dir)
			}
		} else if string(b) != first {
			return fmt.Errorf("mixed read in %s: %s has %q, %s has %q", dir, versionFiles[0], first, name, b)
		}
	}
	// A reader that does not resolve the link first still gets whole files.
	b, err := os.ReadFile(filepath.Join(r.d.Path, r.interval, versionFiles[0]))
	if err != nil {
		return err
	}
	if _, ok := r.audited.Load(string(b)); !ok {
		return fmt.Errorf("read %q through the link: not an audited version", b)
	}
	r.reads.Add(1)
	return nil
}

// TestRacingPublishers is fault test 6 (and 7 with its reader): 8 publishers,
// each a goroutine with its own store handle on one database file, are
// released together on one (artifact, interval) with distinct tokens, round
// after round, each publishing over the pointer as it was before the round
// (PublishIf). Each round has exactly one winner, the pointer's token strictly
// increases, the visible data is the winner's, and a concurrent reader never
// sees a mix. A publisher prepares its next version (attempt, staging,
// audit) as soon as its publish returns, while the others may still publish.
func TestRacingPublishers(t *testing.T) {
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	racePublishers(t, rounds, true)
}

// TestRacingFencedPublishers races the same way with token fencing alone
// (Publish, no base): a lower token may win before a higher one arrives, so
// a round can have several winners, but the round always ends with the
// highest token of the round visible, and no publish is lost or torn.
func TestRacingFencedPublishers(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 50
	}
	racePublishers(t, rounds, false)
}

// racePublishers runs the racing rounds; optimistic publishes with
// PublishIf from the round's base, else with Publish.
func racePublishers(t *testing.T, rounds int, optimistic bool) {
	const publishers = 8
	const interval = "2024-01-01"
	f := newFixture(t)
	ctx := context.Background()

	audited := &sync.Map{}
	rd := &reader{d: f.sink(t, f.st, FencingToken), interval: interval, audited: audited, errs: make(chan error, 1)}
	stop := make(chan struct{})
	var background sync.WaitGroup
	background.Add(1)
	go rd.run(stop, &background)

	type outcome struct {
		publisher int
		res       Result
		err       error
	}
	ready := make(chan error, publishers)
	results := make(chan outcome, publishers)
	release := make([]chan int64, publishers) // the base token of the round
	for p := 0; p < publishers; p++ {
		release[p] = make(chan int64, 1)
		d := f.sink(t, f.open(t), FencingToken)
		background.Add(1)
		go func() {
			defer background.Done()
			for round := 1; ; round++ {
				content := versionContent(round, p)
				v, err := f.tryProduce(d.Store, fmt.Sprintf("p%d", p), interval, filesOf(content))
				if err == nil {
					audited.Store(content, struct{}{})
				}
				ready <- err
				base, ok := <-release[p]
				if !ok {
					return
				}
				var res Result
				if optimistic {
					res, err = d.PublishIf(ctx, v, base)
				} else {
					res, err = d.Publish(ctx, v)
				}
				results <- outcome{p, res, err}
			}
		}()
	}
	defer func() {
		close(stop)
		for _, ch := range release {
			close(ch)
		}
		background.Wait()
	}()

	var lastToken int64
	multi := 0 // rounds with more than one winner (token fencing alone)
	for round := 1; round <= rounds; round++ {
		for i := 0; i < publishers; i++ {
			if err := <-ready; err != nil {
				t.Fatalf("round %d: producing: %v", round, err)
			}
		}
		base, err := f.st.Pointer(ctx, "orders", "warehouse", "orders_clean", interval)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		for _, ch := range release {
			ch <- base.Token
		}
		winners := 0
		var winner, highest Result
		tokens := map[int64]bool{}
		for i := 0; i < publishers; i++ {
			o := <-results
			if o.err != nil {
				t.Fatalf("round %d publisher %d: %v", round, o.publisher, o.err)
			}
			if tokens[o.res.Version.Token] {
				t.Fatalf("round %d: token %d held by two publishers", round, o.res.Version.Token)
			}
			tokens[o.res.Version.Token] = true
			if o.res.Version.Token > highest.Version.Token {
				highest = o.res
			}
			switch o.res.Outcome {
			case store.Won:
				winners++
				winner = o.res
			case store.Fenced:
			case store.Conflict:
				if !optimistic {
					t.Fatalf("round %d: conflict without a base", round)
				}
			default:
				t.Fatalf("round %d publisher %d: outcome %s", round, o.publisher, o.res.Outcome)
			}
		}
		switch {
		case optimistic && winners != 1:
			t.Fatalf("round %d: %d winners, want exactly 1", round, winners)
		case !optimistic && (winners == 0 || highest.Outcome != store.Won):
			t.Fatalf("round %d: %d winners, highest token %d %s", round, winners, highest.Version.Token, highest.Outcome)
		case !optimistic:
			winner = highest // what must be visible at the end of the round
		}
		if winners > 1 {
			multi++
		}
		p, err := f.st.Pointer(ctx, "orders", "warehouse", "orders_clean", interval)
		if err != nil {
			t.Fatal(err)
		}
		if p.Version != winner.Version.ID || p.Token != winner.Version.Token {
			t.Fatalf("round %d: pointer %+v, winner %+v", round, p, winner.Version)
		}
		if p.Token <= lastToken {
			t.Fatalf("round %d: pointer token %d after %d", round, p.Token, lastToken)
		}
		lastToken = p.Token
		want := versionContent(round, int(winner.Version.Task[1]-'0'))
		if got := readVisible(t, rd.d, interval, versionFiles[1]); got != want {
			t.Fatalf("round %d: visible %q, winner wrote %q", round, got, want)
		}
		select {
		case err := <-rd.errs:
			t.Fatalf("reader, round %d: %v", round, err)
		default:
		}
	}
	select {
	case err := <-rd.errs:
		t.Fatalf("reader: %v", err)
	default:
	}
	if rd.reads.Load() == 0 {
		t.Fatal("the reader never read a published version")
	}
	t.Logf("%d rounds (%d with several winners), %d concurrent reads, last token %d", rounds, multi, rd.reads.Load(), lastToken)
	if err := f.st.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDistinctIntervalsNoneLost: 5 publishers × 10 publishes, each to its own
// interval, all at once: exactly 50 versions, every one published and visible.
func TestDistinctIntervalsNoneLost(t *testing.T) {
	const publishers, each = 5, 10
	f := newFixture(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, publishers)
	for p := 0; p < publishers; p++ {
		d := f.sink(t, f.open(t), FencingToken)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				interval := fmt.Sprintf("2024-%02d-%02d", p+1, i+1)
				v, err := f.tryProduce(d.Store, fmt.Sprintf("p%d", p), interval, filesOf(versionContent(i, p)))
				if err != nil {
					errs <- err
					return
				}
				res, err := d.Publish(ctx, v)
				if err != nil {
					errs <- err
					return
				}
				if res.Outcome != store.Won {
					errs <- fmt.Errorf("publisher %d, %s: %s", p, interval, res.Outcome)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	d := f.sink(t, f.st, FencingToken)
	ps, err := f.st.Pointers(ctx, "orders", "warehouse")
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != publishers*each {
		t.Fatalf("%d pointers, want %d", len(ps), publishers*each)
	}
	ids := map[int64]bool{}
	for _, p := range ps {
		ids[p.Version] = true
		v, err := f.st.GetVersion(ctx, p.Version)
		if err != nil {
			t.Fatal(err)
		}
		var month, day int
		fmt.Sscanf(p.Interval, "2024-%02d-%02d", &month, &day)
		if got, want := readVisible(t, d, p.Interval, versionFiles[1]), versionContent(day-1, month-1); got != want {
			t.Errorf("%s shows %q, want %q", p.Interval, got, want)
		}
		if v.Interval != p.Interval {
			t.Errorf("pointer %s names a version of %s", p.Interval, v.Interval)
		}
	}
	if len(ids) != publishers*each {
		t.Errorf("%d distinct versions published, want %d", len(ids), publishers*each)
	}
	if n := countVersionDirs(t, d); n != publishers*each {
		t.Errorf("%d version folders, want %d", n, publishers*each)
	}
	if err := f.st.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
}
