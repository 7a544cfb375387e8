// Package netdelay is a loopback TCP proxy that delays every byte by a fixed
// time in each direction: the link of a network whose round trip takes
// twice that, for benchmarks of clients that talk to a server on this
// machine (pipec workers and their PostgreSQL, which on one machine answer
// over a unix socket in microseconds, where a network takes a fraction of
// a millisecond or more).
//
// The kernel's own delay (tc netem) needs a module and privileges a
// container rarely has; this needs neither. It costs CPU of its own and
// adds some 0.1 ms to a round trip it delays (BenchmarkRoundTrip), so only
// figures taken through it compare with each other.
package netdelay

import (
	"net"
	"sync"
	"time"
)

// Proxy accepts connections on a loopback TCP address and joins each to a
// new connection from its dial function, in both directions, every read
// delivered its delay after it arrived, in order.
type Proxy struct {
	ln    net.Listener
	dial  func() (net.Conn, error)
	delay time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// Start listens on 127.0.0.1 (a free port) and proxies each connection to
// dial's, delay later each way.
func Start(dial func() (net.Conn, error), delay time.Duration) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, dial: dial, delay: delay, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every connection and waits for their
// copies to end.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		out, err := p.dial()
		if err != nil {
			in.Close()
			continue
		}
		if !p.track(in, out) {
			return
		}
		p.wg.Add(2)
		go p.copy(out, in)
		go p.copy(in, out)
	}
}

// track remembers a joined pair, so Close can end it; false once closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = true
	}
	return true
}

// chunk is what one read brought, and when it is due at the other end.
type chunk struct {
	b   []byte
	due time.Time
}

// copy delivers what src sends to dst, each read its delay later; at src's
// end (or any error) both connections close: the proxy serves protocols
// that end a connection whole (PostgreSQL's), not half-closed streams.
func (p *Proxy) copy(dst, src net.Conn) {
	defer p.wg.Done()
	due := make(chan chunk, 1024)
	go func() {
		defer close(due)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				due <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(p.delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range due {
		sleepUntil(c.due)
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	for range due { // src may still be sending: let its reader end
	}
	src.Close()
	dst.Close()
	p.mu.Lock()
	delete(p.conns, src)
	delete(p.conns, dst)
	p.mu.Unlock()
}
