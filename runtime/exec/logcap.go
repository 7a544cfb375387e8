package exec

import (
	"fmt"
	"io"
)

// DefaultLogLimit caps one attempt's log file (Spec.LogLimit zero).
const DefaultLogLimit int64 = 64 << 20

// cappedLog keeps the first max bytes of an attempt's output in its log and
// drops the rest, so a task that prints without end cannot fill the disk.
// Where it cuts it writes a marker line, at once (a reader of a log that is
// still growing, or of one whose pipec crashed, sees it); when the output
// ends it adds how much was dropped. The end of the output is still in the
// attempt's tail (the store's error tail), which is not capped this way.
type cappedLog struct {
	w       io.Writer
	max     int64
	written int64
	dropped int64
}

func (c *cappedLog) Write(p []byte) (int, error) {
	n := len(p)
	if c.dropped > 0 {
		c.dropped += int64(n)
		return n, nil
	}
	if room := c.max - c.written; int64(len(p)) > room {
		keep := p[:max(room, 0)]
		if _, err := c.w.Write(keep); err != nil {
			return 0, err
		}
		c.written += int64(len(keep))
		c.dropped = int64(len(p) - len(keep))
		_, err := fmt.Fprintf(c.w, "\n[pipec: log cut here at %d bytes (the limit); the rest of the output is not kept, its last lines are the attempt's error tail]\n", c.max)
		return n, err
	}
	if _, err := c.w.Write(p); err != nil {
		return 0, err
	}
	c.written += int64(n)
	return n, nil
}

// finish records how much was dropped, if anything was.
func (c *cappedLog) finish() {
	if c.dropped > 0 {
		fmt.Fprintf(c.w, "[pipec: %d bytes of output dropped after the cut]\n", c.dropped)
	}
}
