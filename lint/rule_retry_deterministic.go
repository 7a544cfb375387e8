package lint

import (
	"slices"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
)

var ruleRetryDeterministic = Rule{
	ID:       "retry-deterministic",
	Severity: diag.Error,
	Doc: `a retry policy retries a class marked deterministic; warning when it retries every failure

Naming a deterministic class in "on" is an error. A policy with no "on"
filter at all gets a warning: it retries every failure, the deterministic ones
included.

A deterministic failure (a schema error, a bad argument) fails identically on
every attempt: retrying it costs N times the resources and N times the delay
before anyone sees the error. Retry only the transient classes, and let the
deterministic ones fail at once with their original error. A policy with
max_attempts = 1 retries nothing and is not reported.

Bad:

    pipeline "orders" {
      error "schema" {
        exit_codes    = [65]
        deterministic = true
      }
      error "transient" {
        exit_codes = [75]
      }
      retry "default" {
        max_attempts = 4
        on           = ["transient", "schema"]
      }
    }

Fixed:

    pipeline "orders" {
      error "schema" {
        exit_codes    = [65]
        deterministic = true
      }
      error "transient" {
        exit_codes = [75]
      }
      retry "default" {
        max_attempts = 4
        on           = ["transient"]
      }
    }
`,
	Run: runRetryDeterministic,
}

func runRetryDeterministic(pass *Pass) error {
	ix := pass.Index
	var transient []string
	for i := range pass.Spec.Errors {
		e := &pass.Spec.Errors[i]
		if !e.Deterministic && ix.Classes[e.Name] == e && !slices.Contains(transient, e.Name) {
			transient = append(transient, e.Name)
		}
	}
	transient = append(transient, compiler.BuiltinClasses()...)
	for i := range pass.Spec.Retries {
		r := &pass.Spec.Retries[i]
		if ix.Policies[r.Name] != r || !Retries(r) {
			continue
		}
		if len(r.On) == 0 && !r.Refused("on") {
			pass.Report(diag.Diagnostic{Severity: diag.Warning, Range: r.At("on", r.NameRange),
				Message: "retry policy \"" + r.Name + "\" has no \"on\" filter, so it retries every failure, deterministic ones included: name the transient classes it should retry, e.g. on = [" + quoteList(transient) + "]"})
			continue
		}
		for _, on := range r.On {
			if c := ix.Classes[on.Name]; c != nil && c.Deterministic {
				pass.Reportf(on.Range, "retry policy %q retries error class %q, which is marked deterministic: it fails the same way on every attempt; remove %q from on",
					r.Name, on.Name, on.Name)
			}
		}
	}
	return nil
}
