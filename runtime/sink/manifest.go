package sink

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pipec/pipec/runtime/store"
)

// ManifestName is the lineage manifest in every published version folder:
// PATH/.versions/<version>/_pipec.json, so PATH/<interval>/_pipec.json
// through the link. The name is reserved: an output that holds a top-level
// file of that name is refused at publish.
const ManifestName = "_pipec.json"

// ManifestSchema names the manifest's format.
const ManifestSchema = "pipec/lineage/v1"

// Manifest is the lineage of one published version: who made it, from which
// code, under which token, and which checks accepted it.
//
// The manifest is not part of the content digest. The digest describes the
// task's output alone (what the audit accepted), so two attempts that write
// the same bytes have the same digest and reuse and idempotent publishes
// compare data, not bookkeeping. The manifest is written beside the content,
// into the version folder before the folder is renamed into place (and so
// before any link names it); the folder's name carries the digest and the
// token, so each folder stays immutable and its manifest true for it. To
// check a folder against its digest, use ContentDigest, which leaves the
// manifest out.
type Manifest struct {
	Schema      string          `json:"schema"`
	Pipeline    string          `json:"pipeline"`
	Artifact    string          `json:"artifact"`
	Interval    string          `json:"interval"`
	CodeVersion string          `json:"code_version"`
	Run         string          `json:"run"`
	Task        string          `json:"task"`
	Attempt     int             `json:"attempt"`
	Token       int64           `json:"token"`
	Digest      string          `json:"digest"`
	Checks      []ManifestCheck `json:"checks"`
}

// ManifestCheck is one check that accepted the version, and the run in which
// it did (an earlier run's for a reused version).
type ManifestCheck struct {
	Name string `json:"name"`
	Run  string `json:"run"`
}

// Lineage gives a publish what the version record does not hold: the
// pipeline's name and the checks that accepted the version.
type Lineage func(v store.Version) (pipeline string, checks []ManifestCheck)

// manifestOf builds the manifest of v.
func manifestOf(v store.Version, lineage Lineage) Manifest {
	m := Manifest{Schema: ManifestSchema, Artifact: v.Artifact, Interval: v.Interval, CodeVersion: v.CodeVersion,
		Run: v.Run, Task: v.Task, Attempt: v.Attempt, Token: v.Token, Digest: v.Digest, Checks: []ManifestCheck{}}
	if lineage != nil {
		m.Pipeline, m.Checks = lineage(v)
		if m.Checks == nil {
			m.Checks = []ManifestCheck{}
		}
	}
	if m.Pipeline == "" {
		m.Pipeline = v.Pipeline
	}
	if m.Pipeline == "" {
		// A run id starts with the pipeline's name: "orders/2024-01-01/r1".
		m.Pipeline, _, _ = strings.Cut(v.Run, "/")
	}
	return m
}

// writeManifest writes m into the version folder dir (not yet renamed into
// place): read-only, fsynced; the caller syncs dir.
func writeManifest(dir string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, ManifestName), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("lineage manifest: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("lineage manifest: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("lineage manifest: %w", err)
	}
	return f.Close()
}

// ReadManifest reads the manifest of a version folder (resolve the sink's
// link once, e.g. with Directory.Visible, and pass the folder it names).
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestName), err)
	}
	if m.Schema != ManifestSchema {
		return m, fmt.Errorf("%s: schema %q, want %q", filepath.Join(dir, ManifestName), m.Schema, ManifestSchema)
	}
	return m, nil
}

// refuseReserved fails when a staged output holds the manifest's name.
func refuseReserved(staging string) error {
	if _, err := os.Lstat(filepath.Join(staging, ManifestName)); err == nil {
		return fmt.Errorf("the output holds %s, a name pipec reserves for the lineage manifest", ManifestName)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// ContentDigest is Digest of a published version folder without its
// manifest: equal to the version's recorded digest while the folder is
// intact.
func ContentDigest(dir string) (string, error) {
	digest, _, err := walkCopyExcept(dir, "", ManifestName)
	return digest, err
}
