// Package fswalk walks the fixed-depth folder layouts pipec keeps on disk
// (staging/<pipeline>/<interval>/<run>/<task>/<attempt>, an artifact
// store's <pipeline>/<artifact>/<digest>) without descending below them.
package fswalk

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
)

// AtDepth calls visit for every entry depth levels below root (parts is its
// path relative to root, split) and descends no further. Above that depth,
// a folder whose name skip reports is not entered (skip may be nil). A
// missing root is empty.
func AtDepth(root string, depth int, skip func(name string) bool, visit func(p string, parts []string, d fs.DirEntry)) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return filepath.SkipAll
			}
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) < depth {
			if d.IsDir() && skip != nil && skip(parts[len(parts)-1]) {
				return filepath.SkipDir
			}
			return nil
		}
		visit(p, parts, d)
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
}
