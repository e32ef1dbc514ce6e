package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// The attack suite's "honest status codes" and "spoofed text" bullets of
// issue 11, each against a real server on a real SQLite file.

type postResult struct {
	status int
	header http.Header
	body   []byte
}

func post(t *testing.T, rawURL, contentType string, header map[string]string, body string) postResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, rawURL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return postResult{resp.StatusCode, resp.Header, data}
}

// TestAttackAllInvalidRequestIs400: a request none of whose events is
// valid was answered 207 with accepted 0, which a client reads as success.
// It is a 400 now, with the {"error"} of every error and the per-index
// rejections, and nothing is stored.
func TestAttackAllInvalidRequestIs400(t *testing.T) {
	base := startPagesServer(t)
	body := `[{"type":"attempt","execution_id":"exec_bad","step_id":"s","attempt":0},{"type":"nope"},` +
		`{"type":"execution","execution_id":"exec_bad","status":"done"}]`
	r := post(t, base+"/api/v1/events", "application/json", nil, body)
	var got struct {
		Error    string `json:"error"`
		Accepted *int   `json:"accepted"`
		Rejected []struct {
			Index int    `json:"index"`
			Error string `json:"error"`
		} `json:"rejected"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("body: got %s, want JSON (%v)", r.body, err)
	}
	if r.status != http.StatusBadRequest {
		t.Errorf("status: got %d, want 400 (body %s)", r.status, r.body)
	}
	if !strings.Contains(got.Error, "all 3 events were rejected") || !strings.Contains(got.Error, "attempt:") {
		t.Errorf("error: got %q, want it to say all 3 were rejected and name the first problem", got.Error)
	}
	var idx []int
	for _, rj := range got.Rejected {
		idx = append(idx, rj.Index)
	}
	if !slices.Equal(idx, []int{0, 1, 2}) || got.Accepted == nil || *got.Accepted != 0 {
		t.Errorf("rejected indexes, accepted: got %v, %v, want [0 1 2], 0", idx, got.Accepted)
	}
	// Control: one good event among the bad ones is a 207, and stored.
	good := `{"type":"execution","execution_id":"exec_good","status":"running","started_at":"2026-06-30T14:02:11Z"}`
	if r := post(t, base+"/api/v1/events", "application/json", nil, "["+good+`,{"type":"nope"}]`); r.status != http.StatusMultiStatus {
		t.Errorf("one good event among bad ones: got %d %s, want 207", r.status, r.body)
	}
	list := fetchPage(t, base+"/api/v1/executions", false)
	if strings.Contains(string(list.body), "exec_bad") || !strings.Contains(string(list.body), "exec_good") {
		t.Errorf("executions: got %s, want exec_good and no exec_bad", list.body)
	}
}

// TestAttackSandboxStatusCodes: a header the trace cannot hold was a
// retryable 503 (so a client retried it forever), and a 2 MiB body a 400.
// They are a 400 naming the header, nothing sent and the key left free,
// and a 413.
func TestAttackSandboxStatusCodes(t *testing.T) {
	base := startPagesServer(t)
	send := base + "/sandbox/mail/v1/send"
	msg := `{"to":"jordan@acme.dev","subject":"Your invoice","body":"hi"}`
	for _, tc := range []struct {
		name, header, value string
	}{
		{"execution id over the id limit", "X-Oncetrace-Execution", strings.Repeat("x", 300)},
		{"execution id with a bidi override", "X-Oncetrace-Execution", "exec\u202e1"},
		{"step id over the id limit", "X-Oncetrace-Step", strings.Repeat("s", 300)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "ik_" + strings.ReplaceAll(tc.name, " ", "_")
			header := map[string]string{"Idempotency-Key": key, tc.header: tc.value}
			if tc.header == "X-Oncetrace-Step" {
				header["X-Oncetrace-Execution"] = "exec_ok"
			}
			r := post(t, send, "application/json", header, msg)
			var e struct {
				Error struct{ Type, Message string } `json:"error"`
			}
			_ = json.Unmarshal(r.body, &e)
			if r.status != http.StatusBadRequest || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tc.header) {
				t.Errorf("got %d %s, want 400 invalid_request_error naming %s", r.status, r.body, tc.header)
			}
			if ra := r.header.Get("Retry-After"); ra != "" {
				t.Errorf("Retry-After: got %q, want none (retrying cannot help)", ra)
			}
			// Nothing was sent, so the key runs as new with good headers.
			if r := post(t, send, "application/json", map[string]string{"Idempotency-Key": key}, msg); r.status != http.StatusOK ||
				strings.Contains(string(r.body), `"deduplicated":true`) {
				t.Errorf("same key, good headers: got %d %s, want 200, delivered now", r.status, r.body)
			}
		})
	}
	big := `{"to":"jordan@acme.dev","subject":"s","body":"` + strings.Repeat("b", 2<<20) + `"}`
	if r := post(t, send, "application/json", map[string]string{"Idempotency-Key": "ik_big"}, big); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("2 MiB body: got %d %s, want 413", r.status, r.body)
	}
}

// spoofedEvents put a right-to-left override (and its friends) in every
// free-text field a client sends.
func spoofedEvents() []map[string]any {
	return []map[string]any{
		{"type": "execution", "execution_id": "exec_spoof", "name": "invoice\u202egnp.exe", "status": "running",
			"started_at": "2026-06-30T14:02:11Z", "labels": map[string]string{"customer": "acme\u2066x"}},
		{"type": "attempt", "execution_id": "exec_spoof", "step_id": "step-1", "attempt": 1, "tool": "send\u202eliame",
			"effect": "write", "provider": "mail-api", "idempotency_key": "ik_spoof", "worker": "pid-1",
			"args": map[string]string{"to": "jordan@acme.dev\u202ed"}, "started_at": "2026-06-30T14:02:11.2Z",
			"ended_at": "2026-06-30T14:02:12Z", "outcome": "error", "error": "refused by \u202eevil\u202c\u0085"},
		{"type": "effect", "provider": "mail-api", "effect_id": "msg_spoof", "idempotency_key": "ik_spoof",
			"execution_id": "exec_spoof", "step_id": "step-1", "target": "jordan\u202e@acme.dev", "at": "2026-06-30T14:02:11.5Z"},
	}
}

// hiddenInText reports the first bidi or control character a reader would
// get as is from the page's text nodes, or 0.
func hiddenInText(doc *html.Node) rune {
	for n := range doc.Descendants() {
		if n.Type != html.TextNode {
			continue
		}
		for _, r := range n.Data {
			switch {
			case r == '\n' || r == '\t':
			case r < 0x20, r >= 0x7f && r < 0xa0, r == '\u200e', r == '\u200f', r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
				return r
			}
		}
	}
	return 0
}

// TestAttackBidiTextIsShownEscaped: "invoice\u202egnp.exe" displayed as
// "invoiceexe.png". It is stored as sent (the JSON API returns it so) and
// every page shows the override as a visible <U+202E> marker.
func TestAttackBidiTextIsShownEscaped(t *testing.T) {
	base := startPagesServer(t)
	postUIEvents(t, base, spoofedEvents())

	api := fetchPage(t, base+"/api/v1/executions/exec_spoof", false)
	if !strings.Contains(string(api.body), `"invoice\u202egnp.exe"`) && !strings.Contains(string(api.body), "invoice\u202egnp.exe") {
		t.Errorf("JSON API: got %.400s, want the name exactly as sent", api.body)
	}
	for _, path := range []string{"/", "/executions/exec_spoof", "/executions/exec_spoof/attempt?step=step-1&n=1",
		"/executions/exec_spoof/effect?" + url.Values{"provider": {"mail-api"}, "id": {"msg_spoof"}}.Encode(), "/outbox", "/keys/ik_spoof", "/live"} {
		page := fetchPage(t, base+path, false)
		if page.status != http.StatusOK {
			t.Errorf("GET %s: got %d, want 200", path, page.status)
			continue
		}
		doc, err := html.Parse(strings.NewReader(string(page.body)))
		if err != nil {
			t.Fatal(err)
		}
		if r := hiddenInText(doc); r != 0 {
			t.Errorf("GET %s: the page's text holds %U as is, want it shown as a marker", path, r)
		}
		if !strings.Contains(string(page.body), `class="ctl"`) || !strings.Contains(string(page.body), "&lt;U+202E&gt;") {
			t.Errorf("GET %s: got no <U+202E> marker, want one", path)
		}
	}
}

// TestAttackBidiInChromium: what a reader of the executions list and the
// execution page sees in a real browser is the name with its override as a
// marker, not "invoiceexe.png".
func TestAttackBidiInChromium(t *testing.T) {
	chromium := requireChromium(t)
	srv := startOncetraceServe(t)
	postUIEvents(t, srv.url, spoofedEvents())
	ctx := startBrowser(t, chromium)

	browserLoad(t, ctx, srv.url+"/")
	name := browserEval[string](t, ctx, `document.querySelector('[data-testid="execution-row"] .muted').innerText`)
	if name != "invoice<U+202E>gnp.exe" {
		t.Errorf("executions list: the name reads %q, want %q", name, "invoice<U+202E>gnp.exe")
	}
	browserLoad(t, ctx, srv.url+"/executions/exec_spoof")
	text := browserEval[string](t, ctx, `document.body.innerText`)
	for _, want := range []string{"invoice<U+202E>gnp.exe", "send<U+202E>liame"} {
		if !strings.Contains(text, want) {
			t.Errorf("execution page: got no %q in its text", want)
		}
	}
	if strings.ContainsRune(text, '\u202e') {
		t.Errorf("execution page: its text holds a live U+202E")
	}
	// The marker stands out: boxed, in the critical colour, never plain text.
	border := browserEval[string](t, ctx, `getComputedStyle(document.querySelector('.ctl')).borderTopStyle`)
	if border != "solid" {
		t.Errorf(".ctl border: got %q, want solid", border)
	}
}
