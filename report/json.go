package report

import (
	"encoding/json"
	"io"

	"github.com/pipec/pipec/diag"
)

// JSONFormatVersion is the version of the `--format json` document. The minor
// number grows when fields are added; the major number changes only if a field
// changes meaning or goes, so consumers can check it as they check
// `terraform validate -json`'s.
const JSONFormatVersion = "1.0"

// JSONReport is the `--format json` document. Its top level follows
// `terraform validate -json`: format_version, valid, error_count,
// warning_count, then the diagnostics.
type JSONReport struct {
	FormatVersion string `json:"format_version"`
	// Valid is true when no finding is an error (warnings allowed; under
	// --strict the exit code also fails on warnings, valid does not change).
	Valid        bool             `json:"valid"`
	ErrorCount   int              `json:"error_count"`
	WarningCount int              `json:"warning_count"`
	InfoCount    int              `json:"info_count"`
	Diagnostics  diag.Diagnostics `json:"diagnostics"`
}

// JSON writes the findings as one indented JSON object. Characters such as
// '>' are written as is ("a -> b"), not as \u003e: the output is read by
// programs and people, never embedded in HTML.
func JSON(w io.Writer, ds diag.Diagnostics) error {
	if ds == nil {
		ds = diag.Diagnostics{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(JSONReport{FormatVersion: JSONFormatVersion, Valid: !ds.HasErrors(),
		ErrorCount: ds.Count(diag.Error), WarningCount: ds.Count(diag.Warning), InfoCount: ds.Count(diag.Info),
		Diagnostics: ds})
}
