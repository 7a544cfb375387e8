// Package chaosspec is the pipeline of the chaos scenario, which every
// dispatcher's tests run (pipec's own workers on either store, with a
// folder or an object store, and Temporal), so they all attack the same
// work.
package chaosspec

import (
	"fmt"
	"strings"
)

// Spec is a pipeline of layers layers of 10 tasks: every task writes an
// output naming its interval and task (after a short sleep, so workers are
// caught mid-task), tasks of a layer read one output of the layer before,
// and the 10 tasks of every other layer publish, each to a fenced sink of
// its own after a check. sink gives a published task's sink block body
// (Directory, S3). published lists the tasks that publish.
func Spec(layers int, sink func(task string) string) (spec string, published []string) {
	var b strings.Builder
	b.WriteString(`pipeline "chaos" {
  code_version = "v1"
  schedule {
    every = "24h"
    start = "2024-01-01T00:00:00Z"
  }
`)
	for layer := range layers {
		for i := range 10 {
			name := fmt.Sprintf("t%02d_%d", layer, i)
			fmt.Fprintf(&b, "  task %q {\n    command = [\"./step.sh\", %q]\n    outputs = [\"a_%s\"]\n    timeout = \"2m\"\n", name, name, name)
			if layer > 0 {
				fmt.Fprintf(&b, "    inputs  = [\"a_t%02d_%d\"]\n", layer-1, (i+layer)%10)
			}
			b.WriteString("  }\n")
			if layer%2 == 1 {
				fmt.Fprintf(&b, "  check \"c_%s\" {\n    input         = \"a_%s\"\n    row_count_min = 1\n  }\n", name, name)
				fmt.Fprintf(&b, "  sink \"s_%s\" {\n%s  }\n", name, sink(name))
				fmt.Fprintf(&b, "  publish \"p_%s\" {\n    artifact = \"a_%s\"\n    sink     = \"s_%s\"\n  }\n", name, name, name)
				published = append(published, name)
			}
		}
	}
	b.WriteString("}\n")
	return b.String(), published
}

// Directory is a fenced directory sink at warehouse/<task>.
func Directory(task string) string {
	return fmt.Sprintf("    type    = \"directory\"\n    path    = \"warehouse/%s\"\n    fencing = \"token\"\n", task)
}

// S3 is an s3 sink (fenced by token, its default) at s3://lake/<task>.
func S3(task string) string {
	return fmt.Sprintf("    type = \"s3\"\n    path = \"s3://lake/%s\"\n", task)
}

// Step is the task command (step.sh TASK): its one output's data.csv names
// the interval and the task.
const Step = `#!/bin/sh
sleep 0.02
out=$(env | sed -n 's/^PIPEC_OUTPUT_[^=]*=//p' | head -1)
printf 'id,interval,task\n1,%s,%s\n' "$PIPEC_INTERVAL_START" "$1" > "$out/data.csv"
`
