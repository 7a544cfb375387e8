package cli

import (
	"fmt"
	"io"
	"time"
)

// lookTimeout bounds one look of a follower at a run: a state server that
// stopped answering, its connection open, is then said not to answer, as a
// refused connection is, instead of leaving the follower silent.
const lookTimeout = 10 * time.Second

// stateOutage is what a follower of a run handed to workers says when the
// state does not answer (a database restart, a network cut), once each
// way: the run goes on with the workers, so the follower follows it again
// once the state answers, rather than taking the outage for the run's end.
type stateOutage struct {
	w io.Writer
	// prefix begins each line (which follower says it).
	prefix string
	run    string
	down   bool
}

func (o *stateOutage) failed(err error) {
	if !o.down {
		o.down = true
		fmt.Fprintf(o.w, "%sthe state does not answer (%v); still following %s, trying again\n", o.prefix, err, o.run)
	}
}

func (o *stateOutage) answered() {
	if o.down {
		o.down = false
		fmt.Fprintf(o.w, "%sthe state answers again\n", o.prefix)
	}
}
