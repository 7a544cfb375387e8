package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// A scratch folder is the first state's: again and again; a state file
// made again at its path takes it over; another state is refused with a
// message naming both and the record to remove, even at the same server URL
// (which the environment may point at another database).
func TestClaimScratch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work")
	file := filepath.Join(t.TempDir(), "state.db")
	for range 2 {
		if err := ClaimScratch(dir, "a", file); err != nil {
			t.Fatal(err)
		}
	}
	if err := ClaimScratch(dir, "a2", file); err != nil {
		t.Fatalf("the state file made again: %v", err)
	}
	var inUse *ScratchInUseError
	err := ClaimScratch(dir, "b", filepath.Join(t.TempDir(), "other.db"))
	for _, want := range []string{"holds the staging, logs and heartbeat files of state a2 (" + file + ")",
		"not of this state b", "another --workdir", filepath.Join(dir, "scratch-of.json")} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("another state: %v, want it to say %q", err, want)
		}
	}
	url := "postgres://pipec@/?host=/run/pg"
	server := filepath.Join(t.TempDir(), "server.d")
	if err := ClaimScratch(server, "prod", url); err != nil {
		t.Fatal(err)
	}
	if err := ClaimScratch(server, "staging", url); !errors.As(err, &inUse) {
		t.Errorf("another database at the same URL: %v, want refused", err)
	}
	if err := os.WriteFile(filepath.Join(server, "scratch-of.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ClaimScratch(server, "prod", url); err == nil || !strings.Contains(err.Error(), "is damaged") {
		t.Errorf("a damaged record: %v", err)
	}
}

// Of states racing to claim one folder, exactly one wins.
func TestClaimScratchRaced(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = ClaimScratch(dir, fmt.Sprint("s", i), fmt.Sprintf("/srv/%d.db", i)) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		var inUse *ScratchInUseError
		switch {
		case err == nil:
			won++
		case !errors.As(err, &inUse):
			t.Fatal(err)
		}
	}
	if won != 1 {
		t.Errorf("%d states claimed the folder, want 1: %v", won, errs)
	}
}
