package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/postgres"
)

// TestMigrateVersionLocations plays the "version locations" migration on
// versions written as before it (named by the absolute path of their frozen
// folder): the folder beside the state becomes its location key in the
// default artifact store, any other path is kept as it was.
func TestMigrateVersionLocations(t *testing.T) {
	ctx := context.Background()
	srv := pg.Server(t)
	url := srv.NewSchema(t)
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	run, err := s.CreateRun(ctx, store.NewRun{Pipeline: "orders", Interval: "2024-01-01", IntervalStart: day,
		IntervalEnd: day.AddDate(0, 0, 1), CodeVersion: "v1", PlanDigest: "sha256:p"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "clean", Resource: store.FenceResource("orders", "2024-01-01")})
	if err != nil {
		t.Fatal(err)
	}
	hex := "ab" + strings.Repeat("0", 62)
	old := map[string]string{
		"orders_clean": "/home/u/p/.pipec/versions/orders/orders_clean/" + hex,
		"orders_raw":   "/home/u/p/.pipec/staging/orders/2024-01-01/r1/clean/1/orders_raw",
	}
	ids := map[string]int64{}
	for artifact, loc := range old {
		v, err := s.RecordVersion(ctx, store.Version{Artifact: artifact, Interval: "2024-01-01", Digest: "sha256:" + hex,
			Run: run.ID, Task: "clean", Attempt: a.Number, Location: loc})
		if err != nil {
			t.Fatal(err)
		}
		ids[artifact] = v.ID
	}
	// The table as it was before the step, then the step.
	sql := "SET search_path TO " + schemaOf(t, url) + ";\nALTER TABLE versions RENAME COLUMN location TO staging_path;\n" +
		postgres.MigrationSQL("version locations")
	if out, err := srv.Psql(ctx, "", sql); err != nil {
		t.Fatalf("migration: %v\n%s", err, out)
	}
	for artifact, want := range map[string]string{
		"orders_clean": "orders/orders_clean/" + hex,
		"orders_raw":   old["orders_raw"],
	} {
		v, err := s.GetVersion(ctx, ids[artifact])
		if err != nil || v.Location != want {
			t.Errorf("%s: location %q, %v; want %q", artifact, v.Location, err, want)
		}
	}
}
