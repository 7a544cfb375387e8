package postgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/postgres"
)

// awkward are texts whose JSON quoting differs between encoding/json and a
// plain to_json: every control character PostgreSQL text can hold, the
// characters Go escapes for HTML and JavaScript, quotes, backslashes and
// text beyond ASCII.
func awkward() []string {
	var ctl strings.Builder
	for c := rune(1); c < 0x20; c++ {
		ctl.WriteRune(c)
	}
	return []string{"", "plain", ctl.String(), `<script>&amp;"quoted" \back\slash/`,
		"line\u2028para\u2029end", "del\x7f", "é ü 漢字 🙂", "tab\there\nnewline\r\b\f"}
}

// TestJSONStringSQLQuotesAsGo: the statements that write an event's
// payload themselves quote text as encoding/json does, byte for byte.
func TestJSONStringSQLQuotesAsGo(t *testing.T) {
	s := open(t, pg.Server(t), nil)
	for _, text := range awkward() {
		var got string
		if err := s.Pool().QueryRow(context.Background(), `SELECT `+postgres.JSONStringSQL("$1::text"), text).Scan(&got); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(text)
		if got != string(want) {
			t.Errorf("%q: got %s, want %s", text, got, want)
		}
	}
}

// TestVersionEventsAsAppendEventWritesThem: recording a version and its
// audit verdict, each one statement, log the events a map marshalled by
// store.PayloadText would give, whatever the artifact's name and the
// reason hold.
func TestVersionEventsAsAppendEventWritesThem(t *testing.T) {
	srv := pg.Server(t)
	for i, text := range awkward()[1:] {
		s := open(t, srv, nil)
		ctx := context.Background()
		run := submitWith(t, s, queue.Task{Name: "a"})
		cl, err := s.ClaimStarting(ctx, "w1", time.Minute, store.AttemptSpec{Worker: "w1", Host: "h", Boot: "b"})
		if err != nil || cl == nil || cl.Attempt == nil {
			t.Fatalf("claim: %+v, %v", cl, err)
		}
		a := cl.Attempt
		record := func(digest string) store.Version {
			t.Helper()
			v, err := s.RecordVersion(ctx, store.Version{Artifact: text, Interval: "2024-01-01", Digest: digest,
				Run: a.Run, Task: a.Task, Attempt: a.Number, Location: "loc"})
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		accepted, rejected := record("sha256:"+strings.Repeat("a", 64)), record("sha256:"+strings.Repeat("b", 64))
		if again := record(accepted.Digest); again.ID != accepted.ID {
			t.Fatalf("recorded again: %+v, want %+v", again, accepted)
		}
		if err := s.AcceptVersion(ctx, accepted.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.RejectVersion(ctx, rejected.ID, text); err != nil {
			t.Fatal(err)
		}
		// A verdict given again is no change; another is refused.
		if err := s.AcceptVersion(ctx, accepted.ID); err != nil {
			t.Fatalf("accepted again: %v", err)
		}
		if err := s.RejectVersion(ctx, accepted.ID, "no"); err == nil {
			t.Fatal("an accepted version was rejected")
		}
		var want []string
		for _, e := range []struct {
			v      store.Version
			kind   string
			reason string
		}{{accepted, store.EventVersionRecorded, ""}, {rejected, store.EventVersionRecorded, ""},
			{accepted, store.EventVersionAccepted, ""}, {rejected, store.EventVersionRejected, text}} {
			p := map[string]any{"version": e.v.ID, "label": e.v.Label(), "token": e.v.Token}
			if e.reason != "" {
				p["reason"] = e.reason
			}
			text, err := store.PayloadText(p)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, e.kind+" "+text)
		}
		evs, err := s.Events(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			if strings.HasPrefix(e.Kind, "version.") {
				got = append(got, e.Kind+" "+string(e.Payload))
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("case %d: version events\n%s\nwant\n%s", i, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
