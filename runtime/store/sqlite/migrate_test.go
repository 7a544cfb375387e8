package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/runtime/store"
)

// TestMigrateFromVersion2: a state written before the pipeline scope (schema
// 2: versions and pointers without a pipeline, AUTOINCREMENT events) opens
// with its data carried over: versions and pointers take their run's
// pipeline, events keep their sequence numbers and new ones come after, the
// state gets an identity, and the log stays append-only.
func TestMigrateFromVersion2(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:2] {
		if _, err := db.Exec(m.sql); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL)`,
		`INSERT INTO schema_version VALUES (1, 'initial schema'), (2, 'token epochs')`,
		`INSERT INTO runs VALUES ('orders/2024-01-01/r1', 'orders', '2024-01-01', 1, 0, 0, 'v1', 'sha256:p', 'succeeded', 1, 2)`,
		`INSERT INTO attempts (run, task, number, resource, token, state) VALUES ('orders/2024-01-01/r1', 'clean', 1, 'orders@2024-01-01', 1000000000, 'succeeded')`,
		`INSERT INTO versions (id, artifact, interval_key, digest, run, task, attempt, token, code_version, staging_path, state, created)
		 VALUES (7, 'orders_clean', '2024-01-01', 'sha256:aa', 'orders/2024-01-01/r1', 'clean', 1, 1000000000, 'v1', '/s', 'accepted', 1)`,
		`INSERT INTO pointers VALUES ('warehouse', 'orders_clean', '2024-01-01', 7, 1000000000, 0, 1)`,
		`INSERT INTO events (run, time, kind) VALUES ('orders/2024-01-01/r1', 1, 'run.created'), ('orders/2024-01-01/r1', 2, 'run.finished')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s := openTest(t, path, nil)
	v, err := s.AcceptedVersion(ctx, "orders", "orders_clean", "2024-01-01")
	if err != nil || v.ID != 7 || v.Pipeline != "orders" {
		t.Fatalf("migrated version = %+v, %v", v, err)
	}
	if p, err := s.Pointer(ctx, "orders", "warehouse", "orders_clean", "2024-01-01"); err != nil || p.Version != 7 {
		t.Fatalf("migrated pointer = %+v, %v", p, err)
	}
	if id, err := s.StateID(ctx); err != nil || len(id) != 32 {
		t.Errorf("state id = %q, %v", id, err)
	}
	seq, err := s.AppendEvent(ctx, store.Event{Run: "orders/2024-01-01/r1", Kind: "x"})
	if err != nil || seq != 3 {
		t.Errorf("the next event's seq = %d, %v; want 3", seq, err)
	}
	evs, err := s.Events(ctx, "orders/2024-01-01/r1")
	if err != nil || len(evs) != 3 || evs[0].Seq != 1 || evs[0].Kind != "run.created" {
		t.Errorf("events = %+v, %v", evs, err)
	}
	raw := rawDB(t, path)
	if _, err := raw.Exec(`DELETE FROM events`); err == nil {
		t.Error("the migrated event log accepts deletes")
	}
}

// TestMigrateVersionLocations: a state written before the artifact store
// (schema 6: versions named by the absolute path of their frozen folder)
// opens with each frozen folder beside the state turned into its location
// key in the default artifact store, and any other path kept as it was.
func TestMigrateVersionLocations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:6] {
		if _, err := db.Exec(m.sql); err != nil {
			t.Fatalf("migration %d: %v", m.version, err)
		}
	}
	hex := "ab" + strings.Repeat("0", 62)
	for _, q := range []string{
		`CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL)`,
		`INSERT INTO schema_version VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e'), (6, 'f')`,
		`INSERT INTO runs VALUES ('orders/2024-01-01/r1', 'orders', '2024-01-01', 1, 0, 0, 'v1', 'sha256:p', 'succeeded', 1, 2)`,
		`INSERT INTO attempts (run, task, number, resource, token, state) VALUES ('orders/2024-01-01/r1', 'clean', 1, 'orders@2024-01-01', 1000000000, 'succeeded')`,
		`INSERT INTO versions (id, pipeline, artifact, interval_key, digest, run, task, attempt, token, code_version, staging_path, state, created)
		 VALUES (7, 'orders', 'orders_clean', '2024-01-01', 'sha256:` + hex + `', 'orders/2024-01-01/r1', 'clean', 1, 1000000000, 'v1',
		 '/home/u/p/.pipec/versions/orders/orders_clean/` + hex + `', 'accepted', 1)`,
		`INSERT INTO versions (id, pipeline, artifact, interval_key, digest, run, task, attempt, token, code_version, staging_path, state, created)
		 VALUES (8, 'orders', 'orders_raw', '2024-01-01', 'sha256:` + hex + `', 'orders/2024-01-01/r1', 'clean', 1, 1000000000, 'v1',
		 '/home/u/p/.pipec/staging/orders/2024-01-01/r1/clean/1/orders_raw', 'rejected', 1)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s := openTest(t, path, nil)
	for id, want := range map[int64]string{
		7: "orders/orders_clean/" + hex,
		8: "/home/u/p/.pipec/staging/orders/2024-01-01/r1/clean/1/orders_raw",
	} {
		v, err := s.GetVersion(ctx, id)
		if err != nil || v.Location != want {
			t.Errorf("version %d: location %q, %v; want %q", id, v.Location, err, want)
		}
	}
}
