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

// ParseDuration parses a spec duration ("10s", "1h30m", "24h"). Durations must be
// positive: a zero timeout or lease is always a mistake.
func ParseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: write a number with a unit, such as \"30s\", \"10m\" or \"24h\"", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("invalid duration %q: must be greater than zero", s)
	}
	return d, nil
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
