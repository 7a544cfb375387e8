// Package config reads pipec's configuration file, .pipec.yaml, found by
// walking up from the working directory. It holds what a repository wants of
// every lint run: rules turned off or given another severity, paths that are
// not pipeline specs, the worker pool failover-limits should assume (its
// size, or its workers with their labels), and the root SARIF paths are
// relative to.
//
// The file is validated like a spec: every mistake is a diagnostic with
// file:line:col (rule "config"), and the parts that are valid still apply.
// The command line and the language server call Find, then Options and
// Apply.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/internal/suggest"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/spec"
)

// FileName is the configuration file's name.
const FileName = ".pipec.yaml"

// Rule is the rule id of findings about the configuration file itself.
const Rule = "config"

// Config is one parsed configuration file. The zero value (no file) changes
// nothing.
type Config struct {
	// File is the path of the file as found (relative when Find was given a
	// relative folder); "" when there is none.
	File string
	// Dir is the absolute folder holding the file: ignore patterns and
	// sarif.root are relative to it.
	Dir string
	// Rules are per-rule settings, sorted by rule id.
	Rules []RuleSetting
	// Ignore holds slash-separated glob patterns of paths that are not
	// pipeline specs (Terraform, Packer), relative to Dir.
	Ignore []string
	// Workers is the worker pool failover-limits assumes; 0 means not stated.
	Workers int
	// WorkerLabels holds, when the file lists the workers, the labels each
	// offers (entry i is worker w<i+1>, sorted); nil for a plain count.
	// len(WorkerLabels) == Workers when set.
	WorkerLabels [][]string
	// SARIFRoot is the absolute folder SARIF paths are relative to; "" means
	// not stated (the git root, else Dir, is used).
	SARIFRoot string
}

// RuleSetting turns one rule off or gives its findings another severity.
type RuleSetting struct {
	ID       string
	Off      bool
	Severity diag.Severity // meaningful when !Off
}

// Find looks for FileName in dir and each folder above it, stopping after the
// folder that holds .git (a configuration outside the repository is not the
// repository's) or at the file system's root. A missing file is not an
// error: it returns an empty Config. The error is for a file that exists but
// cannot be read (a usage problem, exit code 2); the diagnostics are the
// file's mistakes.
func Find(dir string) (*Config, diag.Diagnostics, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, err
	}
	up := ""
	for {
		candidate := filepath.Join(abs, FileName)
		if st, err := os.Stat(candidate); err == nil && !st.IsDir() {
			shown := candidate
			if !filepath.IsAbs(dir) {
				shown = filepath.Join(dir, up, FileName)
			}
			return load(shown, abs)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
		if _, err := os.Stat(filepath.Join(abs, ".git")); err == nil {
			return &Config{}, nil, nil
		}
		parent := filepath.Dir(abs)
		if parent == abs {
			return &Config{}, nil, nil
		}
		abs, up = parent, filepath.Join(up, "..")
	}
}

// Load reads one configuration file.
func Load(file string) (*Config, diag.Diagnostics, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, nil, err
	}
	return load(file, filepath.Dir(abs))
}

func load(file, dir string) (*Config, diag.Diagnostics, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	c, ds := Parse(file, src)
	c.Dir = dir
	if c.SARIFRoot != "" && !filepath.IsAbs(c.SARIFRoot) {
		c.SARIFRoot = filepath.Join(dir, c.SARIFRoot)
	}
	return c, ds, nil
}

// Parse reads a configuration from src; file names it in diagnostics. Dir is
// left empty (Find and Load set it).
func Parse(file string, src []byte) (*Config, diag.Diagnostics) {
	p := parser{file: file, cfg: &Config{File: file}, lines: lineCount(src)}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		p.errAt(yamlErrorLine(err), 1, "%s", yamlErrorText(err))
		return p.cfg, p.ds.Sort()
	}
	if len(doc.Content) == 0 {
		return p.cfg, nil // an empty file
	}
	p.top(doc.Content[0])
	slices.SortFunc(p.cfg.Rules, func(a, b RuleSetting) int { return strings.Compare(a.ID, b.ID) })
	return p.cfg, p.ds.Sort()
}

// Options turns the configuration into lint options: rules turned off, the
// worker count (0 when the file states none) and, when the file lists the
// workers, their labels. Command-line flags are applied on top by the
// caller; one that replaces the worker count drops the labels too.
func (c *Config) Options() lint.Options {
	var o lint.Options
	for _, r := range c.Rules {
		if r.Off {
			o.Disable = append(o.Disable, r.ID)
		}
	}
	o.Workers = c.Workers
	o.WorkerLabels = c.WorkerLabels
	return o
}

// Apply gives findings the severities the file sets, returning a new list.
// Rules turned off are handled by lint.Options (Options), so suppression
// comments still see them as off, not as findings to drop here.
func (c *Config) Apply(ds diag.Diagnostics) diag.Diagnostics {
	if c == nil || len(c.Rules) == 0 {
		return ds
	}
	sev := map[string]diag.Severity{}
	for _, r := range c.Rules {
		if !r.Off {
			sev[r.ID] = r.Severity
		}
	}
	out := make(diag.Diagnostics, 0, len(ds))
	for _, d := range ds {
		if s, ok := sev[d.Rule]; ok {
			d.Severity = s
		}
		out = append(out, d)
	}
	return out
}

// Ignored reports whether path (relative to the working directory, or
// absolute) matches an ignore pattern. A pattern without a slash matches a
// file or folder name at any depth ("*.tf.hcl", "terraform"); one with a
// slash is anchored at the file's folder ("infra/**/*.hcl"); "**" matches any
// number of folders; a folder that matches ignores everything under it.
func (c *Config) Ignored(p string) bool {
	if c == nil || len(c.Ignore) == 0 || c.Dir == "" {
		return false
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(c.Dir, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return false
	}
	segs := strings.Split(filepath.ToSlash(rel), "/")
	for _, pat := range c.Ignore {
		if matchPattern(strings.TrimSuffix(pat, "/"), segs) {
			return true
		}
	}
	return false
}

// matchPattern matches a cleaned pattern against a path or any of its parent
// folders.
func matchPattern(pat string, segs []string) bool {
	psegs := strings.Split(strings.TrimPrefix(pat, "/"), "/")
	if !strings.Contains(pat, "/") {
		for _, s := range segs {
			if ok, _ := path.Match(pat, s); ok {
				return true
			}
		}
		return false
	}
	for n := 1; n <= len(segs); n++ {
		if matchSegs(psegs, segs[:n]) {
			return true
		}
	}
	return false
}

// matchSegs matches pattern segments against path segments, with "**"
// standing for zero or more segments.
func matchSegs(pat, segs []string) bool {
	if len(pat) == 0 {
		return len(segs) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(segs); i++ {
			if matchSegs(pat[1:], segs[i:]) {
				return true
			}
		}
		return false
	}
	if len(segs) == 0 {
		return false
	}
	if ok, _ := path.Match(pat[0], segs[0]); !ok {
		return false
	}
	return matchSegs(pat[1:], segs[1:])
}

// parser walks the YAML node tree, collecting the configuration and every
// mistake with its position.
type parser struct {
	file string
	cfg  *Config
	ds   diag.Diagnostics
	// lines is how many lines the file has, counted as YAML breaks them
	// (at \n, \r\n and a lone \r).
	lines int
}

// lineCount counts src's lines as YAML breaks them.
func lineCount(src []byte) int {
	s := string(src)
	return strings.Count(s, "\n") + strings.Count(s, "\r") - strings.Count(s, "\r\n") + 1
}

// pos is a node's position kept inside the file: YAML places what a
// document lacks (the value of a lone "---", the end of the stream) on the
// line after the last.
func (p *parser) pos(line, col int) diag.Pos {
	if line > p.lines {
		line = p.lines
	}
	return diag.Pos{Line: max(line, 1), Column: max(col, 1)}
}

var topKeys = []string{"ignore", "rules", "sarif", "workers"}

func (p *parser) top(n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		p.err(n, "the configuration must be a mapping of %s, not %s", strings.Join(topKeys, ", "), kindName(n))
		return
	}
	p.mapping(n, topKeys, func(key string, k, v *yaml.Node) {
		switch key {
		case "rules":
			p.rules(v)
		case "ignore":
			p.ignore(v)
		case "workers":
			p.workers(v)
		case "sarif":
			p.mapping(v, []string{"root"}, func(_ string, _, v *yaml.Node) {
				if s, ok := p.str(v, "sarif.root"); ok {
					p.cfg.SARIFRoot = filepath.FromSlash(s)
				}
			})
		}
	})
}

// mapping calls fn for each key of a mapping node in file order, reporting
// keys that are not in known (with a suggestion) and keys given twice.
func (p *parser) mapping(n *yaml.Node, known []string, fn func(key string, k, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		p.err(n, "want a mapping, not %s", kindName(n))
		return
	}
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.err(k, "a key must be a plain name")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			p.err(k, "%q is given twice (first at line %d)", clip(k.Value), first.Line)
			continue
		}
		seen[k.Value] = k
		if known != nil && !slices.Contains(known, k.Value) {
			p.err(k, "unknown key %q%s (known: %s)", clip(k.Value), suggest.Hint(k.Value, known), strings.Join(known, ", "))
			continue
		}
		fn(k.Value, k, v)
	}
}

// rules reads `rules: {RULE: off | error | warning | info}`.
func (p *parser) rules(n *yaml.Node) {
	ids := lint.IDs()
	p.mapping(n, nil, func(id string, k, v *yaml.Node) {
		r := lint.Lookup(id)
		if r == nil {
			p.err(k, "unknown rule %q%s (pipec explain lists them)", clip(id), suggest.Hint(id, ids))
			return
		}
		val, ok := p.str(v, "rules."+id)
		if !ok {
			return
		}
		if !r.Reported() {
			p.err(k, "rule %q is found by the loaders or the compiler: a spec with such a finding has no valid plan, so it cannot be turned off or re-graded", id)
			return
		}
		set := RuleSetting{ID: id}
		if val == "off" {
			set.Off = true
		} else if s, ok := diag.ParseSeverity(val); ok {
			set.Severity = s
		} else {
			p.err(v, "rules.%s: want off, error, warning or info, not %q", id, clip(val))
			return
		}
		p.cfg.Rules = append(p.cfg.Rules, set)
	})
}

// ignore reads a list of glob patterns.
func (p *parser) ignore(n *yaml.Node) {
	if n.Kind != yaml.SequenceNode {
		p.err(n, "ignore: want a list of path patterns, not %s", kindName(n))
		return
	}
	for _, e := range n.Content {
		s, ok := p.str(e, "ignore")
		if !ok {
			continue
		}
		pat := strings.TrimSuffix(filepath.ToSlash(s), "/")
		if pat == "" || strings.HasPrefix(pat, "../") || pat == ".." {
			p.err(e, "ignore: %q is not a path under the configuration's folder", clip(s))
			continue
		}
		bad := false
		for seg := range strings.SplitSeq(pat, "/") {
			if _, err := path.Match(seg, ""); err != nil {
				bad = true
			}
		}
		if bad {
			p.err(e, "ignore: %q is not a valid pattern (unbalanced [ or a trailing \\)", clip(s))
			continue
		}
		p.cfg.Ignore = append(p.cfg.Ignore, pat)
	}
}

// workers reads the worker pool: either its size, a whole number of at
// least 1 (`workers: 3`), or the workers one by one with the labels each
// offers (`workers: [{labels: [spark]}, {labels: [spark, gpu]}, {}]`), so
// failover-limits can judge a labelled task on the workers that may run it.
// The list's workers are w1, w2, ... in order, as pipec simulate names
// them.
func (p *parser) workers(n *yaml.Node) {
	if n.Kind == yaml.SequenceNode {
		p.workerList(n)
		return
	}
	var w int
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&w) != nil {
		p.err(n, "workers: want a whole number of workers, or a list of workers with their labels, not %s", describe(n))
		return
	}
	if w < 1 {
		p.err(n, "workers: a pipeline needs at least 1 worker, not %d", w)
		return
	}
	p.cfg.Workers = w
}

// workerList reads `workers: [{labels: [L, ...]}, ...]`. A worker with a
// mistake still counts (it is one of the pool) but offers nothing, and the
// file's findings stop pipec lint anyway. A worker's labels are kept
// sorted and without repeats, as a worker's --label flags are.
func (p *parser) workerList(n *yaml.Node) {
	if len(n.Content) == 0 {
		p.err(n, "workers: a pipeline needs at least 1 worker, not an empty list")
		return
	}
	labels := make([][]string, 0, len(n.Content))
	for i, e := range n.Content {
		what := fmt.Sprintf("workers[%d]", i)
		var offered []string
		if e.Kind != yaml.MappingNode {
			p.err(e, "%s: want a worker, a mapping such as {labels: [spark]} ({} for none), not %s", what, kindName(e))
			labels = append(labels, nil)
			continue
		}
		p.mapping(e, []string{"labels"}, func(_ string, _, v *yaml.Node) {
			if v.Kind != yaml.SequenceNode {
				p.err(v, "%s.labels: want a list of labels, not %s", what, kindName(v))
				return
			}
			for _, l := range v.Content {
				s, ok := p.str(l, what+".labels")
				if !ok {
					continue
				}
				if !spec.ValidLabel(s) {
					p.err(l, "%s.labels: %q is not a valid label (a lowercase letter or digit, then lowercase letters, digits, _, . or -, at most %d characters)", what, clip(s), spec.MaxLabelLen)
					continue
				}
				offered = append(offered, s)
			}
		})
		slices.Sort(offered)
		labels = append(labels, slices.Compact(offered))
	}
	p.cfg.Workers, p.cfg.WorkerLabels = len(labels), labels
}

// str reads a string scalar (YAML's off/no are strings in YAML 1.2, which
// yaml/v3 follows, so `rule: off` reads as "off").
func (p *parser) str(n *yaml.Node, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!bool") {
		p.err(n, "%s: want a string, not %s", what, describe(n))
		return "", false
	}
	return n.Value, true
}

func (p *parser) err(n *yaml.Node, format string, args ...any) {
	end := n.Column
	if n.Kind == yaml.ScalarNode {
		end += len([]rune(n.Value))
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			end += 2
		}
	} else {
		end++
	}
	p.add(p.pos(n.Line, n.Column), end-n.Column, format, args...)
}

func (p *parser) errAt(line, col int, format string, args ...any) {
	p.add(p.pos(line, col), 1, format, args...)
}

// add records a finding width columns wide from start.
func (p *parser) add(start diag.Pos, width int, format string, args ...any) {
	end := diag.Pos{Line: start.Line, Column: start.Column + width}
	p.ds = append(p.ds, diag.Errorf(Rule, diag.Range{Filename: p.file, Start: start, End: end}, format, args...))
}

// kindName names a node's kind for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return describe(n)
}

// describe names a scalar by its YAML type.
func describe(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return kindName(n)
	}
	switch n.Tag {
	case "!!int":
		return fmt.Sprintf("the number %s", clip(n.Value))
	case "!!float":
		return fmt.Sprintf("the number %s", clip(n.Value))
	case "!!bool":
		return fmt.Sprintf("the boolean %s", n.Value)
	case "!!null":
		return "nothing"
	}
	return fmt.Sprintf("the string %q", clip(n.Value))
}

// clipRunes is how much of a value a message quotes: a file that is not
// YAML at all (a spec given as --config) reads as one long string.
const clipRunes = 40

// clip shortens a long value to its start and an ellipsis.
func clip(s string) string {
	if r := []rune(s); len(r) > clipRunes {
		return string(r[:clipRunes]) + "…"
	}
	return s
}
