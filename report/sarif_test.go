package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pipec/pipec/diag"
)

// sarifSchemaPath is the SARIF 2.1.0 JSON schema the printer's output is checked
// against, kept in the repository so the check runs from a clone.
const sarifSchemaPath = "testdata/sarif-2.1.0.json"

func compileSARIFSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	s, err := c.Compile(sarifSchemaPath)
	if err != nil {
		t.Fatalf("compiling the SARIF schema: %v", err)
	}
	return s
}

func validateSARIF(t *testing.T, schema *jsonschema.Schema, out []byte) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("SARIF output is not JSON: %v", err)
	}
	if err := schema.Validate(doc); err != nil {
		t.Errorf("SARIF output is not valid SARIF 2.1.0:\n%v\n%s", err, out)
	}
}

func TestSARIFValidAgainstSchema(t *testing.T) {
	schema := compileSARIFSchema(t)
	tool := ToolInfo{Name: "pipec", Version: "1.2.3", InformationURI: "https://github.com/pipec/pipec"}
	abs := diag.Range{Filename: "/abs/dir/p.hcl", Start: diag.Pos{Line: 1, Column: 1}, End: diag.Pos{Line: 1, Column: 2}}
	for name, ds := range map[string]diag.Diagnostics{
		"fixture":  fixtureDiagnostics(),
		"empty":    nil,
		"absolute": {{Rule: "syntax", Severity: diag.Error, Message: "x", Range: abs}},
		"no end":   {{Rule: "schema", Severity: diag.Warning, Message: "x", Range: diag.Range{Filename: "p.hcl", Start: diag.Pos{Line: 2, Column: 4}}}},
		"line only": {{Rule: "schema", Severity: diag.Info, Message: "x",
			Range: diag.Range{Filename: "sub dir/p#1.hcl", Start: diag.Pos{Line: 2}, End: diag.Pos{Line: 2}}}},
		"inverted": {{Rule: "schema", Severity: diag.Error, Message: "x",
			Range: diag.Range{Filename: "c:x.hcl", Start: diag.Pos{Line: 3, Column: 4}, End: diag.Pos{Line: 1, Column: 1}}}},
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := SARIF(&b, ds, fixtureOptions(tool)); err != nil {
				t.Fatal(err)
			}
			validateSARIF(t, schema, b.Bytes())
		})
	}
}

// TestSARIFSchemaCatchesMistakes keeps the schema check honest: a log with a
// bad level must fail it.
func TestSARIFSchemaCatchesMistakes(t *testing.T) {
	schema := compileSARIFSchema(t)
	var b bytes.Buffer
	if err := SARIF(&b, fixtureDiagnostics(), fixtureOptions(ToolInfo{Name: "pipec"})); err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(b.String(), `"level": "note"`, `"level": "info"`, 1)
	if bad == b.String() {
		t.Fatal("fixture has no note-level result to corrupt")
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	if schema.Validate(doc) == nil {
		t.Error("the schema accepted a result with level \"info\"")
	}
}

// sarifDoc is the part of a SARIF log the assertions below read.
type sarifDoc struct {
	Runs []struct {
		Tool struct {
			Driver struct {
				Rules []struct {
					ID   string `json:"id"`
					Name string `json:"name"`
				} `json:"rules"`
			} `json:"driver"`
		} `json:"tool"`
		Artifacts []struct {
			Location struct {
				URI       string `json:"uri"`
				URIBaseID string `json:"uriBaseId"`
			} `json:"location"`
		} `json:"artifacts"`
		Results []struct {
			RuleID    string `json:"ruleId"`
			RuleIndex int    `json:"ruleIndex"`
			Level     string `json:"level"`
			Message   struct {
				Text string `json:"text"`
			} `json:"message"`
			Locations []struct {
				PhysicalLocation struct {
					ArtifactLocation struct {
						URI       string `json:"uri"`
						URIBaseID string `json:"uriBaseId"`
						Index     int    `json:"index"`
					} `json:"artifactLocation"`
					Region *struct {
						StartLine   int `json:"startLine"`
						StartColumn int `json:"startColumn"`
						EndLine     int `json:"endLine"`
						EndColumn   int `json:"endColumn"`
					} `json:"region"`
				} `json:"physicalLocation"`
			} `json:"locations"`
		} `json:"results"`
	} `json:"runs"`
}

func TestSARIFIndexesAndLocations(t *testing.T) {
	var b bytes.Buffer
	if err := SARIF(&b, fixtureDiagnostics(), fixtureOptions(ToolInfo{Name: "pipec"})); err != nil {
		t.Fatal(err)
	}
	var doc sarifDoc
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 1 {
		t.Fatalf("got %d runs, want 1", len(doc.Runs))
	}
	run := doc.Runs[0]
	rules := run.Tool.Driver.Rules
	for i := 1; i < len(rules); i++ {
		if rules[i-1].ID >= rules[i].ID {
			t.Errorf("rules not sorted and unique: %q before %q", rules[i-1].ID, rules[i].ID)
		}
	}
	ds := fixtureDiagnostics()
	if len(run.Results) != len(ds) {
		t.Fatalf("got %d results, want %d", len(run.Results), len(ds))
	}
	for i, r := range run.Results {
		d := ds[i]
		if r.RuleID != d.Rule || rules[r.RuleIndex].ID != d.Rule {
			t.Errorf("result %d: ruleId %q, ruleIndex %d -> %q; want %q", i, r.RuleID, r.RuleIndex, rules[r.RuleIndex].ID, d.Rule)
		}
		if want := map[diag.Severity]string{diag.Error: "error", diag.Warning: "warning", diag.Info: "note"}[d.Severity]; r.Level != want {
			t.Errorf("result %d: level %q, want %q", i, r.Level, want)
		}
		if d.Range.Filename == "" {
			if len(r.Locations) != 0 {
				t.Errorf("result %d: a finding with no file has locations %+v", i, r.Locations)
			}
			continue
		}
		pl := r.Locations[0].PhysicalLocation
		al := pl.ArtifactLocation
		art := run.Artifacts[al.Index].Location
		if art.URI != al.URI || art.URIBaseID != al.URIBaseID {
			t.Errorf("result %d: artifact index %d is %+v, location says %+v", i, al.Index, art, al)
		}
		if al.URIBaseID != "%SRCROOT%" || strings.Contains(al.URI, "\\") {
			t.Errorf("result %d: uri %q base %q, want a relative forward-slash URI on %%SRCROOT%%", i, al.URI, al.URIBaseID)
		}
		reg := pl.Region
		if reg == nil || reg.StartLine != d.Range.Start.Line || reg.StartColumn != d.Range.Start.Column ||
			reg.EndLine != d.Range.End.Line || reg.EndColumn != d.Range.End.Column {
			t.Errorf("result %d: region %+v, want the range %+v", i, reg, d.Range)
		}
	}
}

func TestArtifactLocation(t *testing.T) {
	for _, tc := range []struct{ in, uri, base string }{
		{"examples/orders/pipeline.hcl", "examples/orders/pipeline.hcl", "%SRCROOT%"},
		{"./p.hcl", "p.hcl", "%SRCROOT%"},
		{"../other/p.cue", "../other/p.cue", "%SRCROOT%"},
		{"a b/c#d%.hcl", "a%20b/c%23d%25.hcl", "%SRCROOT%"},
		{"c:x.hcl", "c%3Ax.hcl", "%SRCROOT%"},
		{"/abs/p.hcl", "file:///abs/p.hcl", ""},
	} {
		got := artifactLocation(tc.in)
		if got.URI != tc.uri || got.URIBaseID != tc.base {
			t.Errorf("artifactLocation(%q) = %q on %q, want %q on %q", tc.in, got.URI, got.URIBaseID, tc.uri, tc.base)
		}
	}
}

func TestRuleTableAddsUndescribedRules(t *testing.T) {
	table := ruleTable([]Rule{{ID: "b"}, {ID: "a"}, {ID: "b"}},
		diag.Diagnostics{{Rule: "c", Severity: diag.Warning}, {Rule: "a"}})
	var ids []string
	for _, r := range table {
		ids = append(ids, r.ID)
	}
	if got := strings.Join(ids, ","); got != "a,b,c" {
		t.Errorf("rule table %s, want a,b,c", got)
	}
	if table[2].Severity != diag.Warning || table[2].Summary == "" {
		t.Errorf("placeholder rule %+v should take the finding's severity and have a summary", table[2])
	}
}

func TestFriendlyNameAndSentence(t *testing.T) {
	for in, want := range map[string]string{"bypassed-validation": "BypassedValidation", "cycle": "Cycle", "a_b.c": "ABC"} {
		if got := friendlyName(in); got != want {
			t.Errorf("friendlyName(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"done": "done.", "done.": "done.", "why?": "why?", "  ": "", "x \n": "x."} {
		if got := sentence(in); got != want {
			t.Errorf("sentence(%q) = %q, want %q", in, got, want)
		}
	}
}

// sarifResults prints ds and returns the results with their first location's
// uri and fingerprint.
func sarifResults(t *testing.T, ds diag.Diagnostics, opt SARIFOptions) (log struct {
	Runs []struct {
		OriginalURIBaseIDs map[string]struct{ URI string } `json:"originalUriBaseIds"`
		Results            []struct {
			RuleID    string `json:"ruleId"`
			Locations []struct {
				PhysicalLocation struct {
					ArtifactLocation struct{ URI, URIBaseID string }
				}
			}
			PartialFingerprints map[string]string
		}
	}
}) {
	t.Helper()
	var b bytes.Buffer
	if err := SARIF(&b, ds, opt); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	return log
}

// TestSARIFFingerprintsSurviveInsertedLines inserts lines above every finding:
// the line numbers change, the fingerprints must not; and two findings of one
// rule on identical lines still get different fingerprints.
func TestSARIFFingerprintsSurviveInsertedLines(t *testing.T) {
	src := "pipeline \"p\" {\n  task \"a\" { command = [\"x\"] }\n  task \"b\" { command = [\"x\"] }\n}\n"
	at := func(line int) diag.Range {
		return diag.Range{Filename: "p.hcl", Start: diag.Pos{Line: line, Column: 26}, End: diag.Pos{Line: line, Column: 31}}
	}
	ds := diag.Diagnostics{
		{Rule: "r", Message: "at line 2", Range: at(2)},
		{Rule: "r", Message: "at line 3", Range: at(3)},
		{Rule: "r", Message: "twin", Range: at(3)},
	}
	before := sarifResults(t, ds, SARIFOptions{Sources: Sources{"p.hcl": []byte(src)}})
	shifted := diag.Diagnostics{}
	for _, d := range ds {
		d.Range.Start.Line += 3
		d.Range.End.Line += 3
		d.Message = strings.Replace(d.Message, "line", "row", 1) // messages may name lines; they are not hashed
		shifted = append(shifted, d)
	}
	after := sarifResults(t, shifted, SARIFOptions{Sources: Sources{"p.hcl": []byte("# a\n# b\n\n" + src)}})
	seen := map[string]bool{}
	for i, r := range before.Runs[0].Results {
		fp := r.PartialFingerprints[fingerprintKey]
		if fp == "" {
			t.Fatalf("result %d has no %s fingerprint", i, fingerprintKey)
		}
		if got := after.Runs[0].Results[i].PartialFingerprints[fingerprintKey]; got != fp {
			t.Errorf("result %d: fingerprint %s became %s after inserting lines above", i, fp, got)
		}
		if seen[fp] {
			t.Errorf("result %d shares fingerprint %s with an earlier result", i, fp)
		}
		seen[fp] = true
	}
	// Editing the finding's own line is a different finding.
	edited := sarifResults(t, ds[:1], SARIFOptions{Sources: Sources{"p.hcl": []byte(strings.Replace(src, `task "a"`, `task "z"`, 1))}})
	if edited.Runs[0].Results[0].PartialFingerprints[fingerprintKey] == before.Runs[0].Results[0].PartialFingerprints[fingerprintKey] {
		t.Error("changing the finding's line kept its fingerprint")
	}
}

// TestSARIFPathsRelativeToRoot runs pipec in a sub-folder of the repository:
// paths are relative to the root, %SRCROOT% carries the root's uri, and a file
// outside the root keeps an absolute file URI.
func TestSARIFPathsRelativeToRoot(t *testing.T) {
	ds := diag.Diagnostics{
		{Rule: "r", Message: "m", Range: diag.Range{Filename: "orders/pipeline.hcl", Start: diag.Pos{Line: 1, Column: 1}}},
		{Rule: "r", Message: "m", Range: diag.Range{Filename: "../../../elsewhere/x.hcl", Start: diag.Pos{Line: 1, Column: 1}}},
	}
	log := sarifResults(t, ds, SARIFOptions{Root: "/src/repo", WorkDir: "/src/repo/pipelines"})
	run := log.Runs[0]
	if got := run.OriginalURIBaseIDs["%SRCROOT%"].URI; got != "file:///src/repo/" {
		t.Errorf("%%SRCROOT%% uri = %q, want file:///src/repo/", got)
	}
	loc := func(i int) string {
		l := run.Results[i].Locations[0].PhysicalLocation.ArtifactLocation
		return l.URIBaseID + " " + l.URI
	}
	if got := loc(0); got != "%SRCROOT% pipelines/orders/pipeline.hcl" {
		t.Errorf("file under the root: %q", got)
	}
	if got := loc(1); got != " file:///elsewhere/x.hcl" {
		t.Errorf("file outside the root: %q", got)
	}
}
