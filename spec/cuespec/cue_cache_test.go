package cuespec

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/pipec/pipec/spec"
)

// TestLoadCUEChunkCache checks that with the chunk cache on, a file loaded
// again is evaluated only in the chunks whose content changed, and that the
// model and findings are exactly those of a load without the cache: after
// an edit inside one chunk, after lines inserted above every chunk (the
// positions of all findings move), and with a chunk in error (never cached).
func TestLoadCUEChunkCache(t *testing.T) {
	cache := NewChunkCache()
	base := string(cueGenSpec(3000))
	load := func(src string, noCache bool) (*spec.Pipeline, []byte, int64) {
		t.Helper()
		l := &cueLoader{file: "big.cue", src: []byte(src), chunkSize: 700, procs: 2, cueOnly: true}
		if !noCache {
			l.cache = cache
		}
		p := l.load()
		return p, cueDiagLines(l.ds.Sort()), l.evaluations.Load()
	}
	check := func(name, src string, wantEvaluated int64) {
		t.Helper()
		want, wantDs, _ := load(src, true)
		got, gotDs, evaluated := load(src, false)
		if !bytes.Equal(gotDs, wantDs) {
			t.Errorf("%s: findings with the cache differ\n--- cached\n%s--- uncached\n%s", name, gotDs, wantDs)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: model with the cache differs", name)
		}
		if evaluated != wantEvaluated {
			t.Errorf("%s: %d chunks evaluated, want %d", name, evaluated, wantEvaluated)
		}
	}
	// 3000 tasks in chunks of 700: 5 chunks. The first load evaluates all.
	check("first load", base, 5)
	check("same text", base, 0)
	check("comment added at the end", base+"// edited\n", 0)
	// A task of the third chunk (tasks 1400-2099) changed: that chunk only.
	edited := strings.Replace(base, "task: t1500: {command: [\"true\"]", "task: t1500: {command: [\"false\"]", 1)
	check("one task changed", edited, 1)
	// Lines inserted at the top move every position; content is the same.
	check("lines inserted above", "// a\n// b\n"+edited, 0)
	// A chunk in error is evaluated on every load, and its findings sit at
	// the positions of this text.
	bad := strings.Replace(edited, "task: t2500: {command: [\"true\"], timeout: \"1m\"", "task: t2500: {command: [\"true\"], timeout: 5", 1)
	check("a task in error", bad, 1)
	check("a task in error, moved", "// c\n"+bad, 1)
	if _, ds, _ := load("// c\n"+bad, false); !bytes.Contains(ds, []byte("timeout")) {
		t.Errorf("the broken timeout is not reported:\n%s", ds)
	}
}
