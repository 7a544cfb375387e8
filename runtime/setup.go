package runtime

import (
	"cmp"
	"path/filepath"
	"slices"
	"time"

	"github.com/pipec/pipec/compiler"
	"github.com/pipec/pipec/runtime/exec"
	"github.com/pipec/pipec/runtime/store"
)

// PlanSetup is what a runner derives from its plan and options alone,
// whatever task it runs: absolute paths, the parsed environment, the
// values of the plan's secret_env names, the tasks by name and the
// interval. Deriving it walks the whole plan, so a worker prepares it once
// per plan (PreparePlan) and hands it to each visit of that plan, and a
// backfill to each of its runs (Options.Setup), rather than redo it per
// task or run; the commands found in PATH are remembered across them too.
// It is read only once made (but for paths, safe for concurrent use), and
// may be shared by concurrent runs and visits.
type PlanSetup struct {
	// What it was derived from: a runner whose options differ derives its
	// own (fits).
	plan                     *compiler.Plan
	rawStatePath, rawBaseDir string
	interval                 string
	environ                  []string
	statePath, baseDir       string // absolute
	parentEnv                exec.Env
	baseEnv                  []string // the variables of parentEnv every task gets (exec.BaseEnv), rendered: each task's environment starts from them
	secrets                  []string
	tasks                    map[string]*compiler.PlanTask
	// paths remembers where the tasks' commands were found in PATH. The one
	// part that changes once made: each visit of a worker makes a runner of
	// its own, and a cache per runner would search PATH at every task.
	paths *exec.Paths
	// digests are the plan's task digests (compiler.TaskDigest), which its
	// runs record and compare with earlier runs'; defined holds those of
	// the interval's earlier runs, read once for all the visits of the plan
	// (they never change).
	digests map[string]string
	defined *runDefinitions
	// iv is the interval, when resolved: a visit resolves one that is not
	// and says why it cannot.
	iv       Interval
	resolved bool
	// checksOf and pubsOf are the plan's checks and publishes by the
	// artifact they read, and leasePoll how often a runner looks for
	// expired leases: derived from the whole plan, once, not by each
	// visit's runner (a 1,000-task run's visits walked the plan 1,000
	// times).
	checksOf  map[string][]compiler.PlanCheck
	pubsOf    map[string][]compiler.PlanPublish
	leasePoll time.Duration
}

// PreparePlan derives o's PlanSetup. Relative paths are made absolute
// against the current directory now, as a runner would at its start.
func PreparePlan(o Options) (*PlanSetup, error) {
	s := &PlanSetup{plan: o.Plan, rawStatePath: o.StatePath, rawBaseDir: o.BaseDir, interval: o.Interval,
		environ: slices.Clone(o.Environ), paths: new(exec.Paths), digests: o.Plan.TaskDigests(), defined: new(runDefinitions)}
	if iv, err := ResolveInterval(o.Plan.Schedule, o.Interval); err == nil {
		s.iv, s.resolved = iv, true
	}
	var err error
	if s.statePath, err = filepath.Abs(cmp.Or(o.StatePath, store.DefaultPath)); err != nil {
		return nil, err
	}
	if s.baseDir, err = filepath.Abs(cmp.Or(o.BaseDir, ".")); err != nil {
		return nil, err
	}
	s.baseEnv = exec.Env{}.Parse(exec.BaseEnv(o.Environ)).List()
	s.parentEnv = exec.Env{}.Parse(o.Environ)
	p := o.Plan
	s.tasks = make(map[string]*compiler.PlanTask, len(p.Tasks))
	for i := range p.Tasks {
		t := &p.Tasks[i]
		s.tasks[t.Name] = t
		for _, name := range t.SecretEnv {
			if v, ok := s.parentEnv[name]; ok && v != "" {
				s.secrets = append(s.secrets, v)
			}
		}
	}
	s.checksOf = map[string][]compiler.PlanCheck{}
	for _, c := range p.Checks {
		s.checksOf[c.Input] = append(s.checksOf[c.Input], c)
	}
	s.pubsOf = map[string][]compiler.PlanPublish{}
	for _, pub := range p.Publishes {
		s.pubsOf[pub.Artifact] = append(s.pubsOf[pub.Artifact], pub)
	}
	s.leasePoll = leasePoll(p)
	return s, nil
}

// intervalOf is o's interval as s resolved it, when s was made for that
// interval and could resolve it.
func (s *PlanSetup) intervalOf(o Options) (Interval, bool) {
	if s == nil || !s.resolved || s.interval != o.Interval {
		return Interval{}, false
	}
	return s.iv, true
}

// fits reports whether s was derived from o's plan, paths and environment:
// the interval is not part of it (a backfill's runs share one), and s's
// resolved interval is used only for the one it was made with.
func (s *PlanSetup) fits(o Options) bool {
	return s != nil && s.plan == o.Plan && s.rawStatePath == o.StatePath && s.rawBaseDir == o.BaseDir &&
		slices.Equal(s.environ, o.Environ)
}
