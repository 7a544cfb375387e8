package cuespec

import (
	"slices"

	"github.com/pipec/pipec/internal/suggest"
	"github.com/pipec/pipec/spec"
)

// kindAt returns the element kind whose fields the last label of path is one
// of: the path of a field in a CUE spec, from "pipeline" down
// (pipeline.NAME.task.NAME.heartbeat.every is a heartbeat field).
func kindAt(path []string) string {
	if len(path) < 3 || path[0] != spec.KindPipeline {
		return ""
	}
	kind := spec.KindPipeline
	fields := spec.Fields()
	rest := path[2 : len(path)-1]
	for len(rest) > 0 {
		var next *spec.Field
		for i, f := range fields[kind] {
			if f.Name == rest[0] && f.Nested != "" {
				next = &fields[kind][i]
			}
		}
		if next == nil {
			return ""
		}
		kind = next.Nested
		rest = rest[1:]
		if next.Labelled {
			if len(rest) == 0 {
				return ""
			}
			rest = rest[1:]
		}
	}
	return kind
}

// fieldHint suggests the accepted field closest to the unknown last label of
// path ("; did you mean \"command\"?"), or "".
func fieldHint(path []string) string {
	kind := kindAt(path)
	if kind == "" {
		return ""
	}
	var names []string
	for _, f := range spec.Fields()[kind] {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	return suggest.Hint(path[len(path)-1], names)
}
