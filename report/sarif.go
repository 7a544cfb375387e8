package report

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
	// PartialFingerprints let code scanning match a finding across commits.
	PartialFingerprints map[string]string `json:"partialFingerprints,omitempty"`
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

// SARIFOptions describe the run a SARIF log comes from.
type SARIFOptions struct {
	Tool ToolInfo
	// Rules describe the catalogue for the driver's rule table.
	Rules []Rule
	// Root is the absolute folder result paths are relative to: the
	// repository root (git's, or the folder of .pipec.yaml), which code
	// scanning resolves %SRCROOT% to. Empty means WorkDir.
	Root string
	// WorkDir is the absolute folder relative file names in the findings are
	// relative to (the working directory). Empty leaves relative names as
	// they are and writes %SRCROOT% without a uri.
	WorkDir string
	// Sources give the text fingerprints are computed from; a finding whose
	// file is missing is fingerprinted from its rule, file and message.
	Sources Sources
}

// SARIF writes the findings as a SARIF 2.1.0 log with one run, for code-scanning
// services (GitHub, Azure DevOps) and editors. The driver's rule table holds
// every rule in opt.Rules plus a placeholder for any rule a finding names that
// the table lacks; results keep the order of ds. Files under the root are
// written relative to %SRCROOT%, so the log holds no absolute path of the
// machine that made it except the root's own uri.
func SARIF(w io.Writer, ds diag.Diagnostics, opt SARIFOptions) error {
	table := ruleTable(opt.Rules, ds)
	index := make(map[string]int, len(table))
	tool := opt.Tool
	driver := sarifDriver{Name: tool.Name, Version: tool.Version, InformationURI: tool.InformationURI,
		Rules: make([]sarifRule, 0, len(table))}
	for i, r := range table {
		index[r.ID] = i
		driver.Rules = append(driver.Rules, sarifRuleOf(r))
	}
	root := opt.Root
	if root == "" {
		root = opt.WorkDir
	}
	locate := func(name string) sarifArtifactLocation { return artifactLocationUnder(name, opt.WorkDir, root) }

	// Artifacts are listed once each, sorted by URI, and results refer to them by index.
	var locs []sarifArtifactLocation
	seen := map[sarifArtifactLocation]bool{}
	for _, d := range ds {
		if d.Range.Filename == "" {
			continue
		}
		l := locate(d.Range.Filename)
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
		base := sarifArtifactLocURI{Description: &sarifText{Text: "The repository root; result paths are relative to it."}}
		if root != "" && filepath.IsAbs(root) {
			base.URI = dirURI(root)
		}
		run.OriginalURIBaseIDs = map[string]sarifArtifactLocURI{srcRoot: base}
	}

	fp := fingerprinter{idx: lines{src: opt.Sources}, seen: map[string]int{}}
	for _, d := range ds {
		res := sarifResult{RuleID: d.Rule, RuleIndex: index[d.Rule], Level: sarifLevel(d.Severity),
			Message: sarifText{Text: sarifMessage(d)}}
		uri := ""
		if d.Range.Filename != "" {
			l := locate(d.Range.Filename)
			uri = l.URI
			n := artIndex[l]
			l.Index = &n
			res.Locations = []sarifLocation{{PhysicalLocation: sarifPhysicalLocation{
				ArtifactLocation: l, Region: sarifRegionOf(d.Range)}}}
		}
		res.PartialFingerprints = map[string]string{fingerprintKey: fp.of(d, uri)}
		run.Results = append(run.Results, res)
	}

	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(sarifLog{Schema: sarifSchema, Version: sarifVersion, Runs: []sarifRun{run}})
}

// fingerprintKey names pipec's partial fingerprint; the version suffix
// changes if the recipe ever does, as SARIF asks.
const fingerprintKey = "pipecFinding/v1"

// fingerprinter gives each result a fingerprint that survives lines being
// inserted or removed above it: it hashes the rule, the file, the text of the
// finding's line (whitespace-normalised) and the text under its range, never
// the line number or the message (messages may name other lines). Findings
// with identical keys are told apart by their order in the file, which an
// insertion above does not change.
type fingerprinter struct {
	idx  lines
	seen map[string]int
}

func (f *fingerprinter) of(d diag.Diagnostic, uri string) string {
	key := d.Rule + "\x00" + uri
	if line, ok := f.idx.line(d.Range.Filename, d.Range.Start.Line); ok {
		key += "\x00" + strings.Join(strings.Fields(line), " ") + "\x00" + underRange(line, d.Range)
	} else {
		key += "\x00" + d.Message
	}
	n := f.seen[key]
	f.seen[key] = n + 1
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d", key, n))
	return hex.EncodeToString(sum[:16])
}

// underRange is the part of line the range covers on its first line.
func underRange(line string, r diag.Range) string {
	runes := []rune(line)
	start := r.Start.Column - 1
	if start < 0 || start > len(runes) {
		return ""
	}
	end := len(runes)
	if r.End.Line == r.Start.Line && r.End.Column-1 >= start && r.End.Column-1 < end {
		end = r.End.Column - 1
	}
	return string(runes[start:end])
}

// dirURI is the file:// URI of an absolute folder, ending in a slash as
// SARIF requires of a base URI.
func dirURI(dir string) string {
	slash := filepath.ToSlash(dir)
	if !strings.HasPrefix(slash, "/") {
		slash = "/" + slash
	}
	if !strings.HasSuffix(slash, "/") {
		slash += "/"
	}
	return (&url.URL{Scheme: "file", Path: slash}).String()
}

// artifactLocationUnder locates a file name from the findings: relative to
// the root when it lies under it, else as artifactLocation does.
func artifactLocationUnder(name, workDir, root string) sarifArtifactLocation {
	if workDir == "" || root == "" {
		return artifactLocation(name)
	}
	abs := name
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(workDir, name)
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return artifactLocation(abs)
	}
	return artifactLocation(rel)
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
