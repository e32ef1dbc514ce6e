package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
	"github.com/oncetrace/oncetrace/views/htmlcheck"
	"github.com/oncetrace/oncetrace/web"
)

// uiBase is when the UI fixture's first execution starts.
var uiBase = time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC)

// The UI fixture's names, used by the pages test and the browser test.
const (
	uiDupExec   = "exec_dup"    // the green duplicate: step-4 timed out, then ok; two emails
	uiDupKey    = "ik_a94a0b1d" // the key step-4 sent
	uiCrashExec = "exec_crash"  // a 53 s crash gap, a replay, a re-execution
)

// uiEvents is a small history with what the UI must show: a green
// duplicate, a crash with a replay and a re-execution, a deduplicated
// retry, failures, a running execution and an orphan effect.
func uiEvents() []map[string]any {
	ts := func(exec time.Duration, sec float64) string {
		return uiBase.Add(exec + time.Duration(sec*float64(time.Second))).Format(time.RFC3339Nano)
	}
	type attempt struct {
		exec                 time.Duration
		id, step, tool, kind string
		n                    int
		start, end           float64 // end < 0: never reported
		outcome              string
		more                 map[string]any
	}
	var events []map[string]any
	execution := func(start time.Duration, id, name, status string, end float64) {
		ev := map[string]any{"type": "execution", "execution_id": id, "name": name, "status": status, "started_at": ts(start, 0)}
		if end >= 0 {
			ev["ended_at"] = ts(start, end)
		}
		events = append(events, ev)
	}
	add := func(a attempt) {
		ev := map[string]any{"type": "attempt", "execution_id": a.id, "step_id": a.step, "attempt": a.n,
			"tool": a.tool, "effect": a.kind, "started_at": ts(a.exec, a.start)}
		if a.end >= 0 {
			ev["ended_at"], ev["outcome"] = ts(a.exec, a.end), a.outcome
		}
		for k, v := range a.more {
			ev[k] = v
		}
		events = append(events, ev)
	}
	email := func(exec time.Duration, id, execID, stepID, key string, sec float64) {
		ev := map[string]any{"type": "effect", "provider": "mail-api", "effect_id": id, "target": "jordan@acme.dev", "at": ts(exec, sec)}
		if key != "" {
			ev["idempotency_key"] = key
		}
		if execID != "" {
			ev["execution_id"], ev["step_id"] = execID, stepID
		}
		events = append(events, ev)
	}
	invoice := map[string]any{"to": "jordan@acme.dev", "subject": "Your June invoice"}

	// exec_dup: step-4's first attempt timed out after the mail API had sent
	// the email; the retry sent another. Every node ends green.
	var d time.Duration
	execution(d, uiDupExec, "billing-agent", "completed", 12)
	add(attempt{d, uiDupExec, "step-1", "lookup_customer", "read", 1, 0.1, 0.4, "ok", map[string]any{"worker": "pid-4121", "args": map[string]any{"customer": "acme"}}})
	add(attempt{d, uiDupExec, "step-4", "send_invoice_email", "write", 1, 0.5, 10.5, "timeout", map[string]any{
		"provider": "mail-api", "idempotency_key": uiDupKey, "worker": "pid-4121", "args": invoice, "error": "network timeout after 10s"}})
	add(attempt{d, uiDupExec, "step-4", "send_invoice_email", "write", 2, 10.6, 10.8, "ok", map[string]any{
		"provider": "mail-api", "idempotency_key": uiDupKey, "worker": "pid-4121", "args": invoice,
		"result": map[string]any{"status": "sent", "message_id": "msg_41bcc8"}}})
	add(attempt{d, uiDupExec, "step-5", "archive_invoice", "write", 1, 11.0, 11.2, "ok", map[string]any{"worker": "pid-4121"}})
	email(d, "msg_41bcc7", uiDupExec, "step-4", uiDupKey, 0.65)
	email(d, "msg_41bcc8", uiDupExec, "step-4", uiDupKey, 10.7)

	// exec_crash: pid-1 died while sending; pid-2 replayed step-1 from the
	// journal 53 s later but ran step-2, which sends no key, again.
	d = 5 * time.Minute
	execution(d, uiCrashExec, "billing-agent", "completed", 55)
	add(attempt{d, uiCrashExec, "step-1", "create_invoice", "write", 1, 0, 0.5, "ok", map[string]any{"worker": "pid-1", "idempotency_key": "ik_inv", "result": map[string]any{"invoice_id": "inv_7"}}})
	add(attempt{d, uiCrashExec, "step-2", "send_email", "write", 1, 1.0, -1, "", map[string]any{"worker": "pid-1", "provider": "mail-api"}})
	add(attempt{d, uiCrashExec, "step-1", "create_invoice", "write", 2, 54.0, 54.01, "replayed", map[string]any{"worker": "pid-2", "idempotency_key": "ik_inv", "result": map[string]any{"invoice_id": "inv_7"}}})
	add(attempt{d, uiCrashExec, "step-2", "send_email", "write", 2, 54.1, 54.3, "ok", map[string]any{"worker": "pid-2", "provider": "mail-api"}})
	email(d, "msg_c1", uiCrashExec, "step-2", "", 1.2)
	email(d, "msg_c2", uiCrashExec, "step-2", "", 54.2)

	// exec_safe: the same timeout, but the mail API recognised the key.
	d = 10 * time.Minute
	execution(d, "exec_safe", "billing-agent", "completed", 10.5)
	add(attempt{d, "exec_safe", "step-1", "send_invoice_email", "write", 1, 0, 10, "timeout", map[string]any{"provider": "mail-api", "idempotency_key": "ik_safe", "args": invoice}})
	add(attempt{d, "exec_safe", "step-1", "send_invoice_email", "write", 2, 10.1, 10.2, "ok", map[string]any{"provider": "mail-api", "idempotency_key": "ik_safe", "args": invoice, "deduplicated": true}})
	email(d, "msg_safe", "exec_safe", "step-1", "ik_safe", 0.2)

	d = 15 * time.Minute
	execution(d, "exec_failed", "report-agent", "failed", 2.5)
	add(attempt{d, "exec_failed", "step-1", "fetch_report", "read", 1, 0, 1, "error", map[string]any{"error": "HTTP 502 from reports"}})
	add(attempt{d, "exec_failed", "step-1", "fetch_report", "read", 2, 1.1, 2, "error", map[string]any{"error": "HTTP 502 from reports"}})

	d = 20 * time.Minute
	execution(d, "exec_running", "report-agent", "running", -1)
	add(attempt{d, "exec_running", "step-1", "fetch_report", "read", 1, 0, 0.3, "ok", nil})
	add(attempt{d, "exec_running", "step-2", "summarise", "read", 1, 0.4, -1, "", nil})

	// An email no attempt of any execution sent.
	email(30*time.Minute, "msg_orphan", "", "", "ik_nobody", 0)
	return events
}

// postUIEvents sends events as one NDJSON request and wants them all stored.
func postUIEvents(t *testing.T, baseURL string, events []map[string]any) {
	t.Helper()
	if status, accepted, data := postNDJSON(t, baseURL, events); status != http.StatusOK || accepted != len(events) {
		t.Fatalf("POST /api/v1/events: got %d %s, want 200 with %d accepted", status, data, len(events))
	}
}

// postNDJSON sends events as one NDJSON request and returns the status,
// how many were stored and the answer.
func postNDJSON(t *testing.T, baseURL string, events []map[string]any) (status, accepted int, answer []byte) {
	t.Helper()
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	for _, ev := range events {
		if err := enc.Encode(ev); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Post(baseURL+"/api/v1/events", "application/x-ndjson", &body)
	if err != nil {
		t.Fatalf("POST /api/v1/events: %v", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var got struct {
		Accepted int `json:"accepted"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("POST /api/v1/events: got %d %s, want a JSON answer", resp.StatusCode, data)
	}
	return resp.StatusCode, got.Accepted, data
}

// startPagesServer is a real server on a real SQLite file.
func startPagesServer(t *testing.T) string { return startPagesStack(t).url }

// pagesStack is a real server on a real SQLite file, and its parts.
type pagesStack struct {
	url    string
	server *web.Server
	db     *store.DB
	writer *writer.Writer
	hub    *web.Hub
}

// startPagesStack starts a server wired as serve wires it: every commit
// published to the hub.
func startPagesStack(t *testing.T) pagesStack {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	hub := web.NewHub(0)
	wcfg := writer.DefaultConfig
	wcfg.OnCommit = hub.Publish
	w := writer.New(db, wcfg)
	ws := web.New(web.Config{DB: db, Writer: w, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig, Hub: hub})
	srv := httptest.NewServer(ws)
	t.Cleanup(func() {
		srv.Close()
		ws.Close()
		w.Close()
		db.Close()
	})
	return pagesStack{url: srv.URL, server: ws, db: db, writer: w, hub: hub}
}

type fetchedPage struct {
	status int
	header http.Header
	body   []byte
}

func fetchPage(t *testing.T, rawURL string, fragment bool) fetchedPage {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fragment {
		req.Header.Set("X-Oncetrace-Fragment", "1")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	return fetchedPage{resp.StatusCode, resp.Header, body}
}

// checkHTMLResponse checks what every UI response promises: HTML, a strict
// Content-Security-Policy that the markup needs nothing beyond, and valid
// markup.
func checkHTMLResponse(t *testing.T, path string, r fetchedPage, wantStatus int, fragment bool) {
	t.Helper()
	if r.status != wantStatus {
		t.Errorf("GET %s: got status %d, want %d", path, r.status, wantStatus)
	}
	if mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type")); mt != "text/html" {
		t.Errorf("GET %s: got Content-Type %q, want text/html", path, r.header.Get("Content-Type"))
	}
	csp := r.header.Get("Content-Security-Policy")
	if csp == "" || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("GET %s: got Content-Security-Policy %q, want one with script-src 'self' and no 'unsafe-inline'", path, csp)
	}
	if ps := htmlcheck.InlineCode(r.body); len(ps) > 0 {
		t.Errorf("GET %s: got markup a strict CSP blocks:\n%s\nwant none", path, ps)
	}
	check, kind := htmlcheck.Document, "page"
	if fragment {
		check, kind = htmlcheck.Fragment, "fragment"
		if bytes.Contains(r.body, []byte("<html")) {
			t.Errorf("GET %s as a fragment: got a whole page, want only the fragment", path)
		}
	}
	if ps := check(r.body); len(ps) > 0 {
		t.Errorf("GET %s: got an invalid HTML %s:\n%s\nwant none", path, kind, ps)
	}
}

// TestPages serves every page of the UI from a real server holding the UI
// fixture, and checks each response's status, type, security headers and
// HTML validity, a block the page exists to show, and its JSON twin.
func TestPages(t *testing.T) {
	base := startPagesServer(t)

	// Before any event: the empty state tells a new user what to do.
	empty := fetchPage(t, base+"/", false)
	checkHTMLResponse(t, "/ (empty)", empty, http.StatusOK, false)
	if !bytes.Contains(empty.body, []byte(`data-testid="empty"`)) || !bytes.Contains(empty.body, []byte("curl "+base)) {
		t.Errorf("GET / with no executions: got no empty state with a curl line to %s, want one", base)
	}

	postUIEvents(t, base, uiEvents())

	attempt := views.AttemptURL(uiDupExec, "step-4", 1)
	effect := views.EffectURL(uiDupExec, "mail-api", "msg_41bcc8")
	tests := []struct {
		path     string
		fragment bool
		status   int
		want     []string // substrings of the body
		twin     string   // the JSON twin, "" for none
		twinWant string   // a substring of the twin's body
	}{
		{path: "/", status: 200, want: []string{`data-testid="execution-row"`, uiDupExec, "exec_running", "✗ 1 critical", "✗ 2 critical", "! 1 warning"},
			twin: "/api/v1/executions", twinWant: `"execution_id":"exec_dup"`},
		{path: "/?status=completed", status: 200, want: []string{uiDupExec, "exec_safe"},
			twin: "/api/v1/executions?status=completed", twinWant: `"execution_id":"exec_safe"`},
		{path: "/?q=" + uiDupKey, status: 200, want: []string{uiDupExec},
			twin: "/api/v1/executions?q=" + uiDupKey, twinWant: `"execution_id":"exec_dup"`},
		{path: "/executions/" + uiDupExec, status: 200, want: []string{`data-testid="timeline"`, "2 emails for step-4", `data-state="duplicate"`, "2 effects for one logical step"},
			twin: "/api/v1/executions/" + uiDupExec, twinWant: `"state":"duplicate"`},
		{path: "/executions/" + uiDupExec + "?lanes=all", status: 200, want: []string{`data-testid="timeline"`},
			twin: "/api/v1/executions/" + uiDupExec, twinWant: `"step_id":"step-4"`},
		{path: "/executions/" + uiCrashExec, status: 200, want: []string{"53 s — no process running", "worker pid-1 → pid-2", `data-testid="replay-ghost"`, "? lost"},
			twin: "/api/v1/executions/" + uiCrashExec, twinWant: `"kind":"crash"`},
		{path: "/executions/exec_safe", status: 200, want: []string{`data-testid="dedupe-badge"`, `data-testid="audit-clean"`},
			twin: "/api/v1/executions/exec_safe", twinWant: `"deduplicated":true`},
		{path: "/executions/exec_running", status: 200, want: []string{"… running"},
			twin: "/api/v1/executions/exec_running", twinWant: `"outcome":"running"`},
		{path: attempt, status: 200, want: []string{`data-testid="attempt-detail"`, "network timeout after 10s", "&#34;to&#34;: &#34;jordan@acme.dev&#34;"},
			twin: "/api/v1/executions/" + uiDupExec, twinWant: `"error":"network timeout after 10s"`},
		{path: attempt, fragment: true, status: 200, want: []string{`data-testid="attempt-detail"`, uiDupKey}},
		{path: effect, status: 200, want: []string{`data-testid="effect-detail"`, "2 effects for step-4"},
			twin: "/api/v1/effects?state=duplicate", twinWant: `"effect_id":"msg_41bcc8"`},
		{path: effect, fragment: true, status: 200, want: []string{`data-testid="effect-detail"`, "◆ duplicate"}},
		{path: "/outbox", status: 200, want: []string{`data-state="duplicate"`, `data-state="orphan"`, `data-state="matched"`},
			twin: "/api/v1/effects", twinWant: `"effect_id":"msg_orphan"`},
		{path: "/outbox?state=orphan", status: 200, want: []string{"msg_orphan"},
			twin: "/api/v1/effects?state=orphan", twinWant: `"effect_id":"msg_orphan"`},
		{path: views.KeyURL(uiDupKey), status: 200, want: []string{`data-testid="key-attempt"`, "msg_41bcc7", "msg_41bcc8"},
			twin: "/api/v1/keys/" + uiDupKey, twinWant: `"idempotency_key":"` + uiDupKey + `"`},
		{path: "/executions/exec_nope", status: 404, want: []string{`data-testid="error"`, "404 Not Found"},
			twin: "/api/v1/executions/exec_nope"},
		{path: views.AttemptURL(uiDupExec, "step-4", 9), status: 404, want: []string{`data-testid="error"`}},
		{path: views.EffectURL(uiDupExec, "mail-api", "msg_nope"), fragment: true, status: 404, want: []string{`data-testid="error"`}},
	}
	for _, tc := range tests {
		name := tc.path
		if tc.fragment {
			name += " (fragment)"
		}
		t.Run(url.PathEscape(name), func(t *testing.T) {
			r := fetchPage(t, base+tc.path, tc.fragment)
			// A failed fragment request gets the error page, which the
			// script replaces by navigating to the link.
			checkHTMLResponse(t, tc.path, r, tc.status, tc.fragment && tc.status == http.StatusOK)
			for _, w := range tc.want {
				if !bytes.Contains(r.body, []byte(w)) {
					t.Errorf("GET %s: got a body without %q, want it", tc.path, w)
				}
			}
			if tc.twin == "" {
				return
			}
			j := fetchPage(t, base+tc.twin, false)
			if j.status != tc.status {
				t.Errorf("GET %s (JSON twin): got status %d, want %d", tc.twin, j.status, tc.status)
			}
			if mt, _, _ := mime.ParseMediaType(j.header.Get("Content-Type")); mt != "application/json" || !json.Valid(j.body) {
				t.Errorf("GET %s (JSON twin): got %q %.200s, want valid application/json", tc.twin, j.header.Get("Content-Type"), j.body)
			}
			if tc.twinWant != "" && !bytes.Contains(j.body, []byte(tc.twinWant)) {
				t.Errorf("GET %s (JSON twin): got %.300s…, want it to contain %s", tc.twin, j.body, tc.twinWant)
			}
		})
	}

	// The one stylesheet and the one script the layout names are served.
	for path, want := range map[string]string{"/static/css/oncetrace.css": "text/css", "/static/js/oncetrace.js": "javascript"} {
		r := fetchPage(t, base+path, false)
		if r.status != http.StatusOK || !strings.Contains(r.header.Get("Content-Type"), want) {
			t.Errorf("GET %s: got %d %q, want 200 %s", path, r.status, r.header.Get("Content-Type"), want)
		}
	}
}

// auditEvents are executions in each audit state, one with model calls and
// an HTTP call under its tool attempt, and an orphan email near them. Times
// are an hour after the UI fixture's.
func auditEvents() []map[string]any {
	base := uiBase.Add(time.Hour)
	ts := func(sec float64) string {
		return base.Add(time.Duration(sec * float64(time.Second))).Format(time.RFC3339Nano)
	}
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	var events []map[string]any
	write := func(exec string, start float64, more map[string]any) {
		events = append(events,
			map[string]any{"type": "execution", "execution_id": exec, "name": "audit-agent", "status": "completed", "started_at": ts(start), "ended_at": ts(start + 2)},
			map[string]any{"type": "attempt", "execution_id": exec, "step_id": "step-1", "attempt": 1, "tool": "send_invoice_email", "effect": "write",
				"provider": "mail-api", "idempotency_key": "ik_" + exec, "started_at": ts(start + 0.1), "ended_at": ts(start + 0.6), "outcome": "ok"})
		for k, v := range more {
			events[len(events)-1][k] = v
		}
	}
	email := func(exec, id string, sec float64) {
		events = append(events, map[string]any{"type": "effect", "provider": "mail-api", "effect_id": id, "idempotency_key": "ik_" + exec,
			"execution_id": exec, "step_id": "step-1", "target": "jordan@acme.dev", "at": ts(sec)})
	}
	// No outbox feed reported an effect of its write step.
	write("exec_unverified", 0, nil)
	// Its tool call made one HTTP request, and the model was called twice.
	write("exec_verified", 10, map[string]any{"trace_id": traceID, "span_id": "00f067aa0ba902b7"})
	email("exec_verified", "msg_v1", 10.4)
	events = append(events,
		map[string]any{"type": "span", "execution_id": "exec_verified", "trace_id": traceID, "span_id": "00f067aa0ba902c1", "parent_span_id": "00f067aa0ba902b7",
			"role": "http", "name": "POST", "http_method": "POST", "http_url": "https://api.mail.test/v1/send", "http_status": 200,
			"started_at": ts(10.2), "ended_at": ts(10.45)},
		map[string]any{"type": "span", "execution_id": "exec_verified", "trace_id": traceID, "span_id": "00f067aa0ba902d1",
			"role": "model", "name": "chat gpt-4o", "model": "gpt-4o", "input_tokens": 120, "output_tokens": 18,
			"started_at": ts(10.7), "ended_at": ts(11.9)},
		map[string]any{"type": "span", "execution_id": "exec_verified", "trace_id": traceID, "span_id": "00f067aa0ba902d2",
			"role": "model", "name": "chat gpt-4o", "model": "gpt-4o", "error": "rate limited",
			"started_at": ts(11.95), "ended_at": ts(11.99)},
	)
	// Two emails for one step.
	write("exec_twice", 20, nil)
	email("exec_twice", "msg_t1", 20.3)
	email("exec_twice", "msg_t2", 20.5)
	// An email no attempt sent, while exec_unverified ran.
	events = append(events, map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "msg_stray", "target": "jordan@acme.dev", "at": ts(1)})
	return events
}

// TestExecutionAuditPages checks the three audit states on the execution
// page and the list's audit filter, the model calls' lane and the HTTP
// calls of an attempt, through a real server.
func TestExecutionAuditPages(t *testing.T) {
	base := startPagesServer(t)
	postUIEvents(t, base, auditEvents())

	tests := []struct {
		exec  string
		state string   // the one audit block
		want  []string // substrings of the page
	}{
		{"exec_unverified", "audit-unverified", []string{"no outbox feed reported effects for 1 step", "POST /sandbox/mail/v1/send",
			`data-testid="nearby-orphan"`, "msg_stray"}},
		{"exec_verified", "audit-clean", []string{"✓ Clean: every side effect happened once"}},
		{"exec_twice", "audit-critical", []string{"✗ Critical:", "duplicate_effect"}},
	}
	for _, tc := range tests {
		t.Run(tc.exec, func(t *testing.T) {
			path := views.ExecutionURL(tc.exec)
			r := fetchPage(t, base+path, false)
			checkHTMLResponse(t, path, r, http.StatusOK, false)
			for _, id := range []string{"audit-critical", "audit-unverified", "audit-clean"} {
				has := bytes.Contains(r.body, []byte(`data-testid="`+id+`"`))
				if has != (id == tc.state) {
					t.Errorf("GET %s: data-testid=%s present: got %v, want %v", path, id, has, id == tc.state)
				}
			}
			if claims := bytes.Contains(r.body, []byte("every side effect happened once")); claims != (tc.state == "audit-clean") {
				t.Errorf("GET %s: claims every side effect happened once: got %v, want %v", path, claims, tc.state == "audit-clean")
			}
			for _, w := range tc.want {
				if !bytes.Contains(r.body, []byte(w)) {
					t.Errorf("GET %s: got a body without %q, want it", path, w)
				}
			}
			j := fetchPage(t, base+"/api/v1"+path, false)
			var twin struct {
				Audit struct {
					State string `json:"state"`
				} `json:"audit"`
			}
			if err := json.Unmarshal(j.body, &twin); err != nil || "audit-"+twin.Audit.State != tc.state {
				t.Errorf("GET /api/v1%s: got audit state %q (%v), want %s", path, twin.Audit.State, err, strings.TrimPrefix(tc.state, "audit-"))
			}
		})
	}

	t.Run("model lane", func(t *testing.T) {
		path := views.ExecutionURL("exec_verified")
		r := fetchPage(t, base+path, false)
		for _, w := range []string{`data-testid="model-lane"`, "gpt-4o · 120 in / 18 out", "120 input tokens, 18 output tokens",
			"error: rate limited", "2 calls · 120 in / 18 out"} {
			if !bytes.Contains(r.body, []byte(w)) && !bytes.Contains(r.body, []byte(html.EscapeString(w))) {
				t.Errorf("GET %s: got a body without %q, want it", path, w)
			}
		}
		if n := bytes.Count(r.body, []byte(`data-testid="model-call"`)); n != 2 {
			t.Errorf("GET %s: got %d model calls, want 2", path, n)
		}
		// Model calls are not steps.
		if n := bytes.Count(r.body, []byte(`data-testid="lane"`)); n != 1 {
			t.Errorf("GET %s: got %d step lanes, want 1", path, n)
		}
		j := fetchPage(t, base+"/api/v1"+path, false)
		var twin struct {
			Execution struct {
				Steps    int `json:"steps"`
				Attempts int `json:"attempts"`
			} `json:"execution"`
			ModelCalls []trace.Span `json:"model_calls"`
		}
		if err := json.Unmarshal(j.body, &twin); err != nil {
			t.Fatalf("GET /api/v1%s: %v", path, err)
		}
		if len(twin.ModelCalls) != 2 || twin.ModelCalls[0].Model != "gpt-4o" || twin.ModelCalls[0].InputTokens != 120 || twin.ModelCalls[0].OutputTokens != 18 {
			t.Errorf("GET /api/v1%s: got model_calls %+v, want 2, the first gpt-4o with 120 in / 18 out", path, twin.ModelCalls)
		}
		if twin.Execution.Steps != 1 || twin.Execution.Attempts != 1 {
			t.Errorf("GET /api/v1%s: got %d steps, %d attempts, want 1 and 1: model calls are not steps", path, twin.Execution.Steps, twin.Execution.Attempts)
		}
	})

	t.Run("HTTP calls of an attempt", func(t *testing.T) {
		path := views.AttemptURL("exec_verified", "step-1", 1)
		r := fetchPage(t, base+path, true)
		checkHTMLResponse(t, path, r, http.StatusOK, true)
		if w := "POST https://api.mail.test/v1/send → 200, 250 ms"; !bytes.Contains(r.body, []byte(`data-testid="http-call"`)) || !bytes.Contains(r.body, []byte(w)) {
			t.Errorf("GET %s: got %s, want the HTTP call %q", path, r.body, w)
		}
	})

	t.Run("audit filter", func(t *testing.T) {
		for state, want := range map[string][]string{
			"unverified": {"exec_unverified"},
			"clean":      {"exec_verified"},
			"critical":   {"exec_twice"},
		} {
			path := "/?audit=" + state
			r := fetchPage(t, base+path, false)
			checkHTMLResponse(t, path, r, http.StatusOK, false)
			if n := bytes.Count(r.body, []byte(`data-testid="execution-row"`)); n != len(want) {
				t.Errorf("GET %s: got %d rows, want %d", path, n, len(want))
			}
			for _, exec := range []string{"exec_unverified", "exec_verified", "exec_twice"} {
				has := bytes.Contains(r.body, []byte(">"+exec+"<"))
				if has != slices.Contains(want, exec) {
					t.Errorf("GET %s: row %s shown: got %v, want %v", path, exec, has, !has)
				}
			}
			if !bytes.Contains(r.body, []byte(`data-state="`+state+`"`)) {
				t.Errorf("GET %s: got no %s audit badge, want one per row", path, state)
			}
			if !bytes.Contains(r.body, []byte(`<option value="`+state+`" selected>`)) {
				t.Errorf("GET %s: got the audit select without %s selected, want it kept", path, state)
			}
		}
		r := fetchPage(t, base+"/?audit=green", false)
		checkHTMLResponse(t, "/?audit=green", r, http.StatusBadRequest, false)
		if !bytes.Contains(r.body, []byte("audit: must be critical, unverified or clean")) {
			t.Errorf("GET /?audit=green: got %s, want the error to name the field", r.body)
		}
	})
}
