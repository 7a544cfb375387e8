package cli

import (
	"github.com/pipec/pipec/config"
	"github.com/pipec/pipec/lint/lintcmd"
	"github.com/pipec/pipec/report"
	"github.com/pipec/pipec/spec/specload"
)

// findOptions say which files a walk keeps.
type findOptions struct {
	// cfg's ignore patterns drop files and folders (nil: none).
	cfg *config.Config
	// skipNonSpecs drops named files that hold no pipeline (for the
	// pre-commit hook, which names every staged .hcl file, Terraform's too).
	skipNonSpecs bool
}

// findSpecFiles expands the arguments as lint does (lintcmd.FindSpecFiles).
func findSpecFiles(paths []string, opt findOptions) ([]string, error) {
	files, err := lintcmd.FindSpecFiles(paths, lintcmd.FindOptions{Config: opt.cfg, SkipNonSpecs: opt.skipNonSpecs, Syntaxes: specload.Both{}})
	return files, err
}

// escapeControl makes a file name or diff from the disk safe for a terminal.
func escapeControl(s string) string { return report.Escape(s) }
