package web_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/oncetrace/oncetrace/views"
)

// rawHEAD sends a HEAD request on its own connection and returns the
// status, the headers and every byte that followed them before the server
// closed the connection: a HEAD answer must have none.
func rawHEAD(t *testing.T, baseURL, path string) (status int, header http.Header, trailing []byte) {
	t.Helper()
	u, err := url.Parse(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "HEAD %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, u.Host)
	all, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("HEAD %s: %v", path, err)
	}
	head, rest, ok := bytes.Cut(all, []byte("\r\n\r\n"))
	if !ok {
		t.Fatalf("HEAD %s: got %q, want a status line and headers", path, all)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(append(head, "\r\n\r\n"...))), &http.Request{Method: http.MethodHead})
	if err != nil {
		t.Fatalf("HEAD %s: %v in %q", path, err, head)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header, rest
}

// getEncoded fetches a URL with the given Accept-Encoding (none when ""), without
// the transport's own decompression, and returns the answer as sent.
func getEncoded(t *testing.T, rawURL, acceptEncoding string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	return resp, body
}

// TestHeadOnGetRoutes: HEAD answers every GET route with the GET's status
// and headers and no body.
func TestHeadOnGetRoutes(t *testing.T) {
	ls := startLiveServer(t, liveOptions{})
	base := ls.ts.URL
	postUIEvents(t, base, uiEvents())
	paths := []string{
		"/",
		"/?status=completed",
		"/outbox",
		"/live",
		views.ExecutionURL(uiDupExec),
		views.AttemptURL(uiDupExec, "step-4", 2),
		views.EffectURL(uiDupExec, "mail-api", "msg_41bcc8"),
		views.KeyURL(uiDupKey),
		"/api/v1/executions",
		views.ExecutionAPIURL(uiDupExec),
		"/static/css/oncetrace.css",
		"/static/js/oncetrace.js",
		"/favicon.ico",
		"/healthz",
	}
	for _, path := range paths {
		status, header, trailing := rawHEAD(t, base, path)
		if status != http.StatusOK {
			t.Errorf("HEAD %s: got %d, want 200", path, status)
			continue
		}
		if len(trailing) != 0 {
			t.Errorf("HEAD %s: got %d body bytes (%.60q), want none", path, len(trailing), trailing)
		}
		resp, body := getEncoded(t, base+path, "")
		if got, want := header.Get("Content-Type"), resp.Header.Get("Content-Type"); got != want {
			t.Errorf("HEAD %s: Content-Type got %q, want the GET's %q", path, got, want)
		}
		// The GET of a plain answer states its length; HEAD must state the same.
		if cl := resp.Header.Get("Content-Length"); cl != "" && header.Get("Content-Length") != cl {
			t.Errorf("HEAD %s: Content-Length got %q, want the GET's %q (%d bytes)", path, header.Get("Content-Length"), cl, len(body))
		}
	}
	// Every GET route, including any added later, answers HEAD: not 405.
	for route, u := range readURLs(t, ls.srv) {
		if route == "/api/v1/stream" {
			continue // a stream never ends; its HEAD would wait for the deadline
		}
		if status, _, trailing := rawHEAD(t, base, u); status == http.StatusMethodNotAllowed || len(trailing) != 0 {
			t.Errorf("HEAD %s (route %s): got %d with %d body bytes, want the GET's status and no body", u, route, status, len(trailing))
		}
	}
	// A HEAD for nothing is still a 404, not a 405.
	if status, _, _ := rawHEAD(t, base, "/no/such/page"); status != http.StatusNotFound {
		t.Errorf("HEAD /no/such/page: got %d, want 404", status)
	}
	if status, _, _ := rawHEAD(t, base, views.ExecutionURL("exec_missing")); status != http.StatusNotFound {
		t.Errorf("HEAD %s: got %d, want 404", views.ExecutionURL("exec_missing"), status)
	}
}

// TestGzip: pages, stylesheets, scripts and JSON are gzipped for clients
// that accept it, and gunzip to exactly what others get; small answers and
// clients that do not ask get them plain.
func TestGzip(t *testing.T) {
	ls := startLiveServer(t, liveOptions{})
	base := ls.ts.URL
	postUIEvents(t, base, uiEvents())
	for _, path := range []string{
		"/",
		views.ExecutionURL(uiDupExec),
		"/outbox",
		"/api/v1/executions",
		"/static/css/oncetrace.css",
		"/static/js/oncetrace.js",
		"/no/such/page", // the error page
	} {
		plainResp, plain := getEncoded(t, base+path, "")
		zipResp, zipped := getEncoded(t, base+path, "gzip, deflate, br")
		if enc := plainResp.Header.Get("Content-Encoding"); enc != "" {
			t.Errorf("GET %s without Accept-Encoding: got Content-Encoding %q, want none", path, enc)
		}
		if !strings.Contains(zipResp.Header.Get("Vary"), "Accept-Encoding") {
			t.Errorf("GET %s: Vary got %q, want Accept-Encoding (caches must keep both)", path, zipResp.Header.Get("Vary"))
		}
		if zipResp.StatusCode != plainResp.StatusCode || zipResp.Header.Get("Content-Type") != plainResp.Header.Get("Content-Type") {
			t.Errorf("GET %s gzipped: got %d %s, want the plain %d %s", path, zipResp.StatusCode, zipResp.Header.Get("Content-Type"), plainResp.StatusCode, plainResp.Header.Get("Content-Type"))
		}
		if path == "/no/such/page" && len(plain) < 1024 {
			continue // small enough to go plain
		}
		if enc := zipResp.Header.Get("Content-Encoding"); enc != "gzip" {
			t.Errorf("GET %s with Accept-Encoding gzip (%d bytes plain): got Content-Encoding %q, want gzip", path, len(plain), enc)
			continue
		}
		if cl := zipResp.Header.Get("Content-Length"); cl != "" && cl != fmt.Sprint(len(zipped)) {
			t.Errorf("GET %s gzipped: Content-Length %s for %d bytes sent", path, cl, len(zipped))
		}
		zr, err := gzip.NewReader(bytes.NewReader(zipped))
		if err != nil {
			t.Fatalf("GET %s: gzip: %v", path, err)
		}
		unzipped, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("GET %s: gunzip: %v", path, err)
		}
		if !bytes.Equal(unzipped, plain) {
			t.Errorf("GET %s: gunzipped %d bytes differ from the plain %d bytes", path, len(unzipped), len(plain))
		}
		if len(zipped) >= len(plain) {
			t.Errorf("GET %s: gzipped %d bytes, plain %d: want smaller", path, len(zipped), len(plain))
		}
		if strings.HasPrefix(path, "/static/") && zipResp.Header.Get("Cache-Control") != plainResp.Header.Get("Cache-Control") {
			t.Errorf("GET %s gzipped: Cache-Control %q, want the plain %q", path, zipResp.Header.Get("Cache-Control"), plainResp.Header.Get("Cache-Control"))
		}
	}

	// Small answers go plain with their length.
	resp, body := getEncoded(t, base+"/healthz", "gzip")
	if enc := resp.Header.Get("Content-Encoding"); enc != "" || resp.StatusCode != http.StatusOK || len(body) >= 1024 {
		t.Errorf("GET /healthz (%d bytes): got %d Content-Encoding %q, want 200 plain", len(body), resp.StatusCode, enc)
	}
	// q=0 refuses gzip.
	if resp, _ := getEncoded(t, base+"/", "gzip;q=0, identity"); resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("GET / with gzip;q=0: got Content-Encoding %q, want none", resp.Header.Get("Content-Encoding"))
	}
}

// TestCompressionLeavesLiveAlone: the live WebSocket and the NDJSON stream
// work for a client that accepts gzip, and the stream's lines arrive as
// they are committed, plain.
func TestCompressionLeavesLiveAlone(t *testing.T) {
	ls := startLiveServer(t, liveOptions{})
	header := http.Header{"Accept-Encoding": {"gzip"}}
	conn, resp, err := websocket.DefaultDialer.Dial(ls.wsURL(""), header)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial /api/v1/live with Accept-Encoding gzip: got %v (status %d), want 101", err, status)
	}
	defer conn.Close()
	if enc := resp.Header.Get("Content-Encoding"); enc != "" {
		t.Errorf("WebSocket upgrade: got Content-Encoding %q, want none", enc)
	}

	req, err := http.NewRequest(http.MethodGet, ls.ts.URL+"/api/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "gzip")
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	stream, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK || stream.Header.Get("Content-Encoding") != "" {
		t.Fatalf("GET /api/v1/stream with Accept-Encoding gzip: got %d Content-Encoding %q, want 200 plain NDJSON", stream.StatusCode, stream.Header.Get("Content-Encoding"))
	}

	ls.waitSubscribers(t, 2)
	ls.post(t, liveAttempt("exec_gzip", "step-1", 1, nil))
	m, err := readLive(conn, 10*time.Second)
	for err == nil && m.Type != "event" {
		m, err = readLive(conn, 10*time.Second)
	}
	if err != nil || m.ExecutionID != "exec_gzip" {
		t.Errorf("WebSocket with Accept-Encoding gzip: got %+v, %v, want the posted event", m, err)
	}
	lines := make(chan string, 1) // the line naming the posted execution
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "exec_gzip") {
				lines <- sc.Text()
				return
			}
		}
		close(lines)
	}()
	select {
	case _, ok := <-lines:
		if !ok {
			t.Errorf("stream ended without the posted event")
		}
	case <-time.After(10 * time.Second):
		t.Errorf("stream with Accept-Encoding gzip: the posted event's line did not arrive within 10s, want it as committed")
	}
}

// TestFaviconAndSkipLink: /favicon.ico is an image kept for long, and
// every page links it, starts with a skip link and marks its main part.
func TestFaviconAndSkipLink(t *testing.T) {
	ls := startLiveServer(t, liveOptions{})
	base := ls.ts.URL
	resp, body := getEncoded(t, base+"/favicon.ico", "")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "image/") {
		t.Fatalf("GET /favicon.ico: got %d %s, want 200 image/…", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !bytes.HasPrefix(body, []byte("<svg")) || !bytes.Contains(body, []byte("</svg>")) {
		t.Errorf("GET /favicon.ico: got %.40q…, want the SVG mark", body)
	}
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=604800") {
		t.Errorf("GET /favicon.ico: Cache-Control got %q, want a week", cc)
	}
	if resp, _ := getEncoded(t, base+"/static/favicon.svg", ""); resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Errorf("GET /static/favicon.svg: got %d %s, want 200 image/svg+xml", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	for _, path := range []string{"/", "/outbox", "/live", "/no/such/page"} {
		_, page := getEncoded(t, base+path, "")
		s := string(page)
		if !strings.Contains(s, `<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">`) {
			t.Errorf("GET %s: no <link rel=icon> to the favicon", path)
		}
		skip := strings.Index(s, `<a class="skip-link" href="#main">Skip to content</a>`)
		body := strings.Index(s, "<body>")
		if skip < 0 || body < 0 || strings.ContainsAny(strings.TrimSpace(s[body+len("<body>"):skip]), "<") {
			t.Errorf("GET %s: want the skip link as the body's first element", path)
		}
		if !strings.Contains(s, `<main id="main"`) {
			t.Errorf("GET %s: want <main id=\"main\">, the skip link's target", path)
		}
	}
}
