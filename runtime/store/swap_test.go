package store

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecideSwap is the publish rule on its own; storetest runs it through
// each store's transaction.
func TestDecideSwap(t *testing.T) {
	version := Version{ID: 7, Pipeline: "p", Artifact: "a", Interval: "i", Digest: "d", State: VersionAccepted, Token: 5,
		Run: "p/i/r1", Task: "t", Attempt: 2}
	swap := Swap{Pipeline: "p", Sink: "s", Artifact: "a", Interval: "i", Version: 7, Token: 5}
	pointer := func(version, token int64) Pointer {
		return Pointer{Pipeline: "p", Sink: "s", Artifact: "a", Interval: "i", Version: version, Token: token}
	}
	expect := func(token int64) *int64 { return &token }
	base := map[string]any{"sink": "s", "artifact": "a", "interval": "i", "version": int64(7), "label": "a@i#d", "token": int64(5)}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		sw      Swap
		v       Version
		cur     Pointer // Version 0: none
		granted int64   // -1: must not be asked
		want    CASOutcome
		kind    string
		payload map[string]any
		grant   int64 // CASResult.GrantedToken
	}{
		{name: "no pointer", sw: swap, v: version, granted: 5, want: Won, kind: EventPublishWon, payload: base},
		{name: "older token held", sw: swap, v: version, cur: pointer(3, 4), granted: 5, want: Won, kind: EventPublishWon,
			payload: with("current_version", int64(3), "current_token", int64(4))},
		{name: "the same publish again", sw: swap, v: version, cur: pointer(7, 5), granted: -1, want: Idempotent,
			kind: EventPublishIdempotent, payload: with("current_version", int64(7), "current_token", int64(5))},
		{name: "newer token held", sw: swap, v: version, cur: pointer(9, 6), granted: -1, want: Fenced,
			kind: EventPublishFenced, payload: with("current_version", int64(9), "current_token", int64(6))},
		{name: "same token, another version", sw: swap, v: version, cur: pointer(8, 5), granted: -1, want: Fenced,
			kind: EventPublishFenced, payload: with("current_version", int64(8), "current_token", int64(5))},
		{name: "fenced at grant", sw: swap, v: version, granted: 6, want: Fenced, kind: EventPublishFenced,
			payload: with("granted_token", int64(6), "fenced_by", "grant"), grant: 6},
		{name: "unfenced: no token compared, no grant asked", sw: Swap{Pipeline: "p", Sink: "s", Artifact: "a", Interval: "i", Version: 7,
			Token: 5, Unfenced: true}, v: version, cur: pointer(9, 6), granted: -1, want: Won, kind: EventPublishWon,
			payload: with("unfenced", true, "current_version", int64(9), "current_token", int64(6))},
		{name: "expected token moved", sw: Swap{Pipeline: "p", Sink: "s", Artifact: "a", Interval: "i", Version: 7, Token: 5,
			Expect: expect(3)}, v: version, cur: pointer(3, 4), granted: 5, want: Conflict, kind: EventPublishConflict,
			payload: with("current_version", int64(3), "current_token", int64(4), "expected_token", int64(3))},
		{name: "expected token held", sw: Swap{Pipeline: "p", Sink: "s", Artifact: "a", Interval: "i", Version: 7, Token: 5,
			Expect: expect(4)}, v: version, cur: pointer(3, 4), granted: 5, want: Won, kind: EventPublishWon,
			payload: with("current_version", int64(3), "current_token", int64(4))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DecideSwap(tc.sw, tc.v, tc.cur, func() (int64, error) {
				if tc.granted < 0 {
					t.Error("the grants were asked")
				}
				return tc.granted, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want := SwapDecision{
				Result:  CASResult{Outcome: tc.want, Previous: tc.cur, GrantedToken: tc.grant},
				Event:   Event{Run: "p/i/r1", Task: "t", Attempt: 2, Kind: tc.kind},
				Payload: tc.payload,
			}
			if tc.want != Won {
				want.Result.Pointer = tc.cur
			}
			if diff := cmp.Diff(want, d); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideSwapRefusesVersions: only an accepted version of the swap's
// pipeline, artifact and interval, produced with its token, is published,
// whatever the pointer holds.
func TestDecideSwapRefusesVersions(t *testing.T) {
	ok := Version{ID: 7, Pipeline: "p", Artifact: "a", Interval: "i", State: VersionAccepted, Token: 5}
	swap := Swap{Pipeline: "p", Sink: "s", Artifact: "a", Interval: "i", Version: 7, Token: 5}
	for name, change := range map[string]func(*Version){
		"another pipeline": func(v *Version) { v.Pipeline = "q" },
		"another artifact": func(v *Version) { v.Artifact = "b" },
		"another interval": func(v *Version) { v.Interval = "j" },
		"staged":           func(v *Version) { v.State = VersionStaged },
		"rejected":         func(v *Version) { v.State = VersionRejected },
		"another token's":  func(v *Version) { v.Token = 4 },
	} {
		t.Run(name, func(t *testing.T) {
			v := ok
			change(&v)
			_, err := DecideSwap(swap, v, Pointer{}, func() (int64, error) {
				t.Error("the grants were asked")
				return 0, nil
			})
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("got %v, want ErrConflict", err)
			}
		})
	}
	errGrants := errors.New("grants unreadable")
	if _, err := DecideSwap(swap, ok, Pointer{}, func() (int64, error) { return 0, errGrants }); !errors.Is(err, errGrants) {
		t.Fatalf("got %v, want the grants' error", err)
	}
}
