package postgres

import (
	"strconv"
	"testing"

	"github.com/pipec/pipec/runtime/store"
)

// The grants' SQL spells the epoch's span as text; it must be the span
// every backend grants by.
func TestEpochSpanSQL(t *testing.T) {
	if want := strconv.Itoa(store.EpochSpan); epochSpanSQL != want {
		t.Fatalf("epochSpanSQL = %s, store.EpochSpan = %s", epochSpanSQL, want)
	}
}
