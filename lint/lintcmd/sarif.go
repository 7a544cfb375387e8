package lintcmd

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/pipec/pipec/config"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/lint"
	"github.com/pipec/pipec/report"
)

// homepage is pipec's information URI in SARIF logs.
const homepage = "https://github.com/pipec/pipec"

// sarifOptions place SARIF paths relative to the repository root: the
// configuration's sarif.root, else the git root above the working directory,
// else the configuration file's folder, else the working directory.
func sarifOptions(cfg *config.Config, src report.Sources, version string) report.SARIFOptions {
	wd, _ := os.Getwd()
	root := cfg.SARIFRoot
	if root == "" {
		root = gitRoot(wd)
	}
	if root == "" {
		root = cfg.Dir
	}
	if root == "" {
		root = wd
	}
	return report.SARIFOptions{
		Tool:    report.ToolInfo{Name: "pipec", Version: version, InformationURI: homepage},
		Rules:   reportRules(),
		Root:    root,
		WorkDir: wd,
		Sources: src,
	}
}

// fromRoot rewrites file names relative to the root of opt (when they lie
// under it), for consumers that resolve paths from the repository root.
func fromRoot(ds diag.Diagnostics, opt report.SARIFOptions) diag.Diagnostics {
	if opt.Root == "" || opt.WorkDir == "" || opt.Root == opt.WorkDir {
		return ds
	}
	out := make(diag.Diagnostics, len(ds))
	for i, d := range ds {
		if f := d.Range.Filename; f != "" && f != "<stdin>" {
			abs := f
			if !filepath.IsAbs(abs) {
				abs = filepath.Join(opt.WorkDir, f)
			}
			if rel, err := filepath.Rel(opt.Root, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				d.Range.Filename = filepath.ToSlash(rel)
			}
		}
		out[i] = d
	}
	return out
}

// gitRoot is the nearest folder at or above dir holding .git (a folder, or a
// file in a worktree), or "".
func gitRoot(dir string) string {
	for dir != "" {
		if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
	return ""
}

// reportRules describes the catalogue for SARIF's rule table; each rule's
// help links to its page under docs/rules/.
func reportRules() []report.Rule {
	rules := lint.All()
	out := make([]report.Rule, 0, len(rules))
	for _, r := range rules {
		out = append(out, report.Rule{ID: r.ID, Severity: r.Severity, Summary: r.Summary, Help: r.Details(),
			HelpURI: lint.DocURL(r.ID)})
	}
	return out
}
