package compiler

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipec/pipec/spec"
)

func TestSinkPathNormalises(t *testing.T) {
	base := filepath.FromSlash("/specs/orders")
	for _, p := range []string{"a/b", "./a/b/", "a//b", "a/./c/../b", "/specs/orders/a/b"} {
		if got := SinkPath(base, p); got != filepath.FromSlash("/specs/orders/a/b") {
			t.Errorf("SinkPath(%q) = %q", p, got)
		}
	}
	if got := SinkPath(base, "../orders2/a"); got != filepath.FromSlash("/specs/orders2/a") {
		t.Errorf("SinkPath(../orders2/a) = %q", got)
	}
}

func sinkSpec(file string, paths ...string) *spec.Pipeline {
	p := &spec.Pipeline{Name: "p", File: file, NameRange: at(1)}
	p.Tasks = []spec.Task{task("t", 2)}
	for i, path := range paths {
		name := string(rune('a' + i))
		p.Tasks[0].Outputs = append(p.Tasks[0].Outputs, ref(name, 3))
		s := spec.Sink{Named: spec.Named{Name: name, NameRange: at(10 + i)}, Type: SinkTypeDirectory, Path: path}
		s.Set("path", at(20+i))
		p.Sinks = append(p.Sinks, s)
		p.Publishes = append(p.Publishes, spec.Publish{Named: spec.Named{Name: name + "_pub", NameRange: at(30 + i)},
			Artifact: ref(name, 40+i), Sink: ref(name, 50+i)})
	}
	return p
}

// An absolute path names the same folder as the relative one, taken from the
// spec's folder (not the working directory).
func TestSinkConflictAbsoluteAndRelative(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "specs", "p.hcl")
	_, ds := Compile(sinkSpec(file, "out/x", filepath.Join(dir, "specs", "out", "x")))
	got := strings.Join(messages(ds), "\n")
	if !strings.Contains(got, `21 sink-conflict sink "b" publishes into the folder of sink "a"`) || len(ds) != 1 {
		t.Fatalf("got %s", got)
	}
	// The same absolute path seen from another folder is another place.
	if _, ds := Compile(sinkSpec(filepath.Join(dir, "other", "p.hcl"), "out/x", filepath.Join(dir, "specs", "out", "x"))); len(ds) != 0 {
		t.Fatalf("distinct folders reported: %v", messages(ds))
	}
}

func TestSinkConflictNestedAndShared(t *testing.T) {
	p := sinkSpec("p.hcl", "w/orders", "w/orders/2024/x", "w/orders-2024")
	p.Publishes[2].Sink = ref("a", 52) // c_pub into a's sink
	_, ds := Compile(p)
	want := []string{
		`21 sink-conflict sink "b" publishes inside the folder of sink "a" (path "w/orders", line 10)`,
		`52 sink-conflict publish "c_pub" writes to sink "a", as publish "a_pub" (line 30) does`,
	}
	got := messages(ds)
	if len(got) != len(want) {
		t.Fatalf("got %q", got)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("finding %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
}

// A path the loader refused is not judged again.
func TestSinkConflictSkipsRefusedPath(t *testing.T) {
	p := sinkSpec("p.hcl", "w/x", "w/x")
	p.Sinks[1].Refuse("path")
	if _, ds := Compile(p); len(ds) != 0 {
		t.Fatalf("got %q", messages(ds))
	}
}
