// Command pipec compiles, lints and runs declarative pipeline specs.
package main

import (
	"os"

	"github.com/pipec/pipec/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Std()))
}
