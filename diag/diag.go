// Package diag holds pipec's diagnostics: a finding with a rule, a severity and a
// source range. It is a leaf package so every layer (loaders, compiler, linter,
// printers) speaks the same type.
package diag

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
)

// Severity orders findings: Error fails a command, Warning fails only under
// --strict, Info never fails.
type Severity int

const (
	Error Severity = iota
	Warning
	Info
)

func (s Severity) String() string {
	switch s {
	case Error:
		return "error"
	case Warning:
		return "warning"
	case Info:
		return "info"
	}
	return fmt.Sprintf("severity(%d)", int(s))
}

// MarshalText writes the severity as its name, so JSON shows "error", not 0.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses a severity name.
func (s *Severity) UnmarshalText(b []byte) error {
	v, ok := ParseSeverity(string(b))
	if !ok {
		return fmt.Errorf("unknown severity %q", b)
	}
	*s = v
	return nil
}

// ParseSeverity maps "error", "warning" and "info" to a Severity.
func ParseSeverity(s string) (Severity, bool) {
	switch s {
	case "error":
		return Error, true
	case "warning":
		return Warning, true
	case "info":
		return Info, true
	}
	return 0, false
}

// Pos is a position in a source file. Line and Column start at 1; Column counts
// characters (not bytes), as editors do. Byte is the 0-based byte offset.
type Pos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

// Range is a half-open source range [Start, End) in one file.
type Range struct {
	Filename string `json:"file"`
	Start    Pos    `json:"start"`
	End      Pos    `json:"end"`
}

// IsZero reports whether the range was never set.
func (r Range) IsZero() bool { return r.Filename == "" && r.Start.Line == 0 }

func (r Range) String() string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// Diagnostic is one finding.
type Diagnostic struct {
	Rule     string
	Severity Severity
	Message  string
	// Detail is optional longer text (a suggestion, the first declaration).
	Detail string
	Range  Range
}

func (d Diagnostic) String() string {
	return fmt.Sprintf("%s: %s: %s [%s]", d.Range, d.Severity, d.Message, d.Rule)
}

// MarshalJSON writes the flat form of docs/design.md section 4. Messages are
// written as is: "a -> b" stays readable instead of becoming "a -\u003e b"
// (the output is never embedded in HTML).
func (d Diagnostic) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(jsonDiagnostic{
		Rule:      d.Rule,
		Severity:  d.Severity,
		Message:   d.Message,
		Detail:    d.Detail,
		File:      d.Range.Filename,
		Line:      d.Range.Start.Line,
		Column:    d.Range.Start.Column,
		EndLine:   d.Range.End.Line,
		EndColumn: d.Range.End.Column,
	})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

// UnmarshalJSON reads the flat form back.
func (d *Diagnostic) UnmarshalJSON(b []byte) error {
	var j jsonDiagnostic
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*d = Diagnostic{Rule: j.Rule, Severity: j.Severity, Message: j.Message, Detail: j.Detail,
		Range: Range{Filename: j.File, Start: Pos{Line: j.Line, Column: j.Column}, End: Pos{Line: j.EndLine, Column: j.EndColumn}}}
	return nil
}

type jsonDiagnostic struct {
	Rule      string   `json:"rule"`
	Severity  Severity `json:"severity"`
	Message   string   `json:"message"`
	Detail    string   `json:"detail,omitempty"`
	File      string   `json:"file"`
	Line      int      `json:"line"`
	Column    int      `json:"column"`
	EndLine   int      `json:"end_line"`
	EndColumn int      `json:"end_column"`
}

// Diagnostics is a list of findings. Functions return it beside a partial
// result and keep going, so one run reports every problem it can.
type Diagnostics []Diagnostic

// HasErrors reports whether any finding has severity Error.
func (ds Diagnostics) HasErrors() bool { return ds.Count(Error) > 0 }

// Count returns how many findings have the given severity.
func (ds Diagnostics) Count(s Severity) int {
	n := 0
	for _, d := range ds {
		if d.Severity == s {
			n++
		}
	}
	return n
}

// Compare orders findings by file, line, column, rule, then message.
func Compare(a, b Diagnostic) int {
	return cmp.Or(
		cmp.Compare(a.Range.Filename, b.Range.Filename),
		cmp.Compare(a.Range.Start.Line, b.Range.Start.Line),
		cmp.Compare(a.Range.Start.Column, b.Range.Start.Column),
		cmp.Compare(a.Rule, b.Rule),
		cmp.Compare(a.Message, b.Message),
		cmp.Compare(a.Range.End.Line, b.Range.End.Line),
		cmp.Compare(a.Range.End.Column, b.Range.End.Column),
	)
}

// Sort orders the findings stably and drops exact duplicates, so output never
// depends on map order or on how many passes saw the same problem.
func (ds Diagnostics) Sort() Diagnostics {
	slices.SortStableFunc(ds, Compare)
	return slices.CompactFunc(ds, func(a, b Diagnostic) bool { return a == b })
}

// Errorf builds an error-severity diagnostic.
func Errorf(rule string, r Range, format string, args ...any) Diagnostic {
	return Diagnostic{Rule: rule, Severity: Error, Message: fmt.Sprintf(format, args...), Range: r}
}
