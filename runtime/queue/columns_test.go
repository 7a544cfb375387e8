package queue

import (
	"reflect"
	"testing"
)

// TestStatusDecoder: the memo decodes as DecodeStatus does, and no two
// tasks share a failover state's map.
func TestStatusDecoder(t *testing.T) {
	rows := [][2]string{
		{`{"Attempts":1,"PerWorker":2,"Global":3,"Workers":0,"NoFailover":false}`, `{"visits":{"w1":1},"failovers":0,"worker":"w1","starts":1}`},
		{`{"Attempts":1,"PerWorker":2,"Global":3,"Workers":0,"NoFailover":false}`, `{"visits":{"w1":1},"failovers":0,"worker":"w1","starts":1}`},
		{`{"Attempts":0,"PerWorker":0,"Global":-1,"Workers":0,"NoFailover":true}`, `{"failovers":0,"starts":0}`},
	}
	var dec StatusDecoder
	var got []TaskStatus
	for i, r := range rows {
		var want, have TaskStatus
		want.Task, have.Task = "t", "t"
		if err := DecodeStatus(&want, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
		if err := dec.Decode(&have, r[0], r[1]); err != nil {
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
	if err := dec.Decode(&bad, `{`, `{}`); err == nil {
		t.Fatal("a broken limits column decoded")
	}
}
