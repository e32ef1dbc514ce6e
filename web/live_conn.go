package web

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"time"
)

// A live socket writes many small frames; one system call each would cost
// more than the frames. batchConn lets the connection's writer gather the
// frames the hub encoded (gather) and send them in one write (flush).
// gorilla/websocket writes each of its own frames — pings, pongs, closes,
// an execution page's pushes — in one Write under its own lock; batchConn
// serialises those with the gathered frames under its lock, so frames
// never interleave: a pong the read goroutine sends while frames are being
// gathered simply joins them.

// batchFlushAt is how much a connection gathers before it writes anyway.
const batchFlushAt = 32 << 10

type batchConn struct {
	net.Conn
	sub *Subscription // told when a write may block; nil until the feed opens

	mu      sync.Mutex
	holding bool // Write appends to buf until flush
	buf     []byte
}

// gatherBuffers are the buffers connections gather frames in, kept only
// between gather and flush: a thousand idle connections hold none.
var gatherBuffers = sync.Pool{New: func() any { b := make([]byte, 0, batchFlushAt+4096); return &b }}

// gather appends a frame to write at the next flush.
func (c *batchConn) gather(frame []byte) {
	c.mu.Lock()
	c.holding = true
	if c.buf == nil {
		c.buf = (*gatherBuffers.Get().(*[]byte))[:0]
	}
	c.buf = append(c.buf, frame...)
	c.mu.Unlock()
}

// buffered is how much waits for flush.
func (c *batchConn) buffered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.buf)
}

// flush writes what was gathered, within deadline, and stops holding.
func (c *batchConn) flush(deadline time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = false
	if len(c.buf) == 0 {
		return nil
	}
	_ = c.Conn.SetWriteDeadline(deadline)
	_, err := c.write(c.buf)
	if cap(c.buf) <= 2*batchFlushAt { // a larger one came of a large frame; let it go
		b := c.buf[:0]
		gatherBuffers.Put(&b)
	}
	c.buf = nil
	return err
}

func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holding {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.write(p)
}

// write writes p, telling the subscription while it may block; c.mu is
// held.
func (c *batchConn) write(p []byte) (int, error) {
	if c.sub != nil {
		c.sub.beginWrite()
		defer c.sub.endWrite()
	}
	return c.Conn.Write(p)
}

// attach tells sub about the writes from now on.
func (c *batchConn) attach(sub *Subscription) {
	c.mu.Lock()
	c.sub = sub
	c.mu.Unlock()
}

// SetWriteDeadline takes the lock so that a control frame's deadline
// cannot cut short a flush in progress.
func (c *batchConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holding {
		return nil // gathered frames are written under flush's deadline
	}
	return c.Conn.SetWriteDeadline(t)
}

// batchingHijacker hands the WebSocket upgrader a batchConn in place of
// the hijacked connection.
type batchingHijacker struct {
	http.ResponseWriter
	conn *batchConn
}

func (h *batchingHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.conn = &batchConn{Conn: c}
	return h.conn, rw, nil
}

// deliveryUnit is one connection's turn at the gate: from the first
// message it reads back or takes from its subscription, through encoding
// and gathering, to the write of what it gathered.
type deliveryUnit struct {
	gate     *deliveryGate
	gathered func() bool  // something waits to be written
	write    func() error // writes it; may block on the client
	held     bool         // the unit holds a slot
	start    time.Time    // when it took it, if it is charged; else zero
}

// begin takes a slot unless one is held.
func (u *deliveryUnit) begin() {
	if !u.held {
		u.start = u.gate.enter()
		u.held = true
	}
}

// end gives the slot back, if held, and returns how long to charge for it.
func (u *deliveryUnit) end() time.Duration {
	if !u.held {
		return 0
	}
	var d time.Duration
	if !u.start.IsZero() {
		d = time.Since(u.start)
	}
	u.held, u.start = false, time.Time{}
	u.gate.leave()
	return d
}

// finish ends the unit, writes what was gathered outside the gate, and,
// when the unit is charged, charges the time in the gate and the write,
// except what a blocked write waits.
func (u *deliveryUnit) finish() error {
	charged := !u.start.IsZero()
	held := u.end()
	if !u.gathered() {
		if held > 0 {
			u.gate.charge(held)
		}
		return nil
	}
	if !charged {
		return u.write()
	}
	start := time.Now()
	err := u.write()
	u.gate.charge(held + min(time.Since(start), liveBlockedWrite))
	return err
}
