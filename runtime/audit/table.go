package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pipec/pipec/compiler"
)

// value is one cell: its text (a JSON string's contents, a CSV field, or the
// compact JSON of any other JSON value) and whether it is null. An empty CSV
// field is null; in JSON Lines, null is null and a missing key is a missing
// column.
type value struct {
	text string
	null bool
}

// row gives a row's cells by column; ok is false when the row has no such
// column.
type row func(col string) (v value, ok bool)

// table accumulates the built-in assertions over every file of a version.
type table struct {
	c        compiler.PlanCheck
	required []string // every column an assertion names, once, in order
	rows     int
	broken   bool     // a file did not parse; row counts would mislead
	reasons  []string // in the order found: files sorted, lines ascending

	nulls map[string]*finding // not_null, per column
	// codeVersion is what c.CodeVersionColumn must hold; stale counts the
	// rows where it does not.
	codeVersion string
	stale       finding
	// missing counts JSON Lines rows without a required column, per (file,
	// column), in the order first seen.
	missing      map[[2]string]*finding
	missingOrder [][2]string
	// files are the version's data files, by index (a row's place is a
	// file index and a line).
	files []string
	// uniq indexes the unique keys by hash (see unique.go); dups is what it
	// found. keyText, on the second pass over the files, is filled with the
	// key of each place it names (only the few duplicates a reason shows).
	uniq    *uniqueIndex
	dups    finding
	keyText map[uint64]string
	err     error // the first failure to index a key (I/O of the spill)
}

// finding counts offending rows and keeps the first few places.
type finding struct {
	count    int
	examples []string
}

func (f *finding) add(example string) {
	f.count++
	if len(f.examples) < maxExamples {
		f.examples = append(f.examples, example)
	}
}

// summary is "a, b, c" plus "(and N more)" past the examples.
func (f *finding) summary() string {
	s := strings.Join(f.examples, ", ")
	if more := f.count - len(f.examples); more > 0 {
		s += fmt.Sprintf(" (and %d more)", more)
	}
	return s
}

func assertTable(ctx context.Context, c compiler.PlanCheck, dir, codeVersion string) ([]string, error) {
	return assertTableSpill(ctx, c, dir, codeVersion, spillRecords)
}

// assertTableSpill is assertTable with the unique index spilling every spill
// records (tests make it small).
func assertTableSpill(ctx context.Context, c compiler.PlanCheck, dir, codeVersion string, spill int) ([]string, error) {
	files, err := dataFiles(dir)
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", c.Name, err)
	}
	if len(files) == 0 {
		return []string{"no CSV (*.csv) or JSON Lines (*.jsonl, *.ndjson) file in the version"}, nil
	}
	t := &table{c: c, nulls: map[string]*finding{}, missing: map[[2]string]*finding{}, files: files,
		codeVersion: codeVersion}
	if len(c.Unique) > 0 {
		t.uniq = newUniqueIndex(spill)
		defer t.uniq.close()
	}
	var stamped []string
	if c.CodeVersionColumn != "" {
		stamped = []string{c.CodeVersionColumn}
	}
	for _, cols := range [][]string{c.Columns, c.Unique, c.NotNull, stamped} {
		for _, col := range cols {
			if !contains(t.required, col) {
				t.required = append(t.required, col)
			}
		}
	}
	if err := t.readAll(ctx, dir); err != nil {
		return nil, err
	}
	if t.uniq != nil {
		if err := t.findDuplicates(ctx, dir); err != nil {
			return nil, err
		}
	}
	return t.verdict(), nil
}

// readAll reads every data file once, in order.
func (t *table) readAll(ctx context.Context, dir string) error {
	for i, name := range t.files {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := os.Open(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return fmt.Errorf("check %s: %w", t.c.Name, err)
		}
		if kindOf(name) == "csv" {
			err = t.readCSV(i, name, f)
		} else {
			err = t.readJSONL(i, name, f)
		}
		f.Close()
		if err == nil {
			err = t.err
		}
		if err != nil {
			return fmt.Errorf("check %s: %s: %w", t.c.Name, name, err)
		}
	}
	return nil
}

// findDuplicates merges the unique index and, when keys repeat, reads the
// files a second time for the text of the few keys the reason shows (the
// index holds only hashes). The second pass changes no count or reason.
func (t *table) findDuplicates(ctx context.Context, dir string) error {
	count, dups, err := t.uniq.duplicates(maxExamples)
	if err != nil {
		return fmt.Errorf("check %s: unique: %w", t.c.Name, err)
	}
	if count == 0 {
		return nil
	}
	t.keyText = map[uint64]string{}
	for _, d := range dups {
		t.keyText[d.loc] = ""
	}
	reasons, broken, rows := t.reasons, t.broken, t.rows
	err = t.readAll(ctx, dir)
	t.reasons, t.broken, t.rows = reasons, broken, rows
	if err != nil {
		return err
	}
	t.dups.count = count
	for _, d := range dups {
		t.dups.examples = append(t.dups.examples, fmt.Sprintf("%s at %s repeats %s", t.keyText[d.loc], t.place(d.loc), t.place(d.first)))
	}
	return nil
}

// place is "file:line" of a row's place.
func (t *table) place(loc uint64) string {
	file, line := splitPlace(loc)
	return fmt.Sprintf("%s:%d", t.files[file], line)
}

// readCSV reads one CSV file whose first record is the header. The error is
// for I/O only; a malformed file becomes a reason.
func (t *table) readCSV(file int, name string, r io.Reader) error {
	lim := &recordLimit{r: r, limit: maxRecord}
	cr := csv.NewReader(bufio.NewReader(lim))
	cr.ReuseRecord = true
	header, err := cr.Read()
	lim.n = 0
	if err == io.EOF {
		header, err = nil, nil // an empty file: no columns, no rows
	}
	if err != nil {
		return t.parseError(name, err)
	}
	index := map[string]int{}
	for i, h := range header {
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff") // a byte order mark is not part of the name
		}
		if _, dup := index[h]; !dup {
			index[h] = i
		}
	}
	var absent []string
	for _, col := range t.required {
		if _, ok := index[col]; !ok {
			absent = append(absent, col)
		}
	}
	if len(absent) > 0 {
		t.reasons = append(t.reasons, fmt.Sprintf("%s has no column %s", name, quoteList(absent)))
	}
	for {
		rec, err := cr.Read()
		lim.n = 0
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return t.parseError(name, err)
		}
		line, _ := cr.FieldPos(0)
		t.row(file, line, func(col string) (value, bool) {
			i, ok := index[col]
			if !ok {
				return value{}, false
			}
			return value{text: rec[i], null: rec[i] == ""}, true
		}, false)
	}
}

// maxRecord bounds one CSV record (its fields may hold newlines), so one
// hostile field cannot make the audit hold more than this in memory: a
// 100 MB field took 582 MB before.
const maxRecord = 16 << 20

// recordLimit fails a read once more than limit bytes were read since the
// caller last set n to 0 (after each record): what the CSV reader buffers
// for one record stays within limit, plus its read-ahead.
type recordLimit struct {
	r        io.Reader
	n, limit int
}

var errRecordTooLong = fmt.Errorf("a record longer than %d bytes", maxRecord)

func (l *recordLimit) Read(p []byte) (int, error) {
	if l.n > l.limit {
		return 0, errRecordTooLong
	}
	if room := l.limit - l.n + 1; len(p) > room {
		p = p[:room]
	}
	n, err := l.r.Read(p)
	l.n += n
	return n, err
}

// parseError turns a malformed file into a reason; I/O errors stay errors.
func (t *table) parseError(name string, err error) error {
	if errors.Is(err, errRecordTooLong) {
		t.broken = true
		t.reasons = append(t.reasons, fmt.Sprintf("%s: %v", name, err))
		return nil
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		t.broken = true
		t.reasons = append(t.reasons, fmt.Sprintf("%s:%d: %v", name, pe.Line, pe.Err))
		return nil
	}
	return err
}

// maxLine bounds one JSON Lines record, so a file without newlines cannot
// make the audit hold all of it in memory.
const maxLine = 64 << 20

// readJSONL reads one JSON Lines file: one JSON object a line, blank lines
// ignored.
func (t *table) readJSONL(file int, name string, r io.Reader) error {
	br := bufio.NewReader(r)
	for line := 1; ; line++ {
		text, err := readLine(br, maxLine)
		if errors.Is(err, errLineTooLong) {
			t.broken = true
			t.reasons = append(t.reasons, fmt.Sprintf("%s:%d: line longer than %d bytes", name, line, maxLine))
			return nil
		}
		if err != nil && err != io.EOF {
			return err
		}
		if trimmed := bytes.TrimSpace(text); len(trimmed) > 0 {
			var obj map[string]json.RawMessage
			if jerr := json.Unmarshal(trimmed, &obj); jerr != nil || obj == nil {
				t.broken = true
				t.reasons = append(t.reasons, fmt.Sprintf("%s:%d: not a JSON object", name, line))
				return nil
			}
			t.row(file, line, func(col string) (value, bool) {
				raw, ok := obj[col]
				if !ok {
					return value{}, false
				}
				return jsonValue(raw), true
			}, true)
		}
		if err == io.EOF {
			return nil
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads up to and including the next newline, failing past limit
// bytes; at the end of the input it returns what is left and io.EOF.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return line, err
	}
}

// jsonValue makes a JSON value comparable with a CSV field: a string is its
// contents, null is null, anything else its compact JSON text.
func jsonValue(raw json.RawMessage) value {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return value{null: true}
	}
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return value{text: s}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return value{text: buf.String()}
	}
	return value{text: string(raw)}
}

// row applies the per-row assertions. perRowColumns is true for JSON Lines,
// where a column can be missing from one row; in CSV the header already said.
func (t *table) row(file, line int, get row, perRowColumns bool) {
	if t.keyText != nil {
		// The second pass: only the keys of the places asked for.
		if _, want := t.keyText[placeOf(file, line)]; want {
			if k, ok := t.uniqueKey(get); ok {
				t.keyText[placeOf(file, line)] = string(k)
			}
		}
		return
	}
	t.rows++
	loc := func() string { return fmt.Sprintf("%s:%d", t.files[file], line) }
	if perRowColumns {
		for _, col := range t.required {
			if _, ok := get(col); !ok {
				file, _, _ := strings.Cut(loc(), ":")
				k := [2]string{file, col}
				f := t.missing[k]
				if f == nil {
					f = &finding{}
					t.missing[k] = f
					t.missingOrder = append(t.missingOrder, k)
				}
				f.add(loc())
			}
		}
	}
	for _, col := range t.c.NotNull {
		if v, ok := get(col); ok && v.null {
			f := t.nulls[col]
			if f == nil {
				f = &finding{}
				t.nulls[col] = f
			}
			f.add(loc())
		}
	}
	if col := t.c.CodeVersionColumn; col != "" {
		if v, ok := get(col); ok && (v.null || v.text != t.codeVersion) {
			t.stale.add(fmt.Sprintf("%s (%s)", loc(), shortValue(v)))
		}
	}
	if t.uniq != nil && t.err == nil {
		if k, ok := t.uniqueKey(get); ok {
			t.err = t.uniq.add(k, placeOf(file, line))
		}
	}
}

// uniqueKey is the JSON text of a row's unique columns (null for a null
// cell); ok is false when the row lacks one (reported as a missing column;
// no cascade).
func (t *table) uniqueKey(get row) ([]byte, bool) {
	key := make([]any, len(t.c.Unique))
	for i, col := range t.c.Unique {
		v, ok := get(col)
		if !ok {
			return nil, false
		}
		if !v.null {
			key[i] = v.text
		}
	}
	b, _ := json.Marshal(key)
	return b, true
}

// verdict turns what was counted into reasons, in a fixed order: file
// problems as found, missing JSON Lines columns, row counts, not_null by
// column, unique.
func (t *table) verdict() []string {
	out := t.reasons
	for _, k := range t.missingOrder {
		f := t.missing[k]
		out = append(out, fmt.Sprintf("%s: column %q missing in %d row(s): %s", k[0], k[1], f.count, f.summary()))
	}
	if !t.broken {
		if lo := t.c.RowCountMin; lo != nil && t.rows < *lo {
			out = append(out, fmt.Sprintf("row_count_min: %d row(s), want at least %d", t.rows, *lo))
		}
		if hi := t.c.RowCountMax; hi != nil && t.rows > *hi {
			out = append(out, fmt.Sprintf("row_count_max: %d row(s), want at most %d", t.rows, *hi))
		}
	}
	for _, col := range t.c.NotNull {
		if f := t.nulls[col]; f != nil {
			out = append(out, fmt.Sprintf("not_null: column %q is null in %d row(s): %s", col, f.count, f.summary()))
		}
	}
	if t.stale.count > 0 {
		out = append(out, fmt.Sprintf("code_version_column: column %q is not the run's code_version %q in %d row(s): %s",
			t.c.CodeVersionColumn, t.codeVersion, t.stale.count, t.stale.summary()))
	}
	if t.dups.count > 0 {
		out = append(out, fmt.Sprintf("unique (%s): %d duplicate row(s): %s", quoteList(t.c.Unique), t.dups.count, t.dups.summary()))
	}
	return out
}

// shortValue shows a cell in a reason: quoted, at most 40 characters.
func shortValue(v value) string {
	if v.null {
		return "null"
	}
	s := v.text
	if r := []rune(s); len(r) > 40 {
		s = string(r[:40]) + "…"
	}
	return fmt.Sprintf("%q", s)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
