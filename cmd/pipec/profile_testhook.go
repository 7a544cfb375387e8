//go:build pipec_testhook

package main

import (
	"os"
	"runtime/pprof"
)

// startProfile: in a binary built with -tags pipec_testhook (tests and
// benchmarks only), PIPEC_TEST_CPUPROFILE=FILE writes a CPU profile of the
// whole process, so a benchmark can profile its pipec worker processes
// (stopped with SIGTERM: the profile is written when main returns).
func startProfile() (stop func()) {
	path := os.Getenv("PIPEC_TEST_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
