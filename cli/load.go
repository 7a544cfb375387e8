package cli

import (
	"errors"
	"io/fs"
	"os"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/lint/lintcmd"
	"github.com/pipec/pipec/report"
	"github.com/pipec/pipec/spec"
	"github.com/pipec/pipec/spec/specload"
)

// compiled is one spec file read, loaded and compiled.
type compiled struct {
	File   string
	Src    []byte
	Result *compiler.Result // nil when the spec could not be loaded at all
	Diags  diag.Diagnostics
	// Warnings are the lint warnings compileFile found; only compile prints
	// them (run and graph show what stops them, not advice).
	Warnings diag.Diagnostics
}

// compileFile loads, compiles and lints one spec, keeping the lint findings of
// severity error in Diags and the warnings apart: compile, graph and run refuse what lint calls an error
// (suppressions apply). The error is for unreadable input (exit code 2);
// findings are in Diags.
func compileFile(path string) (*compiled, error) {
	c, err := loadSpec(path)
	if err != nil || c.Result == nil {
		return c, err
	}
	for _, d := range lint.Run(c.Result, c.Src, lint.Options{}) {
		switch d.Severity {
		case diag.Error:
			c.Diags = append(c.Diags, d)
		case diag.Warning:
			c.Warnings = append(c.Warnings, d)
		}
	}
	c.Diags = c.Diags.Sort()
	return c, nil
}

// loadSpec loads and compiles one spec, without lint rules.
func loadSpec(path string) (*compiled, error) {
	return loadSpecWith(path, compiler.Compile)
}

// loadSpecWith is loadSpec with the compiler's entry point: compiler.Check
// for a caller that never reads Result.Plan (lint: a rule that needs the plan
// builds it with PlanOf), compiler.Compile otherwise. Both give the same
// findings.
func loadSpecWith(path string, compile compileFunc) (*compiled, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, usageErr("%v", unwrapPathError(err))
	} else if st.IsDir() {
		return nil, usageErr("%s is a folder; give a spec file (.hcl or .cue)", path)
	}
	syn, ok := spec.SyntaxOf(path)
	if !ok {
		return nil, usageErr("%s: not a spec file (want .hcl or .cue)", path)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErr("%v", unwrapPathError(err))
	}
	return loadSourceWith(syn, path, src, compile), nil
}

// compileFunc is compiler.Compile or compiler.Check.
type compileFunc func(*spec.Pipeline) (*compiler.Result, diag.Diagnostics)

// loadSourceWith loads and compiles a spec's text with the compiler's entry
// point (see loadSpecWith), as lint does (lintcmd.LoadSource): a binary file
// (a NUL byte, or not UTF-8) gets one finding instead of one per byte the
// parser trips on.
func loadSourceWith(syn spec.Syntax, name string, src []byte, compile compileFunc) *compiled {
	l := lintcmd.LoadSource(specload.Both{}, syn, name, src, lintcmd.CompileFunc(compile))
	return &compiled{File: name, Src: l.Src, Result: l.Result, Diags: l.Diags}
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

// printDiagsText writes findings to stderr in the text format (colour as
// --color says: by default only on a terminal, never under NO_COLOR).
func printDiagsText(io IO, ds diag.Diagnostics, src report.Sources) {
	_ = report.Text(io.Stderr, ds, src, report.TextOptions{Color: io.colorOn(io.StderrTTY)})
}
