package netdelay

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"
)

// echo serves an echo server on a unix socket and returns its dialer.
func echo(t testing.TB) func() (net.Conn, error) {
	t.Helper()
	path := t.TempDir() + "/echo.sock"
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return func() (net.Conn, error) { return net.Dial("unix", path) }
}

// dialThrough starts a proxy to dial with delay and connects to it; both
// close with the test.
func dialThrough(t testing.TB, dial func() (net.Conn, error), delay time.Duration) (*Proxy, net.Conn) {
	t.Helper()
	p, err := Start(dial, delay)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return p, c
}

// TestBytesArriveWholeAndInOrder: a megabyte written in uneven pieces
// comes back through the proxy (both ways delayed) byte for byte.
func TestBytesArriveWholeAndInOrder(t *testing.T) {
	_, c := dialThrough(t, echo(t), time.Millisecond)
	data := make([]byte, 1<<20)
	rand.Read(data)
	go func() {
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 1+len(rest)%7919)
			if _, err := c.Write(rest[:n]); err != nil {
				return
			}
			rest = rest[n:]
		}
	}()
	got := make([]byte, len(data))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the bytes came back changed or out of order")
	}
}

// TestARoundTripTakesTwoDelays: a question and its answer each wait the
// delay, so a round trip takes at least twice it (the least the proxy
// promises; how much more depends on the machine).
func TestARoundTripTakesTwoDelays(t *testing.T) {
	const delay = 20 * time.Millisecond
	_, c := dialThrough(t, echo(t), delay)
	b := []byte("ping")
	for range 3 {
		start := time.Now()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < 2*delay {
			t.Fatalf("a round trip took %v, under twice the delay of %v", took, delay)
		}
	}
}

// BenchmarkRoundTrip measures a small message's round trip through the
// proxy (rtt-us) beside the round trip it was asked for (asked-us): what
// the proxy adds is its own two hops each way and how late its sleeps
// wake.
func BenchmarkRoundTrip(b *testing.B) {
	for _, delay := range []time.Duration{0, 50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond} {
		b.Run(delay.String(), func(b *testing.B) {
			_, c := dialThrough(b, echo(b), delay)
			msg := make([]byte, 16)
			for b.Loop() {
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, msg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "rtt-us")
			b.ReportMetric(float64(2*delay.Microseconds()), "asked-us")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// TestCloseEndsConnections: Close ends the connections it joined, and a
// client sees its connection end.
func TestCloseEndsConnections(t *testing.T) {
	p, c := dialThrough(t, echo(t), time.Millisecond)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	one := make([]byte, 1)
	if _, err := io.ReadFull(c, one); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(one); err == nil {
		t.Fatal("the connection still answers after Close")
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("the proxy still accepts after Close")
	}
}
