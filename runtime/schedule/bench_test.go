package schedule

import (
	"context"
	"testing"

	"github.com/pipec/pipec/internal/pgtest"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/postgres"
)

// BenchmarkBackfill730 decides the seed's 730-interval backfill over a
// state where every interval is published at an older code_version (the
// --stale case): one Read (runs, leases, pointers, one version per
// pointer) and the decisions.
//
//	go test -run '^$' -bench Backfill730 -benchtime 10x ./runtime/schedule/
func BenchmarkBackfill730(b *testing.B) { benchBackfill730(b, openStore(b)) }

// BenchmarkBackfill730Postgres is the same on a PostgreSQL server of its
// own (internal/pgtest): the visible versions are a round trip each.
func BenchmarkBackfill730Postgres(b *testing.B) {
	srv := pgtest.Start(b)
	s, err := postgres.Open(context.Background(), srv.NewSchema(b), postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchBackfill730(b, s)
}

// BenchmarkBackfill730Complete decides the same 730 intervals, each
// complete at the spec's code_version, so that each one's reader of the
// day before (totals@-1) is asked what it read (readMoved).
func BenchmarkBackfill730Complete(b *testing.B) { benchBackfill730Complete(b, openStore(b)) }

// BenchmarkBackfill730CompletePostgres is the same on PostgreSQL.
func BenchmarkBackfill730CompletePostgres(b *testing.B) {
	srv := pgtest.Start(b)
	s, err := postgres.Open(context.Background(), srv.NewSchema(b), postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchBackfill730Complete(b, s)
}

func benchBackfill730Complete(b *testing.B, s store.Store) {
	p := dailyPlan("2024.06.1", false, 1)
	ivs, err := Intervals(interval(b, p, "2024-01-01"), interval(b, p, "2025-12-30"))
	if err != nil {
		b.Fatal(err)
	}
	for _, iv := range ivs {
		runOf(b, s, p, iv.Key, "2024.06.1", store.RunSucceeded, true)
	}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		f, err := Read(ctx, s, queueOf(s), p)
		if err != nil {
			b.Fatal(err)
		}
		ds, err := f.Backfill(ctx, ivs, RebuildGaps)
		if err != nil || len(ds) != 730 || ds[729].Action != Skip {
			b.Fatalf("%d decisions, %v", len(ds), err)
		}
	}
}

func benchBackfill730(b *testing.B, s store.Store) {
	old := dailyPlan("2024.06.1", false, 1)
	first := interval(b, old, "2024-01-01")
	last := interval(b, old, "2025-12-30")
	ivs, err := Intervals(first, last)
	if err != nil {
		b.Fatal(err)
	}
	for _, iv := range ivs {
		runOf(b, s, old, iv.Key, "2024.06.1", store.RunSucceeded, true)
	}
	fixed := dailyPlan("2024.07.1", false, 1)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		f, err := Read(ctx, s, queueOf(s), fixed)
		if err != nil {
			b.Fatal(err)
		}
		ds, err := f.Backfill(ctx, ivs, RebuildStale)
		if err != nil || len(ds) != 730 || ds[729].Action != Run {
			b.Fatalf("%d decisions, %v", len(ds), err)
		}
	}
}
