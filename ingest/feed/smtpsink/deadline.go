package smtpsink

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// limitListener answers connections beyond its slots with 421 and closes
// them, rather than let them wait unseen. Each connection it lets in is a
// deadlineConn, so that holding a slot takes sending mail.
type limitListener struct {
	net.Listener
	slots    chan struct{}
	deadline connDeadlines
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return newDeadlineConn(c, l.deadline, sync.OnceFunc(func() { <-l.slots })), nil
		default:
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(c, "421 4.3.2 Too many connections; try again later\r\n")
			c.Close()
		}
	}
}

// connDeadlines are the session deadlines of Config (IdleTimeout,
// SessionTimeout, AuthTimeout when a token is set, else 0), and the
// longest data transfer (Timeout).
type connDeadlines struct {
	idle, session, auth, transfer time.Duration
	now                           func() time.Time
}

// deadlineConn is one connection the sink let in. go-smtp sets a read
// deadline before each command (Config.Timeout), so a client that sends
// NOOP every few seconds would never meet it; deadlineConn brings each
// such deadline forward to the session's own, which only a delivered
// message (the idle deadline), a successful AUTH (the auth deadline) or
// nothing (the session deadline) moves. The read that meets one of them
// is answered 421 here, naming it, and the connection ends. While a
// message's data arrives only go-smtp's deadline holds: a transfer under
// way is never cut for being slow to start, and is bounded as a whole
// (go-smtp's deadline is per BDAT chunk).
type deadlineConn struct {
	net.Conn
	release func()
	limits  connDeadlines

	mu           sync.Mutex
	start        time.Time
	deliveredAt  time.Time // start, then the last message accepted
	authed       bool
	transferring bool
	transferAt   time.Time
	asked        time.Time // the read deadline go-smtp last set
	binding      string    // the 421 the current deadline ends with, "" when it is go-smtp's
	ended        bool      // the 421 is sent: what go-smtp writes after it is dropped
}

func newDeadlineConn(c net.Conn, limits connDeadlines, release func()) *deadlineConn {
	now := limits.now()
	dc := &deadlineConn{Conn: c, release: release, limits: limits, start: now, deliveredAt: now}
	dc.mu.Lock()
	defer dc.mu.Unlock()
	_ = dc.applyLocked() // before the greeting: a client that never speaks is bounded too
	return dc
}

func (c *deadlineConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// SetReadDeadline is go-smtp's per-command deadline; the session's own
// may come first.
func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = t
	return c.applyLocked()
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

// applyLocked sets the earliest of go-smtp's deadline and the session's.
func (c *deadlineConn) applyLocked() error {
	deadline, binding := c.asked, ""
	earlier := func(limit time.Duration, from time.Time, reply string) {
		if limit <= 0 {
			return
		}
		if at := from.Add(limit); deadline.IsZero() || at.Before(deadline) {
			deadline, binding = at, reply
		}
	}
	if c.transferring {
		earlier(c.limits.transfer, c.transferAt, "") // answered as go-smtp's own: 451, nothing recorded
	} else {
		earlier(c.limits.idle, c.deliveredAt, fmt.Sprintf("421 4.4.2 No message delivered for %v (idle timeout); closing", c.limits.idle))
		earlier(c.limits.session, c.start, fmt.Sprintf("421 4.4.2 The session is over its %v (session timeout); closing", c.limits.session))
		if !c.authed {
			earlier(c.limits.auth, c.start, fmt.Sprintf("421 4.7.0 No AUTH within %v of connecting (auth timeout); closing", c.limits.auth))
		}
	}
	c.binding = binding
	return c.Conn.SetReadDeadline(deadline)
}

// Read answers 421 itself when one of the session's deadlines ends the
// read; go-smtp then closes the connection.
func (c *deadlineConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		c.mu.Lock()
		if c.binding != "" && !c.ended {
			c.ended = true
			_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(c.Conn, c.binding+"\r\n")
		}
		c.mu.Unlock()
	}
	return n, err
}

// Write drops what go-smtp writes after this connection's own 421 (its
// "Idle timeout" reply), so that the client reads one reply.
func (c *deadlineConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	ended := c.ended
	c.mu.Unlock()
	if ended {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// authenticated lifts the auth deadline.
func (c *deadlineConn) authenticated() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.authed = true
	_ = c.applyLocked()
}

// transfer starts or ends a message's data; an accepted message restarts
// the idle deadline.
func (c *deadlineConn) transfer(under bool, delivered bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if under && !c.transferring {
		c.transferAt = c.limits.now()
	}
	c.transferring = under
	if delivered {
		c.deliveredAt = c.limits.now()
	}
	_ = c.applyLocked()
}
