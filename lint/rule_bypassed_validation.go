package lint

import (
	"fmt"
	"strings"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

var ruleBypassedValidation = Rule{
	ID:       "bypassed-validation",
	Severity: diag.Error,
	Doc: `a publish of artifact A can happen without a check on A having accepted it

For each publish, every path in the DAG from A's producer to the publish must
pass through a check whose input is A, and at least one of those checks must
assert something. A publish with no check on A, whose only checks on A assert
nothing, or that can be reached around its checks, makes unaudited data
visible. A check on another artifact does not count, even one on the same
producer's other output: it audited different data.

Write-audit-publish only protects readers when the audit gates the publication
of exactly the artifact being published.

Bad:

    pipeline "orders" {
      task "clean" {
        command = ["./clean.sh"]
        outputs = ["orders_clean", "orders_rejected"]
      }
      check "rejected_ok" {
        input         = "orders_rejected"
        row_count_max = 100
      }
      sink "warehouse" {
        type = "directory"
        path = "warehouse/orders"
      }
      publish "orders_mart" {
        artifact = "orders_clean"
        sink     = "warehouse"
      }
    }

Fixed:

    pipeline "orders" {
      task "clean" {
        command = ["./clean.sh"]
        outputs = ["orders_clean"]
      }
      check "orders_clean_ok" {
        input         = "orders_clean"
        row_count_min = 1
        unique        = ["order_id"]
      }
      sink "warehouse" {
        type = "directory"
        path = "warehouse/orders"
      }
      publish "orders_mart" {
        artifact = "orders_clean"
        sink     = "warehouse"
      }
    }
`,
	Run: runBypassedValidation,
}

// runBypassedValidation does one backward search per publish, from the publish
// towards the producer, that never enters a check on the artifact which asserts
// something. Reaching the producer means some path bypasses every such check.
// The search only visits the publish's ancestors, so its cost is bounded by
// them, not by paths.
func runBypassedValidation(pass *Pass) error {
	g := pass.Result.Graph
	if g == nil {
		return nil
	}
	ix := pass.Index
	for i := range pass.Spec.Publishes {
		pub := &pass.Spec.Publishes[i]
		a := pub.Artifact.Name
		prod, ok := pass.Result.Producer[a]
		if !ok || !isFirstPublish(ix, pub) {
			continue // missing-artifact, or a duplicate the loader reported
		}
		r := pub.Artifact.Range
		checks := ix.ChecksOf[a]
		var asserting, empty []string
		for _, c := range checks {
			if c.Asserts() {
				asserting = append(asserting, c.Name)
			} else {
				empty = append(empty, c.Name)
			}
		}
		if len(asserting) == 0 {
			switch {
			case len(empty) > 0:
				pass.Reportf(r, "publish %q makes artifact %q visible, but its only checks (%s) assert nothing: add an assertion such as row_count_min = 1 to check %q",
					pub.Name, a, quoteList(empty), empty[0])
			case ix.RefusedArtifactRef:
				// Some check's input was refused: it may be the check on a.
			default:
				pass.Reportf(r, "publish %q makes artifact %q visible with no check on %q%s: add a check with input = %q that asserts something",
					pub.Name, a, a, otherChecksHint(ix, pass.Spec, prod, a), a)
			}
			continue
		}
		// Every check on A blocks the search: an empty one beside an
		// asserting one is empty-check's finding, not a bypass.
		blocked := make(map[string]bool, len(checks))
		for _, c := range checks {
			blocked[compiler.NodeID(compiler.KindCheck, c.Name)] = true
		}
		if path := bypassPath(g, compiler.NodeID(compiler.KindPublish, pub.Name), compiler.NodeID(compiler.KindTask, prod), blocked); path != nil {
			pass.Reportf(r, "publish %q can run without check %s accepting artifact %q: the path %s bypasses it; make the publish depend only on the checked artifact",
				pub.Name, quoteList(asserting), a, strings.Join(path, " -> "))
		}
	}
	return nil
}

// isFirstPublish reports whether pub is the first publish of its name.
func isFirstPublish(ix *Index, pub *spec.Publish) bool {
	for _, p := range ix.Publishes[pub.Artifact.Name] {
		if p.Name == pub.Name {
			return p == pub
		}
	}
	return false
}

// bypassPath searches backwards from the publish for the producer without
// entering blocked nodes, and returns the path found (producer first), or nil.
func bypassPath(g *compiler.Graph, publish, producer string, blocked map[string]bool) []string {
	next := map[string]string{publish: ""} // node -> the node it leads to, towards the publish
	queue := []string{publish}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, p := range g.Pred[n] {
			if blocked[p] {
				continue
			}
			if _, seen := next[p]; seen {
				continue
			}
			next[p] = n
			if p == producer {
				var path []string
				for c := p; c != ""; c = next[c] {
					path = append(path, c)
				}
				return path
			}
			queue = append(queue, p)
		}
	}
	return nil
}

// otherChecksHint names checks on the producer's other outputs: the near miss
// of a check on the wrong artifact.
func otherChecksHint(ix *Index, p *spec.Pipeline, producer, artifact string) string {
	t := ix.Tasks[producer]
	if t == nil {
		return ""
	}
	var parts []string
	for _, o := range t.Outputs {
		if o.Name == artifact {
			continue
		}
		for _, c := range ix.ChecksOf[o.Name] {
			parts = append(parts, fmt.Sprintf("check %q audits %q", c.Name, o.Name))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ", not " + fmt.Sprintf("%q", artifact) + ")"
}

// quoteList writes names as "a", "b".
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
