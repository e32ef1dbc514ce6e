package web_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/html"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/smtpsink"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
	"github.com/oncetrace/oncetrace/web"
)

// mailServer is a real server and the SMTP sink beside it, as serve
// --smtp wires them: one writer, one SQLite file. Requests under
// /canary/ are counted: a hostile message's HTML tries to reach them.
type mailServer struct {
	*testServer
	smtpAddr string

	mu     sync.Mutex
	canary []string
}

// storedMessages keeps the sink's messages in the database, as serve's
// own adapter does (the sink does not import the store).
type storedMessages struct{ db *store.DB }

func (s storedMessages) PutMessage(ctx context.Context, m smtpsink.Received) error {
	return s.db.PutMessage(ctx, store.Message{Provider: m.Provider, EffectID: m.EffectID, From: m.From,
		Recipients: m.Recipients, ReceivedAt: m.ReceivedAt, Raw: m.Raw})
}

func startMailServer(t *testing.T) *mailServer {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	ingestWriter := writer.New(db, writer.DefaultConfig)
	srv := web.New(web.Config{DB: db, Writer: ingestWriter, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig})
	ms := &mailServer{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/canary/") {
			ms.mu.Lock()
			ms.canary = append(ms.canary, r.Method+" "+r.URL.Path)
			ms.mu.Unlock()
		}
		srv.ServeHTTP(w, r)
	}))
	sink := smtpsink.New(smtpsink.Config{
		Recorder: feed.WriterRecorder{Writer: ingestWriter, Limits: ingest.DefaultLimits, Feed: smtpsink.Feed},
		Messages: storedMessages{db}, Limits: ingest.DefaultLimits, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- sink.Serve(ln) }()
	t.Cleanup(func() {
		sink.Close()
		<-served
		ts.Close()
		srv.Close()
		ingestWriter.Close()
		db.Close()
	})
	ms.testServer = &testServer{name: "mail", ts: ts, db: db}
	ms.smtpAddr = ln.Addr().String()
	return ms
}

func (ms *mailServer) canaryHits() []string {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return append([]string(nil), ms.canary...)
}

// send sends a message with the standard library's SMTP client.
func (ms *mailServer) send(t *testing.T, to string, msg string) {
	t.Helper()
	if err := smtp.SendMail(ms.smtpAddr, nil, "billing@acme.dev", []string{to}, []byte(msg)); err != nil {
		t.Fatalf("SendMail: %v", err)
	}
}

// invoiceMail is the email an agent's send_invoice_email tool sends, with
// the extra header lines given.
func invoiceMail(messageID string, extra ...string) string {
	lines := append([]string{"From: Billing <billing@acme.dev>", "To: jordan@acme.dev", "Subject: Your June invoice",
		"Message-ID: " + messageID, "Date: Tue, 30 Jun 2026 14:02:11 +0000"}, extra...)
	return strings.Join(append(lines, "", "Hello Jordan, your June invoice is attached.", ""), "\r\n")
}

func findingsOf(t *testing.T, srv *testServer, executionID string) []trace.Finding {
	t.Helper()
	var got struct {
		Findings []trace.Finding `json:"findings"`
	}
	if err := json.Unmarshal(srv.get(t, "/api/v1/findings?execution_id="+executionID), &got); err != nil {
		t.Fatal(err)
	}
	return got.Findings
}

func hasCriticalDuplicate(fs []trace.Finding, stepID string) bool {
	for _, f := range fs {
		if f.Rule == "duplicate_effect" && f.Severity == trace.SeverityCritical && (stepID == "" || f.StepID == stepID) {
			return true
		}
	}
	return false
}

// TestSMTPTwoMessagesForOneStep is the sink's acceptance test: an agent
// retries step-4 after a timeout and its tool sends the email again, over
// SMTP, with the standard library's client. The two messages are two
// effects of one logical step: a critical duplicate_effect, whether they
// name the step in X-Oncetrace headers or carry the tool span's
// traceparent.
func TestSMTPTwoMessagesForOneStep(t *testing.T) {
	t.Run("X-Oncetrace headers", func(t *testing.T) {
		ms := startMailServer(t)
		attempt := func(n int, start, end, outcome string) map[string]any {
			return map[string]any{"type": "attempt", "execution_id": "x", "step_id": "step-4", "attempt": n, "tool": "send_invoice_email",
				"effect": "write", "provider": "smtp", "started_at": start, "ended_at": end, "outcome": outcome}
		}
		postUIEvents(t, ms.ts.URL, []map[string]any{
			{"type": "execution", "execution_id": "x", "name": "billing-agent", "status": "running", "started_at": "2026-06-30T14:02:11Z"},
			attempt(1, "2026-06-30T14:02:11.200Z", "2026-06-30T14:02:21.200Z", "timeout"),
			attempt(2, "2026-06-30T14:02:21.300Z", "2026-06-30T14:02:21.410Z", "ok"),
		})
		for _, id := range []string{"<try-1@agent.acme.dev>", "<try-2@agent.acme.dev>"} {
			ms.send(t, "jordan@acme.dev", invoiceMail(id, "X-Oncetrace-Execution: x", "X-Oncetrace-Step: step-4"))
		}
		if fs := findingsOf(t, ms.testServer, "x"); !hasCriticalDuplicate(fs, "step-4") {
			t.Errorf("findings of x: got %+v, want a critical duplicate_effect on step-4", fs)
		}
		// Sending the first message again (a client that did not hear the
		// 250) adds no effect.
		ms.send(t, "jordan@acme.dev", invoiceMail("<try-1@agent.acme.dev>", "X-Oncetrace-Execution: x", "X-Oncetrace-Step: step-4"))
		var effects struct {
			Effects []store.EffectRow `json:"effects"`
		}
		if err := json.Unmarshal(ms.get(t, "/api/v1/effects?provider=smtp"), &effects); err != nil {
			t.Fatal(err)
		}
		if len(effects.Effects) != 2 {
			t.Errorf("smtp effects: got %d, want 2 (a re-sent Message-ID is the same effect)", len(effects.Effects))
		}
		for _, e := range effects.Effects {
			if e.State != trace.MatchDuplicate || e.ExecutionID != "x" || e.StepID != "step-4" || e.Target != "jordan@acme.dev" {
				t.Errorf("effect %s: got state %s, execution %q step %q target %q; want duplicate, x, step-4, jordan@acme.dev",
					e.ID, e.State, e.ExecutionID, e.StepID, e.Target)
			}
		}
	})

	t.Run("traceparent of the tool span", func(t *testing.T) {
		ms := startMailServer(t)
		const traceID = "5b8efff798038103d269b633813fc60c"
		const s = int64(1_782_828_131_000_000_000)
		const ms1 = int64(1_000_000)
		tool := func(spanID string, start, end int64, errorType string) string {
			return otlpJSONSpan(traceID, spanID, "00000000000000a0", "execute_tool send_invoice_email", 1, s+start*ms1, s+end*ms1,
				map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_invoice_email", "oncetrace.effect": "write",
					"gen_ai.tool.call.arguments": `{"to":"jordan@acme.dev","subject":"Your June invoice"}`}, errorType)
		}
		root := otlpJSONSpan(traceID, "00000000000000a0", "", "invoke_agent billing-agent", 1, s, s+20_000*ms1,
			map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent"}, "")
		postOTLPJSON(t, ms.testServer, root, tool("00000000000000c1", 100, 10_100, "TimeoutError"), tool("00000000000000c2", 10_200, 10_400, ""))
		// Each attempt's email carries the trace context of its tool span,
		// as an instrumented SMTP client puts it in a traceparent header.
		ms.send(t, "jordan@acme.dev", invoiceMail("<span-1@agent.acme.dev>", "traceparent: 00-"+traceID+"-00000000000000c1-01"))
		ms.send(t, "jordan@acme.dev", invoiceMail("<span-2@agent.acme.dev>", "traceparent: 00-"+traceID+"-00000000000000c2-01"))
		fs := findingsOf(t, ms.testServer, traceID)
		var dup *trace.Finding
		for i, f := range fs {
			if f.Rule == "duplicate_effect" && f.Severity == trace.SeverityCritical {
				dup = &fs[i]
			}
		}
		if dup == nil {
			t.Fatalf("findings of %s: got %+v, want a critical duplicate_effect", traceID, fs)
		}
		if got := fmt.Sprint(dup.Attempts, dup.Effects); got != "[1 2] [{smtp <span-1@agent.acme.dev>} {smtp <span-2@agent.acme.dev>}]" {
			t.Errorf("duplicate_effect: got attempts and effects %s, want attempts 1 and 2 of the tool's step, each with its email", got)
		}
	})
}

// hostileMessage is an invoice whose HTML part tries everything a mail's
// HTML must not do in oncetrace's page: run script (inline, from a URL, in
// handlers, in javascript: links and frames), refresh the frame away,
// submit a form, load a tracking pixel, rebase links. Each vector that ran
// would reach a /canary/ URL (navigation is not something CSP blocks), and
// log PWNED. Its link and button sit at fixed places, to be clicked.
func hostileMessage(messageID string) string {
	htmlPart := `<!DOCTYPE html>
<html><head>
<meta http-equiv="refresh" content="0; url=/canary/refresh">
<base href="http://evil.test/">
<link rel="stylesheet" href="/canary/stylesheet">
<script>console.log("PWNED script"); document.title = "PWNED"; document.cookie = "pwned=1"; location.href = "/canary/script";</script>
<script src="/canary/script.js"></script>
<style>#visible { color: rgb(0, 128, 0); }</style>
</head>
<body onload="console.log('PWNED onload'); location.href = '/canary/onload'">
<p id="visible">Your June invoice: 42.00 EUR, due July 15.</p>
<a id="jslink" style="position: fixed; left: 0; top: 60px; width: 300px; height: 40px; display: block"
   href="javascript:console.log('PWNED link'); location.href = '/canary/link'">Pay now</a>
<form id="form" action="/canary/form" method="post" style="position: fixed; left: 0; top: 120px; margin: 0">
  <input type="hidden" name="card" value="4242424242424242">
  <button id="submit" type="submit" style="display: block; width: 300px; height: 40px">Confirm payment</button>
</form>
<img src="x" onerror="console.log('PWNED onerror'); location.href = '/canary/onerror'">
<img src="/canary/pixel.gif" alt="">
<svg onload="console.log('PWNED svg'); location.href = '/canary/svg'"></svg>
<iframe src="javascript:parent.location.href = '/canary/iframe'"></iframe>
<object data="/canary/object"></object>
</body></html>`
	return strings.Join([]string{
		"From: Billing <billing@acme.dev>", "To: jordan@acme.dev", "Subject: Your June invoice",
		"Message-ID: " + messageID, "MIME-Version: 1.0", `Content-Type: multipart/mixed; boundary="m1"`,
		"X-Oncetrace-Execution: x", "X-Oncetrace-Step: step-4",
		"", "--m1", `Content-Type: multipart/alternative; boundary="b1"`,
		"", "--b1", "Content-Type: text/plain; charset=utf-8", "",
		"Hello Jordan, your June invoice: 42.00 EUR, due July 15.",
		"--b1", "Content-Type: text/html; charset=utf-8", "",
		htmlPart,
		"--b1--",
		"--m1", `Content-Type: text/html; name="invoice.html"`, `Content-Disposition: attachment; filename="invoice.html"`,
		"Content-Transfer-Encoding: base64", "",
		base64.StdEncoding.EncodeToString([]byte(`<script>console.log("PWNED attachment")</script>`)),
		"--m1--", "",
	}, "\r\n")
}

// TestMessagePages: the message page shows the header, the text part and
// a sandboxed frame for the HTML part, under the strict policy plus
// frame-src 'self'; the HTML part is served on its own under a policy
// that runs nothing; the effect's detail and the outbox link to it.
func TestMessagePages(t *testing.T) {
	ms := startMailServer(t)
	postUIEvents(t, ms.ts.URL, []map[string]any{{"type": "attempt", "execution_id": "x", "step_id": "step-4", "attempt": 1,
		"tool": "send_invoice_email", "effect": "write", "started_at": "2026-06-30T14:02:11Z", "ended_at": "2026-06-30T14:02:12Z", "outcome": "ok"}})
	const id = "<hostile@agent.acme.dev>"
	ms.send(t, "jordan@acme.dev", hostileMessage(id))

	page := fetchPage(t, ms.ts.URL+views.MessageURL("smtp", id), false)
	checkHTMLResponse(t, "the message page", page, http.StatusOK, false)
	if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("message page: got Content-Security-Policy %q, want the strict policy with frame-src 'self'", csp)
	}
	doc, err := html.Parse(bytes.NewReader(page.body))
	if err != nil {
		t.Fatal(err)
	}
	for _, testid := range []string{"message", "message-subject", "message-text", "message-html", "message-header", "message-raw", "message-attachments"} {
		if findTestID(doc, testid) == nil {
			t.Errorf("message page: no data-testid=%q", testid)
		}
	}
	if got := textOf(findTestID(doc, "message-text")); !strings.Contains(got, "Hello Jordan, your June invoice: 42.00 EUR") {
		t.Errorf("text part: got %q, want the text part", got)
	}
	// An attachment is listed by name, type and size, never shown.
	if got := textOf(findTestID(doc, "message-attachment")); !strings.Contains(got, "invoice.html") || !strings.Contains(got, "text/html") || !strings.Contains(got, "48 B") {
		t.Errorf("attachment row: got %q, want invoice.html, text/html, 48 B", got)
	}
	frame := findTestID(doc, "message-html-frame")
	if frame == nil {
		t.Fatal("message page: no data-testid=message-html-frame")
	}
	sandbox, hasSandbox := attr(frame, "sandbox")
	if frame.Data != "iframe" || !hasSandbox || sandbox != "" {
		t.Errorf("HTML frame: got <%s> sandbox %v %q, want an <iframe> with an empty sandbox attribute (no allow-*)", frame.Data, hasSandbox, sandbox)
	}
	if src, _ := attr(frame, "src"); src != views.MessageHTMLURL("smtp", id) {
		t.Errorf("HTML frame src: got %q, want %q", src, views.MessageHTMLURL("smtp", id))
	}
	if _, ok := attr(frame, "srcdoc"); ok || bytes.Contains(page.body, []byte("PWNED")) || bytes.Contains(page.body, []byte("/canary/")) {
		t.Errorf("message page: the HTML part is in the page's own markup; want it only behind the frame's URL")
	}

	part := fetchPage(t, ms.ts.URL+views.MessageHTMLURL("smtp", id), false)
	if part.status != http.StatusOK || !strings.HasPrefix(part.header.Get("Content-Type"), "text/html") {
		t.Fatalf("HTML part: got %d %q, want 200 text/html", part.status, part.header.Get("Content-Type"))
	}
	csp := part.header.Get("Content-Security-Policy")
	for _, want := range []string{"sandbox", "default-src 'none'", "style-src 'unsafe-inline'", "img-src data:", "frame-ancestors 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("HTML part: got Content-Security-Policy %q, want %s in it", csp, want)
		}
	}
	if strings.Contains(csp, "script-src") || strings.Contains(csp, "allow-scripts") {
		t.Errorf("HTML part: got Content-Security-Policy %q, want no script allowed", csp)
	}
	if part.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("HTML part: got X-Content-Type-Options %q, want nosniff", part.header.Get("X-Content-Type-Options"))
	}
	if !bytes.Contains(part.body, []byte(`<p id="visible">Your June invoice`)) {
		t.Errorf("HTML part: got %q, want the sender's HTML", part.body)
	}

	// The page's JSON twin.
	var twin struct {
		EffectID    string   `json:"effect_id"`
		Recipients  []string `json:"recipients"`
		Text        *string  `json:"text"`
		HTML        *string  `json:"html"`
		Received    int      `json:"received"`
		Attachments []any    `json:"attachments"`
		Effect      *struct {
			ExecutionID string `json:"execution_id"`
			StepID      string `json:"step_id"`
		} `json:"effect"`
	}
	q := strings.TrimPrefix(views.MessageURL("smtp", id), "/outbox/messages")
	if err := json.Unmarshal(ms.get(t, "/api/v1/messages"+q), &twin); err != nil {
		t.Fatal(err)
	}
	if twin.EffectID != id || strings.Join(twin.Recipients, ",") != "jordan@acme.dev" || twin.Text == nil ||
		!strings.HasPrefix(*twin.Text, "Hello Jordan") || twin.HTML == nil || !strings.Contains(*twin.HTML, `id="visible"`) ||
		twin.Received != 1 || twin.Attachments == nil || twin.Effect == nil || twin.Effect.ExecutionID != "x" || twin.Effect.StepID != "step-4" {
		t.Errorf("JSON twin: got %+v, want the message's fields and its effect", twin)
	}

	raw := fetchPage(t, ms.ts.URL+views.MessageRawURL("smtp", id), false)
	if raw.status != http.StatusOK || !strings.HasPrefix(raw.header.Get("Content-Type"), "text/plain") ||
		!strings.Contains(raw.header.Get("Content-Security-Policy"), "sandbox") || !bytes.Contains(raw.body, []byte("Message-ID: "+id)) {
		t.Errorf("raw message: got %d %q %q, want 200 text/plain, sandboxed, the message", raw.status,
			raw.header.Get("Content-Type"), raw.header.Get("Content-Security-Policy"))
	}

	for _, tt := range []struct {
		path   string
		status int
	}{
		{"/outbox/messages?provider=smtp&id=" + "%3Cnone%40agent%3E", http.StatusNotFound},
		{"/outbox/messages?provider=smtp", http.StatusBadRequest},
		{"/outbox/messages/html?provider=smtp&id=%3Cnone%40agent%3E", http.StatusNotFound},
	} {
		r := fetchPage(t, ms.ts.URL+tt.path, false)
		checkHTMLResponse(t, tt.path, r, tt.status, false)
	}
	if r := fetchPage(t, ms.ts.URL+"/api/v1/messages?provider=smtp&id=%3Cnone%40agent%3E", false); r.status != http.StatusNotFound ||
		!strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Errorf("JSON twin of no message: got %d %q, want 404 JSON", r.status, r.header.Get("Content-Type"))
	}

	// The effect's detail and the outbox row link to the message.
	link := `data-testid="effect-message"`
	href := `href="` + html.EscapeString(views.MessageURL("smtp", id)) + `"`
	detail := fetchPage(t, ms.ts.URL+views.EffectURL("x", "smtp", id), false)
	checkHTMLResponse(t, "the effect's detail", detail, http.StatusOK, false)
	if !bytes.Contains(detail.body, []byte(link)) || !bytes.Contains(detail.body, []byte(href)) {
		t.Errorf("effect detail: no link to the message (%s)", href)
	}
	outboxPage := fetchPage(t, ms.ts.URL+"/outbox?provider=smtp", false)
	checkHTMLResponse(t, "/outbox", outboxPage, http.StatusOK, false)
	if !bytes.Contains(outboxPage.body, []byte(link)) || !bytes.Contains(outboxPage.body, []byte(href)) {
		t.Errorf("outbox: no link to the message (%s)", href)
	}
	// An effect with no message kept has no link.
	postUIEvents(t, ms.ts.URL, []map[string]any{{"type": "effect", "provider": "mail-api", "effect_id": "msg_1", "execution_id": "x", "step_id": "step-4"}})
	other := fetchPage(t, ms.ts.URL+views.EffectURL("x", "mail-api", "msg_1"), false)
	if bytes.Contains(other.body, []byte(link)) {
		t.Errorf("effect detail of an effect without a message: got a link to one")
	}
}

func findTestID(n *html.Node, id string) *html.Node {
	if v, ok := attr(n, "data-testid"); ok && v == id {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := findTestID(c, id); f != nil {
			return f
		}
	}
	return nil
}

func attr(n *html.Node, key string) (string, bool) {
	if n == nil || n.Type != html.ElementNode {
		return "", false
	}
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func textOf(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// TestMessagePageManyParts: a message of 100,000 parts is kept whole and
// served raw as received; its page and the page's JSON twin read only the
// first smtpsink.MaxParts parts and say how many they leave out.
func TestMessagePageManyParts(t *testing.T) {
	ms := startMailServer(t)
	const id, parts = "<many-parts@agent>", 100_000
	var b strings.Builder
	b.WriteString("Subject: many parts\r\nMessage-ID: " + id + "\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n")
	for range parts {
		b.WriteString("--b\r\nContent-Type: application/octet-stream\r\n\r\nx\r\n")
	}
	b.WriteString("--b--\r\n")
	msg := b.String()
	ms.send(t, "jordan@acme.dev", msg)

	if raw := ms.get(t, strings.Replace(views.MessageURL("smtp", id), "/outbox/messages?", "/outbox/messages/raw?", 1)); string(raw) != msg {
		t.Errorf("the raw message: got %d bytes, want the %d sent, whole", len(raw), len(msg))
	}
	want := parts - smtpsink.MaxParts
	page := fetchPage(t, ms.ts.URL+views.MessageURL("smtp", id), false)
	checkHTMLResponse(t, "the message page", page, http.StatusOK, false)
	if rows := bytes.Count(page.body, []byte(`data-testid="message-attachment"`)); rows > smtpsink.MaxParts {
		t.Errorf("attachment rows: got %d, want at most %d", rows, smtpsink.MaxParts)
	}
	doc, err := html.Parse(bytes.NewReader(page.body))
	if err != nil {
		t.Fatal(err)
	}
	if notice := textOf(findTestID(doc, "message-parts-not-shown")); !strings.Contains(notice, fmt.Sprint(want)) {
		t.Errorf("notice: got %q, want it to say %d parts are not shown", notice, want)
	}

	var twin struct {
		Attachments   []any `json:"attachments"`
		PartsNotShown int   `json:"parts_not_shown"`
	}
	if err := json.Unmarshal(ms.get(t, "/api/v1/messages?"+strings.TrimPrefix(views.MessageURL("smtp", id), "/outbox/messages?")), &twin); err != nil {
		t.Fatal(err)
	}
	if len(twin.Attachments) > smtpsink.MaxParts || twin.PartsNotShown != want {
		t.Errorf("JSON: got %d attachments, %d parts not shown; want at most %d and %d", len(twin.Attachments), twin.PartsNotShown, smtpsink.MaxParts, want)
	}
}
