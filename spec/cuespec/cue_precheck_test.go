package cuespec

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"cuelang.org/go/cue/parser"
)

// precheckTaskForms are task fields as authors might write them: valid ones
// in ordinary and unusual spellings, and mistakes. The generated tasks get
// some of them at random.
var precheckTaskForms = []string{
	// Valid, ordinary.
	`env: {A: "1", B_2: "x"}`, `idempotent: true`, `idempotent: false`, `pool: "p"`, `retry: "default"`,
	`heartbeat: {every: "10s", lease: "1m"}`, `failover: {per_worker: 2, global: 0}`, `failover: {}`,
	`labels: ["gpu", "eu"]`, `secret_env: ["TOKEN"]`, `effects: ["mail"]`, `outputs: []`, `timeout: "1h"`,
	`"env": {"A": "x"}`, `inputs: ["a0@-1"]`, `command: ["sh", "-c", "echo \"hi\" \u00e9"]`,
	`timeout: """
		1m
		"""`,
	`failover: {global: 2147483647}`,
	// Valid in CUE, unusual: left to CUE.
	`failover: {per_worker: 0x10}`, `failover: {global: 1_000}`, `failover: {global: 1Ki}`,
	`timeout: #"1m"#`, `env: {}`, `labels: ["a"] @attr(x)`, `timeout: "1m", timeout: "1m"`,
	`heartbeat: {every: "1s", lease: "2s"}, heartbeat: {every: "1s", lease: "2s"}`,
	// Mistakes.
	`timeout: 5`, `colour: "red"`, `command: "true"`, `command: [1]`, `command: [["x"]]`, `idempotent: "yes"`,
	`idempotent: 1`, `labels: [1]`, `env: {A: 1}`, `env: {A: {B: "x"}}`, `env: ["A"]`, `retry: 3`, `pool: true`,
	`heartbeat: {every: "1s"}`, `heartbeat: {every: "1s", lease: "2s", grace: "1s"}`, `heartbeat: "1m"`,
	`failover: {per_worker: -1}`, `failover: {global: 2147483648}`, `failover: {global: 1.5}`,
	`failover: {local: 1}`, `failover: {global: "2"}`, `timeout: null`, `timeout: 'bytes'`,
	`env: {A: 'x'}`, `depends_on: "t0"`, `inputs: [true]`, `timeout: "1m", timeout: "2m"`,
	`outputs: [null]`, `check: "x"`,
}

// precheckSpec is a generated spec whose tasks carry random forms (one in
// twenty has no command).
func precheckSpec(r *rand.Rand, n int) string {
	var b strings.Builder
	b.WriteString("pipeline: p: {\n\tsink: out: {type: \"directory\", path: \"w\"}\n")
	for i := range n {
		var fs []string
		if r.Intn(20) != 0 {
			fs = append(fs, `command: ["true"]`)
		}
		for range r.Intn(3) {
			fs = append(fs, precheckTaskForms[r.Intn(len(precheckTaskForms))])
		}
		label := fmt.Sprintf("t%d", i)
		if r.Intn(15) == 0 {
			label = fmt.Sprintf("%q", "task "+label)
		}
		fmt.Fprintf(&b, "\ttask: %s: {%s}\n", label, strings.Join(fs, ", "))
	}
	b.WriteString("}\n")
	return b.String()
}

// checkPrecheck splits a plain file into chunks of size and requires, for
// every chunk Go proves valid, that CUE finds it valid. It returns how many
// chunks were proven and how many were not.
func checkPrecheck(t *testing.T, src string, size int) (proven, notProven int) {
	t.Helper()
	f, err := parser.ParseFile("spec.cue", src)
	if err != nil || !isPlainFile(f) {
		return 0, 0
	}
	chunks := splitPlain(mergeFile(f), size)
	for i, c := range chunks {
		if i == 0 {
			continue
		}
		if !provablyValidTasks(c) {
			notProven++
			continue
		}
		proven++
		if err := newCUEEvaluator().evaluate(c); err != nil {
			t.Fatalf("Go proved a chunk valid that CUE finds invalid (%v) in:\n%s", err, src)
		}
	}
	return proven, notProven
}

// TestPrecheckImpliesCUE: over many generated specs whose tasks mix valid,
// unusual and wrong fields, split into small chunks, every chunk Go proves
// valid is valid for CUE; and some chunks are proven (the check does work)
// while some are not.
func TestPrecheckImpliesCUE(t *testing.T) {
	r := rand.New(rand.NewSource(16))
	var proven, notProven int
	for range 60 {
		p, n := checkPrecheck(t, precheckSpec(r, 40), 1+r.Intn(3))
		proven, notProven = proven+p, notProven+n
	}
	p, _ := checkPrecheck(t, string(cueGenSpec(2000)), 250)
	if p != 7 {
		t.Errorf("%d of the 7 task chunks of the generated 2,000-task spec proven valid", p)
	}
	t.Logf("%d chunks proven valid, %d left to CUE", proven, notProven)
	if proven < 100 || notProven < 100 {
		t.Errorf("%d chunks proven valid, %d left to CUE: the test does not exercise both", proven, notProven)
	}
}

// TestPrecheckSameLoad: a load with the Go check gives exactly the model and
// findings of a load where CUE evaluates every chunk, on every test spec and
// generated ones, and evaluates fewer chunks.
func TestPrecheckSameLoad(t *testing.T) {
	proven := 0
	load := func(src string, size int, cueOnly bool) (any, []byte) {
		l := &cueLoader{file: "spec.cue", src: []byte(src), chunkSize: size, procs: 2, cueOnly: cueOnly}
		p := l.load()
		proven += l.proven
		return p, cueDiagLines(l.ds.Sort())
	}
	var srcs []string
	files, _ := filepath.Glob(filepath.Join("testdata", "cue", "*", "*.cue"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, string(b))
	}
	r := rand.New(rand.NewSource(7))
	for range 20 {
		srcs = append(srcs, precheckSpec(r, 30))
	}
	srcs = append(srcs, string(cueGenSpec(1000)))
	for i, src := range srcs {
		want, wantDs := load(src, 2, true)
		got, gotDs := load(src, 2, false)
		if !bytes.Equal(gotDs, wantDs) {
			t.Errorf("spec %d: findings differ\n--- with the Go check\n%s--- CUE only\n%s", i, gotDs, wantDs)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("spec %d: model differs", i)
		}
	}
	if proven == 0 {
		t.Error("no chunk was proven valid")
	}
}

// FuzzPrecheck: for any plain CUE input split into chunks of one task, a
// chunk Go proves valid is valid for CUE.
//
//	go test ./spec/cuespec -run '^$' -fuzz FuzzPrecheck -fuzztime 1m
func FuzzPrecheck(f *testing.F) {
	r := rand.New(rand.NewSource(1))
	for range 20 {
		f.Add(precheckSpec(r, 4))
	}
	for _, form := range precheckTaskForms {
		f.Add("pipeline: p: task: a: {command: [\"x\"]}\npipeline: p: task: b: {command: [\"x\"], " + form + "}\n")
	}
	f.Fuzz(func(t *testing.T, src string) {
		checkPrecheck(t, src, 1)
	})
}
