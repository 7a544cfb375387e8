package clock

import (
	"testing"
	"time"
)

func TestBoottimeMovesForwardWithABootID(t *testing.T) {
	a := Boottime()
	time.Sleep(time.Millisecond)
	b := Boottime()
	if a.Boot == "" || a.Boot != b.Boot || b.Nanos <= a.Nanos {
		t.Errorf("readings %+v then %+v", a, b)
	}
}

func TestExpired(t *testing.T) {
	until := Reading{Boot: "b1", Nanos: 100}
	for _, c := range []struct {
		now  Reading
		want bool
	}{
		{Reading{Boot: "b1", Nanos: 99}, false},
		{Reading{Boot: "b1", Nanos: 100}, true},
		{Reading{Boot: "b2", Nanos: 1}, true}, // rebooted: every lease of b1 is gone
	} {
		if got := Expired(until, c.now); got != c.want {
			t.Errorf("Expired(%+v, %+v) = %v", until, c.now, got)
		}
	}
}
