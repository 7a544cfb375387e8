package cuespec

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/pipec/pipec/schema"
)

// CacheCUEChunksIn makes LoadCUE keep the chunks of plain files that CUE
// found valid in dir as well, across processes, as Go's build cache keeps
// compiled packages: a `pipec lint` of a spec whose chunks an earlier run
// found valid skips CUE's evaluation of them. As in memory (see validChunks),
// only valid chunks are kept, so a chunk in error is always evaluated and its
// findings are exactly CUE's. An entry is named by a hash of the chunk's
// data, the embedded schema and the CUE version pipec was built with, so a
// new schema or evaluator never reuses an old answer. dir is made when
// needed; errors reading or writing it only cost the cache.
func CacheCUEChunksIn(dir string) {
	diskCache.Lock()
	defer diskCache.Unlock()
	diskCache.dir = dir
}

var diskCache struct {
	sync.Mutex
	dir string
}

func diskCacheDir() string {
	diskCache.Lock()
	defer diskCache.Unlock()
	return diskCache.dir
}

// maxDiskEntries bounds the folder: 40 entries are a 10,000-task spec. Past
// it, the least recently used quarter is removed.
const maxDiskEntries = 4096

// diskSalt is what, besides a chunk's data, decides CUE's answer: the schema
// and the evaluator. The key format's version is in it too.
var diskSalt = sync.OnceValue(func() []byte {
	h := sha256.New()
	h.Write([]byte("pipec cue-valid-chunk v1\x00"))
	h.Write([]byte(schema.PipelineCUE))
	h.Write([]byte{0})
	cueVersion := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "cuelang.org/go" {
				cueVersion = d.Version + " " + d.Sum
				if d.Replace != nil {
					cueVersion += " => " + d.Replace.Path + " " + d.Replace.Version + " " + d.Replace.Sum
				}
			}
		}
	}
	h.Write([]byte(cueVersion))
	return h.Sum(nil)
})

// diskName is the entry of a chunk key: the file name, and its content (the
// full hash, checked when read, so a truncated or foreign file is a miss).
func diskName(k [sha256.Size]byte) (name, content string) {
	h := sha256.New()
	h.Write(diskSalt())
	h.Write(k[:])
	sum := hex.EncodeToString(h.Sum(nil))
	return sum[:2] + string(filepath.Separator) + sum, sum + "\n"
}

// knownValidOnDisk reports whether dir holds the chunk as valid; a hit
// touches the entry, which keeps it among the most recently used.
func knownValidOnDisk(dir string, k [sha256.Size]byte) bool {
	name, content := diskName(k)
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err != nil || string(b) != content {
		return false
	}
	now := time.Now()
	_ = os.Chtimes(path, now, now)
	return true
}

// rememberValidOnDisk writes the entry of a valid chunk. Concurrent writers
// (two lint runs) are safe: each writes a file of its own and renames it into
// place, and both write the same content.
func rememberValidOnDisk(dir string, k [sha256.Size]byte) {
	name, content := diskName(k)
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return
	}
	_, werr := tmp.WriteString(content)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		_ = os.Remove(tmp.Name())
		return
	}
	// One write in 64 (by the entry's first bytes, which are uniform)
	// looks at the folder's size.
	if name[0] == '0' && name[1] < '4' {
		trimDisk(dir)
	}
}

// trimDisk removes the least recently used entries when the folder holds more
// than maxDiskEntries, down to three quarters of it, and temporary files an
// interrupted writer left more than an hour ago.
func trimDisk(dir string) {
	type entry struct {
		path string
		mod  time.Time
	}
	var entries []entry
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if filepath.Base(path)[0] == '.' {
			if time.Since(info.ModTime()) > time.Hour {
				_ = os.Remove(path)
			}
			return nil
		}
		entries = append(entries, entry{path, info.ModTime()})
		return nil
	})
	if len(entries) <= maxDiskEntries {
		return
	}
	slices.SortFunc(entries, func(a, b entry) int { return a.mod.Compare(b.mod) })
	for _, e := range entries[:len(entries)-maxDiskEntries*3/4] {
		_ = os.Remove(e.path)
	}
}
