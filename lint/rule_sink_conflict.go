package lint

import "github.com/pipec/pipec/diag"

// ruleSinkConflict is reported by the compiler (compiler/sinks.go).
var ruleSinkConflict = Rule{
	ID:       "sink-conflict",
	Severity: diag.Error,
	Doc: `two publishes write the same place (one directory or s3 sink, or two sinks with one path)

A directory sink makes data visible as one link per interval in its folder
(PATH/2024-01-01 -> .versions/...). Two publishes into that folder swap the
same link: each is fenced against its own earlier attempts, not against the
other, so both "win" and readers see whichever swapped last, which changes
from run to run. Paths are compared after cleaning, relative to the spec's
folder: "warehouse/orders", "./warehouse/orders/" and "warehouse//orders" are
one folder, as is the absolute path of that folder. A sink whose folder is
inside another sink's folder is reported too: the outer sink keeps its links
and versions there. Symbolic links are not followed.

An s3 sink is judged the same way: its visible data is one pointer object
per interval under its prefix, so two publishes into it, two s3 sinks with
one bucket and prefix ("s3://lake/orders" and "s3://lake//orders/"), or one
prefix inside another's are reported. Sinks of other types are not judged,
since what their path means (a table, a topic) is up to the sink.

A spec with this error does not compile, and pipec run refuses it.
Reported by the compiler; it cannot be disabled or suppressed.

Bad:

    pipeline "orders" {
      task "clean" {
        command = ["./clean.sh"]
        outputs = ["orders_clean", "customers"]
      }
      check "orders_ok" {
        input         = "orders_clean"
        row_count_min = 1
      }
      check "customers_ok" {
        input         = "customers"
        row_count_min = 1
      }
      sink "orders" {
        type = "directory"
        path = "warehouse/orders"
      }
      sink "customers" {
        type = "directory"
        path = "./warehouse/orders/"
      }
      publish "orders_mart" {
        artifact = "orders_clean"
        sink     = "orders"
      }
      publish "customers_mart" {
        artifact = "customers"
        sink     = "customers"
      }
    }

Fixed:

    pipeline "orders" {
      task "clean" {
        command = ["./clean.sh"]
        outputs = ["orders_clean", "customers"]
      }
      check "orders_ok" {
        input         = "orders_clean"
        row_count_min = 1
      }
      check "customers_ok" {
        input         = "customers"
        row_count_min = 1
      }
      sink "orders" {
        type = "directory"
        path = "warehouse/orders"
      }
      sink "customers" {
        type = "directory"
        path = "warehouse/customers"
      }
      publish "orders_mart" {
        artifact = "orders_clean"
        sink     = "orders"
      }
      publish "customers_mart" {
        artifact = "customers"
        sink     = "customers"
      }
    }
`,
}
