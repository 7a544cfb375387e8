package queue

import (
	"reflect"
	"testing"
)

// TestDecoder: the memo decodes as DecodeStatus and DecodeWork do (a
// candidate without its dependents), and no two rows share a failover
// state's map.
func TestDecoder(t *testing.T) {
	rows := [][2]string{
		{`{"Attempts":1,"PerWorker":2,"Global":3,"Workers":0,"NoFailover":false}`, `{"visits":{"w1":1},"failovers":0,"worker":"w1","starts":1}`},
		{`{"Attempts":1,"PerWorker":2,"Global":3,"Workers":0,"NoFailover":false}`, `{"visits":{"w1":1},"failovers":0,"worker":"w1","starts":1}`},
		{`{"Attempts":0,"PerWorker":0,"Global":-1,"Workers":0,"NoFailover":true}`, `{"failovers":0,"starts":0}`},
	}
	var dec Decoder
	var got []TaskStatus
	for i, r := range rows {
		var want, have TaskStatus
		want.Task, have.Task = "t", "t"
		if err := DecodeStatus(&want, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
		if err := dec.Status(&have, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(have, want) {
			t.Fatalf("row %d: %+v, want %+v", i, have, want)
		}
		got = append(got, have)
	}
	got[0].Failover.Visits["w2"] = 1
	if len(got[1].Failover.Visits) != 1 {
		t.Fatalf("two tasks share a map: %+v", got[1].Failover.Visits)
	}
	var bad TaskStatus
	if err := dec.Status(&bad, `{`, `{}`); err == nil {
		t.Fatal("a broken limits column decoded")
	}
	var cands []Work
	for i, r := range rows {
		want, have := Work{Ref: Ref{"r", "t"}}, Work{Ref: Ref{"r", "t"}}
		if err := DecodeWork(&want, r[0], r[1], `[]`); err != nil {
			t.Fatal(err)
		}
		want.Dependents = nil
		if err := dec.Candidate(&have, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(have, want) {
			t.Fatalf("candidate %d: %+v, want %+v", i, have, want)
		}
		cands = append(cands, have)
	}
	cands[0].Failover.Visits["w2"] = 1
	if len(cands[1].Failover.Visits) != 1 || len(got[0].Failover.Visits) != 2 {
		t.Fatalf("two rows share a map: %+v, %+v", cands[1].Failover.Visits, got[0].Failover.Visits)
	}
	if err := dec.Candidate(&Work{}, `{}`, `{`); err == nil {
		t.Fatal("a broken failover column decoded")
	}
}
