package runtime

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pipec/pipec/compiler"
)

// auditBuiltin runs a check's built-in assertions (row counts, unique,
// not_null, required columns) on the artifact's data in dir: the file
// <artifact>.csv or <artifact>.jsonl, or else every .csv and .jsonl file in
// it, read as one table.
func auditBuiltin(c compiler.PlanCheck, artifact, dir string) (bool, string) {
	if c.RowCountMin == nil && c.RowCountMax == nil && len(c.Unique) == 0 && len(c.NotNull) == 0 && len(c.Columns) == 0 {
		return true, ""
	}
	files, err := dataFiles(artifact, dir)
	if err != nil {
		return false, err.Error()
	}
	if len(files) == 0 {
		return false, fmt.Sprintf("no %s.csv or %s.jsonl (nor any .csv or .jsonl file) in the artifact", artifact, artifact)
	}
	rows := 0
	seen := map[string]int{}
	for _, f := range files {
		err := readRows(f, func(cols []string, get func(string) (string, bool), line int) error {
			rows++
			where := fmt.Sprintf("%s:%d", filepath.Base(f), line)
			for _, col := range c.Columns {
				if !slices.Contains(cols, col) {
					return fmt.Errorf("%s: required column %q is missing", where, col)
				}
			}
			for _, col := range c.NotNull {
				if v, ok := get(col); !ok || v == "" {
					return fmt.Errorf("%s: column %q is null", where, col)
				}
			}
			if len(c.Unique) > 0 {
				key := make([]string, len(c.Unique))
				for i, col := range c.Unique {
					v, ok := get(col)
					if !ok {
						return fmt.Errorf("%s: unique column %q is missing", where, col)
					}
					key[i] = v
				}
				k := strings.Join(key, "\x00")
				if first, dup := seen[k]; dup {
					return fmt.Errorf("%s: duplicate %s = %s (first at row %d)", where, strings.Join(c.Unique, ","), strings.Join(key, ","), first)
				}
				seen[k] = rows
			}
			return nil
		})
		if err != nil {
			return false, err.Error()
		}
	}
	if c.RowCountMin != nil && rows < *c.RowCountMin {
		return false, fmt.Sprintf("%d rows, at least %d required", rows, *c.RowCountMin)
	}
	if c.RowCountMax != nil && rows > *c.RowCountMax {
		return false, fmt.Sprintf("%d rows, at most %d allowed", rows, *c.RowCountMax)
	}
	return true, ""
}

func dataFiles(artifact, dir string) ([]string, error) {
	for _, ext := range []string{".csv", ".jsonl"} {
		p := filepath.Join(dir, artifact+ext)
		if _, err := os.Stat(p); err == nil {
			return []string{p}, nil
		}
	}
	var out []string
	for _, ext := range []string{"*.csv", "*.jsonl"} {
		m, err := filepath.Glob(filepath.Join(dir, ext))
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	slices.Sort(out)
	return out, nil
}

// readRows calls fn for every data row of a CSV (header first) or JSON Lines
// file; line is the row's line number.
func readRows(path string, fn func(cols []string, get func(string) (string, bool), line int) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if strings.HasSuffix(path, ".jsonl") {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		line := 0
		for sc.Scan() {
			line++
			if strings.TrimSpace(sc.Text()) == "" {
				continue
			}
			var obj map[string]any
			if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
				return fmt.Errorf("%s:%d: not a JSON object: %v", filepath.Base(path), line, err)
			}
			cols := make([]string, 0, len(obj))
			for k := range obj {
				cols = append(cols, k)
			}
			get := func(c string) (string, bool) {
				v, ok := obj[c]
				if !ok || v == nil {
					return "", ok
				}
				b, _ := json.Marshal(v)
				return string(b), true
			}
			if err := fn(cols, get, line); err != nil {
				return err
			}
		}
		return sc.Err()
	}
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %v", filepath.Base(path), err)
	}
	idx := map[string]int{}
	for i, h := range header {
		idx[h] = i
	}
	for line := 2; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %v", filepath.Base(path), err)
		}
		get := func(c string) (string, bool) {
			i, ok := idx[c]
			if !ok || i >= len(rec) {
				return "", false
			}
			return rec[i], true
		}
		if err := fn(header, get, line); err != nil {
			return err
		}
	}
}
