package lint

import (
	"fmt"
	"strings"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

var ruleUnfencedSink = Rule{
	ID:       "unfenced-sink",
	Severity: diag.Warning,
	Doc: `a publish to an unfenced sink whose producer is retried or not declared idempotent

A publish to a sink that cannot refuse stale writes (fencing = "none", or a
sink type other than "directory" and "s3" that does not declare fencing =
"token"), whose producer is retried (a retry policy or failover) or not
declared idempotent = true.

pipec fences its own sink types by token: the directory sink with its lock
and link swap, the s3 sink (path = "s3://bucket/prefix") with the object
store's conditional writes (If-None-Match: * to create, If-Match on the ETag
to swap the interval's pointer), so a stale writer is refused by the object
store itself. A server without conditional writes is found at first use and
the s3 sink then refuses to publish rather than pretend; fencing = "none" is
the way to publish there, at-least-once, and this rule says what that risks.

No orchestrator can tell a dead task from a slow one: a relaunched attempt can
run beside its original, and without fencing both write to the sink. The
result is at-least-once delivery and a risk of a torn partition, half from
each attempt. pipec says so instead of claiming exactly-once. Publish through a
fenced sink, or make the producer idempotent, declare it, and do not retry it.

Bad:

    pipeline "orders" {
      retry "default" {
        max_attempts = 3
      }
      task "clean" {
        command = ["./clean.sh"]
        outputs = ["orders_clean"]
        retry   = "default"
        timeout = "10m"
      }
      check "orders_clean_ok" {
        input         = "orders_clean"
        row_count_min = 1
      }
      sink "lake" {
        type    = "s3"
        path    = "s3://lake/orders"
        fencing = "none"
      }
      publish "orders_lake" {
        artifact = "orders_clean"
        sink     = "lake"
      }
    }

Fixed:

    pipeline "orders" {
      retry "default" {
        max_attempts = 3
      }
      task "clean" {
        command = ["./clean.sh"]
        outputs = ["orders_clean"]
        retry   = "default"
        timeout = "10m"
      }
      check "orders_clean_ok" {
        input         = "orders_clean"
        row_count_min = 1
      }
      sink "lake" {
        type    = "s3"
        path    = "s3://lake/orders"
        fencing = "token"
      }
      publish "orders_lake" {
        artifact = "orders_clean"
        sink     = "lake"
      }
    }
`,
	Run: runUnfencedSink,
}

func runUnfencedSink(pass *Pass) error {
	ix := pass.Index
	for i := range pass.Spec.Publishes {
		pub := &pass.Spec.Publishes[i]
		s := ix.Sinks[pub.Sink.Name]
		prod := ix.Producer[pub.Artifact.Name]
		// A fencing or type the loader refused is not judged again.
		if s == nil || prod == nil || !isFirstPublish(ix, pub) || s.Refused("fencing") || s.Refused("type") ||
			compiler.SinkFencing(s) != spec.FencingNone {
			continue
		}
		var reasons []string
		if r := ix.RetryingPolicy(prod); r != nil {
			reasons = append(reasons, fmt.Sprintf("retried by policy %q", r.Name))
		}
		if prod.Failover != nil {
			reasons = append(reasons, "fails over to other workers")
		}
		if (prod.Idempotent == nil || !*prod.Idempotent) && !prod.Refused("idempotent") {
			reasons = append(reasons, "not declared idempotent = true")
		}
		if len(reasons) == 0 {
			continue
		}
		fencing := "fencing = \"none\""
		if s.Type == compiler.SinkTypeS3 && s.Has("fencing") {
			fencing = "fencing = \"none\": the object store's conditional writes are not used"
		} else if !s.Has("fencing") {
			fencing = fmt.Sprintf("sink type %q is not fenced unless it says fencing = \"token\"", s.Type)
		}
		pass.Reportf(pub.Sink.Range,
			"publish %q writes %q to sink %q, which cannot refuse stale writes (%s), and its producer %q is %s: a relaunched attempt beside a live one can tear the output (at-least-once only); publish through a fenced sink, or declare the producer idempotent and do not retry it",
			pub.Name, pub.Artifact.Name, s.Name, fencing, prod.Name, strings.Join(reasons, " and "))
	}
	return nil
}
