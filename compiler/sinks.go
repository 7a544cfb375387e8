package compiler

import (
	"fmt"
	"path/filepath"
	"strings"

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
// two sinks at one place (or one inside the other's), and two publishes into
// one sink. A directory sink's visible data is one link per interval in its
// folder, an s3 sink's one pointer object per interval under its prefix; two
// writers of that link each "win" in turn and readers see whichever swapped
// last, which no token can fence since each publish is fenced only against
// itself.
//
// Sinks of other types are not judged: what their path means (a table, a
// topic) is up to the sink.
func (c *compilation) checkSinks() {
	base := specBase(c.p.File)
	type owner struct {
		s     *spec.Sink
		place sinkPlace
	}
	byPlace := map[sinkPlace]owner{}
	var placed []owner
	for i := range c.p.Sinks {
		s := &c.p.Sinks[i]
		if c.sinks[s.Name] != s || s.Path == "" || s.Refused("path") {
			continue
		}
		pl, ok := placeOf(base, s)
		if !ok {
			continue
		}
		o := owner{s, pl}
		if first, dup := byPlace[pl]; dup {
			c.ds = append(c.ds, diag.Errorf(RuleSinkConflict, s.At("path", s.NameRange),
				"sink %q publishes into the %s of sink %q (path %q%s): two sinks in one %s swap the same interval %s, so readers see whichever published last; give each sink its own path",
				s.Name, pl.noun(), first.s.Name, first.s.Path, onLine(first.s.NameRange), pl.noun(), pl.links()))
			continue
		}
		byPlace[pl] = o
		placed = append(placed, o)
	}
	for _, o := range placed {
		for pl, ok := o.place.parent(); ok; pl, ok = pl.parent() {
			if outer, found := byPlace[pl]; found {
				c.ds = append(c.ds, diag.Errorf(RuleSinkConflict, o.s.At("path", o.s.NameRange),
					"sink %q publishes inside the %s of sink %q (path %q%s), which holds that sink's interval %s and versions: a %s of one can be taken for an interval or a leftover of the other; put the sinks side by side",
					o.s.Name, pl.noun(), outer.s.Name, outer.s.Path, onLine(outer.s.NameRange), pl.links(), pl.noun()))
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
		if s == nil {
			continue
		}
		if _, judged := placeOf(base, s); !judged {
			continue
		}
		if prev, dup := first[s.Name]; dup {
			links := "one link per interval"
			if s.Type == SinkTypeS3 {
				links = "one pointer object per interval"
			}
			c.ds = append(c.ds, diag.Errorf(RuleSinkConflict, pub.Sink.Range,
				"publish %q writes to sink %q, as publish %q%s does: both swap %s in %s, so readers see whichever published last; give each publish its own sink",
				pub.Name, s.Name, prev.Name, inParens(onLine(prev.NameRange)), links, quotePath(s.Path)))
			continue
		}
		first[s.Name] = pub
	}
}

// sinkPlace is where a sink's interval links live: a directory sink's
// folder (cleaned, absolute when it can be) or an s3 sink's bucket and
// prefix ("bucket/a/b", no empty elements).
type sinkPlace struct {
	s3   bool
	path string
}

// placeOf is s's place; false for a type not judged or an s3 path that is
// no s3:// URL (local-artifact reports that).
func placeOf(base string, s *spec.Sink) (sinkPlace, bool) {
	switch s.Type {
	case SinkTypeDirectory:
		return sinkPlace{path: SinkPath(base, s.Path)}, true
	case SinkTypeS3:
		rest, ok := strings.CutPrefix(s.Path, "s3://")
		if !ok {
			return sinkPlace{}, false
		}
		var els []string
		for _, el := range strings.Split(rest, "/") {
			if el == "." || el == ".." {
				return sinkPlace{}, false // refused by the sink itself
			}
			if el != "" {
				els = append(els, el)
			}
		}
		if len(els) == 0 || strings.HasPrefix(rest, "/") {
			return sinkPlace{}, false // no bucket
		}
		return sinkPlace{s3: true, path: strings.Join(els, "/")}, true
	}
	return sinkPlace{}, false
}

// parent is the place that holds p; false at the top (a root folder, or
// a bucket, which is not itself inside anything).
func (p sinkPlace) parent() (sinkPlace, bool) {
	if p.s3 {
		i := strings.LastIndexByte(p.path, '/')
		if i < 0 {
			return sinkPlace{}, false
		}
		return sinkPlace{s3: true, path: p.path[:i]}, true
	}
	dir := filepath.Dir(p.path)
	if dir == p.path {
		return sinkPlace{}, false
	}
	return sinkPlace{path: dir}, true
}

func (p sinkPlace) noun() string {
	if p.s3 {
		return "prefix"
	}
	return "folder"
}

func (p sinkPlace) links() string {
	if p.s3 {
		return "pointers"
	}
	return "links"
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
