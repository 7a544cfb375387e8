package postgres_test

import (
	"context"
	"testing"

	"github.com/pipec/pipec/runtime/store"
)

// TestStartAttemptSessionEndedAtCommit: the server ends the session under
// a start's COMMIT (SQLSTATE 57P01, as a restart's shutdown does; here a
// deferred trigger ends its own session once, so the start did not
// commit). Whether it committed is unknown to the client, which reads the
// row the INSERT returned, finds it missing, and starts again: one
// attempt, started. Before, the start failed ("the state database does not
// answer"), and a local run failed the task with class store: a run of
// TestRunRidesOutBlips (cli) did, now and then.
func TestStartAttemptSessionEndedAtCommit(t *testing.T) {
	s := open(t, pg.Server(t), nil)
	ctx := context.Background()
	run, err := s.CreateRun(ctx, store.NewRun{Pipeline: "p", Interval: "2024-01-01", CodeVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `
CREATE SEQUENCE cuts;
CREATE FUNCTION cut_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.task = 'cut' AND nextval('cuts') = 1 THEN
		PERFORM pg_terminate_backend(pg_backend_pid());
	END IF;
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER cut_at_commit AFTER INSERT ON attempts DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION cut_at_commit();`); err != nil {
		t.Fatal(err)
	}
	a, err := s.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "cut", Resource: "p@2024-01-01"})
	if err != nil {
		t.Fatalf("a start whose first COMMIT lost its session: %v", err)
	}
	var cuts int64
	if err := s.Pool().QueryRow(ctx, `SELECT last_value FROM cuts`).Scan(&cuts); err != nil || cuts < 2 {
		t.Fatalf("the trigger ran %d time(s) (%v): the session was not cut", cuts, err)
	}
	as, err := s.Attempts(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 1 || as[0].Number != a.Number || as[0].Token != a.Token {
		t.Fatalf("attempts %+v, want the one started (%s, token %d)", as, a.AttemptRef, a.Token)
	}
}
