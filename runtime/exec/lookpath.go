package exec

import (
	"strings"
	"sync"
)

// Paths remembers where commands were found in PATH, for one run: a run
// starts the same few commands (true, sh, python3) hundreds of times with the
// same PATH and directory, and each search costs one stat per PATH entry
// before the hit (ten failed stats a task on a common PATH, a tenth of a
// 1,000-task run's system calls). The zero value is ready; it is safe for
// concurrent use.
//
// Only hits are remembered, keyed by name, directory and PATH, so a command
// installed during the run is found at its next start. A remembered command
// removed later fails at exec with "no such file or directory" instead of
// "command not found": nothing starts either way. A name with a slash is
// never searched, so never remembered.
type Paths struct {
	mu sync.Mutex
	m  map[pathKey]string
}

type pathKey struct{ name, dir, path string }

// look resolves name as lookPath does, from memory when it can.
func (c *Paths) look(name, dir string, env []string) (string, error) {
	if c == nil || strings.Contains(name, "/") {
		return lookPath(name, dir, env)
	}
	k := pathKey{name: name, dir: dir, path: pathOf(env)}
	c.mu.Lock()
	p, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := lookPath(name, dir, env)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[pathKey]string{}
	}
	c.m[k] = p
	c.mu.Unlock()
	return p, nil
}
