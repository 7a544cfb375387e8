package exec

import (
	"sort"
	"strings"
)

// passed reports whether a variable of pipec's own environment goes to a
// task: what a program needs to find commands, its home and its locale, and
// nothing else (credentials reach a task only through secret_env).
func passed(k string) bool {
	switch k {
	case "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "TZ", "LANG", "LANGUAGE", "TERM":
		return true
	}
	return strings.HasPrefix(k, "LC_")
}

// BaseEnv filters environ ("KEY=value" entries, as os.Environ returns) to the
// variables every task gets: PATH, HOME, USER, LOGNAME, SHELL, TMPDIR, TZ,
// LANG, LANGUAGE, TERM and LC_*.
func BaseEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if ok && passed(k) {
			out = append(out, kv)
		}
	}
	return out
}

// Env is an environment under construction; later Set calls win. It renders
// sorted, so a task's environment is deterministic.
type Env map[string]string

// Parse adds "KEY=value" entries.
func (e Env) Parse(environ []string) Env {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			e[k] = v
		}
	}
	return e
}

// List renders the environment as sorted "KEY=value" entries.
func (e Env) List() []string {
	out := make([]string, 0, len(e))
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Over renders base, sorted "KEY=value" entries as List renders them, with
// e's variables set over it: what List renders of base's variables and e's
// together, e's value winning. A task's environment is a few variables of
// its own over pipec's, the same for every task; copying pipec's into a map
// and rendering it again at every task was a third of preparing one.
func (e Env) Over(base []string) []string {
	own := e.List()
	out := make([]string, 0, len(base)+len(own))
	i := 0
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, mine := e[k]; mine {
			continue
		}
		for i < len(own) && own[i] < kv {
			out = append(out, own[i])
			i++
		}
		out = append(out, kv)
	}
	return append(out, own[i:]...)
}
