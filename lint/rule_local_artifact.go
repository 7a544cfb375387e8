package lint

import (
	"path"
	"slices"
	"strings"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/diag"
)

var ruleLocalArtifact = Rule{
	ID:       "local-artifact",
	Severity: diag.Warning,
	Doc: `an artifact or sink path on worker-local storage (/tmp, a relative path outside the workspace), or several workers without a shared artifact store

A sink path, a command argument, an env value or a check command that points
at worker-local storage: /tmp, /var/tmp, /dev/shm, or (for a sink) a relative
path that escapes the workspace with "..". The same for the pipeline's shared
artifact store (artifacts = "..."), the folder every worker reads accepted
versions from: on worker-local storage it is not shared at all. Paths inside
the configured artifact store are not reported again (one mistake, one
finding).

A pipeline that runs on several workers (its workers = N above 1, or a pool
of more than one worker from .pipec.yaml or pipec lint --workers) and has a
task reading an artifact another task produces needs a shared artifact store:
without artifacts = "...", each accepted version stays on the disk of the
worker that made it, and the reader, claimed by another worker, cannot find
it (workers on a database server refuse to run such tasks). The finding is
at the pipeline's workers field, or its block when the pool comes from
elsewhere; a single worker, a store that is set, or tasks that read no other
task's output are fine. Workers all started with --artifacts DIR have a
store lint cannot see: set artifacts in the spec as well (each worker's flag
still wins, for a share mounted at another path).

An object store is shared storage: artifacts = "s3://bucket/prefix" (an S3
bucket or an S3-compatible server: MinIO, R2, versitygw) needs no folder
mounted anywhere, each worker downloads the versions it reads into its own
--workdir. An s3:// path is never worker-local; what is reported is a
location the runtime cannot use as written: an artifact store or a sink
path with another scheme (gs://, hdfs://: pipec opens a folder or s3://), a
directory sink given an s3:// path (it would make a local folder named
"s3:"; use type = "s3"), and an s3 sink whose path is not an s3:// URL.

A dependency is satisfied by an accepted artifact, never by a temporary path
another worker cannot see: data written to /tmp on one worker is missing on the
next (after a retry, a failover or a restart), and a path above the workspace
depends on where the pipeline happens to be checked out. Write outputs to the
staging directory pipec gives each attempt ($PIPEC_OUTPUT_<artifact>) and
publish them through a sink inside the workspace or on shared storage; put
the artifact store on a filesystem every worker mounts.

Bad:

    pipeline "orders" {
      artifacts = "/tmp/pipec/artifacts"
      task "extract" {
        command = ["./extract.sh", "--out", "/tmp/raw_orders.csv"]
      }
      sink "warehouse" {
        type = "directory"
        path = "../warehouse/orders"
      }
    }

Fixed:

    pipeline "orders" {
      artifacts = "s3://pipec-artifacts/orders"
      task "extract" {
        command = ["./extract.sh"]
        outputs = ["raw_orders"]
      }
      sink "warehouse" {
        type = "directory"
        path = "warehouse/orders"
      }
    }
`,
	Run: runLocalArtifact,
}

// localDirs are worker-local temporary folders.
var localDirs = []string{"/tmp", "/var/tmp", "/dev/shm"}

func runLocalArtifact(pass *Pass) error {
	ix := pass.Index
	p := pass.Spec
	store := ""
	if p.Artifacts != "" && !strings.Contains(p.Artifacts, "://") && !p.Refused("artifacts") {
		store = path.Clean(p.Artifacts)
		at := p.At("artifacts", p.Range)
		if dir, ok := workerLocal(p.Artifacts); ok {
			pass.Reportf(at, "the artifact store %q is under %s, on one worker's disk: a task on another worker cannot read the versions put there; use a folder on a filesystem every worker mounts", p.Artifacts, dir)
		} else if escapesWorkspace(p.Artifacts) {
			pass.Reportf(at, "the artifact store %q is outside the workspace (it climbs out with ..): where that lands depends on where each worker checks the pipeline out; use an absolute path on shared storage", p.Artifacts)
		}
	}
	if i := strings.Index(p.Artifacts, "://"); i > 0 && !strings.HasPrefix(p.Artifacts, "s3://") && !p.Refused("artifacts") {
		pass.Reportf(p.At("artifacts", p.Range), "the artifact store %q is a %s:// URL, which pipec cannot open: use a folder every worker mounts, or an S3 bucket (s3://bucket/prefix)", p.Artifacts, p.Artifacts[:i])
	}
	reportNoSharedStore(pass)
	// inStore: a path inside the configured store is judged once, above.
	inStore := func(v string) bool {
		if store == "" || v == "" {
			return false
		}
		c := path.Clean(v)
		return c == store || strings.HasPrefix(c, strings.TrimSuffix(store, "/")+"/")
	}
	for i := range pass.Spec.Sinks {
		s := &pass.Spec.Sinks[i]
		if ix.Sinks[s.Name] != s || s.Refused("path") || s.Refused("type") {
			continue
		}
		isURL := strings.HasPrefix(s.Path, "s3://")
		switch {
		case s.Type == compiler.SinkTypeDirectory && isURL:
			pass.Reportf(s.At("path", s.Range), "sink %q is a directory sink with path %q, an object store URL: it would write a local folder named \"s3:\" on each worker; use type = \"s3\" to publish to the bucket", s.Name, s.Path)
			continue
		case s.Type == compiler.SinkTypeS3 && !isURL:
			pass.Reportf(s.At("path", s.Range), "sink %q is an s3 sink with path %q, which is not an s3:// URL: give the bucket and prefix (path = \"s3://bucket/prefix\")", s.Name, s.Path)
			continue
		}
		if strings.Contains(s.Path, "://") || inStore(s.Path) {
			continue
		}
		if dir, ok := workerLocal(s.Path); ok {
			pass.Reportf(s.At("path", s.Range), "sink %q writes to %q, under %s on one worker's disk: other workers and readers cannot see it; use a path in the workspace or on shared storage", s.Name, s.Path, dir)
		} else if escapesWorkspace(s.Path) {
			pass.Reportf(s.At("path", s.Range), "sink %q writes to %q, outside the workspace (it climbs out with ..): where that lands depends on where the pipeline is checked out; use a path inside the workspace or an absolute path on shared storage", s.Name, s.Path)
		}
	}
	for _, t := range ix.TaskList {
		if arg, dir, ok := firstLocal(t.Command, inStore); ok {
			pass.Reportf(t.At("command", t.Range), "task %q passes %q, under %s on one worker's disk: another worker cannot read it after a retry or failover; write outputs to $PIPEC_OUTPUT_<artifact> and declare them in outputs", t.Name, arg, dir)
		}
		for _, k := range sortedKeys(t.Env) {
			if dir, ok := workerLocal(valuePath(t.Env[k])); ok && !inStore(valuePath(t.Env[k])) {
				pass.Reportf(t.At("env."+k, t.At("env", t.Range)), "task %q sets %s to %q, under %s on one worker's disk: another worker cannot read it after a retry or failover; use $PIPEC_OUTPUT_<artifact> for outputs", t.Name, k, t.Env[k], dir)
			}
		}
	}
	for i := range pass.Spec.Checks {
		c := &pass.Spec.Checks[i]
		if arg, dir, ok := firstLocal(c.Command, inStore); ok {
			pass.Reportf(c.At("command", c.Range), "check %q passes %q, under %s on one worker's disk: the audit must read the artifact version it accepts, not a worker-local copy", c.Name, arg, dir)
		}
	}
	return nil
}

// reportNoSharedStore reports a pipeline meant for several workers whose
// tasks hand artifacts to each other without a shared artifact store. The
// pool is the one the linter was told of (Pass.Workers: the configuration,
// the flag, else the spec's workers); the finding names the first reader
// and producer, in spec order.
func reportNoSharedStore(pass *Pass) {
	p, ix := pass.Spec, pass.Index
	if pass.Workers < 2 || p.Artifacts != "" || p.Refused("artifacts") {
		return
	}
	for _, t := range ix.TaskList {
		for _, in := range t.Inputs {
			prod := ix.Producer[in.Artifact]
			if prod == nil || prod == t {
				continue
			}
			from, at := "from .pipec.yaml or --workers", p.NameRange
			if p.Has("workers") && p.Workers == pass.Workers {
				from, at = "its workers field", p.At("workers", p.NameRange)
			}
			pass.Reportf(at, "pipeline %q runs on %d workers (%s) but sets no shared artifact store: task %q reads %q, which task %q produces, and each accepted version would stay on the disk of the worker that made it; set artifacts to a folder on a filesystem every worker mounts (artifacts = \"/mnt/shared/pipec/artifacts\")",
				p.Name, pass.Workers, from, t.Name, in.Artifact, prod.Name)
			return
		}
	}
}

// workerLocal reports whether p is a worker-local temporary path and under
// which folder.
func workerLocal(p string) (string, bool) {
	if !strings.HasPrefix(p, "/") {
		return "", false
	}
	clean := path.Clean(p)
	for _, d := range localDirs {
		if clean == d || strings.HasPrefix(clean, d+"/") {
			return d, true
		}
	}
	return "", false
}

// valuePath returns the path part of an argument: the value of --flag=PATH,
// or the argument itself.
func valuePath(arg string) string {
	if strings.HasPrefix(arg, "-") {
		if _, v, ok := strings.Cut(arg, "="); ok {
			return v
		}
	}
	return arg
}

// firstLocal is the first argument on worker-local storage, leaving out
// those skip says are judged elsewhere.
func firstLocal(args []string, skip func(string) bool) (arg, dir string, ok bool) {
	for _, a := range args {
		if d, ok := workerLocal(valuePath(a)); ok && !skip(valuePath(a)) {
			return a, d, true
		}
	}
	return "", "", false
}

// escapesWorkspace reports whether a relative path leaves the spec's folder.
func escapesWorkspace(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") {
		return false
	}
	clean := path.Clean(p)
	return clean == ".." || strings.HasPrefix(clean, "../")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
