// Package gendag generates the benchmark DAG: one random DAG written in four
// forms, so that pipec and its peers are measured on the same work.
//
//	pipeline.hcl   a pipec spec
//	pipeline.cue   the same spec in CUE (the same plan)
//	workflow.yml   a GitHub Actions workflow whose jobs form the same DAG (for actionlint)
//	Makefile       the same DAG as make targets that run `true` (for make -j)
//
// Task i > 0 depends on 1 to 3 random earlier tasks. Every 10th task also
// produces an artifact, which a later task may read; the last task writes a
// one-row CSV, the artifact `final`, which a check accepts and a publish makes
// visible. Every 7th task is retried. The family is fixed by (n, seed): the
// same pair gives the same bytes on every machine and Go version, so figures
// measured on it stay comparable. The command is bench/gendag:
//
//	go run ./bench/gendag -n 10000 -seed 42 -out DIR
package gendag

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DAG is one generated DAG: tasks t0 … t(n-1), in order.
type DAG struct {
	Tasks []Task
}

// Task is one task of the DAG.
type Task struct {
	Deps   []int  // earlier tasks it depends on, ascending
	Output string // the artifact it produces, or ""
	Input  string // the artifact it reads, or ""
}

// Generate makes the DAG of n tasks (n >= 2) for a seed. It uses math/rand's
// seeded source on purpose: its sequence is fixed by the Go 1 promise, so the
// family does not change under a benchmark's feet.
func Generate(n int, seed int64) (*DAG, error) {
	if n < 2 {
		return nil, fmt.Errorf("gendag: %d tasks: the DAG needs at least 2", n)
	}
	r := rand.New(rand.NewSource(seed))
	tasks := make([]Task, n)
	var unread []string // artifacts produced and not yet read, oldest first
	for i := 1; i < n; i++ {
		deps := map[int]bool{}
		for k := 1 + r.Intn(3); k > 0; k-- {
			deps[r.Intn(i)] = true
		}
		for d := range deps {
			tasks[i].Deps = append(tasks[i].Deps, d)
		}
		slices.Sort(tasks[i].Deps)
		if len(unread) > 0 && r.Intn(5) == 0 {
			tasks[i].Input, unread = unread[0], unread[1:]
		}
		if i%10 == 0 {
			tasks[i].Output = fmt.Sprintf("a%d", i)
			unread = append(unread, tasks[i].Output)
		}
	}
	tasks[0].Output = "a0"
	tasks[n-1].Output = "final"
	return &DAG{Tasks: tasks}, nil
}

// Files are the four forms, by file name.
func (d *DAG) Files() map[string][]byte {
	return map[string][]byte{
		"pipeline.hcl": d.HCL(),
		"pipeline.cue": d.CUE(),
		"workflow.yml": d.Workflow(),
		"Makefile":     d.Makefile(),
	}
}

// WriteFiles writes the four forms into dir, creating it.
func (d *DAG) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, b := range d.Files() {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// command is task i's argv: `true`, except for the last task, which writes
// the one-row CSV the check accepts and the publish makes visible.
func (d *DAG) command(i int) string {
	if i == len(d.Tasks)-1 {
		return `["sh", "-c", "printf 'id\\n1\\n' > \"$PIPEC_OUTPUT_final/final.csv\""]`
	}
	return `["true"]`
}

// taskList is ids as a list of quoted task names: "t1", "t4".
func taskList(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprintf(`"t%d"`, id)
	}
	return strings.Join(s, ", ")
}

// HCL is the pipec spec in HCL.
func (d *DAG) HCL() []byte {
	var b bytes.Buffer
	b.WriteString("pipeline \"bench\" {\n  code_version = \"1\"\n\n")
	b.WriteString("  schedule {\n    every   = \"24h\"\n    start   = \"2024-01-01T00:00:00Z\"\n    catchup = false\n  }\n\n")
	b.WriteString("  error \"transient\" { exit_codes = [75] }\n\n")
	b.WriteString("  retry \"default\" {\n    max_attempts = 3\n    initial      = \"1s\"\n    multiplier   = 2\n" +
		"    max_delay    = \"1m\"\n    jitter       = \"full\"\n    max_elapsed  = \"10m\"\n    on           = [\"transient\"]\n  }\n\n")
	for i, t := range d.Tasks {
		fmt.Fprintf(&b, "  task \"t%d\" {\n    command = %s\n    timeout = \"1m\"\n", i, d.command(i))
		if len(t.Deps) > 0 {
			fmt.Fprintf(&b, "    depends_on = [%s]\n", taskList(t.Deps))
		}
		if t.Input != "" {
			fmt.Fprintf(&b, "    inputs = [%q]\n", t.Input)
		}
		if t.Output != "" {
			fmt.Fprintf(&b, "    outputs = [%q]\n", t.Output)
		}
		if i%7 == 0 {
			b.WriteString("    retry = \"default\"\n")
		}
		b.WriteString("  }\n\n")
	}
	b.WriteString("  check \"final_ok\" {\n    input         = \"final\"\n    row_count_min = 1\n  }\n\n")
	b.WriteString("  sink \"out\" {\n    type    = \"directory\"\n    path    = \"warehouse/bench\"\n    fencing = \"token\"\n  }\n\n")
	b.WriteString("  publish \"final_out\" {\n    artifact = \"final\"\n    sink     = \"out\"\n  }\n}\n")
	return b.Bytes()
}

// CUE is the same spec in CUE, one task per line.
func (d *DAG) CUE() []byte {
	var b bytes.Buffer
	b.WriteString("pipeline: bench: {\n\tcode_version: \"1\"\n")
	b.WriteString("\tschedule: {every: \"24h\", start: \"2024-01-01T00:00:00Z\", catchup: false}\n")
	b.WriteString("\terror: transient: {exit_codes: [75]}\n")
	b.WriteString("\tretry: default: {max_attempts: 3, initial: \"1s\", multiplier: 2, max_delay: \"1m\", jitter: \"full\", max_elapsed: \"10m\", on: [\"transient\"]}\n")
	for i, t := range d.Tasks {
		fields := []string{"command: " + d.command(i), `timeout: "1m"`}
		if len(t.Deps) > 0 {
			fields = append(fields, "depends_on: ["+taskList(t.Deps)+"]")
		}
		if t.Input != "" {
			fields = append(fields, fmt.Sprintf("inputs: [%q]", t.Input))
		}
		if t.Output != "" {
			fields = append(fields, fmt.Sprintf("outputs: [%q]", t.Output))
		}
		if i%7 == 0 {
			fields = append(fields, `retry: "default"`)
		}
		fmt.Fprintf(&b, "\ttask: t%d: {%s}\n", i, strings.Join(fields, ", "))
	}
	b.WriteString("\tcheck: final_ok: {input: \"final\", row_count_min: 1}\n")
	b.WriteString("\tsink: out: {type: \"directory\", path: \"warehouse/bench\", fencing: \"token\"}\n")
	b.WriteString("\tpublish: final_out: {artifact: \"final\", sink: \"out\"}\n}\n")
	return b.Bytes()
}

// Workflow is a GitHub Actions workflow whose jobs form the same DAG, each
// running `true`.
func (d *DAG) Workflow() []byte {
	var b bytes.Buffer
	b.WriteString("name: bench\non: push\njobs:\n")
	for i, t := range d.Tasks {
		fmt.Fprintf(&b, "  t%d:\n    runs-on: ubuntu-latest\n", i)
		if len(t.Deps) > 0 {
			fmt.Fprintf(&b, "    needs: [%s]\n", taskList(t.Deps))
		}
		b.WriteString("    steps:\n      - run: \"true\"\n")
	}
	return b.Bytes()
}

// Makefile is the same DAG as phony make targets that run `true`; `all`
// builds every one.
func (d *DAG) Makefile() []byte {
	var all strings.Builder
	for i := range d.Tasks {
		fmt.Fprintf(&all, " t%d", i)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, ".PHONY: all%s\nall:%s\n", all.String(), all.String())
	for i, t := range d.Tasks {
		deps := make([]string, len(t.Deps))
		for j, dep := range t.Deps {
			deps[j] = fmt.Sprintf("t%d", dep)
		}
		fmt.Fprintf(&b, "t%d: %s\n\t@true\n", i, strings.Join(deps, " "))
	}
	return b.Bytes()
}
