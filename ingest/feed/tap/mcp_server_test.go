package tap_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed/mcp"
	"github.com/oncetrace/oncetrace/ingest/feed/tap"
)

// mcpServer is a hand-written Streamable HTTP MCP server (2025-06-18):
// sessions named on initialize, the invoice tools, answers as
// application/json or as an event stream written with CR LF, comments,
// multi-line data and event ids, and a GET stream that replays what a
// POST's stream did not get to send. It keeps a digest of every body it
// received and wrote, to compare with what went through the tap.
type mcpServer struct {
	sse bool // answer POSTs with an event stream

	mu       sync.Mutex
	sessions int
	emails   int
	received []seenMCP
	wrote    []sentMCP
	// owed are events a POST's stream ended before sending, by the last
	// event id it sent: a GET with that Last-Event-ID gets them.
	owed map[string]string
	// slow delays the answer of slow_send.
	slow time.Duration
	// release, when set, lets a streamed answer go after its first event.
	release chan struct{}
}

type seenMCP struct {
	method, path, session, protocol, lastEventID string
	body                                         string
}

type sentMCP struct {
	status      int
	contentType string
	session     string
	len         int
	sha         string
	body        string // when short
}

func (s *mcpServer) seen() []seenMCP {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenMCP(nil), s.received...)
}

func (s *mcpServer) sent() []sentMCP {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sentMCP(nil), s.wrote...)
}

func (s *mcpServer) emailsSent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.emails
}

// digestWriter keeps the length and digest of what an answer wrote, and
// its first bytes.
type digestWriter struct {
	http.ResponseWriter
	h    hash.Hash
	n    int
	head []byte
}

func (d *digestWriter) Write(b []byte) (int, error) {
	d.h.Write(b)
	d.n += len(b)
	if len(d.head) < 64<<10 {
		d.head = append(d.head, b[:min(len(b), 64<<10-len(d.head))]...)
	}
	return d.ResponseWriter.Write(b)
}

func (d *digestWriter) Flush() { d.ResponseWriter.(http.Flusher).Flush() }

func (s *mcpServer) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.received = append(s.received, seenMCP{method: r.Method, path: r.URL.Path, session: r.Header.Get(tap.SessionHeader), protocol: r.Header.Get("MCP-Protocol-Version"),
		lastEventID: r.Header.Get("Last-Event-ID"), body: string(body)})
	s.mu.Unlock()
	w := &digestWriter{ResponseWriter: rw, h: sha256.New()}
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		sent := sentMCP{status: 200, contentType: rw.Header().Get("Content-Type"), session: rw.Header().Get(tap.SessionHeader), len: w.n, sha: hex.EncodeToString(w.h.Sum(nil))}
		if w.n <= len(w.head) {
			sent.body = string(w.head)
		}
		s.wrote = append(s.wrote, sent)
	}()
	switch r.Method {
	case http.MethodGet:
		s.serveGet(w, r)
		return
	case http.MethodDelete:
		w.WriteHeader(http.StatusOK)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		http.Error(w, "not one JSON-RPC message", http.StatusBadRequest)
		return
	}
	if m.ID == nil {
		w.WriteHeader(http.StatusAccepted) // a notification
		return
	}
	var result string
	switch m.Method {
	case "initialize":
		s.mu.Lock()
		s.sessions++
		w.Header().Set(tap.SessionHeader, fmt.Sprintf("sess-%d", s.sessions))
		s.mu.Unlock()
		result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"invoices","version":"1"}}`
	case "tools/list":
		result = `{"tools":[{"name":"send_invoice_email","inputSchema":{"type":"object"}},` +
			`{"name":"get_invoice","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},` +
			`{"name":"charge_card","inputSchema":{"type":"object"},"annotations":{"idempotentHint":true}}]}`
	case "tools/call":
		switch m.Params.Name {
		case "send_invoice_email", "slow_send":
			if m.Params.Name == "slow_send" {
				time.Sleep(s.slow)
			}
			s.mu.Lock()
			s.emails++
			result = fmt.Sprintf(`{"content":[{"type":"text","text":"sent"}],"structuredContent":{"id":"msg_%d"}}`, s.emails)
			s.mu.Unlock()
		case "get_invoice":
			result = `{"content":[{"type":"text","text":"inv_7: 1200 EUR"}],"structuredContent":{"id":"inv_7","amount":1200}}`
		case "big_report":
			s.writeBig(w, m.ID, strings.Contains(string(m.Params.Arguments), `"id_first":true`))
			return
		case "hang_up":
			// Ends the answer without answering.
			if s.sse {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, ": no answer coming\n\n")
			} else {
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
			return
		default:
			result = `{"content":[{"type":"text","text":"no such tool"}],"isError":true}`
		}
	default:
		result = `{}`
	}
	answer := `{"result":` + result + `,"jsonrpc":"2.0","id":` + string(m.ID) + `}` // result first, as the TypeScript SDK writes it
	if !s.sse || m.Method == "initialize" {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	session := w.Header().Get(tap.SessionHeader)
	if session == "" {
		session = r.Header.Get(tap.SessionHeader)
	}
	prefix := session + "-" + strings.Trim(string(m.ID), `"`)
	// A comment, then a progress notification split over two data lines
	// with CR LF line ends, then the answer, also split.
	io.WriteString(w, ": stream open\r\n\r\nretry: 1000\r\nevent: message\r\nid: "+prefix+"-1\r\n"+
		`data: {"jsonrpc":"2.0","method":"notifications/progress",`+"\r\n"+`data: "params":{"progressToken":1,"progress":1}}`+"\r\n\r\n")
	w.Flush()
	if s.release != nil && m.Method == "tools/call" {
		<-s.release
	}
	cut := strings.Index(answer, `"jsonrpc"`)
	event := "id: " + prefix + "-2\ndata: " + answer[:cut] + "\ndata:" + answer[cut:] + "\n\n"
	if m.Params.Name == "resumable" {
		// The stream ends before the answer; a GET resuming it gets it.
		s.mu.Lock()
		if s.owed == nil {
			s.owed = map[string]string{}
		}
		s.owed[prefix+"-1"] = strings.Replace(event, `{"content":[{"type":"text","text":"no such tool"}],"isError":true}`, `{"structuredContent":{"id":"msg_resumed"}}`, 1)
		s.mu.Unlock()
		return
	}
	io.WriteString(w, event)
}

// serveGet is the server's GET stream: what a resumed stream owes after
// Last-Event-ID, then the end.
func (s *mcpServer) serveGet(w *digestWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	s.mu.Lock()
	event := s.owed[r.Header.Get("Last-Event-ID")]
	s.mu.Unlock()
	io.WriteString(w, ": resumed\n\n"+event)
}

// writeBig answers with a result of 10 MB of text, its structured id
// after it, in 32 KB writes from one buffer; the message's id last (as
// the TypeScript SDK writes it) or first (as the Go SDK does).
func (s *mcpServer) writeBig(w *digestWriter, id json.RawMessage, idFirst bool) {
	head := `{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"`
	tail := `"}],"structuredContent":{"id":"rep_1"}},"id":` + string(id) + `}`
	if idFirst {
		head = `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"`
		tail = `"}],"structuredContent":{"id":"rep_1"}}}`
	}
	if s.sse {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: "+head)
	} else {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, head)
	}
	chunk := []byte(strings.Repeat("0123456789abcdef", 2048))
	for left := bigResult; left > 0; left -= len(chunk) {
		w.Write(chunk[:min(left, len(chunk))])
	}
	io.WriteString(w, tail)
	if s.sse {
		io.WriteString(w, "\n\n")
	}
}

const bigResult = 10 << 20

// eventLog keeps the events an MCP tap records, checked as POST
// /api/v1/events checks them.
type eventLog struct {
	t      *testing.T
	mu     sync.Mutex
	events []map[string]any
}

func (l *eventLog) RecordEvents(_ context.Context, events []json.RawMessage) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, raw := range events {
		if _, err := ingest.ParseEvent(raw, ingest.DefaultLimits); err != nil {
			l.t.Errorf("recorded an event POST /api/v1/events refuses: %v\n%s", err, raw)
		}
		var m map[string]any
		json.Unmarshal(raw, &m)
		l.events = append(l.events, m)
	}
	return nil
}

func (l *eventLog) ofType(typ string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, m := range l.events {
		if m["type"] == typ {
			out = append(out, m)
		}
	}
	return out
}

// waitAttempts waits until n attempts are recorded and returns them in
// the order they began.
func (l *eventLog) waitAttempts(t *testing.T, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := l.ofType("attempt")
		if len(got) >= n {
			sortByStart(got)
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("attempts: got %d (%v), want %d", len(got), got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func sortByStart(ms []map[string]any) {
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && fmt.Sprint(ms[j]["started_at"]) < fmt.Sprint(ms[j-1]["started_at"]); j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
}

// startMCPTap serves an MCP tap in front of server; change edits its
// config before it starts.
func startMCPTap(t *testing.T, server *mcpServer, change func(*tap.Config)) (*tap.Tap, *mcp.Observer, *eventLog, string) {
	t.Helper()
	up := httptest.NewServer(server)
	t.Cleanup(up.Close)
	log := &eventLog{t: t}
	o, err := mcp.New(mcp.Config{Provider: "invoices", Recorder: log, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	tp, url := startTap(t, up.URL+"/mcp", nil, func(c *tap.Config) {
		c.Provider, c.MCP = "invoices", o
		if change != nil {
			change(c)
		}
	})
	return tp, o, log, url
}

// mcpClient speaks Streamable HTTP to url, as an MCP client does, and
// keeps the bytes of each answer.
type mcpClient struct {
	t       *testing.T
	url     string
	http    *http.Client
	session string
	nextID  int
}

// answer is what a client got for one request.
type answer struct {
	status      int
	contentType string
	session     string
	body        []byte
	len         int
	sha         string
	err         error // reading it failed (a timeout)
	took        time.Duration
}

// newMCPClient is a client of the tap at url, at the endpoint's path.
func newMCPClient(t *testing.T, url string, timeout time.Duration) *mcpClient {
	return &mcpClient{t: t, url: url + "/mcp", http: rawClient(timeout)}
}

// do sends one request and reads its answer whole, keeping its first
// 64 KB and a digest of all of it.
func (c *mcpClient) do(method, body string, header map[string]string) answer {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.session != "" {
		req.Header.Set(tap.SessionHeader, c.session)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), session: resp.Header.Get(tap.SessionHeader)}
	d := &digestWriter{ResponseWriter: nopResponseWriter{}, h: sha256.New()}
	_, a.err = io.Copy(d, resp.Body)
	a.len, a.sha, a.took = d.n, hex.EncodeToString(d.h.Sum(nil)), time.Since(start)
	if d.n <= len(d.head) {
		a.body = d.head
	}
	if a.session != "" {
		c.session = a.session
	}
	return a
}

type nopResponseWriter struct{}

func (nopResponseWriter) Header() http.Header         { return http.Header{} }
func (nopResponseWriter) Write(b []byte) (int, error) { return len(b), nil }
func (nopResponseWriter) WriteHeader(int)             {}
func (nopResponseWriter) Flush()                      {}

// call sends a tools/call with a new id, and _meta when given.
func (c *mcpClient) call(tool, args, meta string) answer {
	c.nextID++
	if meta == "" {
		meta = "{}"
	}
	return c.do(http.MethodPost, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":%s}}`, c.nextID, tool, args, meta), nil)
}

// handshake initializes a session and lists the tools.
func (c *mcpClient) handshake() {
	c.t.Helper()
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"billing-agent","version":"1.0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
	} {
		if a := c.do(http.MethodPost, m, nil); a.err != nil || a.status/100 != 2 {
			c.t.Fatalf("%s: got %d %v, want a 2xx", m, a.status, a.err)
		}
	}
	c.nextID = 1
}
