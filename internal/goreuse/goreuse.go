// Package goreuse starts functions on goroutines that are kept, once their
// function returns, for the next one.
//
// A new goroutine starts on a small stack and grows it by copying as its
// calls deepen. A run of short tasks starts a few goroutines per task, each
// growing its stack again (the runtime's adaptive starting size only moves
// at a garbage collection, and a run of 1,000 no-op tasks collects twice):
// about 4% of pipec's CPU in such a run went to copying stacks. A goroutine
// kept idle keeps its grown stack for the next function, as gRPC's stream
// workers do for the same reason.
package goreuse

import "sync"

// Pool starts functions on kept goroutines. Its zero value is ready; Close
// ends the idle ones. A Pool never bounds how many functions run at once:
// Go starts a new goroutine whenever none is idle, so a function may wait
// for another started after it.
type Pool struct {
	mu     sync.Mutex
	idle   []chan func() // the most recently idle last
	closed bool
}

// Go runs f on an idle goroutine of the pool, or on a new one.
func (p *Pool) Go(f func()) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		next := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		next <- f // buffered: the goroutine takes it when it is scheduled
		return
	}
	p.mu.Unlock()
	go p.work(f)
}

// work runs f, then the functions handed to it while it is idle, until the
// pool is closed.
func (p *Pool) work(f func()) {
	next := make(chan func(), 1)
	for f != nil {
		f()
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, next)
		p.mu.Unlock()
		f = <-next // nil once Close closed it
	}
}

// Close ends the idle goroutines, and each running one once its function
// returns. It does not wait for them. Go still works after Close, on a new
// goroutine that ends with its function.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, next := range idle {
		close(next)
	}
}

// Idle says how many goroutines wait for a function: those a later Go
// reuses rather than start.
func (p *Pool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
