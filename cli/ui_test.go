package cli

import "testing"

func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		addr     string
		explicit bool
		loopback bool
		refused  bool
	}{
		{"127.0.0.1:8321", false, true, false},
		{"[::1]:8321", false, true, false},
		{"localhost:0", false, true, false},
		{"10.1.2.3:8321", false, false, true}, // only ever explicit
		{"10.1.2.3:8321", true, false, false},
		{"0.0.0.0:8321", true, false, false},
		{":8321", true, false, true}, // every interface: write the host out
		{"8321", true, false, true},
	} {
		loopback, err := checkListen(c.addr, c.explicit)
		if loopback != c.loopback || (err != nil) != c.refused {
			t.Errorf("checkListen(%q, %v) = %v, %v", c.addr, c.explicit, loopback, err)
		}
	}
}
