package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/runtime/queue"
	"github.com/pipec/pipec/runtime/store"
)

// runCapabilities runs the checks of the optional capabilities, each on a
// backend that has it; a backend without one skips its check, saying so.
func runCapabilities(t *testing.T, open Opener) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"ClaimStarting", testClaimStarting},
		{"EventsAfter", testEventsAfter},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	}
}

// testClaimStarting (queue.AttemptStarter): the claim starts the task's
// first attempt of the visit in its transaction (queued, a token of the
// run's pipeline@interval, the next number), logged exactly as
// StartAttempt logs it; an attempt the visit never ran is removed with its
// event by Finish (Result.Unused).
func testClaimStarting(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	s, ok := h.(queue.AttemptStarter)
	if !ok {
		t.Skip("the backend's queue does not start attempts as it claims (queue.AttemptStarter)")
	}
	ctx := context.Background()
	run, err := h.Submit(ctx, queue.Submission{
		Run:  store.NewRun{Pipeline: "p", Interval: "2024-01-01", CodeVersion: "1"},
		Plan: []byte(`{}`), BaseDir: "/spec", Interval: "2024-01-01",
		Tasks: []queue.Task{{Name: "a"}, {Name: "b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Register(ctx, queue.WorkerInfo{Name: "w<1>", Host: "h", PID: 1, Slots: 2}, time.Minute); err != nil {
		t.Fatal(err)
	}
	spec := store.AttemptSpec{Worker: "w<1>", Host: "h", Boot: "boot-1"}
	cl, err := s.ClaimStarting(ctx, "w<1>", time.Minute, spec)
	if err != nil || cl == nil || cl.Attempt == nil {
		t.Fatalf("claim: %+v, %v", cl, err)
	}
	a := *cl.Attempt
	if a.Run != run.ID || a.Task != cl.Task || a.Number != cl.AttemptBase+1 || a.State != store.AttemptQueued ||
		a.Resource != "p@2024-01-01" || a.Token <= 0 || a.Worker != "w<1>" || a.Host != "h" || a.Boot != "boot-1" {
		t.Fatalf("the claim's attempt: %+v (base %d)", a, cl.AttemptBase)
	}
	// The same as StartAttempt would have logged.
	other, err := h.StartAttempt(ctx, store.AttemptSpec{Run: run.ID, Task: "b", Resource: "p@2024-01-01", Worker: "w<1>", Queued: true})
	if err != nil || other.Token <= a.Token {
		t.Fatalf("a later grant: %+v, %v", other, err)
	}
	evs, err := h.Events(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got, want string
	for _, ev := range evs {
		if ev.Kind == store.EventAttemptStarted && ev.Task == a.Task {
			got = string(ev.Payload)
		}
		if ev.Kind == store.EventAttemptStarted && ev.Task == "b" {
			want = strings.Replace(string(ev.Payload), fmt.Sprint(other.Token), fmt.Sprint(a.Token), 1)
		}
	}
	if got != want || got == "" {
		t.Fatalf("the claim's attempt.started payload\n%s\nwant (as StartAttempt)\n%s", got, want)
	}
	// The visit did not run it: Finish ends it failed, logged as
	// FinishAttempt logs an end.
	if err := h.Finish(ctx, "w<1>", cl.Ref, queue.Result{Ending: queue.NotRun, Reason: "input missing", Unused: &a.AttemptRef}); err != nil {
		t.Fatal(err)
	}
	end, err := h.GetAttempt(ctx, a.AttemptRef)
	if err != nil || end.State != store.AttemptFailed || end.Class != queue.ClassNotStarted || end.ExitCode != -1 {
		t.Fatalf("the unused attempt: %+v, %v", end, err)
	}
	if err := h.FinishAttempt(ctx, other.AttemptRef, queue.UnusedOutcome()); err != nil {
		t.Fatal(err)
	}
	evs, _ = h.Events(ctx, run.ID)
	got, want = "", ""
	for _, ev := range evs {
		if ev.Kind == store.EventAttemptFinished && ev.Task == a.Task {
			got = string(ev.Payload)
		}
		if ev.Kind == store.EventAttemptFinished && ev.Task == "b" {
			want = strings.Replace(string(ev.Payload), fmt.Sprint(other.Token), fmt.Sprint(a.Token), 1)
		}
	}
	if got != want || got == "" {
		t.Fatalf("the unused attempt's end payload\n%s\nwant (as FinishAttempt)\n%s", got, want)
	}
}

// testEventsAfter (store.EventTailer): a run's events past a sequence
// number, in order, and none of another run's; from 0, exactly Events.
func testEventsAfter(t *testing.T, open Opener) {
	h := open(t, nil)(t)
	tl, ok := h.(store.EventTailer)
	if !ok {
		t.Skip("the backend's store has no EventsAfter (store.EventTailer)")
	}
	ctx := context.Background()
	a := newRun(t, h, "2024-01-01")
	b := newRun(t, h, "2024-01-02")
	for i := range 3 {
		for _, r := range []store.Run{a, b} {
			if _, err := h.AppendEvent(ctx, store.Event{Run: r.ID, Kind: "test.event", Task: fmt.Sprint("t", i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	all, err := h.Events(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	seqs := func(evs []store.Event) string {
		var out []string
		for _, e := range evs {
			if e.Run != a.ID {
				t.Errorf("EventsAfter(%s) returned an event of %s", a.ID, e.Run)
			}
			out = append(out, fmt.Sprint(e.Seq, e.Kind, e.Task))
		}
		return strings.Join(out, " ")
	}
	got, err := tl.EventsAfter(ctx, a.ID, 0)
	if err != nil || seqs(got) != seqs(all) {
		t.Fatalf("EventsAfter(0) = %s, %v; want Events' %s", seqs(got), err, seqs(all))
	}
	if len(all) < 4 {
		t.Fatalf("run %s logged %d events, want its run.created and 3 more", a.ID, len(all))
	}
	mid := all[len(all)-3].Seq
	got, err = tl.EventsAfter(ctx, a.ID, mid)
	if err != nil || seqs(got) != seqs(all[len(all)-2:]) {
		t.Fatalf("EventsAfter(%d) = %s, %v; want %s", mid, seqs(got), err, seqs(all[len(all)-2:]))
	}
	if got, err := tl.EventsAfter(ctx, a.ID, all[len(all)-1].Seq); err != nil || len(got) != 0 {
		t.Fatalf("EventsAfter(last) = %v, %v; want none", got, err)
	}
}
