// Package audit runs a pipeline's checks on one artifact version: the
// built-in assertions on CSV and JSON Lines files, and a command for anything
// else. An artifact version is accepted only when every check on it accepts;
// the reasons say, for a person, why one did not.
package audit

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pipec/pipec/compiler"
)

// Options are the surroundings of a check.
type Options struct {
	// Dir is the working directory of a command check: the spec's folder,
	// like the tasks'.
	Dir string
	// Env is the whole environment of a command check ("KEY=value"), to
	// which the PIPEC_CHECK_* variables are added. Nothing of pipec's own
	// environment is passed implicitly: a check sees what a task sees, so a
	// secret in pipec's environment reaches it only when the spec names it.
	Env []string
	// Timeout bounds a command check; 0 means 10 minutes.
	Timeout time.Duration
	// CodeVersion is the run's code_version, which a check's
	// code_version_column must hold in every row.
	CodeVersion string
	// Redact, when set, is applied to a command check's output before it
	// becomes a reason (secret values).
	Redact func(string) string
}

// Result is the verdict of one check on one version.
type Result struct {
	Check    string
	Artifact string
	Accepted bool
	// Reasons says why the version was rejected, one finding a line, in a
	// stable order; empty when it was accepted.
	Reasons []string
}

// maxExamples bounds how many offending rows one assertion names; the rest
// are counted.
const maxExamples = 3

// Run audits the version in dir with one check. The built-in assertions
// (row_count_min, row_count_max, unique, not_null, columns,
// code_version_column) read every
// *.csv (comma-separated, header row first) and *.jsonl / *.ndjson file (one
// JSON object a line) under dir, sorted by path, as one table: row counts and
// uniqueness are over all files together, and every file must have every
// column an assertion names. An empty CSV field and a JSON null are null
// (for unique, null is a value like any other).
// A file that does not parse rejects the version, with its line.
//
// A command check runs after them: argv exactly as written (no shell unless
// the author writes one, nothing appended), in opt.Dir, in its own process
// group, with the version directory in PIPEC_CHECK_INPUT (and the check's
// and artifact's names in PIPEC_CHECK_NAME and PIPEC_CHECK_ARTIFACT). The
// directory is passed in the environment, not as an argument, so that an
// author's argv means what it says. Exit status 0 accepts; anything else, a
// timeout (the whole group is killed) or a command that cannot start rejects,
// with the exit status and the tail of its output as the reason.
//
// The error is for failures of pipec itself (an unreadable directory, a
// cancelled context); anything about the data is a reason.
func Run(ctx context.Context, c compiler.PlanCheck, dir string, opt Options) (Result, error) {
	res := Result{Check: c.Name, Artifact: c.Input}
	builtin := c.RowCountMin != nil || c.RowCountMax != nil || len(c.Unique) > 0 || len(c.NotNull) > 0 || len(c.Columns) > 0 ||
		c.CodeVersionColumn != ""
	if !builtin && len(c.Command) == 0 {
		res.Reasons = []string{"the check asserts nothing, so it accepts nothing"}
		return res, nil
	}
	if builtin {
		reasons, err := assertTable(ctx, c, dir, opt.CodeVersion)
		if err != nil {
			return res, err
		}
		res.Reasons = append(res.Reasons, reasons...)
	}
	if len(c.Command) > 0 {
		reasons, err := runCommand(ctx, c, dir, opt)
		if err != nil {
			return res, err
		}
		res.Reasons = append(res.Reasons, reasons...)
	}
	res.Accepted = len(res.Reasons) == 0
	return res, nil
}

// RunAll runs every check on the version in dir, in order, and reports
// whether all accepted.
func RunAll(ctx context.Context, checks []compiler.PlanCheck, dir string, opt Options) (bool, []Result, error) {
	ok := true
	var out []Result
	for _, c := range checks {
		r, err := Run(ctx, c, dir, opt)
		if err != nil {
			return false, out, err
		}
		ok = ok && r.Accepted
		out = append(out, r)
	}
	return ok, out, nil
}

// dataFiles lists the CSV and JSON Lines files under dir by slash path.
func dataFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// Only regular files: a link could point outside the version.
		if !d.Type().IsRegular() || kindOf(p) == "" {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	slices.Sort(out)
	return out, err
}

// kindOf is "csv", "jsonl" or "" by file extension.
func kindOf(name string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".csv":
		return "csv"
	case ".jsonl", ".ndjson":
		return "jsonl"
	}
	return ""
}

// quoteList renders column names for a reason: "a", "b".
func quoteList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = fmt.Sprintf("%q", c)
	}
	return strings.Join(q, ", ")
}
