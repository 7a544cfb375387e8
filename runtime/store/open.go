package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// Location is where a state lives, parsed from a --state value (or
// PIPEC_STATE): today a path to an SQLite file. A server URL is one more
// case here, and nothing else in pipec changes.
type Location struct {
	// Value is what was given.
	Value string
	// Path is the SQLite database file.
	Path string
}

// ParseLocation reads a --state value. A URL with a scheme this build has
// no store for is refused with a message, never read as a file name.
func ParseLocation(value string) (Location, error) {
	if value == "" {
		return Location{}, errors.New("no state given")
	}
	if scheme, _, ok := strings.Cut(value, "://"); ok && !strings.ContainsAny(scheme, `/\`) {
		return Location{}, fmt.Errorf("state %q: this pipec has no store for %s:// URLs (give the path of an SQLite file)", value, scheme)
	}
	return Location{Value: value, Path: value}, nil
}

// Exists reports whether the state was ever created (status and events
// never create one).
func (l Location) Exists() (bool, error) {
	_, err := os.Stat(l.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// String is the location as a person typed it.
func (l Location) String() string { return l.Value }

// Open opens (creating if needed) the store at the location.
func (l Location) Open(ctx context.Context, opt Options) (Store, error) {
	return Open(ctx, l.Path, opt)
}
