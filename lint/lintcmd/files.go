package lintcmd

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pipec/pipec/config"
	"github.com/pipec/pipec/internal/specdetect"
	"github.com/pipec/pipec/spec"
)

// FindOptions say which files a walk keeps.
type FindOptions struct {
	// Config's ignore patterns drop files and folders (nil: none).
	Config *config.Config
	// SkipNonSpecs drops named files that hold no pipeline (for the
	// pre-commit hook, which names every staged .hcl file, Terraform's too).
	SkipNonSpecs bool
	// Syntaxes decide which files hold a pipeline. A file of a syntax they
	// do not read, which the walk would have to judge or keep, ends the walk
	// with an *UnreadSyntaxError.
	Syntaxes Syntaxes
}

// FindSpecFiles expands the arguments: a file is taken as given (it must have
// a spec extension); a folder is searched for the .hcl and .cue files that
// hold a pipeline (Syntaxes.IsPipeline), skipping hidden folders,
// node_modules and ignored paths. The result is sorted and has no duplicates.
// An unreadable file or folder, and a folder with no spec at all (a mistyped
// CI path must not pass), are usage errors (*ExitError, exit code 2) that name
// the path.
func FindSpecFiles(paths []string, opt FindOptions) ([]string, error) {
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
			if opt.Config.Ignored(p) {
				continue
			}
			if !opt.Syntaxes.Reads(syn) {
				return nil, &UnreadSyntaxError{Syntax: syn, Path: p}
			}
			if opt.SkipNonSpecs {
				src, err := os.ReadFile(p)
				if err != nil {
					return nil, usageErr("%v", unwrapPathError(err))
				}
				if !opt.Syntaxes.IsPipeline(syn, src) && !specdetect.IsBinary(src) {
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
				if path != p && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || opt.Config.Ignored(path)) {
					return filepath.SkipDir
				}
				return nil
			}
			syn, ok := spec.SyntaxOf(path)
			if !ok || opt.Config.Ignored(path) {
				return nil
			}
			if !opt.Syntaxes.Reads(syn) {
				return &UnreadSyntaxError{Syntax: syn, Path: path}
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if opt.Syntaxes.IsPipeline(syn, src) {
				files = append(files, path)
				found++
			}
			return nil
		})
		if err != nil {
			var unread *UnreadSyntaxError
			if errors.As(err, &unread) {
				return nil, err
			}
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
