package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// nginxProxy is docs/deploy.md's nginx recipe on a free loopback port (not
// 80 or 443), emulated with httputil.ReverseProxy since nginx is not
// installed here: the request goes on to upstream with HTTP/1.1, Upgrade
// and Connection: upgrade for the WebSocket (the recipe's map), no
// X-Forwarded-* headers (the recipe sets none), and Host set as
// `proxy_set_header Host $http_host` does (the Host the browser sent,
// port included) or, with dropPort, as `$host` does (the name alone, the
// port dropped: the old recipe). sockets counts the live WebSocket
// requests it passed on.
func nginxProxy(t *testing.T, upstream string, dropPort bool) (base string, sockets *atomic.Int64) {
	t.Helper()
	return nginxProxyWith(t, upstream, map[bool]string{false: "$http_host", true: "$host"}[dropPort])
}

// recipeHostVariable is the variable docs/deploy.md's nginx recipe passes
// as Host: the test runs what the document says.
func recipeHostVariable(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`proxy_set_header\s+Host\s+(\S+);`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/deploy.md: no proxy_set_header Host line in the nginx recipe")
	}
	return string(m[1])
}

// nginxProxyWith is nginxProxy with Host set from an nginx variable.
func nginxProxyWith(t *testing.T, upstream, hostVariable string) (base string, sockets *atomic.Int64) {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	var dropPort bool
	switch hostVariable {
	case "$http_host":
	case "$host":
		dropPort = true
	default:
		t.Fatalf("nginx Host variable %s: the emulation knows $http_host and $host", hostVariable)
	}
	sockets = &atomic.Int64{}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // $http_host
		if dropPort {
			r.Out.Host = strings.ToLower(r.In.URL.Hostname()) // $host
			if r.Out.Host == "" {
				host, _, _ := strings.Cut(r.In.Host, ":")
				r.Out.Host = strings.ToLower(host)
			}
		}
		if r.In.URL.Path == "/api/v1/live" {
			sockets.Add(1)
		}
	}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL, sockets
}

// Behind docs/deploy.md's proxy (its Host line read from the document) on
// a port that is not 80, the live page
// connects and shows new events; behind the old recipe, which dropped the
// port, the page says why its WebSocket is refused and stops retrying
// instead of "disconnected — reconnecting" for ever.
func TestBrowserLiveBehindProxy(t *testing.T) {
	chromium := requireChromium(t)
	srv := startOncetraceServe(t)
	ctx := startBrowser(t, chromium)

	base, _ := nginxProxyWith(t, srv.url, recipeHostVariable(t))
	if strings.HasSuffix(base, ":80") || strings.HasSuffix(base, ":443") {
		t.Fatalf("the proxy listens on %s, want a port other than 80 and 443", base)
	}
	browserLoad(t, ctx, base+"/live")
	browserWait(t, ctx, "the live status to say live behind the proxy", `document.getElementById('live-status').textContent === 'live'`)
	postUIEvents(t, base, []map[string]any{
		{"type": "execution", "execution_id": "exec_behind_proxy", "name": "billing-agent", "status": "running",
			"started_at": time.Now().UTC().Format(time.RFC3339Nano)},
	})
	browserWait(t, ctx, "the new event's row through the proxy",
		`Array.from(document.querySelectorAll('#live-rows tr')).some(r => r.textContent.includes('exec_behind_proxy'))`)

	old, sockets := nginxProxy(t, srv.url, true)
	browserLoad(t, ctx, old+"/live")
	browserWait(t, ctx, "the live status to say why the WebSocket is refused",
		`document.getElementById('live-status').hasAttribute('data-refused')`)
	browserScreenshot(t, ctx, artifactsDir(t), "live-refused-origin.png")
	status := browserEval[string](t, ctx, `document.getElementById('live-status').textContent`)
	wantOrigin := "origin " + old + " is not allowed"
	for _, want := range []string{wantOrigin, "$http_host", "see --allowed-origin"} {
		if !strings.Contains(status, want) {
			t.Errorf("behind a proxy that drops the port: the status says %q, want it to say %q", status, want)
		}
	}
	// It stops: no second attempt within three times the first retry's
	// delay (0.5 s).
	tried := sockets.Load()
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n := sockets.Load(); n != tried {
			t.Fatalf("after the refusal: got %d WebSocket attempts, want %d (no retry)", n, tried)
		}
	}
	if tried != 1 {
		t.Errorf("got %d WebSocket attempts through the old proxy, want 1", tried)
	}
}

// The refused handshake's 403 says why, for curl and logs; the page asks
// GET /api/v1/live/origin, which answers for the Host it was reached by.
func TestLiveOriginRefusalSaysWhy(t *testing.T) {
	base := startPagesServer(t)
	u, _ := url.Parse(base)
	port := u.Port()
	get := func(path string, header http.Header) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}
	upgrade := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"},
		"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}, "Origin": {"http://127.0.0.1:" + strconv.Itoa(portPlusOne(t, port))}}
	status, body := get("/api/v1/live", upgrade)
	if status != http.StatusForbidden || !strings.Contains(body, "is not allowed") || !strings.Contains(body, "see --allowed-origin") {
		t.Errorf("a WebSocket from another port: got %d %q, want 403 saying why", status, body)
	}
	for _, c := range []struct {
		origin, want string
	}{
		{base, `"allowed":true`},
		{"http://127.0.0.1:" + strconv.Itoa(portPlusOne(t, port)), `"allowed":false`},
		{"https://evil.test", `"reason":"origin https://evil.test is not allowed: see --allowed-origin"`},
	} {
		status, body := get("/api/v1/live/origin?"+url.Values{"origin": {c.origin}}.Encode(), nil)
		if status != http.StatusOK || !strings.Contains(body, c.want) {
			t.Errorf("GET /api/v1/live/origin?origin=%s: got %d %s, want 200 with %s", c.origin, status, body, c.want)
		}
	}
	if status, body := get("/api/v1/live/origin", nil); status != http.StatusBadRequest || !strings.Contains(body, "origin: required") {
		t.Errorf("without origin: got %d %s, want 400 naming origin", status, body)
	}
}

func portPlusOne(t *testing.T, port string) int {
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n + 1
}
