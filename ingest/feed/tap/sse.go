package tap

import (
	"bytes"
	"io"
	"time"
)

// eventStream passes an MCP server's SSE stream (text/event-stream, the
// answer to a POST or a GET) through to the client as it comes, event by
// event, and tells the session each event's data (its data lines joined
// with newlines, as an EventSource would dispatch it). The bytes of an
// event are held until it ends, then released whole (the proxy flushes
// each write of an event stream) or, when they answer a call
// lose-response struck, dropped: the stream then stays open when the
// server ends it, until the client gives up or HoldLimit, so that the
// client's own timeout fires. An event longer than MaxMessageBytes is
// released as it comes and its data read as it streams: it cannot be
// dropped.
type eventStream struct {
	rc io.ReadCloser
	t  *Tap
	ex *exchange
	// withheld, when set, says why none of it reaches the client (it is
	// read through for the record).
	withheld string

	buf       []byte
	out       []byte // released, not yet read
	outPos    int
	held      []byte // the current event's bytes
	streaming bool   // the current event outgrew the limit: its bytes pass as they come
	// discarding: it did so when its id, read already, named a call
	// lose-response struck: its bytes are dropped as they come.
	discarding bool
	msg        serverMessage
	hasData    bool // the current event has a data line

	// The line being read.
	line    lineState
	name    [5]byte // enough to tell "data" and "id" from the other fields
	nameLen int
	isData  bool
	isID    bool
	// resumable: the stream named its events (id:), so a client can
	// resume it (GET with Last-Event-ID) and get the answers it owes.
	resumable bool
	// A CR ended the last line: an LF next is part of its end, and goes
	// where that line went (lastDropped when it ended a dropped event).
	skipLF, crEnded, lastDropped bool

	dropped  bool // an event was dropped: hold the end
	mustHold bool
	err      error
}

type lineState uint8

const (
	lineStart   lineState = iota // nothing of the line read yet
	lineName                     // reading the field's name
	lineValue0                   // after ':', where one space is skipped
	lineValue                    // reading the value
	lineComment                  // a line beginning with ':'
)

func newEventStream(t *Tap, ex *exchange, rc io.ReadCloser, withheld string) *eventStream {
	return &eventStream{rc: rc, t: t, ex: ex, withheld: withheld, buf: make([]byte, 32<<10),
		msg: serverMessage{sess: ex.mcp.sess, limit: t.cfg.MaxMessageBytes}}
}

func (s *eventStream) Read(p []byte) (int, error) {
	for s.outPos >= len(s.out) {
		s.out, s.outPos = s.out[:0], 0
		if s.err != nil {
			if s.mustHold {
				s.mustHold = false
				s.hold()
			}
			return 0, s.err
		}
		n, err := s.rc.Read(s.buf)
		s.feed(s.buf[:n])
		if err != nil {
			s.finish(err)
		}
	}
	n := copy(p, s.out[s.outPos:])
	s.outPos += n
	return n, nil
}

// Close records what the stream still owed as never answered, if the
// client went away before it ended.
func (s *eventStream) Close() error {
	if s.err == nil {
		s.err = io.ErrClosedPipe
		s.owed("the client went away before the answer")
	}
	return s.rc.Close()
}

// feed reads a chunk of the stream, line by line.
func (s *eventStream) feed(c []byte) {
	for len(c) > 0 {
		if s.skipLF {
			s.skipLF = false
			if c[0] == '\n' {
				switch {
				case !s.crEnded:
					s.place(c[:1])
				case !s.lastDropped:
					s.out = append(s.out, '\n')
				}
				c = c[1:]
				continue
			}
		}
		j := bytes.IndexAny(c, "\r\n")
		if j < 0 {
			s.lineBytes(c)
			s.place(c)
			return
		}
		s.lineBytes(c[:j])
		s.place(c[:j+1])
		s.skipLF = c[j] == '\r'
		s.crEnded = s.lineEnd()
		c = c[j+1:]
	}
}

// lineBytes reads part of a line (no CR or LF in it).
func (s *eventStream) lineBytes(seg []byte) {
	for len(seg) > 0 {
		switch s.line {
		case lineStart, lineName:
			if seg[0] == ':' {
				if s.line == lineStart {
					s.line = lineComment
					return
				}
				s.fieldNamed()
				s.line = lineValue0
				seg = seg[1:]
				continue
			}
			if s.nameLen < len(s.name) {
				s.name[s.nameLen] = seg[0]
			}
			s.nameLen++
			s.line = lineName
			seg = seg[1:]
		case lineValue0:
			if seg[0] == ' ' {
				seg = seg[1:]
			}
			s.line = lineValue
		case lineValue:
			if s.isData {
				s.msg.Write(seg)
			}
			s.resumable = s.resumable || s.isID
			return
		case lineComment:
			return
		}
	}
}

// fieldNamed is told the line's field name is read: a data line adds to
// the event's data, after a newline if it is not the first.
func (s *eventStream) fieldNamed() {
	s.isData = s.nameLen == 4 && string(s.name[:4]) == "data"
	s.isID = s.nameLen == 2 && string(s.name[:2]) == "id"
	if !s.isData {
		return
	}
	if s.hasData {
		s.msg.Write([]byte{'\n'})
	}
	s.hasData = true
}

// lineEnd ends a line; an empty one ends the event, and lineEnd says so.
func (s *eventStream) lineEnd() (eventEnded bool) {
	switch s.line {
	case lineStart:
		s.eventEnd()
		eventEnded = true
	case lineName: // a field without a colon has an empty value
		s.fieldNamed()
	}
	s.line, s.nameLen, s.isData, s.isID = lineStart, 0, false, false
	return eventEnded
}

// place puts bytes of the current event where they go: held until it
// ends, or, once it outgrew the limit, passed on as they come (dropped, if
// the id read by then names a call lose-response struck).
func (s *eventStream) place(b []byte) {
	switch {
	case s.discarding:
		return
	case s.streaming:
		s.out = append(s.out, b...)
		return
	}
	s.held = append(s.held, b...)
	if int64(len(s.held)) > s.t.cfg.MaxMessageBytes {
		s.streaming = true
		s.msg.stream()
		if s.discarding = s.withheld == "" && s.msg.struck(); !s.discarding {
			s.out = append(s.out, s.held...)
		}
		s.held = s.held[:0]
	}
}

// eventEnd records the event's message and releases or drops its bytes.
func (s *eventStream) eventEnd() {
	drop := false
	switch {
	case s.discarding:
		s.msg.drop()
		drop = true
	case !s.hasData:
	case s.withheld != "":
		s.msg.withhold(s.withheld)
	default:
		drop = s.msg.deliver()
	}
	if drop {
		s.dropped = true
	} else if !s.streaming {
		s.out = append(s.out, s.held...)
	}
	s.lastDropped, s.streaming, s.discarding, s.hasData = drop, false, false, false
	s.held = s.held[:0]
	if cap(s.held) > 64<<10 {
		s.held = nil
	}
	s.msg.reset()
}

// finish ends the stream: a last event not ended passes as it came (a
// client drops it too), the calls still owed an answer are recorded
// unanswered unless the stream can be resumed, and, if an event was
// dropped, the end is held.
func (s *eventStream) finish(err error) {
	if !s.streaming {
		s.out = append(s.out, s.held...)
	}
	s.held, s.discarding = nil, false
	s.owed(describeEnd(err, s.ex.mcp.client))
	s.mustHold = s.dropped && err == io.EOF && s.withheld == "" && (s.ex.lose == nil || !s.ex.lose.Answer504)
	s.err = err
}

// hold keeps the client waiting after the server ended a stream whose
// answer was dropped, until it goes away, HoldLimit, or the tap closes.
func (s *eventStream) hold() {
	timer := time.NewTimer(s.t.cfg.HoldLimit)
	defer timer.Stop()
	select {
	case <-s.ex.mcp.client.Done():
		s.err = s.ex.mcp.client.Err()
	case <-timer.C:
	case <-s.t.closing:
	}
}

// owed records the calls of the POST this stream answers that it did
// not answer as never answered, unless the stream named its events: a
// client may then resume it and the answers come on the resumed stream
// (they stay open until then, or until the session ends).
func (s *eventStream) owed(why string) {
	if s.resumable && s.withheld == "" {
		return
	}
	s.ex.mcp.unanswered(why)
}
