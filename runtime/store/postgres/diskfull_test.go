package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pipec/pipec/runtime/store"
)

// TestDiskFullIsTyped: a write the server refuses with SQLSTATE 53100
// (disk_full) fails with store.ErrDiskFull (errors.Is), from the code, not
// its message: a trigger on the event log raises exactly that code with a
// message that names no disk, as a server out of space would refuse the
// insert. Any other refusal is not a full disk.
func TestDiskFullIsTyped(t *testing.T) {
	s := open(t, pg.Server(t), nil)
	ctx := context.Background()
	run, err := s.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: "2024-01-01", CodeVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.kind = 'test.full' THEN
		RAISE EXCEPTION 'refused' USING ERRCODE = '53100';
	ELSIF NEW.kind = 'test.other' THEN
		RAISE EXCEPTION 'refused' USING ERRCODE = '53200';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER refuse BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION refuse();`); err != nil {
		t.Fatal(err)
	}
	_, err = s.AppendEvent(ctx, store.Event{Run: run.ID, Kind: "test.full"})
	if !errors.Is(err, store.ErrDiskFull) {
		t.Fatalf("an insert refused with 53100: %v, want store.ErrDiskFull", err)
	}
	_, err = s.AppendEvent(ctx, store.Event{Run: run.ID, Kind: "test.other"})
	if err == nil || errors.Is(err, store.ErrDiskFull) {
		t.Fatalf("an insert refused with 53200 (out of memory): %v, want an error other than store.ErrDiskFull", err)
	}
	if _, err := s.AppendEvent(ctx, store.Event{Run: run.ID, Kind: "test.fine"}); err != nil {
		t.Fatal(err)
	}
}
