package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/s3test"
	"github.com/pipec/pipec/internal/scenario"
	"github.com/pipec/pipec/runtime/store"
)

// TestObjectStoreRestartsMidRun is pipec worker's TestS3RestartsMidRun on
// Temporal: 2 pipec-temporal workers run the 100-task chaos pipeline (10
// layers of 10, every other layer publishing to its own fenced s3 sink)
// with the artifact store on S3 (versitygw), which is stopped for 3 s and
// started again on its port, twice. The run succeeds, and every pointer in
// the bucket is the state's.
func TestObjectStoreRestartsMidRun(t *testing.T) {
	srv := s3test.Start(t, "arts", "lake")
	spec, pubs := scenario.Chaos(10, scenario.S3Sink)
	e := newEnvAt(t, spec, map[string]string{"step.sh": scenario.ChaosStep}, "")
	e.arts = "s3://arts/chaos"
	e.worker("w1")
	e.worker("w2")
	const day = "2024-01-01"
	_, run, _ := e.submit(day, false)
	ctx := context.Background()
	c := srv.Client()
	for _, n := range []int{20, 50} {
		// The versions committed so far: one per task.
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
			objs, _, err := c.List(ctx, "arts", "chaos/.committed/", "")
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) >= n {
				break
			}
			if r, err := e.st.GetRun(ctx, run); err == nil && r.State != store.RunRunning {
				t.Fatalf("run %s %s before %d tasks committed a version", run, r.State, n)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d versions committed after two minutes, want %d", len(objs), n)
			}
		}
		srv.Stop()
		time.Sleep(3 * time.Second)
		srv.Restart()
	}
	if r := e.until(run); r.State != store.RunSucceeded {
		t.Fatalf("run %s %s, want succeeded", run, r.State)
	}
	if err := scenario.S3PointersAgree(ctx, c, e.st, pubs, day); err != nil {
		t.Fatal(err)
	}
}
