package goreuse

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestGoReusesIdleGoroutines runs functions one after another: each finds
// the goroutine of the one before it idle, so one goroutine runs them all.
func TestGoReusesIdleGoroutines(t *testing.T) {
	var p Pool
	defer p.Close()
	before := runtime.NumGoroutine()
	for i := range 50 {
		done := make(chan struct{})
		p.Go(func() { close(done) })
		<-done
		waitIdle(t, &p, 1)
		if n := runtime.NumGoroutine() - before; n != 1 {
			t.Fatalf("after function %d: %d goroutines more than before, want 1 (the kept one)", i, n)
		}
	}
}

// TestGoNeverWaitsForABusyGoroutine: functions that wait for each other all
// run at once, however many there are.
func TestGoNeverWaitsForABusyGoroutine(t *testing.T) {
	var p Pool
	defer p.Close()
	const n = 20
	var started, release sync.WaitGroup
	started.Add(n)
	release.Add(1)
	for range n {
		p.Go(func() {
			started.Done()
			release.Wait()
		})
	}
	started.Wait() // every function is running: none waited for a goroutine
	release.Done()
	waitIdle(t, &p, n)
}

// TestCloseEndsTheGoroutines: idle goroutines end at Close, a running one
// once its function returns; Go still runs functions after Close.
func TestCloseEndsTheGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	var p Pool
	release := make(chan struct{})
	p.Go(func() { <-release })
	for range 3 {
		done := make(chan struct{})
		p.Go(func() { close(done) })
		<-done
	}
	waitIdle(t, &p, 1)
	p.Close()
	close(release)
	ran := make(chan struct{})
	p.Go(func() { close(ran) })
	<-ran
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines more than before the pool, want 0", runtime.NumGoroutine()-before)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitIdle waits until n goroutines of p are idle.
func waitIdle(t *testing.T, p *Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		idle := len(p.idle)
		p.mu.Unlock()
		if idle == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d idle goroutines, want %d", idle, n)
		}
		time.Sleep(time.Millisecond)
	}
}
