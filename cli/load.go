package cli

import (
	"errors"
	"io/fs"
	"os"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/report"
	"github.com/pipec/pipec/spec"
)

// compiled is one spec file read, loaded and compiled.
type compiled struct {
	File   string
	Src    []byte
	Result *compiler.Result // nil when the spec could not be loaded at all
	Diags  diag.Diagnostics
}

// compileFile loads, compiles and lints one spec, keeping the lint findings of
// severity error: compile, graph and run refuse what lint calls an error
// (suppressions apply). The error is for unreadable input (exit code 2);
// findings are in Diags.
func compileFile(path string) (*compiled, error) {
	c, err := loadSpec(path)
	if err != nil || c.Result == nil {
		return c, err
	}
	for _, d := range lint.Run(c.Result, c.Src, lint.Options{}) {
		if d.Severity == diag.Error {
			c.Diags = append(c.Diags, d)
		}
	}
	c.Diags = c.Diags.Sort()
	return c, nil
}

// loadSpec loads and compiles one spec, without lint rules.
func loadSpec(path string) (*compiled, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, usageErr("%v", unwrapPathError(err))
	} else if st.IsDir() {
		return nil, usageErr("%s is a folder; give a spec file (.hcl or .cue)", path)
	}
	p, src, ds, err := spec.LoadFile(path)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	c := &compiled{File: path, Src: src, Diags: ds}
	if p == nil || hasRule(ds, spec.RuleSyntax) {
		// The model of a file that does not parse is partial: compiling it
		// would report follow-on errors (a missing artifact whose producer
		// is in the broken part) for a cause already reported.
		return c, nil
	}
	res, cds := compiler.Compile(p)
	c.Result = res
	c.Diags = append(c.Diags, cds...).Sort()
	return c, nil
}

// hasRule reports whether any finding is of the given rule.
func hasRule(ds diag.Diagnostics, rule string) bool {
	for _, d := range ds {
		if d.Rule == rule {
			return true
		}
	}
	return false
}

// sources returns the file contents the text printer shows lines from.
func (c *compiled) sources() report.Sources { return report.Sources{c.File: c.Src} }

// unwrapPathError keeps "open x: no such file or directory" readable.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return errors.New(pe.Path + ": " + pe.Err.Error())
	}
	return err
}

// printDiagsText writes findings to stderr in the text format (colour only on a
// terminal, never under NO_COLOR).
func printDiagsText(io IO, ds diag.Diagnostics, src report.Sources) {
	_ = report.Text(io.Stderr, ds, src, report.TextOptions{})
}
