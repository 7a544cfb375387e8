package cli_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/internal/s3test"
	"github.com/pipec/pipec/internal/tracked"
	"github.com/pipec/pipec/runtime/store/sqlite"
	"github.com/pipec/pipec/webview"
)

// The artifact page says which accepted versions a sink still holds: after a
// forced rerun and gc --keep 1, the visible version is held and the older
// one is not, on a directory sink and on an s3 sink alike.
func TestArtifactPageHeldBySink(t *testing.T) {
	t.Run("directory", func(t *testing.T) {
		dir := t.TempDir()
		tracked.Copy(t, filepath.Join("..", "examples", "orders"), dir)
		checkHeld(t, filepath.Join(dir, "pipeline.hcl"))
	})
	t.Run("s3", func(t *testing.T) {
		s3test.Start(t, "arts", "lake")
		checkHeld(t, s3Orders(t))
	})
}

func checkHeld(t *testing.T, spec string) {
	t.Helper()
	plan := filepath.Join(t.TempDir(), "plan.json")
	for _, args := range [][]string{
		{"run", spec, "--interval", "2024-01-01"},
		{"run", spec, "--interval", "2024-01-01", "--force"},
		{"gc", "--spec", spec, "--keep", "1"},
		{"compile", spec, "-o", plan},
	} {
		if code, out, errs := pipecIn(t, nil, args...); code != 0 {
			t.Fatalf("pipec %v: exit %d\n%s%s", args, code, out, errs)
		}
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(filepath.Dir(spec), ".pipec", "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := compiler.LoadPlan(plan)
	if err != nil {
		t.Fatal(err)
	}
	src := &webview.Source{Store: st, Specs: []webview.Spec{{Plan: p, Dir: filepath.Dir(spec)}}}
	av, err := src.LoadArtifact(ctx, "orders", "orders_clean")
	if err != nil {
		t.Fatal(err)
	}
	if len(av.Visible) != 1 || len(av.Visible[0].Older) != 1 {
		t.Fatalf("artifact page: %+v, want one visible version with one older", av.Visible)
	}
	if got := av.Visible[0].Version.Held; got != "yes" {
		t.Errorf("the visible version is held %q, want yes", got)
	}
	if got := av.Visible[0].Older[0].Held; got != "no" {
		t.Errorf("the version gc pruned is held %q, want no", got)
	}
}
