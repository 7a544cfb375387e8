package specload

import (
	"testing"

	"github.com/pipec/pipec/spec"
)

// TestRefusedAlike checks that both loaders, reading plain fields through
// the field table, mark a pipeline attribute with a refused value as
// refused, so rules skip it whatever the syntax.
func TestRefusedAlike(t *testing.T) {
	hclSrc := "pipeline \"p\" {\n  code_version = [\"a\"]\n  workers = 0\n  task \"t\" {\n    command = [\"x\"]\n    timeout = \"soon\"\n  }\n}\n"
	cueSrc := "pipeline: p: {\n\tcode_version: [\"a\"]\n\tworkers: 0\n\ttask: t: {\n\t\tcommand: [\"x\"]\n\t\ttimeout: \"soon\"\n\t}\n}\n"
	for _, c := range []struct {
		syn spec.Syntax
		src string
	}{{spec.SyntaxHCL, hclSrc}, {spec.SyntaxCUE, cueSrc}} {
		p, ds := Load(c.syn, "p."+string(c.syn), []byte(c.src))
		if p == nil || len(p.Tasks) != 1 {
			t.Fatalf("%s: no pipeline with one task:\n%v", c.syn, ds)
		}
		if !ds.HasErrors() {
			t.Errorf("%s: no finding for the refused values", c.syn)
		}
		for _, name := range []string{"code_version", "workers"} {
			if !p.Refused(name) {
				t.Errorf("%s: pipeline %s not marked refused", c.syn, name)
			}
		}
		if !p.Tasks[0].Refused("timeout") || p.Tasks[0].Refused("command") {
			t.Errorf("%s: task refusals %v, want only timeout", c.syn, p.Tasks[0].Invalid)
		}
		if p.CodeVersion != "" || p.Workers != 0 || p.Tasks[0].Timeout != 0 {
			t.Errorf("%s: refused values reached the model: %q %d %v", c.syn, p.CodeVersion, p.Workers, p.Tasks[0].Timeout)
		}
	}
}
