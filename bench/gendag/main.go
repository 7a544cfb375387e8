// Command gendag writes the benchmark DAG (package internal/gendag) in its
// four forms, pipeline.hcl, pipeline.cue, workflow.yml and Makefile, into a
// folder. bench/run.sh and bench/run1k.sh use it; the Go benchmarks call the
// package directly.
//
//	go run ./bench/gendag -n 10000 -seed 42 -out DIR
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/pipec/pipec/internal/gendag"
)

func main() {
	n := flag.Int("n", 1000, "number of tasks (at least 2)")
	seed := flag.Int64("seed", 42, "random seed")
	out := flag.String("out", ".", "output folder")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "gendag: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	d, err := gendag.Generate(*n, *seed)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := d.WriteFiles(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gendag:", err)
		os.Exit(1)
	}
}
