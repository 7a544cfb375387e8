package cli

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pipec/pipec/config"
	"github.com/pipec/pipec/report"
	"github.com/pipec/pipec/spec"
)

// findOptions say which files a walk keeps.
type findOptions struct {
	// cfg's ignore patterns drop files and folders (nil: none).
	cfg *config.Config
	// skipNonSpecs drops named files that hold no pipeline (for the
	// pre-commit hook, which names every staged .hcl file, Terraform's too).
	skipNonSpecs bool
}

// findSpecFiles expands the arguments: a file is taken as given (it must have
// a spec extension); a folder is searched for the .hcl and .cue files that
// hold a pipeline (isPipelineSpec), skipping hidden folders, node_modules and
// ignored paths. The result is sorted and has no duplicates. An unreadable
// file or folder, and a folder with no spec at all (a mistyped CI path must
// not pass), are usage errors (exit code 2) that name the path.
func findSpecFiles(paths []string, opt findOptions) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, usageErr("%v", unwrapPathError(err))
		}
		if !st.IsDir() {
			syn, ok := spec.SyntaxOf(p)
			if !ok {
				return nil, usageErr("%s: not a spec file (want .hcl or .cue)", p)
			}
			if opt.cfg.Ignored(p) {
				continue
			}
			if opt.skipNonSpecs {
				src, err := os.ReadFile(p)
				if err != nil {
					return nil, usageErr("%v", unwrapPathError(err))
				}
				if !isPipelineSpec(syn, src) && !isBinary(src) {
					continue
				}
			}
			files = append(files, p)
			continue
		}
		found := 0
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != p && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || opt.cfg.Ignored(path)) {
					return filepath.SkipDir
				}
				return nil
			}
			syn, ok := spec.SyntaxOf(path)
			if !ok || opt.cfg.Ignored(path) {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if isPipelineSpec(syn, src) {
				files = append(files, path)
				found++
			}
			return nil
		})
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				return nil, usageErr("%s: cannot read: %v", pe.Path, pe.Err)
			}
			return nil, usageErr("%v", err)
		}
		if found == 0 {
			return nil, usageErr("no pipeline specs under %s", p)
		}
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// escapeControl makes a file name or diff from the disk safe for a terminal.
func escapeControl(s string) string { return report.Escape(s) }
