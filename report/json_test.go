package report

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pipec/pipec/diag"
)

func TestJSONEmptyIsAnEmptyArray(t *testing.T) {
	var b bytes.Buffer
	if err := JSON(&b, nil); err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if got := string(doc["diagnostics"]); got != "[]" {
		t.Errorf("diagnostics = %s, want [] (consumers index it without a nil check)", got)
	}
}

// TestJSONFieldsAndRoundTrip checks the fields DESIGN.md section 4 promises,
// and that a consumer reading them back gets the findings printed.
func TestJSONFieldsAndRoundTrip(t *testing.T) {
	ds := fixtureDiagnostics()
	var b bytes.Buffer
	if err := JSON(&b, ds); err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Diagnostics []map[string]any `json:"diagnostics"`
		Summary     JSONSummary      `json:"summary"`
	}
	if err := json.Unmarshal(b.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	for i, d := range raw.Diagnostics {
		for _, k := range []string{"rule", "severity", "message", "file", "line", "column", "end_line", "end_column"} {
			if _, ok := d[k]; !ok {
				t.Errorf("diagnostic %d has no %q: %v", i, k, d)
			}
		}
	}
	want := JSONSummary{Errors: ds.Count(diag.Error), Warnings: ds.Count(diag.Warning), Infos: ds.Count(diag.Info)}
	if raw.Summary != want || want.Errors == 0 || want.Warnings == 0 || want.Infos == 0 {
		t.Errorf("summary %+v, want %+v with every severity present", raw.Summary, want)
	}
	var back JSONReport
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	// Byte offsets are not part of the JSON form.
	if diff := cmp.Diff(ds, back.Diagnostics); diff != "" {
		t.Errorf("round trip changed the findings (-printed +read):\n%s", diff)
	}
}
