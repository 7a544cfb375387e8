package cli

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/pipec/pipec/spec"
)

var (
	hclPipelineBlock = regexp.MustCompile(`(?m)^[ \t]*pipeline[ \t]+"`)
	cuePipelineField = regexp.MustCompile(`(?m)^[ \t]*pipeline[ \t]*:`)
)

// findSpecFiles expands the arguments: a file is taken as given (it must have
// a spec extension); a folder is searched for HCL files with a pipeline block
// and CUE files defining pipeline, skipping hidden folders. The result is
// sorted and has no duplicates.
func findSpecFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, usageErr("%v", unwrapPathError(err))
		}
		if !st.IsDir() {
			if _, ok := spec.SyntaxOf(p); !ok {
				return nil, usageErr("%s: not a spec file (want .hcl or .cue)", p)
			}
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != p && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
					return filepath.SkipDir
				}
				return nil
			}
			if isSpecFile(path) {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, usageErr("%v", unwrapPathError(err))
		}
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// isSpecFile reports whether a file found in a folder walk holds a pipeline.
func isSpecFile(path string) bool {
	syn, ok := spec.SyntaxOf(path)
	if !ok {
		return false
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	if syn == spec.SyntaxHCL {
		return hclPipelineBlock.Match(src)
	}
	return cuePipelineField.Match(src)
}
