package objstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// silenceBound is a dialer whose connections fail a read or a write that
// waits longer than limit with nothing moving either way on the
// connection: a server that stops sending a body, stops taking one, or
// never begins its answer. It bounds silence rather than a transfer's
// length, which for a large version can be anything. Writes move the
// deadline of reads too: the HTTP transport has a read waiting on every
// connection while it sends a request's body, and a long upload is no
// silence. An idle pooled connection is closed after limit, its read
// failing; the transport then dials a new one.
type silenceBound struct {
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)
	limit time.Duration
}

func (b silenceBound) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := b.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	bc := &boundedConn{Conn: c, limit: b.limit}
	bc.moved()
	return bc, nil
}

type boundedConn struct {
	net.Conn
	limit time.Duration
	// silent: a read or write waited out the limit. The transport then
	// closes the connection, and the other direction's error ("use of
	// closed network connection") is said as that silence too.
	silent atomic.Bool
}

// moved gives both directions another limit from now.
func (c *boundedConn) moved() { _ = c.Conn.SetDeadline(time.Now().Add(c.limit)) }

func (c *boundedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.moved()
	}
	return n, c.said(err)
}

func (c *boundedConn) Write(p []byte) (int, error) {
	c.moved() // a request on a connection idle until now
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.moved()
	}
	return n, c.said(err)
}

// said turns a deadline's error, and any error after one, into a
// silenceError.
func (c *boundedConn) said(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.silent.Store(true)
	}
	if !c.silent.Load() {
		return err
	}
	return &silenceError{limit: c.limit, err: err}
}

// silenceError is a connection on which nothing moved for limit. It is a
// net.Error that timed out, as the deadline's own error is, so the SDK
// tries the request again as it would that one.
type silenceError struct {
	limit time.Duration
	err   error
}

func (e *silenceError) Error() string {
	return fmt.Sprintf("the object store moved nothing on the connection for %s (timeout)", e.limit)
}
func (e *silenceError) Unwrap() error   { return e.err }
func (e *silenceError) Timeout() bool   { return true }
func (e *silenceError) Temporary() bool { return true }
