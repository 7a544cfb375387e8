//go:build ignore

// sarifgen writes the SARIF log of the specs under the given folders, through
// the same loader, compiler and printer pipec uses, for scripts/sarif-validate.sh
// to check while `pipec lint --format sarif` is not available. It is a build-
// ignored file, so `go install ./...` (pre-commit) never builds it.
//
//	go run scripts/sarifgen.go examples/broken > out.sarif
package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/report"
	"github.com/pipec/pipec/spec"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sarifgen:", err)
		os.Exit(2)
	}
}

func run(dirs []string) error {
	var files []string
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if _, ok := spec.SyntaxOf(p); ok && !e.IsDir() {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	slices.Sort(files)
	var all diag.Diagnostics
	for _, f := range files {
		p, _, ds, err := spec.LoadFile(f)
		if err != nil {
			return err
		}
		all = append(all, ds...)
		if p != nil {
			_, cds := compiler.Compile(p)
			all = append(all, cds...)
		}
	}
	return report.SARIF(os.Stdout, all.Sort(), nil,
		report.ToolInfo{Name: "pipec", Version: "0.1.0-dev", InformationURI: "https://github.com/pipec/pipec"})
}
