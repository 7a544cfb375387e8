// Package spectest writes the pipeline specs that tests attacking a run
// share, so that a local run, workers and a crashed pipec are attacked
// with the same DAG.
package spectest

import (
	"fmt"
	"strings"
)

// Chain is a chain of tasks t0 … t(N-1), each writing one CSV file, a.csv
// ("id", then the task's index), to its output a<i>, which the next task
// reads; a check c<i> wants a row at least, and a publish p<i> puts the
// version into a directory sink s<i> at Sinks/a<i>. Every task thus writes
// the state at its start and end, its version's record, audit and
// acceptance, and its publish.
type Chain struct {
	Pipeline string
	N        int
	// Daily gives the pipeline a daily schedule from 2024-01-01.
	Daily bool
	// CodeVersion is the pipeline's code_version, when set.
	CodeVersion string
	// Before and After are shell commands run before and after the task
	// writes its output ($PIPEC_TASK names the task).
	Before, After string
	// Charging makes every other task (t1, t3, …) not idempotent, with the
	// effect "charge".
	Charging bool
	// Fenced sets fencing = "token" on the sinks.
	Fenced bool
	// Sinks is the sinks' folder, relative to the spec's ("out" when "").
	Sinks string
}

// HCL is the chain's spec.
func (c Chain) HCL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pipeline %q {\n", c.Pipeline)
	if c.CodeVersion != "" {
		fmt.Fprintf(&b, "  code_version = %q\n", c.CodeVersion)
	}
	if c.Daily {
		b.WriteString("  schedule {\n    every = \"24h\"\n    start = \"2024-01-01T00:00:00Z\"\n  }\n")
	}
	sinks := c.Sinks
	if sinks == "" {
		sinks = "out"
	}
	for i := range c.N {
		shell := []string{fmt.Sprintf(`printf 'id\n%d\n' > "$PIPEC_OUTPUT_a%d/a.csv"`, i, i)}
		if c.Before != "" {
			shell = append([]string{c.Before}, shell...)
		}
		if c.After != "" {
			shell = append(shell, c.After)
		}
		fmt.Fprintf(&b, "  task \"t%d\" {\n    command = [\"sh\", \"-c\", %q]\n    outputs = [\"a%d\"]\n", i, strings.Join(shell, "; "), i)
		if i > 0 {
			fmt.Fprintf(&b, "    inputs  = [\"a%d\"]\n", i-1)
		}
		if c.Charging && i%2 == 1 {
			b.WriteString("    effects    = [\"charge\"]\n    idempotent = false\n")
		}
		fmt.Fprintf(&b, "  }\n  check \"c%d\" {\n    input         = \"a%d\"\n    row_count_min = 1\n  }\n", i, i)
		fmt.Fprintf(&b, "  sink \"s%d\" {\n    type = \"directory\"\n    path = \"%s/a%d\"\n", i, sinks, i)
		if c.Fenced {
			b.WriteString("    fencing = \"token\"\n")
		}
		fmt.Fprintf(&b, "  }\n  publish \"p%d\" {\n    artifact = \"a%d\"\n    sink     = \"s%d\"\n  }\n", i, i, i)
	}
	b.WriteString("}\n")
	return b.String()
}

// NotChargedOnce is the charging tasks of a chain of n (t1, t3, …, as
// Charging makes them) that ran other than once, given the tasks that ran,
// one name for each run.
func NotChargedOnce(ran []string, n int) []string {
	runs := map[string]int{}
	for _, task := range ran {
		runs[task]++
	}
	var not []string
	for i := 1; i < n; i += 2 {
		if task := fmt.Sprintf("t%d", i); runs[task] != 1 {
			not = append(not, task)
		}
	}
	return not
}
