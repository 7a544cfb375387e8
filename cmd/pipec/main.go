// Command pipec compiles, lints and runs declarative pipeline specs.
package main

import (
	"os"
	"runtime/debug"

	"github.com/pipec/pipec/cli"
)

func main() {
	tuneGC()
	stopProfile := startProfile()
	code := cli.Process(os.Args[1:])
	stopProfile()
	os.Exit(code)
}

// tuneGC trades memory for time: pipec is a short-lived process that
// allocates a large model while loading, and at the default GOGC=100 the
// collector spent about a fifth of `pipec lint` on a 10,000-task spec. GOGC=400
// with a soft limit of 768 MiB keeps 100,000-task specs under 1 GiB (the
// collector works harder as the heap nears the limit). GOGC and GOMEMLIMIT in
// the environment still win.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(768 << 20)
	}
}
