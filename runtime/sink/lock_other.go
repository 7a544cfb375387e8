//go:build !unix

package sink

import "errors"

// lockFile is unsupported where flock is missing: the directory sink needs an
// atomic rename over a symbolic link and a cross-process lock.
func lockFile(string) (func(), error) {
	return nil, errors.New("the directory sink needs a unix system (flock, atomic rename of links)")
}
