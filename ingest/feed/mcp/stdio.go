package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
)

// DefaultMaxLine bounds the stdio line the relay holds to observe unless
// StdioConfig.MaxLine says otherwise: a longer line is relayed as it
// comes, unobserved (docs/mcp.md § Limits).
const DefaultMaxLine = 4 << 20

// StdioPipes are the two ends of a stdio MCP connection the relay sits
// between: the client's (the proxy's own stdin and stdout) and the server
// process's.
type StdioPipes struct {
	ClientIn  io.Reader      // what the client sends: the proxy's stdin
	ClientOut io.Writer      // what the client reads: the proxy's stdout
	ChildIn   io.WriteCloser // the server's stdin; closed when ClientIn ends
	ChildOut  io.Reader      // the server's stdout
}

// StdioConfig configures RelayStdio.
type StdioConfig struct {
	// MaxLine bounds the line the relay holds to observe; DefaultMaxLine
	// when 0.
	MaxLine int
	Logger  *slog.Logger
}

// StdioStats count what RelayStdio did besides relaying.
type StdioStats struct {
	// Unobserved are lines over MaxLine relayed without being observed:
	// a request's call is not recorded, an answer whose id the relay
	// could not read leaves its call to be recorded unanswered.
	Unobserved int64 `json:"unobserved"`
	// Unwithheld are answers over MaxLine to a call lose-response struck
	// whose id came too late in the line to withhold it: delivered,
	// though the call is recorded as the fault has it.
	Unwithheld int64 `json:"unwithheld"`
}

// RelayStdio relays an MCP stdio connection (newline-delimited JSON-RPC)
// byte for byte both ways, telling s each complete line, and applies the
// faults s gives a call: latency forwards its line late (later lines wait
// behind it, keeping their order); fail-before writes s.Refuse's error to
// the client instead of forwarding the line; lose-response forwards it and
// never writes its answer. The client's lines are written whole: a
// refusal never lands inside a server's line.
//
// It returns when the server's output ends, with the first error reading
// it or writing to the client (the relay keeps reading the server after
// the client stops taking its output, so the server never blocks). When
// ClientIn ends it closes ChildIn, and on returning too. The goroutine reading ClientIn may
// outlive the call, blocked in a read that nothing can interrupt (a
// process's stdin); it forwards and observes nothing more, and ends when
// that read returns. Once RelayStdio has returned s is told nothing more,
// so the caller can Close it to record the calls left unanswered.
func RelayStdio(s *Session, p StdioPipes, cfg StdioConfig) (StdioStats, error) {
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = DefaultMaxLine
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &stdioRelay{s: s, p: p, cfg: cfg, struck: map[string]bool{}, stop: make(chan struct{})}
	go r.fromClient()
	err := r.fromServer()
	r.mu.Lock()
	r.stopped = true
	close(r.stop)
	stats := r.stats
	r.mu.Unlock()
	// Nothing more goes to a server whose output has ended.
	r.p.ChildIn.Close()
	return stats, err
}

type stdioRelay struct {
	s   *Session
	p   StdioPipes
	cfg StdioConfig
	// out serialises writes to the client: the server's lines and the
	// refusals.
	out        sync.Mutex
	clientGone error // the first write to the client that failed; out is held
	mu         sync.Mutex
	stopped    bool            // the server's output ended: observe nothing more
	stop       chan struct{}   // closed with stopped, ends a latency wait
	struck     map[string]bool // ids of the calls lose-response struck, awaiting their answer
	stats      StdioStats
}

// fromClient relays the client's lines to the server until either ends.
func (r *stdioRelay) fromClient() {
	defer r.p.ChildIn.Close()
	lines := newLineReader(r.p.ClientIn, r.cfg.MaxLine)
	for {
		line, whole, err := lines.read()
		if len(line) > 0 {
			var ok bool
			switch {
			case !whole:
				r.count(func(st *StdioStats) { st.Unobserved++ })
				ok = r.relayLong(line, lines)
			case line[len(line)-1] != '\n':
				ok = r.toChild(line) // a last line without its newline: relayed, not a message
			default:
				ok = r.clientLine(line)
			}
			if !ok {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				r.cfg.Logger.Warn("mcp: reading the client's messages failed; the server's input is closed", "err", err)
			}
			return
		}
	}
}

// clientLine observes one complete line of the client's and does what
// the faults striking its calls say. It reports whether the relay goes on.
func (r *stdioRelay) clientLine(line []byte) bool {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return false
	}
	calls := r.s.FromClient(line)
	var refused []Call
	var delay time.Duration
	delayed := 0
	for _, c := range calls {
		if _, ok := c.Fault(sandbox.FailBefore); ok {
			refused = append(refused, c)
			continue
		}
		if f, ok := c.Fault(sandbox.Latency); ok {
			delay = max(delay, f.Delay)
			delayed++
		}
		if _, ok := c.Fault(sandbox.LoseResponse); ok && len(r.struck) < MaxPending {
			r.struck[idKey(c.ID)] = true
		}
	}
	r.mu.Unlock()

	if len(refused) > 0 {
		line = r.refuse(line, refused)
	}
	for range delayed {
		r.s.Delayed()
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.stop:
			t.Stop()
			return false
		}
	}
	if len(line) == 0 {
		return true
	}
	return r.toChild(line)
}

// refuse answers the refused calls of line with s.Refuse's errors and
// returns what is left to forward: nothing for one message, the batch
// without the refused requests for a batch.
func (r *stdioRelay) refuse(line []byte, refused []Call) []byte {
	answers := make([][]byte, len(refused))
	ids := map[string]bool{}
	for i, c := range refused {
		answers[i] = r.s.Refuse(c)
		ids[idKey(c.ID)] = true
	}
	batch := bytes.HasPrefix(bytes.TrimSpace(line), []byte("["))
	if batch {
		r.toClient(append(joinArray(answers), '\n'))
		return keepElements(line, func(m message) bool { return !(m.Method == "tools/call" && ids[idKey(m.ID)]) })
	}
	for _, a := range answers {
		r.toClient(append(a, '\n'))
	}
	return nil
}

// relayLong forwards a client's line too long to observe: first, then the
// rest of it as it comes.
func (r *stdioRelay) relayLong(first []byte, lines *lineReader) bool {
	ok := r.toChild(first)
	for {
		piece, last, err := lines.rest()
		if ok && len(piece) > 0 {
			ok = r.toChild(piece)
		}
		if last || err != nil {
			return ok && err == nil
		}
	}
}

func (r *stdioRelay) toChild(b []byte) bool {
	if _, err := r.p.ChildIn.Write(b); err != nil {
		r.cfg.Logger.Warn("mcp: writing to the server's input failed; the client's messages are no longer relayed", "err", err)
		return false
	}
	return true
}

// fromServer relays the server's lines to the client until the server's
// output ends.
func (r *stdioRelay) fromServer() error {
	lines := newLineReader(r.p.ChildOut, r.cfg.MaxLine)
	for {
		line, whole, err := lines.read()
		if len(line) > 0 {
			switch {
			case !whole:
				r.serverLong(line, lines)
			case line[len(line)-1] != '\n':
				r.toClient(line) // a last line without its newline: relayed, not a message
			default:
				r.serverLine(line)
			}
		}
		if err != nil {
			r.out.Lock()
			defer r.out.Unlock()
			if err == io.EOF {
				return r.clientGone
			}
			return errors.Join(errorf("reading the server's output: %v", err), r.clientGone)
		}
	}
}

// serverLine observes one complete line of the server's and delivers it,
// or, when it answers a call lose-response struck, withholds that answer.
func (r *stdioRelay) serverLine(line []byte) {
	if !r.s.FromServer(line) {
		r.toClient(line)
		return
	}
	r.mu.Lock()
	struck := r.struck
	var withheld []string
	keep := func(m message) bool {
		if m.isResponse() && struck[idKey(m.ID)] {
			withheld = append(withheld, idKey(m.ID))
			return false
		}
		return true
	}
	if bytes.HasPrefix(bytes.TrimSpace(line), []byte("[")) {
		line = keepElements(line, keep)
	} else {
		for _, m := range parseMessages(line) {
			keep(m)
		}
		line = nil
	}
	for _, id := range withheld {
		delete(struck, id)
	}
	r.mu.Unlock()
	if len(line) > 0 {
		r.toClient(line)
	}
}

// serverLong relays a server's line too long to hold, reading what it
// says of itself as it passes (ServerScan): when its id comes in the part
// held and names a call lose-response struck, the whole line is withheld;
// at its end, the call it answers is recorded from what was read.
func (r *stdioRelay) serverLong(first []byte, lines *lineReader) {
	scan := r.s.ScanFromServer()
	scan.Write(first)
	withhold := scan.Struck()
	r.out.Lock()
	defer r.out.Unlock()
	size := len(first)
	if !withhold {
		r.writeClient(first)
	}
	for {
		piece, last, err := lines.rest()
		size += len(piece)
		scan.Write(piece)
		if !withhold {
			r.writeClient(piece)
		}
		if last || err != nil {
			break
		}
	}
	id, found := scan.ID()
	if !found {
		r.count(func(st *StdioStats) { st.Unobserved++ })
		return
	}
	r.mu.Lock()
	delete(r.struck, idKey(id))
	r.mu.Unlock()
	if scan.End(!withhold) && !withhold {
		r.count(func(st *StdioStats) { st.Unwithheld++ })
		r.cfg.Logger.Warn("mcp: lose-response could not withhold an answer too long to hold whose id came late in it; it was delivered",
			"id", string(id), "bytes", size)
	}
}

// toClient writes b to the client whole.
func (r *stdioRelay) toClient(b []byte) {
	r.out.Lock()
	defer r.out.Unlock()
	r.writeClient(b)
}

// writeClient writes b to the client unless a write failed before: the
// client is gone, and the server's output is read on so it never blocks.
// r.out is held.
func (r *stdioRelay) writeClient(b []byte) {
	if r.clientGone != nil || len(b) == 0 {
		return
	}
	if _, err := r.p.ClientOut.Write(b); err != nil {
		r.clientGone = errorf("writing to the client: %v", err)
		r.cfg.Logger.Warn("mcp: writing to the client failed; the server's output is read on and discarded", "err", err)
	}
}

func (r *stdioRelay) count(f func(*StdioStats)) {
	r.mu.Lock()
	f(&r.stats)
	r.mu.Unlock()
}

// keepElements is the JSON-RPC batch line without the messages keep
// refuses, each kept one byte for byte, or nil when none is kept. A line
// that is not a batch of messages is returned as it is.
func keepElements(line []byte, keep func(message) bool) []byte {
	var elems []json.RawMessage
	if json.Unmarshal(line, &elems) != nil {
		return line
	}
	var kept [][]byte
	for _, e := range elems {
		var m message
		if json.Unmarshal(e, &m) != nil || keep(m) {
			kept = append(kept, e)
		}
	}
	switch {
	case len(kept) == len(elems):
		return line
	case len(kept) == 0:
		return nil
	}
	return append(joinArray(kept), '\n')
}

func joinArray(elems [][]byte) []byte {
	return append(append([]byte("["), bytes.Join(elems, []byte(","))...), ']')
}

// lineReader reads lines of at most max bytes whole, and longer ones in
// pieces, holding at most about max bytes.
type lineReader struct {
	br   *bufio.Reader
	max  int
	line []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, min(max, 64<<10)), max: max}
}

// read returns the next line with its newline; at the input's end, what
// is left without one (and io.EOF). A line longer than max comes as its
// first part, at least max bytes, with whole false: rest reads the others.
// The line is valid until the next read.
func (l *lineReader) read() (line []byte, whole bool, err error) {
	l.line = l.line[:0]
	for {
		frag, err := l.br.ReadSlice('\n')
		l.line = append(l.line, frag...)
		if err == bufio.ErrBufferFull {
			if len(l.line) > l.max {
				return l.line, false, nil
			}
			continue
		}
		return l.line, true, err
	}
}

// rest returns the next piece of a line read returned in part; last says
// it ends the line. The piece is valid until the next read.
func (l *lineReader) rest() (piece []byte, last bool, err error) {
	frag, err := l.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return frag, false, nil
	}
	return frag, true, err
}
