package cuespec

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
	"github.com/google/go-cmp/cmp"

	"github.com/pipec/pipec/internal/gendag"
)

// treeDump lists every node of f with its kind, where it starts and ends
// (file, line, column, offset), the spacing before it, its flags, and its
// name or value: two trees with the same dump read the same everywhere the
// loader (and CUE) looks.
func treeDump(f *ast.File) []string {
	var out []string
	ast.Walk(f, func(n ast.Node) bool {
		p := n.Pos()
		line := fmt.Sprintf("%T %v-%v rel=%v comma=%v scanned=%v", n, p.Position(), n.End().Position(), p.RelPos(), p.HasComma(), p.Scanned())
		switch x := n.(type) {
		case *ast.BasicLit:
			line += " " + x.Value
		case *ast.Ident:
			line += " " + x.Name
		case *ast.Field:
			line += fmt.Sprintf(" :%v %v", x.TokenPos.Position(), x.TokenPos.RelPos())
		case *ast.StructLit:
			line += fmt.Sprintf(" {%v %v %v %v}", x.Lbrace.Position(), x.Lbrace.RelPos(), x.Rbrace.Position(), x.Rbrace.RelPos())
		case *ast.ListLit:
			line += fmt.Sprintf(" [%v %v %v %v]", x.Lbrack.Position(), x.Lbrack.RelPos(), x.Rbrack.Position(), x.Rbrack.RelPos())
		}
		out = append(out, line)
		return true
	}, nil)
	return out
}

// splitInputs are plain specs the layout must cut: the benchmark DAG, and
// variations in spacing, comments and line ends.
func splitInputs(t testing.TB) map[string][]byte {
	d, err := gendag.Generate(1000, 42)
	if err != nil {
		t.Fatal(err)
	}
	gen := d.CUE()
	lines := strings.Split(string(gen), "\n")
	var spaced, commented strings.Builder
	for i, l := range lines {
		spaced.WriteString(l + "\n")
		commented.WriteString(l)
		if i%3 == 0 && strings.HasPrefix(l, "\ttask:") {
			spaced.WriteString("\n\n  \t\n") // blank lines, some with spaces
			commented.WriteString(" // a line comment")
		}
		commented.WriteString("\n")
		if i%5 == 0 && strings.HasPrefix(l, "\ttask:") {
			commented.WriteString("\t// a comment line\n")
		}
	}
	return map[string][]byte{
		"gendag":             gen,
		"generated":          cueGenSpec(700),
		"spaced":             []byte(strings.TrimSuffix(spaced.String(), "\n")),
		"commented":          []byte("// a spec\n" + commented.String() + "// after\n"),
		"crlf":               bytes.ReplaceAll(gen, []byte("\n"), []byte("\r\n")),
		"signs":              bytes.ReplaceAll(gen, []byte(`timeout: "1m"`), []byte(`x: -1, y: +2.5e3, z: 0x1F, w: 1_000, v: null, u: [true, false], "q-r": {}`)),
		"blank before close": concatBytes(bytes.TrimSuffix(gen, []byte("}\n")), []byte("\n\n  }")),
		"multi-line": bytes.ReplaceAll(gen, []byte(`{command: ["true"], `),
			[]byte("{\n\t\tcommand: [\n\t\t\t\"true\",\n\t\t]\n\n\t\t")),
	}
}

// TestParsePiecesSameTree: a spec parsed in pieces gives the tree of the
// whole parse, node for node, with the same positions, spacing and flags;
// so does one parsed again after an edit, with most pieces taken from the
// cache and moved.
func TestParsePiecesSameTree(t *testing.T) {
	for name, src := range splitInputs(t) {
		for _, size := range []int{1 << 10, 4 << 10, 16 << 10} {
			cache := NewChunkCache()
			for round, src := range editsOf(src) {
				whole, err := parser.ParseFile("p.cue", src)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				lay, ok := layoutCUE(src, size)
				if !ok {
					if len(src) >= 2*size {
						t.Errorf("%s: not cut in pieces of %d", name, size)
					}
					continue
				}
				f, pieces := parsePieces("p.cue", src, lay, 2, cache)
				if f == nil {
					t.Fatalf("%s, pieces of %d, round %d: did not parse", name, size, round)
				}
				if d := cmp.Diff(treeDump(whole), treeDump(f)); d != "" {
					t.Fatalf("%s, pieces of %d, round %d: tree differs from the whole parse (-whole +pieces):\n%s", name, size, round, d)
				}
				reused := 0
				for _, p := range pieces {
					if p.kept != 0 {
						reused++
					}
				}
				if round > 0 && reused < len(pieces)/2 {
					t.Errorf("%s, pieces of %d, round %d: %d of %d pieces from cache", name, size, round, reused, len(pieces))
				}
				cache.keepPieces(pieces)
			}
		}
	}
}

// editsOf is src, then src after edits an author makes: a value changed
// (longer) in the middle, a line inserted near the start, the first edit
// undone, a comment typed at the end.
func editsOf(src []byte) [][]byte {
	mid := bytes.Index(src[len(src)/2:], []byte(`"1m"`))
	if mid < 0 {
		return [][]byte{src}
	}
	mid += len(src) / 2
	a := concatBytes(src[:mid], []byte(`"1001m"`), src[mid+len(`"1m"`):])
	nl := bytes.IndexByte(a, '\n') + 1
	b := concatBytes(a[:nl], []byte("\tcode_version: \"2\"\n"), a[nl:])
	b = bytes.Replace(b, []byte(`"1001m"`), []byte(`"1m"`), 1)
	c := append(bytes.Clone(b), "// typed\n"...)
	return [][]byte{src, a, b, c, c}
}

func concatBytes(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestLoadCUEPiecesSameResult: whatever a spec holds, loading it parsed in
// pieces (from cache or not) gives the pipeline and the findings of loading
// it parsed whole.
func TestLoadCUEPiecesSameResult(t *testing.T) {
	srcs := map[string][]byte{}
	for name, src := range splitInputs(t) {
		srcs[name] = src
	}
	d, err := gendag.Generate(600, 42)
	if err != nil {
		t.Fatal(err)
	}
	gen := string(d.CUE())
	mid := strings.Index(gen, "\ttask: t300:")
	at := func(s string) []byte { return []byte(gen[:mid] + s + gen[mid:]) }
	srcs["bad value"] = at("\ttask: bad: {command: [\"x\"], timeout: \"1x\", retries: 3}\n")
	srcs["bad type"] = at("\ttask: bad2: {command: \"x\"}\n")
	srcs["unknown field"] = at("\tnonsense: {a: 1}\n")
	srcs["bad dependency"] = []byte(strings.Replace(gen, `depends_on: ["t0"]`, `depends_on: ["t0", "nope"]`, 1))
	srcs["syntax"] = at("\ttask: x: {command: [\"x\"}\n")
	srcs["duplicate"] = at("\ttask: t1: {command: [\"other\"]}\n")
	addTestdataSpecs(t, srcs)
	for name, src := range srcs {
		whole := &cueLoader{file: "p.cue", src: src, pieceSize: -1}
		wp := whole.load()
		wds := whole.ds.Sort()
		cache := NewChunkCache()
		for round := range 2 {
			l := &cueLoader{file: "p.cue", src: src, pieceSize: 1 << 10, cache: cache}
			p := l.load()
			cache.keepPieces(l.pieces)
			if d := cmp.Diff(wp, p); d != "" {
				t.Errorf("%s, round %d: pipeline differs (-whole +pieces):\n%s", name, round, d)
			}
			if d := cmp.Diff(wds, l.ds.Sort()); d != "" {
				t.Errorf("%s, round %d: findings differ (-whole +pieces):\n%s", name, round, d)
			}
		}
	}
}

// TestLayoutCUEDeclines: what is not plain data, or not understood, is not
// cut (it is parsed whole).
func TestLayoutCUEDeclines(t *testing.T) {
	d, err := gendag.Generate(300, 42)
	if err != nil {
		t.Fatal(err)
	}
	gen := string(d.CUE())
	mid := strings.Index(gen, "\ttask: t150:")
	at := func(s string) string { return gen[:mid] + s + gen[mid:] }
	if _, ok := layoutCUE([]byte(gen), 1<<10); !ok {
		t.Fatal("the plain spec is not cut")
	}
	for name, src := range map[string]string{
		"reference":        at("\tx: y\n"),
		"selector":         at("\tx: task.t1.command\n"),
		"comprehension":    at("\tfor k, v in task {}\n"),
		"definition":       at("\t#D: 1\n"),
		"hidden":           at("\t_h: 1\n"),
		"optional":         at("\tx?: 1\n"),
		"disjunction":      at("\tx: 1 | 2\n"),
		"attribute":        at("\tx: 1 @tag(a)\n"),
		"multi-line":       at("\tx: \"\"\"\n\t\ttask: t9999: {}\n\t\t\"\"\"\n"),
		"raw string":       at("\tx: #\"a\"#\n"),
		"interpolation":    at("\tx: \"\\(task)\"\n"),
		"newline string":   at("\tx: \"a\n\"\n"),
		"type":             at("\tx: string\n"),
		"package":          "package p\n" + gen,
		"import":           "import \"strings\"\n" + gen,
		"after":            gen + "x: 1\n",
		"two structs":      gen + "other: {}\n",
		"unclosed":         strings.TrimSuffix(gen, "}\n"),
		"unopened":         strings.Replace(gen, "{", "", 1),
		"unicode":          at("\tdéjà: 1\n"),
		"comment at end":   strings.TrimSuffix(gen, "}\n") + "\t// last\n}\n",
		"division":         at("\tx: 4 / 2\n"),
		"top-level list":   "pipeline: [" + gen + "]",
		"bracket at top":   strings.Replace(gen, "pipeline: bench: {", "pipeline: bench: [", 1),
		"single quotes":    at("\tx: '''\n\t\tb\n\t\t'''\n"),
		"unclosed string":  at("\tx: \"a"),
		"one line":         strings.ReplaceAll(gen, "\n\t", " "),
		"close after code": strings.TrimSuffix(gen, "\n}\n") + "}\n",
	} {
		if _, ok := layoutCUE([]byte(src), 1<<10); ok {
			t.Errorf("%s: cut", name)
		}
	}
}

// TestParseCUEPieceErrors: a cut whose piece does not parse alone, or not
// into plain fields, is parsed whole, with the whole parse's errors.
func TestParseCUEPieceErrors(t *testing.T) {
	d, err := gendag.Generate(1000, 42)
	if err != nil {
		t.Fatal(err)
	}
	gen := string(d.CUE())
	mid := strings.Index(gen, "\ttask: t500:")
	for name, src := range map[string]string{
		"missing comma":  gen[:mid] + "\tx: 1 y: 2\n" + gen[mid:],
		"value on next":  gen[:mid] + "\tx:\n" + gen[mid:],
		"unbalanced":     gen[:mid] + "\tx: {a: 1}}\n" + gen[mid:],
		"binary minus":   gen[:mid] + "\tx: 1 - 2\n" + gen[mid:],
		"ellipsis":       gen[:mid] + "\tx: [1, ...]\n" + gen[mid:],
		"selector label": gen[:mid] + "\ta.b: 1\n" + gen[mid:],
		"embedding":      gen[:mid] + "\t{a: 1}\n" + gen[mid:],
	} {
		whole, wantErr := parser.ParseFile("p.cue", src)
		f, _, err := parseCUE("p.cue", []byte(src), 4, 1<<10, nil)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Errorf("%s: error %v, want %v", name, err, wantErr)
		}
		if d := cmp.Diff(treeDump(whole), treeDump(f)); d != "" {
			t.Errorf("%s: tree differs from the whole parse:\n%s", name, d)
		}
	}
}

// FuzzParsePieces: whatever the input, parsing it in pieces gives exactly
// the whole parse's tree and error; so does parsing it again with the
// pieces of the first parse in cache.
//
//	go test ./spec/cuespec -run '^$' -fuzz FuzzParsePieces -fuzztime 2m
func FuzzParsePieces(f *testing.F) {
	d, err := gendag.Generate(40, 42)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(d.CUE(), uint8(2))
	f.Add([]byte("pipeline: p: {\n\ta: 1\n\tb: 2\n\tc: {d: [1, 2]}\n}\n"), uint8(3))
	f.Add([]byte("pipeline: p: {\n\ta: 1\n\tb: \"x\" // c\n\tc: -1\n}\n"), uint8(2))
	f.Fuzz(func(t *testing.T, src []byte, n uint8) {
		size := 8 + int(n)%64
		whole, wantErr := parser.ParseFile("p.cue", src)
		cache := NewChunkCache()
		for range 2 {
			got, pieces, err := parseCUE("p.cue", src, 2, size, cache)
			cache.keepPieces(pieces)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Fatalf("error %v, the whole parse's %v", err, wantErr)
			}
			if d := cmp.Diff(treeDump(whole), treeDump(got)); d != "" {
				t.Fatalf("tree differs from the whole parse (-whole +pieces):\n%s", d)
			}
		}
	})
}

// TestChunkCachePieces: a piece taken from the cache is out of it until
// given back; the pieces of a file bigger than the bound are not kept, and
// past the bound those kept longest ago go first.
func TestChunkCachePieces(t *testing.T) {
	c := NewChunkCache()
	piece := func(text string) *cuePiece { return &cuePiece{text: text} }
	a, b := piece("a: 1\n"), piece("b: 2\n")
	c.keepPieces([]*cuePiece{a, b})
	if got := c.takePiece([]byte("a: 1\n")); got != a {
		t.Fatalf("takePiece = %v, want the piece kept", got)
	}
	if got := c.takePiece([]byte("a: 1\n")); got != nil {
		t.Fatalf("taken twice: %v", got)
	}
	c.keepPieces([]*cuePiece{a})
	big := piece(strings.Repeat("x", maxPieceBytes/2))
	bigger := piece(strings.Repeat("y", maxPieceBytes/2+1))
	c.keepPieces([]*cuePiece{big, bigger})
	if c.takePiece([]byte(big.text)) != nil || c.takePiece([]byte(bigger.text)) != nil {
		t.Fatal("kept the pieces of a file over the bound")
	}
	c.keepPieces([]*cuePiece{big})
	c.keepPieces([]*cuePiece{bigger}) // over the bound: b, a, then big go, oldest first
	if c.pieceBytes > maxPieceBytes {
		t.Fatalf("holds %d bytes, bound %d", c.pieceBytes, maxPieceBytes)
	}
	if c.takePiece([]byte(big.text)) != nil || c.takePiece([]byte(bigger.text)) != bigger {
		t.Fatal("did not drop the piece kept longest ago")
	}
	var none *ChunkCache
	none.keepPieces([]*cuePiece{a})
	if none.takePiece([]byte(a.text)) != nil {
		t.Fatal("no cache holds a piece")
	}
}

// TestRunAllPanics: a job's panic comes back to the caller, and the other
// jobs run.
func TestRunAllPanics(t *testing.T) {
	ran := make([]bool, 6)
	jobs := make([]func(), len(ran))
	for i := range jobs {
		jobs[i] = func() {
			ran[i] = true
			if i == 2 {
				panic("job 2")
			}
		}
	}
	if r := runAll(2, jobs); r != "job 2" {
		t.Fatalf("runAll = %v, want the job's panic", r)
	}
	for i, r := range ran {
		if !r {
			t.Errorf("job %d did not run", i)
		}
	}
	if r := runAll(2, jobs[:2]); r != nil {
		t.Fatalf("runAll = %v without a panic", r)
	}
}

// TestLoadCUECachedConcurrently: loads of one text that share a cache at
// the same moment (two editors' documents alike) each hold pieces of their
// own (a piece is taken out of the cache while a load moves it), and all
// give the whole parse's result. Run with -race.
func TestLoadCUECachedConcurrently(t *testing.T) {
	d, err := gendag.Generate(800, 42)
	if err != nil {
		t.Fatal(err)
	}
	src := d.CUE()
	want, wantDs := LoadCUE("p.cue", src)
	cache := NewChunkCache()
	const loads = 4
	errs := make(chan string, loads*3)
	var wg sync.WaitGroup
	for range loads {
		wg.Go(func() {
			for range 3 {
				p, ds := LoadCUECached("p.cue", src, cache)
				if d := cmp.Diff(want, p); d != "" {
					errs <- "pipeline differs:\n" + d
				}
				if d := cmp.Diff(wantDs, ds); d != "" {
					errs <- "findings differ:\n" + d
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if len(cache.pieces) == 0 {
		t.Error("no piece was kept")
	}
}
