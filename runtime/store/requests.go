package store

import (
	"errors"
	"fmt"
	"strings"
)

// The checks every store makes of a request before it touches its tables,
// written here once so that both stores refuse the same requests with the
// same words.

// Check refuses a run without its pipeline or its interval.
func (nr NewRun) Check() error {
	if nr.Pipeline == "" || nr.Interval == "" {
		return errors.New("create run: pipeline and interval are required")
	}
	return nil
}

// Check refuses an attempt without its run or its task.
func (spec AttemptSpec) Check() error {
	if spec.Run == "" || spec.Task == "" {
		return errors.New("start attempt: run and task are required")
	}
	return nil
}

// CheckRecord refuses to record a version that does not name what produced
// it (its artifact, interval, run, task and attempt) or whose digest is not
// sha256:<hex>.
func (v Version) CheckRecord() error {
	if v.Artifact == "" || v.Interval == "" || v.Run == "" || v.Task == "" || v.Attempt <= 0 {
		return errors.New("record version: artifact, interval, run, task and attempt are required")
	}
	if !strings.HasPrefix(v.Digest, "sha256:") {
		return fmt.Errorf("record version: digest %q is not sha256:<hex>", v.Digest)
	}
	return nil
}

// Check refuses a swap that does not name its pointer whole.
func (sw Swap) Check() error {
	if sw.Pipeline == "" || sw.Sink == "" || sw.Artifact == "" || sw.Interval == "" {
		return errors.New("compare-and-swap: pipeline, sink, artifact and interval are required")
	}
	return nil
}
