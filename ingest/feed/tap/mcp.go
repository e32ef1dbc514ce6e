package tap

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/mcp"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/trace"
)

// The tap's MCP mode (Config.MCP) proxies a Streamable HTTP MCP server
// (MCP 2025-06-18 § Transports): POSTs of JSON-RPC messages answered with
// application/json or an SSE stream, GET streams, DELETE. It passes every
// byte through as the plain tap does, and tells the observer each message
// each way: the POST's body, each SSE event's data, each JSON answer. A
// message longer than MaxMessageBytes is not held: a request passes
// unread, an answer is read as it streams for the call it closes
// (mcp.ServerScan). The upstream is the MCP endpoint (http://HOST/mcp):
// the tap serves it at its root and at that path; another path is joined
// to it, as the plain tap joins every path to its base URL.

// SessionHeader carries the MCP session's id: the server names it in its
// answer to initialize, the client sends it on every later request.
const SessionHeader = "Mcp-Session-Id"

// DefaultMaxMessageBytes is how long an MCP message the tap holds by
// default.
const DefaultMaxMessageBytes = 4 << 20

// mcpExchange is what the tap knows of an MCP request while it is proxied.
type mcpExchange struct {
	sess *mcp.Session
	// sessionID is the request's Mcp-Session-Id; fresh, for a POST without
	// one, says sess is new and takes the id the answer gives.
	sessionID string
	fresh     bool
	// calls are the tools/call requests of a POST, with their faults.
	calls []mcp.Call
	// client ends when the client goes away.
	client context.Context
}

// unanswered records the calls still awaiting an answer as never
// answered; why says what happened.
func (x *mcpExchange) unanswered(why string) {
	for _, c := range x.calls {
		x.sess.Unanswered(c.ID, why)
	}
}

// label names the calls in the tap's log: tool#id.
func (x *mcpExchange) label() string {
	var parts []string
	for _, c := range x.calls {
		parts = append(parts, c.Tool+"#"+strings.Trim(string(c.ID), `"`))
	}
	return strings.Join(parts, " ")
}

// serveMCP proxies one request to an MCP server: reads the POST's
// messages, does what faults strike its calls, and forwards it.
func (t *Tap) serveMCP(w http.ResponseWriter, r *http.Request) {
	ex := &exchange{method: r.Method, uri: r.URL.RequestURI(), path: r.URL.Path, rawQuery: r.URL.RawQuery}
	x := &mcpExchange{sessionID: r.Header.Get(SessionHeader), client: r.Context()}
	ex.mcp = x
	x.sess, x.fresh = t.mcpSession(x.sessionID, r.Method)
	var body []byte
	if r.Method == http.MethodPost && r.Body != nil && r.Body != http.NoBody {
		var whole bool
		var err error
		body, whole, err = readMessage(r, t.cfg.MaxMessageBytes)
		if err != nil {
			return // the client's body broke off: nothing was sent upstream
		}
		if whole {
			x.calls = x.sess.FromClient(body)
		} else {
			t.cfg.Logger.Warn("tap: an MCP request over the message limit passed through unread: a tools/call in it is not recorded",
				"provider", t.cfg.Provider, "limit", t.cfg.MaxMessageBytes)
		}
	}
	var delay time.Duration
	refuse := false
	for _, c := range x.calls {
		ex.unsafe = ex.unsafe || c.Class != trace.EffectRead
		for _, f := range c.Faults {
			ex.faultNames = append(ex.faultNames, c.Tool+": "+f.String())
			t.countFault(f)
			t.cfg.Logger.Info("tap fault", "provider", t.cfg.Provider, "fault", f.String(), "tool", c.Tool, "id", string(c.ID))
			switch f.Kind {
			case sandbox.FailBefore:
				refuse = true
			case sandbox.LoseResponse:
				if ex.lose == nil {
					ex.lose = &f
				}
			case sandbox.Latency:
				delay = max(delay, f.Delay)
			}
		}
	}
	if refuse {
		t.refuseMCP(w, ex, body)
		return
	}
	if delay > 0 {
		for _, c := range x.calls {
			if _, ok := c.Fault(sandbox.Latency); ok {
				x.sess.Delayed()
			}
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			x.unanswered("the client went away during the latency fault; not forwarded")
			t.note(ex, LogEntry{Error: "the client left during the latency fault; not forwarded"})
			return
		case <-t.closing:
			x.unanswered("oncetrace tap shut down during the latency fault; not forwarded")
			writeError(w, http.StatusServiceUnavailable, "api_error", "oncetrace tap is shutting down; the request was not forwarded")
			return
		}
	}
	t.mu.Lock()
	t.proxied++
	t.mu.Unlock()
	ex.forwarded = t.cfg.Now()
	t.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, ex)))
}

// mcpSession is the session a request belongs to: the one its
// Mcp-Session-Id names; for a POST without one, a new session that takes
// the id the server's answer gives (initialize), unless the server was
// found to give none (a stateless server: its requests share one session
// for as long as the tap runs).
func (t *Tap) mcpSession(id, method string) (s *mcp.Session, fresh bool) {
	if id != "" {
		return t.cfg.MCP.Session(id), false
	}
	t.mu.Lock()
	stateless := t.stateless
	t.mu.Unlock()
	if stateless != nil {
		return stateless, false
	}
	return t.cfg.MCP.Session(""), method == http.MethodPost
}

// readMessage reads a POST's body up to limit bytes. whole says it is all
// of it; else the request's body is set to pass the rest on untouched.
func readMessage(r *http.Request, limit int64) (body []byte, whole bool, err error) {
	body, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(body)) <= limit {
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		return body, true, nil
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	return nil, false, nil
}

// refuseMCP answers a POST a fail-before struck without forwarding it:
// each tools/call in it gets the JSON-RPC error Session.Refuse gives, as
// the one message of a 200 application/json answer, or an array of them
// for a batch (refused whole: what else it held goes unanswered).
func (t *Tap) refuseMCP(w http.ResponseWriter, ex *exchange, body []byte) {
	var answers [][]byte
	for _, c := range ex.mcp.calls {
		answers = append(answers, ex.mcp.sess.Refuse(c))
	}
	out := answers[0]
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '[' {
		out = append(append([]byte("["), bytes.Join(answers, []byte(","))...), ']')
	}
	t.note(ex, LogEntry{Error: "not forwarded (fail-before)"})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(out)
}

// mcpResponse sees the MCP server's answer before the client does.
func (t *Tap) mcpResponse(resp *http.Response, ex *exchange) error {
	x := ex.mcp
	success := resp.StatusCode >= 200 && resp.StatusCode <= 299
	if x.fresh {
		if id := resp.Header.Get(SessionHeader); id != "" {
			t.cfg.MCP.Adopt(x.sess, id)
		} else if success {
			t.mu.Lock()
			t.stateless = x.sess
			t.mu.Unlock()
		}
	}
	if ex.method == http.MethodDelete && success && x.sessionID != "" {
		t.cfg.MCP.Forget(x.sessionID)
	}
	if len(x.calls) > 0 {
		t.note(ex, LogEntry{})
	}
	stream := isEventStream(resp.Header)
	switch {
	case ex.late != "":
		// The client has had its answer (a 504) or left: nothing reaches it.
		t.withholdMCP(resp, ex, ex.late, stream)
	case stream:
		resp.Body = newEventStream(t, ex, resp.Body, "")
	case ex.lose != nil && success:
		// The answer to a POST is the answer to its calls: lose-response
		// withholds it whole, the client held until it gives up.
		t.withholdMCP(resp, ex, "oncetrace lose-response withheld the answer it came with", false)
		return errLost
	default:
		resp.Body = &messageBody{rc: resp.Body, ex: ex, msg: serverMessage{sess: x.sess, limit: t.cfg.MaxMessageBytes}}
	}
	return nil
}

// withholdMCP reads an answer through without delivering it: its
// messages are recorded as never reaching the client.
func (t *Tap) withholdMCP(resp *http.Response, ex *exchange, why string, stream bool) {
	if stream {
		s := newEventStream(t, ex, resp.Body, why)
		io.Copy(io.Discard, s)
		s.Close()
		return
	}
	msg := serverMessage{sess: ex.mcp.sess, limit: t.cfg.MaxMessageBytes}
	_, err := io.Copy(&msg, resp.Body)
	resp.Body.Close()
	if err != nil {
		ex.mcp.unanswered("the server's answer broke off: " + err.Error())
		return
	}
	msg.withhold(why)
	ex.mcp.unanswered(ex.noAnswer())
}

// mcpUnanswered records the calls of an exchange whose server did not
// answer as never answered, unless the tap still waits for the answer.
func (t *Tap) mcpUnanswered(ex *exchange, why string) {
	if ex == nil || ex.mcp == nil || ex.waiting {
		return
	}
	ex.mcp.unanswered(why)
}

func isEventStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

// serverMessage gathers one message from the server: held whole up to
// limit bytes, read as it streams past them (mcp.ServerScan).
type serverMessage struct {
	sess  *mcp.Session
	limit int64
	data  []byte
	scan  *mcp.ServerScan
}

func (m *serverMessage) Write(b []byte) (int, error) {
	if m.scan == nil && int64(len(m.data)+len(b)) > m.limit {
		m.stream()
	}
	if m.scan != nil {
		m.scan.Write(b)
	} else {
		m.data = append(m.data, b...)
	}
	return len(b), nil
}

// stream reads the message as it streams from now on, whatever its
// length: its bytes are no longer held.
func (m *serverMessage) stream() {
	if m.scan == nil {
		m.scan = m.sess.ScanFromServer()
		m.scan.Write(m.data)
		m.data = nil
	}
}

// deliver records the message as the client gets it; drop says the proxy
// must withhold it (a message held whole answering a call lose-response
// struck). A message read as it streamed has reached the client already.
func (m *serverMessage) deliver() (drop bool) {
	if m.scan != nil {
		m.scan.End(true)
		return false
	}
	return m.sess.FromServer(m.data)
}

// struck says the message, streaming, answers a call lose-response
// struck, as far as its id, read already, tells (mcp.ServerScan.Struck).
func (m *serverMessage) struck() bool { return m.scan != nil && m.scan.Struck() }

// drop records the message, streamed but not passed on, as withheld for
// the fault that struck the call it answers.
func (m *serverMessage) drop() { m.scan.End(false) }

// withhold records the message as never reaching the client, why saying
// what happened.
func (m *serverMessage) withhold(why string) {
	if m.scan != nil {
		m.scan.EndUndelivered(why)
		return
	}
	m.sess.Undelivered(m.data, why)
}

// reset readies it for the next message, letting go of a large buffer.
func (m *serverMessage) reset() {
	m.data, m.scan = m.data[:0], nil
	if cap(m.data) > 64<<10 {
		m.data = nil
	}
}

// messageBody passes a response body that is one message (a JSON
// answer) through to the client, and records it when it ends: before the
// end is passed on, as the plain tap records its effects.
type messageBody struct {
	rc   io.ReadCloser
	ex   *exchange
	msg  serverMessage
	once sync.Once
}

func (b *messageBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.msg.Write(p[:n])
	if err != nil {
		b.once.Do(func() { b.end(err) })
	}
	return n, err
}

func (b *messageBody) end(err error) {
	x := b.ex.mcp
	switch {
	case err == io.EOF:
		b.msg.deliver()
		x.unanswered(b.ex.noAnswer())
	case x.client.Err() != nil:
		x.unanswered("the client went away while the answer streamed")
	default:
		x.unanswered("the server's answer broke off: " + err.Error())
	}
}

// Close, before the body ended (the client went away), reads what is
// left within closeDrain, so that what the server did is recorded.
func (b *messageBody) Close() error {
	b.once.Do(func() {
		stop := time.AfterFunc(closeDrain, func() { b.rc.Close() })
		_, err := io.Copy(&b.msg, b.rc)
		stop.Stop()
		if err != nil {
			b.ex.mcp.unanswered("the client went away while the answer streamed, and the rest of it did not come")
			return
		}
		b.msg.withhold("the client went away while the answer streamed")
		b.ex.mcp.unanswered(b.ex.noAnswer())
	})
	return b.rc.Close()
}

// describeEnd says why a call got no answer from a stream that ended.
func describeEnd(err error, client context.Context) string {
	switch {
	case err == io.EOF:
		return "the server's event stream ended without answering it"
	case client.Err() != nil:
		return "the client went away before the answer"
	}
	return fmt.Sprintf("the server's event stream broke off: %v", err)
}

// noAnswer says why a call its answer did not answer got none.
func (ex *exchange) noAnswer() string {
	return fmt.Sprintf("the server's answer (HTTP %d) ended without answering it", ex.status)
}
