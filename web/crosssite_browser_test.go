package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// The browser part of issue 11's attack: a page on another origin, in
// Chromium, tries every way a page can write without a CORS preflight —
// fetch with mode no-cors (text/plain, and a Blob without type, which
// sends no Content-Type at all), navigator.sendBeacon (both again), and
// HTML forms (text/plain crafted into JSON, urlencoded, multipart) — at
// the ingest API, OTLP, a webhook and the sandbox's send endpoint of a
// real `oncetrace serve`. And a page whose name was rebound to the
// server's address (Chromium resolves attacker.test to 127.0.0.1) tries
// to read and to open the WebSocket.

// attackPage is the other site's page; TARGET is the server's origin.
const attackPage = `<!doctype html><title>another site</title>
<p>Nothing to see here.</p>
<script>
window.attack = async (target) => {
  const ev = id => JSON.stringify({type: "execution", execution_id: id, name: "written by another site"});
  const mail = JSON.stringify({to: "victim@acme.dev", subject: "from another site", body: "the sandbox must not send this"});
  const untyped = s => new Blob([s]); // a Blob without type: no Content-Type header at all
  const out = [];
  const tries = [
    ["fetch no-cors text/plain /api/v1/events", target + "/api/v1/events", ev("exec_csrf_fetch_text")],
    ["fetch no-cors untyped /api/v1/events", target + "/api/v1/events", untyped(ev("exec_csrf_fetch_untyped"))],
    ["fetch no-cors text/plain /sandbox/mail/v1/send", target + "/sandbox/mail/v1/send", mail],
    ["fetch no-cors untyped /sandbox/mail/v1/send", target + "/sandbox/mail/v1/send", untyped(mail)],
    ["fetch no-cors untyped /v1/traces", target + "/v1/traces", untyped("{}")],
    ["fetch no-cors text/plain /api/v1/webhooks/stripe", target + "/api/v1/webhooks/stripe",
      JSON.stringify({id: "evt_csrf", type: "charge.succeeded", data: {object: {id: "ch_csrf", object: "charge"}}})],
  ];
  for (const [name, url, body] of tries) {
    try { await fetch(url, {method: "POST", mode: "no-cors", body}); out.push(name + ": sent, opaque answer"); }
    catch (e) { out.push(name + ": " + e); }
  }
  out.push("sendBeacon untyped /api/v1/events: queued " + navigator.sendBeacon(target + "/api/v1/events", untyped(ev("exec_csrf_beacon_untyped"))));
  out.push("sendBeacon text/plain /api/v1/events: queued " + navigator.sendBeacon(target + "/api/v1/events", ev("exec_csrf_beacon_text")));
  out.push("sendBeacon untyped /sandbox/mail/v1/send: queued " + navigator.sendBeacon(target + "/sandbox/mail/v1/send", untyped(mail)));
  out.push("sendBeacon text/plain /sandbox/mail/v1/send: queued " + navigator.sendBeacon(target + "/sandbox/mail/v1/send", mail));
  return out;
};
</script>`

// attackForms are forms that submit themselves on load. A text/plain form
// whose one field's name and value are cut from a JSON body sends that JSON
// verbatim (name=value): the classic way a form posts JSON.
var attackForms = map[string]string{
	"events-text": `<form method="POST" action="TARGET/api/v1/events" enctype="text/plain">` +
		`<input name='{"type":"execution","execution_id":"exec_csrf_form","name":"form","pad":"' value='"}'></form>`,
	"sandbox-text": `<form method="POST" action="TARGET/sandbox/mail/v1/send" enctype="text/plain">` +
		`<input name='{"to":"victim@acme.dev","subject":"from another site","body":"form","pad":"' value='"}'></form>`,
	"sandbox-urlencoded": `<form method="POST" action="TARGET/sandbox/mail/v1/send">` +
		`<input name="to" value="victim@acme.dev"><input name="subject" value="x"><input name="body" value="y"></form>`,
	"sandbox-multipart": `<form method="POST" action="TARGET/sandbox/mail/v1/send" enctype="multipart/form-data">` +
		`<input name="to" value="victim@acme.dev"></form>`,
	"events-urlencoded": `<form method="POST" action="TARGET/api/v1/events"><input name="type" value="execution"></form>`,
}

// observedRequest is one POST Chromium sent to the server, as the network
// saw it.
type observedRequest struct {
	url, initiator string
	headers        map[string]string // as sent on the wire, lowercase names
	status         int64
}

// networkLog keeps what Chromium sent to origin and the answers.
type networkLog struct {
	origin string
	mu     sync.Mutex
	byID   map[network.RequestID]*observedRequest
	order  []network.RequestID
	// logs are what Chromium logged, as a failed WebSocket handshake.
	logs []string
}

func watchNetwork(t *testing.T, ctx context.Context, origin string) *networkLog {
	t.Helper()
	l := &networkLog{origin: origin, byID: map[network.RequestID]*observedRequest{}}
	get := func(id network.RequestID) *observedRequest {
		r := l.byID[id]
		if r == nil {
			r = &observedRequest{headers: map[string]string{}}
			l.byID[id] = r
			l.order = append(l.order, id)
		}
		return r
	}
	err := chromedp.Listen(ctx, func(ev any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			if ev.Request.Method == http.MethodPost && strings.HasPrefix(ev.Request.URL, origin) {
				r := get(ev.RequestID)
				r.url, r.initiator = ev.Request.URL, ev.DocumentURL
			}
		case *network.EventRequestWillBeSentExtraInfo:
			r := get(ev.RequestID)
			for k, v := range ev.Headers {
				r.headers[strings.ToLower(k)] = fmt.Sprint(v)
			}
		case *cdplog.EventEntryAdded:
			l.logs = append(l.logs, ev.Entry.Text)
		case *network.EventResponseReceivedExtraInfo:
			get(ev.RequestID).status = ev.StatusCode
		case *network.EventResponseReceived:
			if r := l.byID[ev.RequestID]; r != nil && r.status == 0 {
				r.status = ev.Response.Status
			}
		}
	})
	if err != nil {
		t.Fatalf("listen to the network: %v", err)
	}
	return l
}

// posts returns the POSTs to the server seen so far.
func (l *networkLog) posts() []observedRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []observedRequest
	for _, id := range l.order {
		if r := l.byID[id]; r.url != "" {
			out = append(out, observedRequest{url: r.url, initiator: r.initiator, headers: maps.Clone(r.headers), status: r.status})
		}
	}
	return out
}

// waitAnswered waits until n POSTs have been answered.
func (l *networkLog) waitAnswered(t *testing.T, n int) []observedRequest {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		posts := l.posts()
		answered := 0
		for _, p := range posts {
			if p.status != 0 {
				answered++
			}
		}
		if answered >= n {
			return posts
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server answered %d of the %d POSTs Chromium was to send; seen: %+v", answered, n, posts)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBrowserCrossSiteCannotWrite: every write a page on another site can
// make without a preflight reaches the server and is refused with 403;
// nothing is stored and the sandbox sends nothing. The server's own page
// still writes, and a rebound name gets 421 for reads and the WebSocket.
func TestBrowserCrossSiteCannotWrite(t *testing.T) {
	chromium := requireChromium(t)
	server := startOncetraceServe(t)
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if name := r.URL.Query().Get("form"); name != "" {
			form := strings.ReplaceAll(attackForms[name], "TARGET", server.url)
			fmt.Fprintf(w, "<!doctype html><title>another site</title>%s<script>document.forms[0].submit()</script>", form)
			return
		}
		io.WriteString(w, attackPage)
	}))
	defer attacker.Close()
	_, port, _ := strings.Cut(strings.TrimPrefix(attacker.URL, "http://"), ":")
	serverPort := server.url[strings.LastIndex(server.url, ":")+1:]

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Headless, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		// DNS rebinding without a DNS server: the attacker's name resolves
		// to the server's address.
		chromedp.Flag("host-resolver-rules", "MAP attacker.test 127.0.0.1"),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium %s: %v", chromium, err)
	}
	netlog := watchNetwork(t, ctx, server.url)

	// The other site: 127.0.0.1 on another port (same-site, another
	// origin), then localhost (another site).
	sent := 0
	for _, origin := range []string{"http://127.0.0.1:" + port, "http://localhost:" + port} {
		browserLoad(t, ctx, origin+"/")
		results := browserAwait[[]string](t, ctx, fmt.Sprintf(`window.attack(%q)`, server.url))
		t.Logf("from %s:\n  %s", origin, strings.Join(results, "\n  "))
		for _, r := range results {
			if strings.HasPrefix(r, "sendBeacon") && !strings.HasSuffix(r, "queued true") {
				t.Errorf("from %s: %s, want the beacon queued (else nothing was tried)", origin, r)
			}
		}
		sent += 10
		netlog.waitAnswered(t, sent)
		for _, name := range slices.Sorted(maps.Keys(attackForms)) {
			browserDo(t, ctx, "form "+name, chromedp.Navigate(origin+"/?form="+name))
			browserWait(t, ctx, "form "+name+" to reach the server", fmt.Sprintf(`location.href.startsWith(%q) && document.readyState === "complete"`, server.url))
			sent++
			netlog.waitAnswered(t, sent)
			if body := browserEval[string](t, ctx, `document.body.innerText`); !strings.Contains(body, "Sec-Fetch-Site") {
				t.Errorf("form %s from %s: the page shows %q, want the 403 naming Sec-Fetch-Site", name, origin, body)
			}
		}
	}
	posts := netlog.waitAnswered(t, sent)
	for _, p := range posts {
		site := p.headers["sec-fetch-site"]
		t.Logf("%s from %s: Content-Type %q, Origin %q, Sec-Fetch-Site %q -> %d", p.url, p.initiator, p.headers["content-type"], p.headers["origin"], site, p.status)
		if p.status != http.StatusForbidden {
			t.Errorf("POST %s from %s (Content-Type %q): got %d, want 403", p.url, p.initiator, p.headers["content-type"], p.status)
		}
		if site != "same-site" && site != "cross-site" {
			t.Errorf("POST %s: Chromium sent Sec-Fetch-Site %q, want same-site or cross-site", p.url, site)
		}
	}
	untyped := 0
	for _, p := range posts {
		if _, ok := p.headers["content-type"]; !ok {
			untyped++
		}
	}
	if untyped != 10 { // per origin: the 3 fetches and 2 beacons of a Blob without type
		t.Errorf("POSTs without Content-Type: got %d, want the untyped fetches and beacons to have been sent without one", untyped)
	}

	// Nothing was written, nothing was sent.
	checkServerUntouched := func(when string) {
		t.Helper()
		var list struct{ Executions []struct{ ID string } }
		getServerJSON(t, server.url+"/api/v1/executions", &list)
		for _, x := range list.Executions {
			if strings.HasPrefix(x.ID, "exec_csrf") {
				t.Errorf("%s: execution %s stored, want none from another site", when, x.ID)
			}
		}
		var log struct{ Log []json.RawMessage }
		getServerJSON(t, server.url+"/sandbox/log", &log)
		if len(log.Log) != 0 {
			t.Errorf("%s: the sandbox log holds %s, want nothing sent and nothing tried", when, log.Log)
		}
		var effects struct{ Effects []json.RawMessage }
		getServerJSON(t, server.url+"/api/v1/effects", &effects)
		if len(effects.Effects) != 0 {
			t.Errorf("%s: effects %s, want none", when, effects.Effects)
		}
	}
	checkServerUntouched("after the attacks")

	// The server's own page writes as before (Sec-Fetch-Site same-origin).
	browserLoad(t, ctx, server.url+"/")
	status := browserAwait[int](t, ctx, `fetch("/api/v1/events", {method: "POST", headers: {"Content-Type": "application/json"},
		body: JSON.stringify({type: "execution", execution_id: "exec_same_origin_page", name: "own page"})}).then(r => r.status)`)
	if status != http.StatusOK {
		t.Errorf("same-origin fetch from the server's own page: got %d, want 200", status)
	}
	var own struct {
		ExecutionID string `json:"execution_id"`
	}
	getServerJSON(t, server.url+"/api/v1/executions/exec_same_origin_page", &own)

	// A rebound name: the page itself, its reads and its WebSocket get 421.
	rebound := "http://attacker.test:" + serverPort
	browserLoad(t, ctx, rebound+"/")
	if body := browserEval[string](t, ctx, `document.body.innerText`); !strings.Contains(body, "421") || !strings.Contains(body, "attacker.test") {
		t.Errorf("%s/: the page shows %q, want the 421 naming the host", rebound, body)
	}
	for _, path := range []string{"/api/v1/executions", "/api/v1/executions/exec_same_origin_page", "/sandbox/log", "/healthz"} {
		got := browserAwait[string](t, ctx, fmt.Sprintf(`fetch(%q).then(async r => r.status + " " + await r.text())`, path))
		if !strings.HasPrefix(got, "421 ") || strings.Contains(got, "own page") {
			t.Errorf("rebound read of %s: got %q, want 421 and nothing of the data", path, html.UnescapeString(got))
		}
	}
	ws := browserAwait[string](t, ctx, `new Promise(done => {
		const ws = new WebSocket("ws://" + location.host + "/api/v1/live");
		ws.onopen = () => done("open");
		ws.onclose = e => done("closed " + e.code);
	})`)
	if ws == "open" {
		t.Errorf("rebound WebSocket: got %q, want it refused", ws)
	}
	wsURL := "ws://attacker.test:" + serverPort + "/api/v1/live"
	want := fmt.Sprintf("WebSocket connection to '%s' failed: Error during WebSocket handshake: Unexpected response code: 421", wsURL)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		netlog.mu.Lock()
		logs := strings.Join(netlog.logs, "\n")
		netlog.mu.Unlock()
		if strings.Contains(logs, want) {
			t.Logf("rebound WebSocket: %s; Chromium: %s", ws, want)
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("rebound WebSocket: Chromium logged\n%s\nwant %q", logs, want)
			break
		}
	}
	checkServerUntouched("after the rebound page")
}

// browserAwait evaluates expr and waits for the promise it returns.
func browserAwait[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func getServerJSON(t *testing.T, url string, v any) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: got %d %s, want 200", url, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, data)
	}
}
