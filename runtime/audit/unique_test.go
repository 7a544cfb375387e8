package audit

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pipec/pipec/compiler"
)

// TestUniqueSpills: the unique index gives the same verdict whether it keeps
// its hashes in memory or spills them as sorted runs to temporary files and
// merges them (a run every 7 rows here), across files and formats, with the
// duplicates counted exactly and the first three in reading order shown with
// their keys; the temporary files are gone afterwards.
func TestUniqueSpills(t *testing.T) {
	var a, b strings.Builder
	a.WriteString("id,shop\n")
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&a, "%d,s%d\n", i, i%3)
	}
	// Repeats: 10 (line 12 of a.csv) at a.csv:503, 250 twice in b.jsonl,
	// and 499 (a.csv:501) once more.
	a.WriteString("10,s1\n")
	b.WriteString(`{"id": "250", "shop": "s1"}` + "\n")
	b.WriteString(`{"id": "9999", "shop": "s0"}` + "\n")
	b.WriteString(`{"id": "250", "shop": "s1"}` + "\n")
	b.WriteString(`{"id": "499", "shop": "s1"}` + "\n")
	dir := version(t, map[string]string{"a.csv": a.String(), "b.jsonl": b.String()})
	c := compiler.PlanCheck{Name: "u", Input: "x", Unique: []string{"id", "shop"}}
	want := []string{`unique ("id", "shop"): 4 duplicate row(s): ["10","s1"] at a.csv:502 repeats a.csv:12, ` +
		`["250","s1"] at b.jsonl:1 repeats a.csv:252, ["250","s1"] at b.jsonl:3 repeats a.csv:252 (and 1 more)`}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, spill := range []int{7, 1 << 18} {
		got, err := assertTableSpill(context.Background(), c, dir, "", spill)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("spill every %d: reasons (-want +got):\n%s", spill, diff)
		}
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// No duplicates: accepted, with or without spilling.
	clean := version(t, map[string]string{"c.csv": "id\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"})
	for _, spill := range []int{2, 1 << 18} {
		got, err := assertTableSpill(context.Background(), compiler.PlanCheck{Name: "u", Unique: []string{"id"}}, clean, "", spill)
		if err != nil || len(got) != 0 {
			t.Errorf("spill every %d: %v, %v", spill, got, err)
		}
	}
}
