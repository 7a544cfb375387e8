package report

import (
	"encoding/json"
	"io"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pipec/pipec/diag"
)

// ToolInfo names the program that produced a SARIF log.
type ToolInfo struct {
	Name           string
	Version        string
	InformationURI string
}

// SARIF versions and the base id that marks paths relative to where the tool ran.
const (
	sarifVersion = "2.1.0"
	sarifSchema  = "https://json.schemastore.org/sarif-2.1.0.json"
	srcRoot      = "%SRCROOT%"
)

// The structs below are the subset of SARIF 2.1.0 pipec writes. Fields are
// declared in the order the spec lists them, so the output is byte-stable.
type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool               sarifTool                      `json:"tool"`
	OriginalURIBaseIDs map[string]sarifArtifactLocURI `json:"originalUriBaseIds,omitempty"`
	Artifacts          []sarifArtifact                `json:"artifacts,omitempty"`
	Results            []sarifResult                  `json:"results"`
	ColumnKind         string                         `json:"columnKind"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version,omitempty"`
	InformationURI string      `json:"informationUri,omitempty"`
	Rules          []sarifRule `json:"rules"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifHelp struct {
	Text     string `json:"text"`
	Markdown string `json:"markdown,omitempty"`
}

type sarifRule struct {
	ID                   string          `json:"id"`
	Name                 string          `json:"name,omitempty"`
	ShortDescription     sarifText       `json:"shortDescription"`
	FullDescription      sarifText       `json:"fullDescription"`
	Help                 sarifHelp       `json:"help"`
	HelpURI              string          `json:"helpUri,omitempty"`
	DefaultConfiguration sarifRuleConfig `json:"defaultConfiguration"`
}

type sarifRuleConfig struct {
	Level string `json:"level"`
}

type sarifArtifactLocURI struct {
	URI         string     `json:"uri,omitempty"`
	Description *sarifText `json:"description,omitempty"`
}

type sarifArtifact struct {
	Location       sarifArtifactLocation `json:"location"`
	Roles          []string              `json:"roles"`
	SourceLanguage string                `json:"sourceLanguage,omitempty"`
}

type sarifArtifactLocation struct {
	URI       string `json:"uri"`
	URIBaseID string `json:"uriBaseId,omitempty"`
	Index     *int   `json:"index,omitempty"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	RuleIndex int             `json:"ruleIndex"`
	Level     string          `json:"level"`
	Message   sarifText       `json:"message"`
	Locations []sarifLocation `json:"locations,omitempty"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysicalLocation `json:"physicalLocation"`
}

type sarifPhysicalLocation struct {
	ArtifactLocation sarifArtifactLocation `json:"artifactLocation"`
	Region           *sarifRegion          `json:"region,omitempty"`
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn,omitempty"`
	EndLine     int `json:"endLine,omitempty"`
	EndColumn   int `json:"endColumn,omitempty"`
}

// SARIF writes the findings as a SARIF 2.1.0 log with one run, for code-scanning
// services (GitHub, Azure DevOps) and editors. The driver's rule table holds
// every rule in rules plus a placeholder for any rule a finding names that
// rules lacks; results keep the order of ds. Paths relative to the working
// directory are written relative to %SRCROOT%, so the log holds no absolute
// path of the machine that made it.
func SARIF(w io.Writer, ds diag.Diagnostics, rules []Rule, tool ToolInfo) error {
	table := ruleTable(rules, ds)
	index := make(map[string]int, len(table))
	driver := sarifDriver{Name: tool.Name, Version: tool.Version, InformationURI: tool.InformationURI,
		Rules: make([]sarifRule, 0, len(table))}
	for i, r := range table {
		index[r.ID] = i
		driver.Rules = append(driver.Rules, sarifRuleOf(r))
	}

	// Artifacts are listed once each, sorted by URI, and results refer to them by index.
	var locs []sarifArtifactLocation
	seen := map[sarifArtifactLocation]bool{}
	for _, d := range ds {
		if d.Range.Filename == "" {
			continue
		}
		l := artifactLocation(d.Range.Filename)
		if !seen[l] {
			seen[l] = true
			locs = append(locs, l)
		}
	}
	slices.SortFunc(locs, func(a, b sarifArtifactLocation) int {
		return strings.Compare(a.URIBaseID+"\x00"+a.URI, b.URIBaseID+"\x00"+b.URI)
	})
	artIndex := make(map[sarifArtifactLocation]int, len(locs))
	run := sarifRun{Tool: sarifTool{Driver: driver}, Results: make([]sarifResult, 0, len(ds)),
		ColumnKind: "unicodeCodePoints"}
	usesRoot := false
	for i, l := range locs {
		artIndex[l] = i
		run.Artifacts = append(run.Artifacts, sarifArtifact{Location: l, Roles: []string{"analysisTarget"},
			SourceLanguage: sourceLanguage(l.URI)})
		usesRoot = usesRoot || l.URIBaseID == srcRoot
	}
	if usesRoot {
		run.OriginalURIBaseIDs = map[string]sarifArtifactLocURI{srcRoot: {
			Description: &sarifText{Text: "The folder pipec ran in; result paths are relative to it."}}}
	}

	for _, d := range ds {
		res := sarifResult{RuleID: d.Rule, RuleIndex: index[d.Rule], Level: sarifLevel(d.Severity),
			Message: sarifText{Text: sarifMessage(d)}}
		if d.Range.Filename != "" {
			l := artifactLocation(d.Range.Filename)
			n := artIndex[l]
			l.Index = &n
			res.Locations = []sarifLocation{{PhysicalLocation: sarifPhysicalLocation{
				ArtifactLocation: l, Region: sarifRegionOf(d.Range)}}}
		}
		run.Results = append(run.Results, res)
	}

	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(sarifLog{Schema: sarifSchema, Version: sarifVersion, Runs: []sarifRun{run}})
}

func sarifRuleOf(r Rule) sarifRule {
	short := sentence(firstParagraph(r.Summary))
	if short == "" {
		short = sentence("The " + r.ID + " rule")
	}
	full := sentence(firstParagraph(r.Help))
	if full == "" {
		full = short
	}
	help := strings.TrimSpace(r.Help)
	markdown := "**" + r.ID + "**: " + short
	if help == "" {
		help = short
	} else {
		markdown += "\n\n" + help
	}
	// SARIF wants the friendly name to differ from the id (the validator's
	// SARIF1001 compares them ignoring case), so one-word ids get none.
	name := friendlyName(r.ID)
	if strings.EqualFold(name, r.ID) {
		name = ""
	}
	return sarifRule{
		ID:                   r.ID,
		Name:                 name,
		ShortDescription:     sarifText{Text: short},
		FullDescription:      sarifText{Text: full},
		Help:                 sarifHelp{Text: help, Markdown: markdown},
		HelpURI:              r.HelpURI,
		DefaultConfiguration: sarifRuleConfig{Level: sarifLevel(r.Severity)},
	}
}

// sarifLevel maps pipec severities to SARIF result levels.
func sarifLevel(s diag.Severity) string {
	switch s {
	case diag.Warning:
		return "warning"
	case diag.Info:
		return "note"
	}
	return "error"
}

// sarifMessage is the finding's message as the other formats print it, then
// its detail on a new line. Messages are not forced into sentences: a
// compiler's "2 errors in empty disjunction:" would read worse with a period,
// and the validator's period check (SARIF2001) is off by default.
func sarifMessage(d diag.Diagnostic) string {
	msg := d.Message
	if det := strings.TrimSpace(d.Detail); det != "" {
		msg += "\n" + det
	}
	return msg
}

// sarifRegionOf converts a half-open range; SARIF's endColumn is also
// exclusive, and both count characters from 1. Missing or inverted ends are
// left out rather than invented.
func sarifRegionOf(r diag.Range) *sarifRegion {
	if r.Start.Line < 1 {
		return nil
	}
	reg := &sarifRegion{StartLine: r.Start.Line}
	if r.Start.Column >= 1 {
		reg.StartColumn = r.Start.Column
	}
	end := r.End
	if end.Line > r.Start.Line || (end.Line == r.Start.Line && end.Column >= r.Start.Column && reg.StartColumn > 0) {
		reg.EndLine = end.Line
		if end.Column >= 1 {
			reg.EndColumn = end.Column
		}
	}
	return reg
}

// artifactLocation writes a file name as a URI: relative names become
// forward-slash URI references against %SRCROOT%, absolute ones file:// URIs.
func artifactLocation(name string) sarifArtifactLocation {
	slash := filepath.ToSlash(name)
	if filepath.IsAbs(name) || strings.HasPrefix(slash, "/") {
		if !strings.HasPrefix(slash, "/") {
			slash = "/" + slash // a Windows drive path: file:///C:/...
		}
		return sarifArtifactLocation{URI: (&url.URL{Scheme: "file", Path: slash}).String()}
	}
	slash = strings.TrimPrefix(slash, "./")
	segs := strings.Split(slash, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	// A colon in the first segment would read as a URI scheme.
	segs[0] = strings.ReplaceAll(segs[0], ":", "%3A")
	return sarifArtifactLocation{URI: strings.Join(segs, "/"), URIBaseID: srcRoot}
}

// sourceLanguage names a spec's language by its extension, as SARIF viewers
// use it for highlighting.
func sourceLanguage(uri string) string {
	switch path.Ext(uri) {
	case ".hcl":
		return "hcl"
	case ".cue":
		return "cue"
	}
	return ""
}
