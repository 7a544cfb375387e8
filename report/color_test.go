package report

import (
	"bytes"
	"os"
	"testing"
)

func TestUseColorNeedsATerminal(t *testing.T) {
	env := func(string) string { return "" }
	if UseColor(&bytes.Buffer{}, env) {
		t.Error("a buffer is not a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if UseColor(f, env) {
		t.Error("a regular file is not a terminal")
	}
}

func TestUseColorHonoursNoColor(t *testing.T) {
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no controlling terminal to test with: %v", err)
	}
	defer tty.Close()
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, true},
		{map[string]string{"NO_COLOR": "1"}, false},
		{map[string]string{"TERM": "dumb"}, false},
	} {
		if got := UseColor(tty, func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("UseColor(tty, %v) = %v, want %v", tc.env, got, tc.want)
		}
	}
}
