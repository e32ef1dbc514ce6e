package tap_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/tap"
)

// TestMCPPassthrough: through the tap, every request reaches the server
// byte for byte with its headers (MCP-Protocol-Version, Mcp-Session-Id),
// and every answer, JSON or event stream, reaches the client byte for
// byte with the session's header; the tap records the tools/calls as
// attempts of the session, and nothing of the handshake.
func TestMCPPassthrough(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[sse], func(t *testing.T) {
			server := &mcpServer{sse: sse}
			_, o, log, url := startMCPTap(t, server, nil)
			c := newMCPClient(t, url, 5*time.Second)
			var sent []string
			var got []answer
			do := func(method, body string, header map[string]string) {
				sent = append(sent, body)
				got = append(got, c.do(method, body, header))
			}
			do(http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"billing-agent","version":"1.0"}}}`, nil)
			do(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
			do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, nil)
			c.url = strings.TrimSuffix(c.url, "/mcp") // the tap serves the endpoint at its root too
			do(http.MethodPost, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_invoice","arguments":{"invoice_id":"inv_7"}}}`, nil)
			do(http.MethodPost, `{"jsonrpc":"2.0","id":"call-3","method":"tools/call","params":{"name":"send_invoice_email","arguments":{"to":"jordan@acme.dev","invoice_id":"inv_7"}}}`, nil)
			do(http.MethodDelete, "", nil)

			seen, wrote := server.seen(), server.sent()
			if len(seen) != len(sent) || len(wrote) != len(sent) {
				t.Fatalf("the server saw %d requests and answered %d, want %d", len(seen), len(wrote), len(sent))
			}
			for i := range sent {
				if seen[i].body != sent[i] {
					t.Errorf("request %d: the server got %q, want %q", i, seen[i].body, sent[i])
				}
				if seen[i].protocol != "2025-06-18" || (i > 0 && seen[i].session != "sess-1") || seen[i].path != "/mcp" {
					t.Errorf("request %d: the server got protocol %q session %q at %s, want 2025-06-18 and sess-1 after initialize, at /mcp", i, seen[i].protocol, seen[i].session, seen[i].path)
				}
				a, w := got[i], wrote[i]
				if a.err != nil || a.len != w.len || a.sha != w.sha || a.contentType != w.contentType || a.session != w.session {
					t.Errorf("answer %d: the client got %d bytes %.12s (%s, session %q, err %v), the server wrote %d bytes %.12s (%s, session %q)\n got %q\nwant %q",
						i, a.len, a.sha, a.contentType, a.session, a.err, w.len, w.sha, w.contentType, w.session, a.body, w.body)
				}
			}
			if sse && !strings.Contains(wrote[4].body, "\r\n") {
				t.Error("the server's stream has no CR LF: the test does not test them")
			}

			attempts := log.waitAttempts(t, 2)
			time.Sleep(50 * time.Millisecond) // a third would come now
			if n := len(log.ofType("attempt")); n != 2 {
				t.Errorf("got %d attempts, want 2: initialize, the notification and tools/list are none", n)
			}
			if attempts[0]["tool"] != "get_invoice" || attempts[0]["effect"] != "read" || attempts[0]["outcome"] != "ok" ||
				attempts[1]["tool"] != "send_invoice_email" || attempts[1]["effect"] != "write" || attempts[1]["outcome"] != "ok" {
				t.Errorf("attempts: got %v, want get_invoice read ok, send_invoice_email write ok", attempts)
			}
			for _, a := range attempts {
				if a["execution_id"] != "sess-1" || a["provider"] != "invoices" {
					t.Errorf("attempt: got %v, want of execution sess-1 (the session the server named), provider invoices", a)
				}
			}
			// Named after the client, and completed by the client's DELETE
			// (recorded off the stream's path: in either order).
			var named, completed bool
			var ex []map[string]any
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !(named && completed); time.Sleep(10 * time.Millisecond) {
				ex, named, completed = log.ofType("execution"), false, false
				for _, e := range ex {
					named = named || e["execution_id"] == "sess-1" && e["name"] == "billing-agent"
					completed = completed || e["execution_id"] == "sess-1" && e["status"] == "completed"
				}
			}
			if len(ex) != 2 || !named || !completed {
				t.Errorf("executions: got %v, want sess-1 named after the client, and completed", ex)
			}
			if e := log.ofType("effect"); len(e) != 1 || e[0]["effect_id"] != "msg_1" {
				t.Errorf("effects: got %v, want msg_1 (the read is none)", e)
			}
			if c := o.Counts(); c.Calls != 2 {
				t.Errorf("calls: got %d, want 2", c.Calls)
			}
		})
	}
}

// TestMCPEventsPassAsTheyCome: an event reaches the client when the
// server has sent it, before the stream goes on.
func TestMCPEventsPassAsTheyCome(t *testing.T) {
	server := &mcpServer{sse: true, release: make(chan struct{})}
	_, _, log, url := startMCPTap(t, server, nil)
	c := newMCPClient(t, url, 5*time.Second)
	c.handshake()
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"send_invoice_email","arguments":{}}}`))
	req.Header.Set(tap.SessionHeader, c.session)
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	var first []byte
	for !strings.Contains(string(first), "progress\":1}}\r\n\r\n") {
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatalf("read %q, then %v; want the first event before the server sends the rest", first, err)
		}
		first = append(first, buf[:n]...)
	}
	if strings.Contains(string(first), "msg_") {
		t.Fatalf("got %q before the server sent the answer", first)
	}
	close(server.release)
	rest := new(strings.Builder)
	for {
		n, err := resp.Body.Read(buf)
		rest.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if !strings.Contains(rest.String(), `"structuredContent":{"id":"msg_1"}`) {
		t.Errorf("the rest: got %q, want the answer", rest)
	}
	if a := log.waitAttempts(t, 1); a[0]["outcome"] != "ok" {
		t.Errorf("attempt: got %v, want ok", a[0])
	}
}

// TestMCPResumption: a POST's stream that ends before the answer, its
// events named, leaves the call open; the client's GET with Last-Event-ID
// reaches the server, the replayed answer reaches the client byte for
// byte and closes the call.
func TestMCPResumption(t *testing.T) {
	server := &mcpServer{sse: true}
	_, _, log, url := startMCPTap(t, server, nil)
	c := newMCPClient(t, url, 5*time.Second)
	c.handshake()
	if a := c.call("resumable", `{"to":"a@b.c"}`, ""); a.err != nil || strings.Contains(string(a.body), "msg_resumed") {
		t.Fatalf("the cut stream: got %q (%v), want it without the answer", a.body, a.err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(log.ofType("attempt")); n != 0 {
		t.Fatalf("got %d attempts after the cut stream, want the call still open", n)
	}
	a := c.do(http.MethodGet, "", map[string]string{"Last-Event-ID": "sess-1-2-1"})
	seen, wrote := server.seen(), server.sent()
	last := len(wrote) - 1
	if seen[last].lastEventID != "sess-1-2-1" || seen[last].method != http.MethodGet {
		t.Errorf("the server got %s with Last-Event-ID %q, want GET with sess-1-2-1", seen[last].method, seen[last].lastEventID)
	}
	if a.err != nil || a.sha != wrote[last].sha || !strings.Contains(string(a.body), "msg_resumed") {
		t.Errorf("the resumed stream: got %q (%v), want the server's bytes %q", a.body, a.err, wrote[last].body)
	}
	attempts := log.waitAttempts(t, 1)
	if attempts[0]["outcome"] != "ok" {
		t.Errorf("attempt: got %v, want ok, answered on the resumed stream", attempts[0])
	}
	if e := log.ofType("effect"); len(e) != 1 || e[0]["effect_id"] != "msg_resumed" {
		t.Errorf("effects: got %v, want msg_resumed", e)
	}
}

// TestMCPLoseResponse: lose-response on a tools/call forwards it, the
// server sends the email, the answer is withheld and the client's own
// timeout fires (a JSON answer: the request held; a stream: the answer's
// event dropped, the stream held open); the retry goes through. The
// attempts are timeout then ok, the server's two emails two effects.
func TestMCPLoseResponse(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[sse], func(t *testing.T) {
			server := &mcpServer{sse: sse}
			_, o, log, url := startMCPTap(t, server, func(c *tap.Config) { c.HoldLimit = time.Minute })
			c := newMCPClient(t, url, 400*time.Millisecond)
			c.handshake()
			args := `{"to":"jordan@acme.dev","invoice_id":"inv_7"}`
			lost := c.call("send_invoice_email", args, `{"io.oncetrace/fault":"lose-response"}`)
			if lost.err == nil || !strings.Contains(lost.err.Error(), "Client.Timeout") || lost.took < 400*time.Millisecond {
				t.Errorf("the struck call: got %q, err %v after %v, want the client's own timeout", lost.body, lost.err, lost.took)
			}
			if strings.Contains(string(lost.body), "msg_1") {
				t.Errorf("the struck call: the client got %q, want no answer", lost.body)
			}
			if sse && !strings.Contains(string(lost.body), `"progress":1`) {
				t.Errorf("the struck stream: got %q, want the events before the answer", lost.body)
			}
			if n := server.emailsSent(); n != 1 {
				t.Errorf("emails: got %d, want 1 (the struck call was forwarded)", n)
			}
			retry := c.call("send_invoice_email", args, "")
			if retry.err != nil || !strings.Contains(string(retry.body), "msg_2") {
				t.Errorf("the retry: got %q (%v), want msg_2", retry.body, retry.err)
			}
			attempts := log.waitAttempts(t, 2)
			if attempts[0]["outcome"] != "timeout" || !strings.Contains(fmt.Sprint(attempts[0]["error"]), "lose-response") || attempts[1]["outcome"] != "ok" {
				t.Errorf("attempts: got %v, want timeout (lose-response) then ok", attempts)
			}
			if attempts[0]["step_id"] != attempts[1]["step_id"] {
				t.Errorf("steps: got %v and %v, want one step", attempts[0]["step_id"], attempts[1]["step_id"])
			}
			if e := log.ofType("effect"); len(e) != 2 {
				t.Errorf("effects: got %v, want msg_1 and msg_2", e)
			}
			if c := o.Counts(); c.Dropped != 1 {
				t.Errorf("dropped: got %d, want 1", c.Dropped)
			}
		})
	}
}

// TestMCPLoseResponseHoldLimit: a client that never gives up is answered
// after HoldLimit: a 504 for a JSON answer, the stream's end (without the
// answer) for an event stream.
func TestMCPLoseResponseHoldLimit(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[sse], func(t *testing.T) {
			server := &mcpServer{sse: sse}
			_, _, _, url := startMCPTap(t, server, func(c *tap.Config) { c.HoldLimit = 300 * time.Millisecond })
			c := newMCPClient(t, url, 10*time.Second)
			c.handshake()
			a := c.call("send_invoice_email", `{}`, `{"io.oncetrace/fault":"lose-response"}`)
			if a.took < 300*time.Millisecond || a.took > 5*time.Second || strings.Contains(string(a.body), "msg_1") {
				t.Fatalf("got %d %q after %v, want no answer after the hold limit", a.status, a.body, a.took)
			}
			if want := map[bool]int{false: http.StatusGatewayTimeout, true: http.StatusOK}[sse]; a.status != want || a.err != nil {
				t.Errorf("got status %d (%v), want %d", a.status, a.err, want)
			}
		})
	}
}

// TestMCPFailBefore: fail-before answers the call with a JSON-RPC error
// without forwarding it; a batch is refused whole.
func TestMCPFailBefore(t *testing.T) {
	server := &mcpServer{}
	_, _, log, url := startMCPTap(t, server, nil)
	c := newMCPClient(t, url, 5*time.Second)
	c.handshake()
	before := len(server.seen())
	a := c.call("send_invoice_email", `{"to":"a@b.c"}`, `{"io.oncetrace/fault":"fail-before"}`)
	var reply struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.body, &reply); err != nil || a.status != http.StatusOK || a.contentType != "application/json" || reply.ID != 2 || !strings.Contains(reply.Error.Message, "fail-before") {
		t.Errorf("got %d %s %q, want 200 application/json: a JSON-RPC error for id 2 naming fail-before", a.status, a.contentType, a.body)
	}
	batch := c.do(http.MethodPost, `[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"send_invoice_email","arguments":{},"_meta":{"io.oncetrace/fault":"fail-before"}}},`+
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get_invoice","arguments":{}}}]`, nil)
	var replies []struct{ ID int }
	if err := json.Unmarshal(batch.body, &replies); err != nil || len(replies) != 2 || replies[0].ID != 3 || replies[1].ID != 4 {
		t.Errorf("the batch: got %q, want an array of errors for 3 and 4", batch.body)
	}
	if n := len(server.seen()) - before; n != 0 || server.emailsSent() != 0 {
		t.Errorf("the server got %d requests and sent %d emails, want none", n, server.emailsSent())
	}
	attempts := log.waitAttempts(t, 3)
	for _, at := range attempts {
		if at["outcome"] != "error" || !strings.Contains(fmt.Sprint(at["error"]), "fail-before") {
			t.Errorf("attempt: got %v, want an error naming fail-before", at)
		}
	}
	if e := log.ofType("effect"); len(e) != 0 {
		t.Errorf("effects: got %v, want none", e)
	}
}

// TestMCPLatency: latency forwards the call after the delay.
func TestMCPLatency(t *testing.T) {
	_, o, log, url := startMCPTap(t, &mcpServer{sse: true}, nil)
	c := newMCPClient(t, url, 5*time.Second)
	c.handshake()
	a := c.call("send_invoice_email", `{}`, `{"io.oncetrace/fault":"latency=300ms"}`)
	if a.err != nil || a.took < 300*time.Millisecond || !strings.Contains(string(a.body), "msg_1") {
		t.Errorf("got %q (%v) after %v, want the answer after 300ms", a.body, a.err, a.took)
	}
	if at := log.waitAttempts(t, 1); at[0]["outcome"] != "ok" {
		t.Errorf("attempt: got %v, want ok", at[0])
	}
	if c := o.Counts(); c.Delayed != 1 {
		t.Errorf("delayed: got %d, want 1", c.Delayed)
	}
}

// TestMCPUnanswered: an answer that ends without answering the call (a
// stream without event ids ending, an error status) records it as a
// timeout, no effect.
func TestMCPUnanswered(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[sse], func(t *testing.T) {
			_, _, log, url := startMCPTap(t, &mcpServer{sse: sse}, nil)
			c := newMCPClient(t, url, 5*time.Second)
			c.handshake()
			c.call("hang_up", `{}`, "")
			at := log.waitAttempts(t, 1)
			if at[0]["outcome"] != "timeout" || !strings.Contains(fmt.Sprint(at[0]["error"]), "without answering") {
				t.Errorf("attempt: got %v, want a timeout: the answer ended without answering", at[0])
			}
		})
	}
}

// TestMCPLateAnswer: a server slower than UpstreamTimeout gets the client
// a 504; the tap waits on, and the answer that comes is recorded as what
// the server did (an effect) and what the client had (a timeout).
func TestMCPLateAnswer(t *testing.T) {
	server := &mcpServer{slow: 600 * time.Millisecond}
	_, _, log, url := startMCPTap(t, server, func(c *tap.Config) { c.UpstreamTimeout = 200 * time.Millisecond })
	c := newMCPClient(t, url, 5*time.Second)
	c.handshake()
	if a := c.call("slow_send", `{}`, ""); a.status != http.StatusGatewayTimeout {
		t.Errorf("got %d %q, want 504", a.status, a.body)
	}
	at := log.waitAttempts(t, 1)
	if at[0]["outcome"] != "timeout" || !strings.Contains(fmt.Sprint(at[0]["error"]), "504") {
		t.Errorf("attempt: got %v, want a timeout saying the client was answered 504", at[0])
	}
	if e := log.ofType("effect"); len(e) != 1 || e[0]["effect_id"] != "msg_1" {
		t.Errorf("effects: got %v, want msg_1, sent after the client's 504", e)
	}
}

// TestMCPLongResultStreams: a 10 MB tool result passes through byte for
// byte with the tap allocating a small part of it, and its call is
// closed with the effect id that comes after the 10 MB.
func TestMCPLongResultStreams(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[sse], func(t *testing.T) {
			server := &mcpServer{sse: sse}
			_, _, log, url := startMCPTap(t, server, func(c *tap.Config) { c.MaxMessageBytes = 256 << 10 })
			c := newMCPClient(t, url, 30*time.Second)
			c.handshake()
			c.call("get_invoice", `{}`, "") // warm the connections
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			a := c.call("big_report", `{}`, "")
			runtime.ReadMemStats(&after)
			wrote := server.sent()
			if w := wrote[len(wrote)-1]; a.err != nil || a.len != w.len || a.sha != w.sha || a.len < bigResult {
				t.Fatalf("the client got %d bytes %.12s (%v), the server wrote %d bytes %.12s", a.len, a.sha, a.err, w.len, w.sha)
			}
			// Everything in this process together: the server, the tap
			// and the client. Holding the result once would take 10 MB.
			t.Logf("allocated %d bytes passing %d through", after.TotalAlloc-before.TotalAlloc, a.len)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
				t.Errorf("passing 10 MB through allocated %d bytes, want under 4 MB", grew)
			}
			at := log.waitAttempts(t, 2)
			if at[1]["tool"] != "big_report" || at[1]["outcome"] != "ok" {
				t.Errorf("attempt: got %v, want big_report ok", at[1])
			}
			if e := log.ofType("effect"); len(e) != 1 || e[0]["effect_id"] != "rep_1" {
				t.Errorf("effects: got %v, want rep_1, read after the 10 MB", e)
			}
		})
	}
}

// TestMCPLongStruckEvent: an event too long to hold that answers a call
// lose-response struck is dropped when its id comes first (the Go SDK's
// order), the stream held; when its id comes last it has reached the
// client before the tap could know, and the call is recorded answered.
func TestMCPLongStruckEvent(t *testing.T) {
	server := &mcpServer{sse: true}
	_, o, log, url := startMCPTap(t, server, func(c *tap.Config) { c.MaxMessageBytes = 256 << 10; c.HoldLimit = 200 * time.Millisecond })
	c := newMCPClient(t, url, 30*time.Second)
	c.handshake()
	lose := `{"io.oncetrace/fault":"lose-response"}`
	first := c.call("big_report", `{"id_first":true}`, lose)
	if first.err != nil || first.len > 64<<10 || strings.Contains(string(first.body), "rep_1") {
		t.Errorf("id first: the client got %d bytes (%v), want the stream without the answer", first.len, first.err)
	}
	last := c.call("big_report", `{}`, lose)
	if w := server.sent(); last.err != nil || last.sha != w[len(w)-1].sha {
		t.Errorf("id last: the client got %d bytes (%v), want the server's %d", last.len, last.err, w[len(w)-1].len)
	}
	at := log.waitAttempts(t, 2)
	if at[0]["outcome"] != "timeout" || at[1]["outcome"] != "ok" {
		t.Errorf("attempts: got %v, want timeout (withheld) then ok (delivered)", at)
	}
	if e := log.ofType("effect"); len(e) != 2 {
		t.Errorf("effects: got %v, want 2", e)
	}
	if c := o.Counts(); c.Dropped != 1 {
		t.Errorf("dropped: got %d, want 1", c.Dropped)
	}
}
