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

// TestJSONFieldsAndRoundTrip checks the fields docs/design.md section 4 promises,
// and that a consumer reading them back gets the findings printed.
func TestJSONFieldsAndRoundTrip(t *testing.T) {
	ds := fixtureDiagnostics()
	var b bytes.Buffer
	if err := JSON(&b, ds); err != nil {
		t.Fatal(err)
	}
	var raw struct {
		FormatVersion string           `json:"format_version"`
		Valid         *bool            `json:"valid"`
		ErrorCount    int              `json:"error_count"`
		WarningCount  int              `json:"warning_count"`
		InfoCount     int              `json:"info_count"`
		Diagnostics   []map[string]any `json:"diagnostics"`
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
	if raw.FormatVersion != JSONFormatVersion {
		t.Errorf("format_version = %q, want %q", raw.FormatVersion, JSONFormatVersion)
	}
	if raw.Valid == nil || *raw.Valid {
		t.Errorf("valid = %v, want false for findings with errors", raw.Valid)
	}
	e, w, n := ds.Count(diag.Error), ds.Count(diag.Warning), ds.Count(diag.Info)
	if raw.ErrorCount != e || raw.WarningCount != w || raw.InfoCount != n || e == 0 || w == 0 || n == 0 {
		t.Errorf("counts %d/%d/%d, want %d/%d/%d with every severity present", raw.ErrorCount, raw.WarningCount, raw.InfoCount, e, w, n)
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

// TestJSONWritesArrowsAsIs checks that a cycle message stays readable, and that
// a spec with only warnings is valid.
func TestJSONWritesArrowsAsIs(t *testing.T) {
	ds := diag.Diagnostics{{Rule: "cycle", Severity: diag.Warning, Message: "a -> b -> a <&>", Range: diag.Range{Filename: "p.hcl"}}}
	var b bytes.Buffer
	if err := JSON(&b, ds); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b.Bytes(), []byte(`"a -> b -> a <&>"`)) {
		t.Errorf("the message was escaped:\n%s", b.String())
	}
	if !bytes.Contains(b.Bytes(), []byte(`"valid": true`)) {
		t.Errorf("warnings only, but not valid:\n%s", b.String())
	}
}
