package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pipec/pipec/diag"
)

func TestGitHubCommands(t *testing.T) {
	pos := func(l, c int) diag.Pos { return diag.Pos{Line: l, Column: c} }
	for _, tc := range []struct {
		name string
		d    diag.Diagnostic
		want string
	}{
		{"single line, end exclusive -> inclusive",
			diag.Diagnostic{Rule: "cycle", Severity: diag.Error, Message: "a -> b -> a",
				Range: diag.Range{Filename: "p.hcl", Start: pos(3, 5), End: pos(3, 9)}},
			"::error file=p.hcl,line=3,col=5,endLine=3,endColumn=8,title=cycle::a -> b -> a\n"},
		{"empty range keeps endColumn at col",
			diag.Diagnostic{Rule: "schema", Severity: diag.Error, Message: "missing",
				Range: diag.Range{Filename: "p.hcl", Start: pos(3, 5), End: pos(3, 5)}},
			"::error file=p.hcl,line=3,col=5,endLine=3,endColumn=5,title=schema::missing\n"},
		{"multi-line range has no columns",
			diag.Diagnostic{Rule: "empty-check", Severity: diag.Warning, Message: "m",
				Range: diag.Range{Filename: "p.hcl", Start: pos(3, 5), End: pos(6, 2)}},
			"::warning file=p.hcl,line=3,endLine=6,title=empty-check::m\n"},
		{"info is a notice, no end",
			diag.Diagnostic{Rule: "unused-artifact", Severity: diag.Info, Message: "m",
				Range: diag.Range{Filename: "p.hcl", Start: pos(2, 1)}},
			"::notice file=p.hcl,line=2,col=1,title=unused-artifact::m\n"},
		{"escaping of data and properties",
			diag.Diagnostic{Rule: "r:1,2", Severity: diag.Error, Message: "100% sure\r\nnext: a,b", Detail: "did you mean x?",
				Range: diag.Range{Filename: "d,1/a:b%.hcl", Start: pos(1, 1), End: pos(1, 2)}},
			"::error file=d%2C1/a%3Ab%25.hcl,line=1,col=1,endLine=1,endColumn=1,title=r%3A1%2C2::100%25 sure%0D%0Anext: a,b%0Adid you mean x?\n"},
		{"no location at all",
			diag.Diagnostic{Severity: diag.Error, Message: "cannot read"},
			"::error::cannot read\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := GitHub(&b, diag.Diagnostics{tc.d}); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestGitHubEscapesControlCharacters(t *testing.T) {
	var b strings.Builder
	if err := GitHub(&b, diag.Diagnostics{{Rule: "schema", Message: "value \"\x1b[31mred\""}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "\x1b") || !strings.Contains(b.String(), `\x1b[31mred`) {
		t.Errorf("got %q", b.String())
	}
}
