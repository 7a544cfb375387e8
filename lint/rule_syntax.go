package lint

import "github.com/pipec/pipec/diag"

// ruleSyntax is reported by the loaders (spec.LoadHCL, cuespec.LoadCUE).
var ruleSyntax = Rule{
	ID:       "syntax",
	Severity: diag.Error,
	Doc: `the file does not parse (HCL) or does not evaluate (CUE)

Nothing else can be checked until the file parses, so pipec reports the parser's
own message at the place it stopped. In CUE this includes conflicting values
(a field given two different concrete values) and references that do not
resolve.

Reported by the loaders; it cannot be disabled or suppressed.

Bad:

    pipeline "orders" {
      task "extract" {
        command = ["./extract.sh"
      }
    }

Fixed:

    pipeline "orders" {
      task "extract" {
        command = ["./extract.sh"]
      }
    }
`,
}
