package report

import (
	"encoding/json"
	"io"

	"github.com/pipec/pipec/diag"
)

// JSONReport is the `--format json` document.
type JSONReport struct {
	Diagnostics diag.Diagnostics `json:"diagnostics"`
	Summary     JSONSummary      `json:"summary"`
}

// JSONSummary counts findings by severity.
type JSONSummary struct {
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
	Infos    int `json:"infos"`
}

// JSON writes the findings as one indented JSON object.
func JSON(w io.Writer, ds diag.Diagnostics) error {
	if ds == nil {
		ds = diag.Diagnostics{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(JSONReport{Diagnostics: ds, Summary: JSONSummary{
		Errors: ds.Count(diag.Error), Warnings: ds.Count(diag.Warning), Infos: ds.Count(diag.Info)}})
}
