package spec

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ValidName reports whether s may name a pipeline element: a letter, then
// letters, digits, '_' or '-'. Names end up in environment variable names,
// file paths and run ids, so nothing else is allowed.
func ValidName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '_' || r == '-'):
		default:
			return false
		}
	}
	return true
}

// ValidEnvName reports whether s may name an environment variable a task
// gets (env keys, secret_env): the shell's rule, not ValidName's, since '-'
// cannot appear in a variable name and a leading '_' can.
func ValidEnvName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_':
		case i > 0 && r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
}

// NameError explains an invalid name, for a diagnostic.
func NameError(kind, s string) string {
	return fmt.Sprintf("invalid %s name %q: use a letter followed by letters, digits, '_' or '-'", kind, s)
}

// ParseDuration parses a spec duration ("10s", "1h30m", "24h") that must be
// greater than zero. Use ParseField for a field of the spec, where zero may
// have a meaning.
func ParseDuration(s string) (time.Duration, error) { return ParseField("", s) }

// ZeroDuration reports whether zero is a meaningful value of a duration field:
// a retry's initial delay and its max_delay (immediate retries, as Airflow
// and Prefect default to; retry-storm reports the missing backoff). Every
// other duration is a length that zero would make meaningless, and
// zeroWhy says why.
func ZeroDuration(field string) bool { return field == "initial" || field == "max_delay" }

// zeroWhy says why a duration field cannot be zero.
func zeroWhy(field string) string {
	switch field {
	case "timeout":
		return "a zero timeout would end every attempt at its start; leave timeout out for no limit"
	case "lease":
		return "a zero lease would expire as soon as it is granted"
	case "every":
		return "a period of zero has no length"
	case "max_elapsed":
		return "zero would allow no retry at all; leave max_elapsed out for no limit, or set max_attempts = 1"
	}
	return "must be greater than zero"
}

// ParseField parses the duration written for the spec field named field
// ("timeout", "initial"); zero is refused, with the reason, unless
// ZeroDuration says it means something.
func ParseField(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: write a number with a unit, such as \"30s\", \"10m\" or \"24h\"", s)
	}
	switch {
	case d < 0:
		return 0, fmt.Errorf("invalid duration %q: must not be negative", s)
	case d == 0 && !ZeroDuration(field):
		return 0, fmt.Errorf("invalid duration %q: %s", s, zeroWhy(field))
	}
	return d, nil
}

// BoundHint explains, after a count written out of its range, what the
// allowed values mean for the field ("" when nothing needs saying). Both
// loaders append it to their message, so `max_attempts = -1` says that 0
// means unlimited: pipec has one spelling for each meaning.
func BoundHint(field string) string {
	switch field {
	case "max_attempts":
		return "; 0 means unlimited attempts (bound them with max_elapsed), 1 means no retry"
	case "per_worker":
		return "; 0 means no limit per worker"
	case "global":
		return "; 0 means the task never fails over"
	case "max_active_runs":
		return "; 0 means no bound on concurrent runs"
	case "workers":
		return "; leave workers out when the pool's size is not known"
	case "slots":
		return "; a pool needs at least one slot to start anything"
	case "min":
		return "; 0 means no retry is always allowed"
	case "exit_codes":
		return "; exit code 0 is success, never a failure to classify, and codes end at 255"
	case "row_count_min", "row_count_max":
		return "; a row count is never negative"
	}
	return ""
}

// ParseTime parses an RFC 3339 timestamp and returns it in UTC.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid timestamp %q: use RFC 3339, such as \"2024-01-01T00:00:00Z\"", s)
	}
	return t.UTC(), nil
}

// ParseInput splits an input reference "artifact" or "artifact@-1" into the
// artifact name and its interval offset.
func ParseInput(s string) (name string, offset int, err error) {
	name, off, found := strings.Cut(s, "@")
	if !ValidName(name) {
		return "", 0, fmt.Errorf("%s", NameError("artifact", name))
	}
	if !found {
		return name, 0, nil
	}
	n, convErr := strconv.Atoi(off)
	if convErr != nil || off == "" || (off[0] != '-' && off[0] != '+' && off != "0") {
		return "", 0, fmt.Errorf("invalid interval offset %q in input %q: write \"%s@-1\" for the previous interval", off, s, name)
	}
	return name, n, nil
}

// InputString is the inverse of ParseInput.
func InputString(name string, offset int) string {
	if offset == 0 {
		return name
	}
	return fmt.Sprintf("%s@%+d", name, offset)
}

// LabelKind marks names that are worker labels (a task's labels, a
// worker's --label): ValidLabel's rule applies, not ValidName's.
const LabelKind = "label"

// EnvVarKind marks names that are environment variables (secret_env, env
// keys): the shell's rule applies, not ValidName's.
const EnvVarKind = "environment variable"

// MaxLabelLen bounds a worker label.
const MaxLabelLen = 63

// ValidLabel reports whether s may be a worker label: a lowercase letter or
// digit, then lowercase letters, digits, '_', '.' or '-', at most
// MaxLabelLen characters. Labels are matched exactly between a task and a
// worker, so one spelling per label (no case, no spaces) keeps "Spark" and
// "spark" from silently never matching; the worker's comma-separated
// --label flag needs them free of commas.
func ValidLabel(s string) bool {
	if s == "" || len(s) > MaxLabelLen {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case i > 0 && (r == '_' || r == '.' || r == '-'):
		default:
			return false
		}
	}
	return true
}

// LabelError explains an invalid worker label, for a diagnostic.
func LabelError(s string) string {
	return fmt.Sprintf("invalid label %q: use a lowercase letter or digit followed by lowercase letters, digits, '_', '.' or '-' (at most %d characters)", s, MaxLabelLen)
}
