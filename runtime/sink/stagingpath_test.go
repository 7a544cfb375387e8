package sink

import (
	"os"
	"path/filepath"
	"testing"
)

// An output's staging is ROOT/<run>/<task>.<attempt>/<artifact>;
// FindStaging finds it there or where an older pipec staged it
// (ROOT/<run>/<task>/<attempt>/<artifact>), and says when it is in neither.
func TestStagingLayouts(t *testing.T) {
	root := t.TempDir()
	dir, err := NewStaging(root, "p/2024-01-01/r1", "load", 2, "rows")
	if want := filepath.Join(root, "p", "2024-01-01", "r1", "load.2", "rows"); err != nil || dir != want {
		t.Fatalf("NewStaging = %s, %v; want %s", dir, err, want)
	}
	if got, err := FindStaging(root, "p/2024-01-01/r1", "load", 2, "rows"); err != nil || got != dir {
		t.Errorf("FindStaging = %s, %v; want %s", got, err, dir)
	}
	legacy, err := LegacyStagingPath(root, "p/2024-01-01/r1", "load", 3, "rows")
	if want := filepath.Join(root, "p", "2024-01-01", "r1", "load", "3", "rows"); err != nil || legacy != want {
		t.Fatalf("LegacyStagingPath = %s, %v; want %s", legacy, err, want)
	}
	if _, err := FindStaging(root, "p/2024-01-01/r1", "load", 3, "rows"); !os.IsNotExist(err) {
		t.Errorf("FindStaging of nothing staged: %v", err)
	}
	if err := os.MkdirAll(legacy, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := FindStaging(root, "p/2024-01-01/r1", "load", 3, "rows"); err != nil || got != legacy {
		t.Errorf("FindStaging of a legacy staging = %s, %v; want %s", got, err, legacy)
	}
	// Debris of a crash of the attempt itself is cleared.
	if err := os.WriteFile(filepath.Join(dir, "half.csv"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if again, err := NewStaging(root, "p/2024-01-01/r1", "load", 2, "rows"); err != nil || again != dir {
		t.Fatalf("NewStaging again = %s, %v", again, err)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("staging not fresh: %v, %v", ents, err)
	}
	if _, err := StagingPath(root, "p/2024-01-01/r1", "a.b", 1, "rows"); err == nil {
		t.Error("a task name with a dot was taken")
	}
}
