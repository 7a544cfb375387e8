package compiler

import (
	"fmt"
	"strconv"

	"github.com/pipec/pipec/diag"
	"github.com/pipec/pipec/spec"
)

// RuleInputVariable is an input whose environment variable is another's: an
// artifact named like the variable of an input at an offset (raw_PREV beside
// raw@-1), so one variable would stand for two inputs and the task would
// read one of them as the other.
const RuleInputVariable = "input-variable-collision"

// InputVarPrefix starts the variable naming an input's version folder.
const InputVarPrefix = "PIPEC_INPUT_"

// OffsetSuffix is what an input at an interval offset adds to its artifact's
// variable: "" for this interval, "_PREV" for -1, "_PREV<n>" for -n and
// "_NEXT<n>" for +n (runtime: PIPEC_INPUT_raw_PREV is raw@-1).
func OffsetSuffix(offset int) string {
	switch {
	case offset == 0:
		return ""
	case offset == -1:
		return "_PREV"
	case offset < 0:
		return "_PREV" + strconv.Itoa(-offset)
	}
	return "_NEXT" + strconv.Itoa(offset)
}

// InputVars names the variables the runtime sets for an input: its
// artifact's variable plus OffsetSuffix, and, for an input at an offset of a
// task that does not read the artifact of its own interval (plainTaken
// false), the artifact's plain variable as well.
func InputVars(artifact string, offset int, plainTaken bool) []string {
	base := InputVarPrefix + artifact
	if offset == 0 {
		return []string{base}
	}
	if plainTaken {
		return []string{base + OffsetSuffix(offset)}
	}
	return []string{base, base + OffsetSuffix(offset)}
}

func inputLabel(in spec.Input) string {
	if in.Offset == 0 {
		return in.Artifact
	}
	return fmt.Sprintf("%s@%+d", in.Artifact, in.Offset)
}

// checkInputVars refuses two inputs of one task whose variables collide
// (reported at the later input, either order), and an artifact named like
// the variable of an input at an offset anywhere in the pipeline (reported
// at the output that declares it), since the name alone invites the mix-up
// as soon as a task reads both. Two inputs of the same artifact at
// different offsets share only the plain alias, which is documented. It
// returns its findings rather than add them: it runs beside link, which adds
// its own.
func (c *compilation) checkInputVars() diag.Diagnostics {
	var ds diag.Diagnostics
	reported := map[[2]string]bool{} // artifact name, offset input label
	// offsetVars maps the suffixed variable's artifact-part (raw_PREV) to
	// the first task and input that read raw@-1.
	type reader struct {
		task string
		in   spec.Input
	}
	offsetVars := map[string]reader{}
	for i := range c.p.Tasks {
		t := &c.p.Tasks[i]
		if c.tasks[t.Name] != t {
			continue
		}
		plain := map[string]bool{}
		for _, in := range t.Inputs {
			if in.Offset == 0 && in.Artifact != "" {
				plain[in.Artifact] = true
			}
		}
		seen := map[string]spec.Input{}
		for _, in := range t.Inputs {
			if in.Artifact == "" {
				continue
			}
			if in.Offset != 0 {
				name := in.Artifact + OffsetSuffix(in.Offset)
				if _, ok := offsetVars[name]; !ok {
					offsetVars[name] = reader{t.Name, in}
				}
			}
			for _, v := range InputVars(in.Artifact, in.Offset, plain[in.Artifact]) {
				first, ok := seen[v]
				if !ok {
					seen[v] = in
					continue
				}
				if first.Artifact == in.Artifact {
					continue // the plain alias of two offsets of one artifact
				}
				// One of the two has v as its plain variable (PIPEC_INPUT_raw_PREV
				// for raw_PREV): its artifact's name is the one to change; the
				// other reads at an offset (raw@-1).
				offsetIn, named := first, in
				if v == InputVarPrefix+first.Artifact {
					offsetIn, named = in, first
				}
				reported[[2]string{named.Artifact, inputLabel(offsetIn)}] = true
				ds = append(ds, diag.Errorf(RuleInputVariable, in.Range,
					"task %q reads %s and %s, which both would be %s: the task would read one as the other; rename artifact %q (inputs of other intervals are %s<artifact>_PREV, _PREV<n> and _NEXT<n>)",
					t.Name, inputLabel(first), inputLabel(in), v, named.Artifact, InputVarPrefix))
			}
		}
	}
	for i := range c.p.Tasks {
		t := &c.p.Tasks[i]
		if c.tasks[t.Name] != t {
			continue
		}
		for _, o := range t.Outputs {
			r, ok := offsetVars[o.Name]
			if !ok || c.producer[o.Name] != t.Name || reported[[2]string{o.Name, inputLabel(r.in)}] {
				continue
			}
			ds = append(ds, diag.Errorf(RuleInputVariable, o.Range,
				"artifact %q is named like the variable of input %s of task %q (%s%s): a task reading both would read one as the other; rename the artifact",
				o.Name, inputLabel(r.in), r.task, InputVarPrefix, o.Name))
		}
	}
	return ds
}
