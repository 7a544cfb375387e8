package webview

import (
	"context"
	"strings"
	"sync"

	"github.com/pipec/pipec/runtime/store"
)

// runFacts is what the runs list and the artifact pages need of one run's
// event log. A finished run's log no longer changes, so its facts are
// kept (factsCache) and its log is read once per viewer, not per page.
type runFacts struct {
	who      string
	versions []recorded // version.recorded, in order
	checks   []passed   // check.passed
	sinks    []published
}

type recorded struct {
	id       int64
	artifact string
}

type passed struct {
	version         int64
	artifact, check string
}

type published struct{ artifact, sink string }

// factsCache holds the facts of finished runs, by run id. Its size is
// bounded by the number of runs in the state; each entry is small.
type factsCache struct{ m sync.Map }

func (s *Source) facts(ctx context.Context, r store.Run) (*runFacts, error) {
	if r.State != store.RunRunning {
		if f, ok := s.cache.m.Load(r.ID); ok {
			return f.(*runFacts), nil
		}
	}
	evs, err := s.Store.Events(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	f := &runFacts{who: s.who(evs[:min(len(evs), 4)])}
	for _, e := range evs {
		switch e.Kind {
		case store.EventVersionRecorded:
			p := payload(e)
			art, _, _ := strings.Cut(str(p, "label"), "@")
			f.versions = append(f.versions, recorded{id: num(p, "version"), artifact: art})
		case "check.passed":
			p := payload(e)
			f.checks = append(f.checks, passed{version: num(p, "version"), artifact: str(p, "artifact"), check: str(p, "check")})
		case store.EventPublishWon, store.EventPublishFenced, store.EventPublishIdempotent:
			p := payload(e)
			f.sinks = append(f.sinks, published{artifact: str(p, "artifact"), sink: str(p, "sink")})
		}
	}
	if r.State != store.RunRunning {
		s.cache.m.Store(r.ID, f)
	}
	return f, nil
}
