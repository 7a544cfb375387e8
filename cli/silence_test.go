package cli

import (
	"bytes"
	"errors"
	"testing"
)

// The runs of a batch share one stateSilence: it says once that the state
// does not answer, and once that it answers again, when the last run
// waiting for it was answered; a renewal that failed is no answer.
func TestStateSilenceOncePerOutage(t *testing.T) {
	var b bytes.Buffer
	s := &stateSilence{w: &b}
	gaveUp := errors.New("the state did not answer within 35s of the stop")
	for _, e := range []struct {
		silent bool
		err    error
	}{{true, nil}, {true, nil}, {false, nil}, {false, nil}, {false, nil}, {true, nil}, {false, nil}, {true, nil}, {false, gaveUp}} {
		s.told(e.silent, e.err)
	}
	want := "pipec: the state does not answer; the run waits for it (Ctrl-C stops it)\n" +
		"pipec: the state answers again\n" +
		"pipec: the state does not answer; the run waits for it (Ctrl-C stops it)\n" +
		"pipec: the state answers again\n" +
		"pipec: the state does not answer; the run waits for it (Ctrl-C stops it)\n"
	if b.String() != want {
		t.Errorf("said:\n%s\nwant:\n%s", b.String(), want)
	}
}
