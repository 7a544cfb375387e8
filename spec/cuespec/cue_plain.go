package cuespec

import (
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"
)

// isPlainFile reports whether f is plain data: regular fields with literal
// labels holding literals, lists and structs, and nothing that refers to
// anything (no references, definitions, hidden fields, imports, embeddings,
// comprehensions, aliases, optional or required markers). The value of such a
// file is its syntax tree with repeated struct fields merged, which is what
// lets LoadCUE read values and positions from the tree.
func isPlainFile(f *ast.File) bool {
	for _, d := range f.Decls {
		switch x := d.(type) {
		case *ast.Package, *ast.CommentGroup, *ast.Attribute:
		case *ast.Field:
			if !isPlainField(x) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func isPlainField(f *ast.Field) bool {
	if f.Alias != nil || f.Constraint != token.ILLEGAL || plainLabel(f.Label) == "" {
		return false
	}
	return isPlainExpr(f.Value)
}

func isPlainExpr(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.BasicLit:
		return true
	case *ast.UnaryExpr:
		lit, ok := x.X.(*ast.BasicLit)
		return ok && (x.Op == token.SUB || x.Op == token.ADD) && (lit.Kind == token.INT || lit.Kind == token.FLOAT)
	case *ast.ListLit:
		for _, el := range x.Elts {
			if !isPlainExpr(el) {
				return false
			}
		}
		return true
	case *ast.StructLit:
		for _, d := range x.Elts {
			switch y := d.(type) {
			case *ast.CommentGroup, *ast.Attribute:
			case *ast.Field:
				if !isPlainField(y) {
					return false
				}
			default:
				return false
			}
		}
		return true
	}
	return false
}

// plainLabel returns the name of a regular field label (an identifier that is
// not a definition or hidden, or a double-quoted string), or "" for any other
// label.
func plainLabel(l ast.Label) string {
	switch x := l.(type) {
	case *ast.Ident:
		if x.Name == "" || strings.HasPrefix(x.Name, "#") || strings.HasPrefix(x.Name, "_") {
			return ""
		}
		return x.Name
	case *ast.BasicLit:
		if x.Kind != token.STRING || !isDoubleQuoted(x.Value) {
			return ""
		}
		s, err := literal.Unquote(x.Value)
		if err != nil || s == "" {
			return ""
		}
		return s
	}
	return ""
}

// isDoubleQuoted reports whether a string literal is a string ("..." or
// #"..."#), not bytes ('...').
func isDoubleQuoted(lit string) bool {
	s := strings.TrimLeft(lit, "#")
	return strings.HasPrefix(s, `"`)
}

// mergeFile returns a copy of a plain file in which, in every struct, the
// struct-valued fields that share a label are merged into the first of them:
// `task: a: {...}` and `task: b: {...}` become `task: {a: {...}, b: {...}}`.
// For plain data this is the same value (unification of structs without
// references is the union of their fields), and CUE evaluates it far faster:
// a field declared 10,000 times costs it quadratic work. The original nodes
// are not changed; positions stay those of the author's file.
func mergeFile(f *ast.File) *ast.File {
	out := *f
	out.Decls = mergeDecls(f.Decls)
	return &out
}

func mergeDecls(decls []ast.Decl) []ast.Decl {
	out := make([]ast.Decl, 0, len(decls))
	// first maps a label to the index in out of its merged struct field.
	// Small structs (a task's fields) are searched linearly instead.
	var first map[string]int
	if len(decls) > 16 {
		first = make(map[string]int)
	}
	var merged map[int]bool
	for _, d := range decls {
		f, ok := d.(*ast.Field)
		if !ok {
			out = append(out, d)
			continue
		}
		st, ok := f.Value.(*ast.StructLit)
		if !ok {
			out = append(out, f)
			continue
		}
		name := plainLabel(f.Label)
		at := -1
		if first != nil {
			if i, ok := first[name]; ok {
				at = i
			}
		} else {
			for i, o := range out {
				if of, ok := o.(*ast.Field); ok && plainLabel(of.Label) == name {
					if _, ok := of.Value.(*ast.StructLit); ok {
						at = i
						break
					}
				}
			}
		}
		if at < 0 {
			if first != nil {
				first[name] = len(out)
			}
			out = append(out, f)
			continue
		}
		// Merge into the field at out[at]; copy it the first time so the
		// author's tree is left untouched.
		if merged == nil {
			merged = make(map[int]bool)
		}
		target := out[at].(*ast.Field)
		if !merged[at] {
			cp := *target
			tst := *(target.Value.(*ast.StructLit))
			tst.Elts = append([]ast.Decl(nil), tst.Elts...)
			cp.Value = &tst
			out[at] = &cp
			target = &cp
			merged[at] = true
		}
		tst := target.Value.(*ast.StructLit)
		tst.Elts = append(tst.Elts, st.Elts...)
	}
	// Merge inside every struct value as well.
	for i, d := range out {
		f, ok := d.(*ast.Field)
		if !ok {
			continue
		}
		st, ok := f.Value.(*ast.StructLit)
		if !ok || !hasStructFields(st) {
			continue
		}
		elts := mergeDecls(st.Elts)
		cp := *f
		nst := *st
		nst.Elts = elts
		cp.Value = &nst
		out[i] = &cp
	}
	return out
}

// hasStructFields reports whether a struct holds a struct-valued field, the
// only case in which merging can change it.
func hasStructFields(st *ast.StructLit) bool {
	for _, d := range st.Elts {
		if f, ok := d.(*ast.Field); ok {
			if _, ok := f.Value.(*ast.StructLit); ok {
				return true
			}
		}
	}
	return false
}
