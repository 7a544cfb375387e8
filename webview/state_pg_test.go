package webview

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pipec/pipec/internal/pgtest"
	"github.com/pipec/pipec/runtime/store"
	"github.com/pipec/pipec/runtime/store/postgres"
)

// A PostgreSQL state that stops answering, its connections open: a run's
// live poll and its page say that the state does not answer (503) within
// the bound, where they waited for ever and the page's polling stopped
// with them; once the server answers again, so do they.
func TestStateStopsAnswering(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, srv.NewSchema(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the thaw (cleanups run last first)
	r, err := st.CreateRun(ctx, store.NewRun{Pipeline: "live", Interval: "2024-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer((&Server{Src: &Source{Store: st}, StateName: "pg", AnswerWithin: 500 * time.Millisecond}).Handler())
	t.Cleanup(hs.Close)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	live := fmt.Sprintf("/run/live?id=%s&seq=0", url.QueryEscape(r.ID))
	if code, b := get(live); code != http.StatusOK {
		t.Fatalf("live: %d %s", code, b)
	}
	thaw := srv.Frozen(t)
	for _, path := range []string{live, "/run?id=" + url.QueryEscape(r.ID), "/"} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			code, b := get(path)
			if code != http.StatusServiceUnavailable || !strings.Contains(b, "does not answer") {
				t.Errorf("%s from a silent state: %d\n%s", path, code, b)
			}
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no answer from the ui", path)
		}
	}
	thaw()
	if code, b := get(live); code != http.StatusOK || !strings.Contains(b, `"state":"running"`) {
		t.Fatalf("live once the server answers again: %d %s", code, b)
	}
}
