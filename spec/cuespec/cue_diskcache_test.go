package cuespec

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// useDiskCache points the cache folder at a fresh temporary folder for one
// test.
func useDiskCache(t testing.TB) string {
	dir := t.TempDir()
	CacheCUEChunksIn(dir)
	t.Cleanup(func() { CacheCUEChunksIn("") })
	return dir
}

// diskLoad loads src as one process of `pipec lint` would (no memory cache),
// returning the model, the findings and how many chunks CUE evaluated.
func diskLoad(src string, chunkSize int, noCache bool) (any, []byte, int64) {
	n := chunkEvaluations.Load()
	l := &cueLoader{file: "spec.cue", src: []byte(src), chunkSize: chunkSize, procs: 2, noCache: noCache}
	p := l.load()
	return p, cueDiagLines(l.ds.Sort()), chunkEvaluations.Load() - n
}

// TestDiskCacheSameAnswers: with the cache folder, a cold and a warm load give
// exactly the model and findings of a load without it, on every test spec
// and on a big generated one, edited, broken and moved; a warm load evaluates
// only the chunks in error.
func TestDiskCacheSameAnswers(t *testing.T) {
	useDiskCache(t)
	check := func(name, src string, chunkSize int, wantWarm int64) {
		t.Helper()
		want, wantDs, _ := diskLoad(src, chunkSize, true)
		for _, round := range []string{"cold", "warm"} {
			got, gotDs, evaluated := diskLoad(src, chunkSize, false)
			if !bytes.Equal(gotDs, wantDs) {
				t.Errorf("%s (%s): findings differ\n--- cached\n%s--- uncached\n%s", name, round, gotDs, wantDs)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s (%s): model differs", name, round)
			}
			if round == "warm" && wantWarm >= 0 && evaluated != wantWarm {
				t.Errorf("%s: a warm load evaluated %d chunks, want %d", name, evaluated, wantWarm)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "cue", "*", "*.cue"))
	if len(files) < 10 {
		t.Fatalf("only %d test specs", len(files))
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		check(f, string(src), 1, -1)
	}
	base := string(cueGenSpec(3000))
	check("generated", base, 700, 0)
	check("generated, lines above", "// a\n// b\n"+base, 700, 0)
	bad := strings.Replace(base, "task: t2500: {command: [\"true\"], timeout: \"1m\"", "task: t2500: {command: [\"true\"], timeout: 5", 1)
	check("a task in error", bad, 700, 1)
	if _, ds, _ := diskLoad("// c\n"+bad, 700, false); !bytes.Contains(ds, []byte("timeout")) {
		t.Errorf("the broken timeout is not reported from a warm cache:\n%s", ds)
	}
}

// TestDiskCacheNeverHidesAnError mutates a generated spec at random (values
// of the wrong type, unknown fields, bad enumerations, out-of-range numbers),
// each mutant loaded after the folder learnt the valid original and earlier
// mutants: the findings are always those of a load without the cache.
func TestDiskCacheNeverHidesAnError(t *testing.T) {
	useDiskCache(t)
	base := string(cueGenSpec(400))
	if _, _, n := diskLoad(base, 50, false); n == 0 {
		t.Fatal("nothing evaluated")
	}
	mutations := []struct{ from, to string }{
		{`timeout: "1m"`, `timeout: 5`},
		{`timeout: "1m"`, `timeout: "1m", colour: "red"`},
		{`command: ["true"]`, `command: "true"`},
		{`command: ["true"]`, `command: [1]`},
		{`timeout: "1m"`, `timeout: "1m", retry: 3`},
		{`timeout: "1m"`, `timeout: "1m", idempotent: "yes"`},
		{`timeout: "1m"`, `timeout: "1m", labels: [1]`},
		{`jitter: "full"`, `jitter: "some"`},
		{`max_attempts: 3`, `max_attempts: -1`},
	}
	r := rand.New(rand.NewSource(16))
	for i := range 40 {
		m := mutations[r.Intn(len(mutations))]
		n := strings.Count(base, m.from)
		if n == 0 {
			continue
		}
		k := r.Intn(n)
		idx := 0
		for range k + 1 {
			j := strings.Index(base[idx:], m.from)
			idx += j + 1
		}
		mutant := base[:idx-1] + m.to + base[idx-1+len(m.from):]
		_, want, _ := diskLoad(mutant, 50, true)
		_, got, _ := diskLoad(mutant, 50, false)
		if !bytes.Equal(got, want) {
			t.Fatalf("mutant %d (%s -> %s, occurrence %d): findings differ\n--- cached\n%s--- uncached\n%s", i, m.from, m.to, k, got, want)
		}
		if len(want) == 0 {
			t.Errorf("mutant %d (%s -> %s) has no finding: the mutation is not an error", i, m.from, m.to)
		}
	}
}

// TestDiskCacheEntries: an entry is a miss unless its content is the full
// hash (a truncated or foreign file), and concurrent loads into one cold
// folder all get the right answer and leave whole entries.
func TestDiskCacheEntries(t *testing.T) {
	dir := useDiskCache(t)
	src := string(cueGenSpec(1000))
	_, want, _ := diskLoad(src, 100, true)
	var wg sync.WaitGroup
	results := make([][]byte, 6)
	for i := range results {
		wg.Go(func() { _, results[i], _ = diskLoad(src, 100, false) })
	}
	wg.Wait()
	for i, got := range results {
		if !bytes.Equal(got, want) {
			t.Errorf("concurrent load %d: findings differ", i)
		}
	}
	var entries []string
	_ = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			entries = append(entries, path)
		}
		return nil
	})
	if len(entries) != 10 {
		t.Fatalf("%d entries for 10 chunks: %v", len(entries), entries)
	}
	for _, e := range entries {
		b, _ := os.ReadFile(e)
		if string(b) != filepath.Base(e)+"\n" {
			t.Errorf("%s holds %q", e, b)
		}
	}
	if _, _, n := diskLoad(src, 100, false); n != 0 {
		t.Errorf("warm: %d chunks evaluated", n)
	}
	// Damage every entry: each is a miss, evaluated and written again.
	for _, e := range entries {
		if err := os.WriteFile(e, []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, got, n := diskLoad(src, 100, false); n != 10 || !bytes.Equal(got, want) {
		t.Errorf("damaged entries: %d chunks evaluated (want 10), findings equal: %v", n, bytes.Equal(got, want))
	}
	if _, _, n := diskLoad(src, 100, false); n != 0 {
		t.Errorf("after rewriting: %d chunks evaluated", n)
	}
}

// TestDiskCacheTrim: past maxDiskEntries, the least recently used entries go,
// down to three quarters; stale temporary files go too.
func TestDiskCacheTrim(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-2 * time.Hour)
	sub := filepath.Join(dir, "ab")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range maxDiskEntries + 10 {
		p := filepath.Join(sub, fmt.Sprintf("e%05d", i))
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ts := old.Add(time.Duration(i) * time.Second)
		if err := os.Chtimes(p, ts, ts); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(sub, ".tmp-1")
	if err := os.WriteFile(tmp, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, old, old); err != nil {
		t.Fatal(err)
	}
	trimDisk(dir)
	left, _ := os.ReadDir(sub)
	if len(left) != maxDiskEntries*3/4 {
		t.Errorf("%d entries left, want %d", len(left), maxDiskEntries*3/4)
	}
	if _, err := os.Stat(filepath.Join(sub, fmt.Sprintf("e%05d", maxDiskEntries+9))); err != nil {
		t.Errorf("the newest entry was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(sub, "e00000")); err == nil {
		t.Error("the oldest entry was kept")
	}
	if _, err := os.Stat(tmp); err == nil {
		t.Error("a stale temporary file was kept")
	}
}

// FuzzCUEDiskCache: for any input, split into chunks of one element, a load
// with a warm cache folder (after a cold one) gives the findings of a load
// without it.
//
//	go test ./spec/cuespec -run '^$' -fuzz FuzzCUEDiskCache -fuzztime 1m
func FuzzCUEDiskCache(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "cue", "*", "*.cue"))
	for _, s := range seeds {
		src, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Add(cueGenSpec(20))
	useDiskCache(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		_, want, _ := diskLoad(string(src), 1, true)
		for range 2 {
			if _, got, _ := diskLoad(string(src), 1, false); !bytes.Equal(got, want) {
				t.Fatalf("findings differ\n--- cached\n%s--- uncached\n%s", got, want)
			}
		}
	})
}
