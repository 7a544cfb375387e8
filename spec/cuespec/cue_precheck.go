package cuespec

import (
	"strconv"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"

	"github.com/pipec/pipec/spec"
)

// provablyValidTasks reports whether Go can prove, without CUE, that a chunk
// of a plain file (see splitPlain) is valid against the schema: the chunk is
// `pipeline: NAME: task: {...}` and nothing else (every chunk but the first
// of a big spec), and every task in it holds only what #Task in
// schema/pipeline.cue allows, written in the most ordinary way: double-quoted
// strings, lists of them, true or false, small decimal integers, the env,
// heartbeat and failover structs, each field once, no attributes.
//
// It is conservative: false means "not proven", never "invalid", and the
// chunk then goes to CUE, whose findings are what the author sees. So a
// chunk with any mistake, or anything unusual, is evaluated by CUE as before,
// and what pipec reports does not change; a chunk proven valid skips CUE's
// evaluation, which is most of the time of a big spec's load.
// TestPrecheckImpliesCUE holds it to "proven valid => CUE finds it valid".
func provablyValidTasks(f *ast.File) bool {
	if len(f.Decls) != 1 {
		return false
	}
	pipelines, ok := onlyField(f.Decls[0], spec.KindPipeline)
	if !ok {
		return false
	}
	named, ok := structOf(pipelines)
	if !ok || len(named.Elts) != 1 {
		return false
	}
	nf, ok := named.Elts[0].(*ast.Field)
	if !ok || !plainField(nf) {
		return false
	}
	body, ok := structOf(nf.Value)
	if !ok || len(body.Elts) != 1 {
		return false
	}
	tasks, ok := onlyField(body.Elts[0], spec.KindTask)
	if !ok {
		return false
	}
	ts, ok := structOf(tasks)
	if !ok {
		return false
	}
	seen := make(map[string]bool, len(ts.Elts))
	for _, d := range ts.Elts {
		tf, ok := d.(*ast.Field)
		if !ok || !plainField(tf) {
			if _, comment := d.(*ast.CommentGroup); comment {
				continue
			}
			return false
		}
		name := plainLabel(tf.Label)
		if seen[name] || !validTask(tf.Value) {
			return false
		}
		seen[name] = true
	}
	return true
}

// onlyField returns the value of d when d is the regular field name.
func onlyField(d ast.Decl, name string) (ast.Expr, bool) {
	fd, ok := d.(*ast.Field)
	if !ok || !plainField(fd) || plainLabel(fd.Label) != name {
		return nil, false
	}
	return fd.Value, true
}

// plainField: a regular field with a plain label, no `?`/`!`, no alias and
// no attributes.
func plainField(fd *ast.Field) bool {
	return fd.Alias == nil && fd.Constraint == token.ILLEGAL && len(fd.Attrs) == 0 && plainLabel(fd.Label) != ""
}

func structOf(e ast.Expr) (*ast.StructLit, bool) {
	s, ok := e.(*ast.StructLit)
	return s, ok
}

// fields returns the fields of a struct by name, or false when it holds
// anything but plain fields (and comments) or a name twice.
func fields(e ast.Expr) (map[string]ast.Expr, bool) {
	s, ok := structOf(e)
	if !ok {
		return nil, false
	}
	out := make(map[string]ast.Expr, len(s.Elts))
	for _, d := range s.Elts {
		switch x := d.(type) {
		case *ast.CommentGroup:
		case *ast.Field:
			name := plainLabel(x.Label)
			if !plainField(x) {
				return nil, false
			}
			if _, dup := out[name]; dup {
				return nil, false
			}
			out[name] = x.Value
		default:
			return nil, false
		}
	}
	return out, true
}

// validTask: #Task (command required, a list of strings; the list fields;
// env; idempotent; retry, pool and timeout strings; heartbeat; failover).
func validTask(e ast.Expr) bool {
	fs, ok := fields(e)
	if !ok {
		return false
	}
	if _, ok := fs["command"]; !ok {
		return false
	}
	for name, v := range fs {
		switch name {
		case "command", "inputs", "outputs", "depends_on", "secret_env", "effects", "labels":
			ok = isStringList(v)
		case "env":
			var env map[string]ast.Expr
			env, ok = fields(v)
			for _, s := range env {
				ok = ok && isString(s)
			}
		case "idempotent":
			ok = isBool(v)
		case "retry", "pool", "timeout":
			ok = isString(v)
		case "heartbeat":
			var hb map[string]ast.Expr
			hb, ok = fields(v)
			ok = ok && len(hb) == 2 && isString(hb["every"]) && isString(hb["lease"])
		case "failover":
			var fo map[string]ast.Expr
			fo, ok = fields(v)
			for k, n := range fo {
				ok = ok && (k == "per_worker" || k == "global") && isCount(n)
			}
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return true
}

// isString: a double-quoted string literal (not bytes, not a raw string).
func isString(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING || len(lit.Value) == 0 || lit.Value[0] != '"' {
		return false
	}
	_, err := literal.Unquote(lit.Value)
	return err == nil
}

func isStringList(e ast.Expr) bool {
	l, ok := e.(*ast.ListLit)
	if !ok {
		return false
	}
	for _, el := range l.Elts {
		if !isString(el) {
			return false
		}
	}
	return true
}

func isBool(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	return ok && (lit.Kind == token.TRUE || lit.Kind == token.FALSE)
}

// isCount: #Count, an int from 0 to 2147483647, written in plain decimal.
func isCount(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.INT || len(lit.Value) == 0 || len(lit.Value) > 10 {
		return false
	}
	for i, c := range []byte(lit.Value) {
		if c < '0' || c > '9' || (i == 0 && c == '0' && len(lit.Value) > 1) {
			return false
		}
	}
	n, err := strconv.ParseInt(lit.Value, 10, 64)
	return err == nil && n <= 2147483647
}
