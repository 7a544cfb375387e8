package compiler

import (
	"fmt"
	"path/filepath"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

// RuleSinkConflict is reported when two publishes would write one place.
const RuleSinkConflict = "sink-conflict"

// SinkTypeDirectory is the sink type pipec owns: a folder of versions and one
// link per interval.
const SinkTypeDirectory = "directory"

// SinkTypeS3 is pipec's object store sink: versions under immutable keys and
// one pointer object per interval, swapped with conditional writes.
const SinkTypeS3 = "s3"

// SinkPath is the folder a directory sink publishes into: path, when relative,
// is taken from base (the folder of the spec or plan file, where the runtime
// resolves it too), and the result is cleaned, so "a/b", "./a/b/" and "a//b"
// are one folder. Symbolic links are not followed: that would make the
// answer depend on the machine the spec is checked on.
func SinkPath(base, path string) string {
	if !filepath.IsAbs(path) {
		path = filepath.Join(base, path)
	}
	return filepath.Clean(path)
}

// specBase is the folder relative sink paths are resolved from: the spec's
// folder, made absolute so that an absolute and a relative path to one folder
// compare equal. When the working directory cannot be found the folder is
// kept relative; relative paths still compare among themselves.
func specBase(file string) string {
	dir := filepath.Dir(file)
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// checkSinks reports publication places written by more than one publish:
// two directory sinks in one folder (or one inside the other's folder), and
// two publishes into one directory sink. A directory sink's visible data is
// one link per interval in its folder; two writers of that link each "win"
// in turn and readers see whichever swapped last, which no token can fence
// since each publish is fenced only against itself.
//
// Sinks of other types are not judged: what their path means (a bucket, a
// table) is up to the sink.
func (c *compilation) checkSinks() {
	base := specBase(c.p.File)
	type owner struct {
		s      *spec.Sink
		folder string
	}
	byFolder := map[string]owner{}
	var dirs []owner
	for i := range c.p.Sinks {
		s := &c.p.Sinks[i]
		if c.sinks[s.Name] != s || s.Type != SinkTypeDirectory || s.Path == "" || s.Refused("path") {
			continue
		}
		o := owner{s, SinkPath(base, s.Path)}
		if first, dup := byFolder[o.folder]; dup {
			c.ds = append(c.ds, diag.Errorf(RuleSinkConflict, s.At("path", s.NameRange),
				"sink %q publishes into the folder of sink %q (path %q%s): two sinks in one folder swap the same interval links, so readers see whichever published last; give each sink its own path",
				s.Name, first.s.Name, first.s.Path, onLine(first.s.NameRange)))
			continue
		}
		byFolder[o.folder] = o
		dirs = append(dirs, o)
	}
	for _, o := range dirs {
		for dir := filepath.Dir(o.folder); ; dir = filepath.Dir(dir) {
			if outer, ok := byFolder[dir]; ok {
				c.ds = append(c.ds, diag.Errorf(RuleSinkConflict, o.s.At("path", o.s.NameRange),
					"sink %q publishes inside the folder of sink %q (path %q%s), which holds that sink's interval links and versions: a folder of one can be taken for an interval or a leftover of the other; put the sinks side by side",
					o.s.Name, outer.s.Name, outer.s.Path, onLine(outer.s.NameRange)))
				break
			}
			if parent := filepath.Dir(dir); parent == dir {
				break
			}
		}
	}
	first := map[string]*spec.Publish{}
	seen := map[string]bool{}
	for i := range c.p.Publishes {
		pub := &c.p.Publishes[i]
		if seen[pub.Name] {
			continue
		}
		seen[pub.Name] = true
		s := c.sinks[pub.Sink.Name]
		if s == nil || s.Type != SinkTypeDirectory {
			continue
		}
		if prev, dup := first[s.Name]; dup {
			c.ds = append(c.ds, diag.Errorf(RuleSinkConflict, pub.Sink.Range,
				"publish %q writes to sink %q, as publish %q%s does: both swap one link per interval in %s, so readers see whichever published last; give each publish its own sink",
				pub.Name, s.Name, prev.Name, inParens(onLine(prev.NameRange)), quotePath(s.Path)))
			continue
		}
		first[s.Name] = pub
	}
}

// onLine is ", line N" for an element declared on line N of a spec, and
// nothing for one with no line (rebuilt from a plan).
func onLine(r diag.Range) string {
	if r.Start.Line < 1 {
		return ""
	}
	return fmt.Sprintf(", line %d", r.Start.Line)
}

// inParens turns ", line N" into " (line N)".
func inParens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s[2:] + ")"
}

// quotePath shows a path as written, quoted.
func quotePath(p string) string { return fmt.Sprintf("%q", p) }
