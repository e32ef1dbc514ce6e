package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// hardenedServer is a real server on a real SQLite file, behind a real
// http.Server whose timeouts a test may set, as serve wires it.
type hardenedServer struct {
	ts  *httptest.Server
	srv *web.Server
	db  *store.DB
}

type hardenedOptions struct {
	hosts        []string // Config.AllowedHosts
	token        string   // Config.IngestToken
	readTimeout  time.Duration
	writeTimeout time.Duration
}

func startHardenedServer(t *testing.T, o hardenedOptions) *hardenedServer {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	hub := web.NewHub(0)
	wcfg := writer.DefaultConfig
	wcfg.OnCommit = hub.Publish
	w := writer.New(db, wcfg)
	srv := web.New(web.Config{DB: db, Writer: w, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig,
		Hub: hub, AllowedHosts: o.hosts, IngestToken: o.token})
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ReadTimeout, ts.Config.WriteTimeout = o.readTimeout, o.writeTimeout
	ts.Start()
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		w.Close()
		db.Close()
	})
	return &hardenedServer{ts: ts, srv: srv, db: db}
}

// route is one registered route with a concrete path.
type route struct{ method, pattern, path string }

// routesOf lists every route of the server with its parameters filled in.
func routesOf(s *web.Server) []route {
	var out []route
	for _, r := range web.RoutesOf(s) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			continue // echo's own not-found routes
		}
		segs := strings.Split(r.Path, "/")
		for i, s := range segs {
			if strings.HasPrefix(s, ":") || s == "*" {
				segs[i] = "x"
			}
		}
		out = append(out, route{method: r.Method, pattern: r.Path, path: strings.Join(segs, "/")})
	}
	slices.SortFunc(out, func(a, b route) int { return strings.Compare(a.method+a.path, b.method+b.path) })
	return out
}

// writeRoutes are the routes that take a body.
func writeRoutes(s *web.Server) []route {
	var out []route
	for _, r := range routesOf(s) {
		if r.method == http.MethodPost || r.method == http.MethodPut || r.method == http.MethodPatch {
			out = append(out, r)
		}
	}
	return out
}

// goodBody is a body each write route accepts, with its content type.
func goodBody(r route) (contentType, body string) {
	switch {
	case r.pattern == "/api/v1/events":
		return "application/json", `{"type":"execution","execution_id":"exec_same_origin","name":"allowed"}`
	case strings.HasPrefix(r.pattern, "/v1/"):
		return "application/json", `{}`
	case r.pattern == "/sandbox/mail/v1/send":
		return "application/json", `{"to":"jordan@acme.dev","subject":"hello","body":"allowed"}`
	case r.pattern == "/sandbox/faults":
		return "application/json", `{"faults":[]}`
	case r.pattern == "/login" || r.pattern == "/logout":
		return "application/x-www-form-urlencoded", "token=x&next=%2F"
	}
	return "application/json", `{}`
}

type sent struct {
	status int
	body   string
	header http.Header
}

func send(t *testing.T, method, url string, header map[string]string, body string) sent {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return sent{status: resp.StatusCode, body: string(data), header: resp.Header}
}

// errorMessage is the message of any of the server's error formats: the
// API's {"error": "..."}, the sandbox's {"error": {"message": "..."}},
// OTLP's {"message": "..."}.
func errorMessage(t *testing.T, body string) string {
	t.Helper()
	if strings.HasPrefix(body, "<!doctype html>") { // the UI's error page
		m := errorPageMessage.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("error page %q: no message", body)
		}
		return html.UnescapeString(m[1])
	}
	var api struct {
		Error json.RawMessage `json:"error"`
		Msg   string          `json:"message"`
	}
	if err := json.Unmarshal([]byte(body), &api); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	var s string
	if json.Unmarshal(api.Error, &s) == nil {
		return s
	}
	var box struct{ Message string }
	if json.Unmarshal(api.Error, &box) == nil && box.Message != "" {
		return box.Message
	}
	return api.Msg
}

var errorPageMessage = regexp.MustCompile(`data-testid="error"><h1>[^<]*</h1><p>([^<]*)</p>`)

// checkNothingWritten: no execution, no effect, no sandbox send, no fault.
func checkNothingWritten(t *testing.T, hs *hardenedServer) {
	t.Helper()
	for path, want := range map[string]string{
		"/api/v1/executions": `"executions":[]`,
		"/api/v1/effects":    `"effects":[]`,
		"/sandbox/log":       `{"log":[]}`,
		"/sandbox/faults":    `{"faults":[]}`,
	} {
		got := send(t, http.MethodGet, hs.ts.URL+path, nil, "")
		if got.status != http.StatusOK || !strings.Contains(got.body, want) {
			t.Errorf("GET %s after the refused writes: got %d %s, want 200 with %s", path, got.status, got.body, want)
		}
	}
}

// TestHostAllowlist: a request under a name that is not the server's gets
// 421 before anything else, on every route (reads, writes, the WebSocket,
// a path that does not exist); the server's names pass, with or without
// port, in any case, with a trailing dot.
func TestHostAllowlist(t *testing.T) {
	hs := startHardenedServer(t, hardenedOptions{hosts: []string{"localhost", "127.0.0.1", "::1", "oncetrace.example.com"}})
	routes := append(routesOf(hs.srv), route{method: http.MethodGet, pattern: "(none)", path: "/no/such/page"})
	if len(routes) < 20 {
		t.Fatalf("routes: got %d, want every route of the server", len(routes))
	}
	foreign := []string{"attacker.test", "attacker.test:" + strings.Split(hs.ts.URL, ":")[2], "127.0.0.1.attacker.test",
		"localhost.attacker.test", "oncetrace.example.com.attacker.test", "[::2]:8080", "10.0.0.1", "0.0.0.0"}
	own := []string{"127.0.0.1", strings.TrimPrefix(hs.ts.URL, "http://"), "localhost", "LOCALHOST:8080", "[::1]:8080", "[::1]",
		"oncetrace.example.com", "OncEtrace.Example.COM.", "oncetrace.example.com:443"}
	for _, r := range routes {
		ct, body := goodBody(r)
		for _, host := range foreign {
			got := send(t, r.method, hs.ts.URL+r.path, map[string]string{"Host": host, "Origin": "http://" + host, "Content-Type": ct}, body)
			if got.status != http.StatusMisdirectedRequest {
				t.Errorf("%s %s with Host %q: got %d, want 421", r.method, r.path, host, got.status)
				continue
			}
			if r.method != http.MethodHead {
				if msg := errorMessage(t, got.body); !strings.Contains(msg, "Host:") || !strings.Contains(msg, "--allowed-hosts") {
					t.Errorf("%s %s with Host %q: got message %q, want it to name Host and --allowed-hosts", r.method, r.path, host, msg)
				}
			}
		}
	}
	// The server's own names reach the handlers; reads only, so that the
	// check of what was written stays meaningful.
	for _, r := range routes {
		if r.method != http.MethodGet || r.pattern == "/api/v1/live" || r.pattern == "/api/v1/stream" {
			continue
		}
		for _, host := range own {
			if got := send(t, r.method, hs.ts.URL+r.path, map[string]string{"Host": host}, ""); got.status == http.StatusMisdirectedRequest {
				t.Errorf("GET %s with Host %q: got 421, want the server's own name to pass", r.path, host)
			}
		}
	}
	checkNothingWritten(t, hs)
}

// TestHostAllowlistWebSocket: DNS rebinding's WebSocket, Host and Origin
// both the attacker's name, is refused before the upgrade; the server's own
// name is upgraded.
func TestHostAllowlistWebSocket(t *testing.T) {
	hs := startHardenedServer(t, hardenedOptions{hosts: []string{"localhost", "127.0.0.1", "::1"}})
	wsURL := "ws" + strings.TrimPrefix(hs.ts.URL, "http") + "/api/v1/live"
	for _, tc := range []struct {
		host string
		want int
	}{
		{"attacker.test", http.StatusMisdirectedRequest},
		{"attacker.test:" + strings.Split(hs.ts.URL, ":")[2], http.StatusMisdirectedRequest},
		{strings.TrimPrefix(hs.ts.URL, "http://"), http.StatusSwitchingProtocols},
		{"localhost:" + strings.Split(hs.ts.URL, ":")[2], http.StatusSwitchingProtocols},
	} {
		h := http.Header{"Host": {tc.host}, "Origin": {"http://" + tc.host}}
		conn, resp, err := websocket.DefaultDialer.Dial(wsURL, h)
		if conn != nil {
			conn.Close()
		}
		if resp == nil {
			t.Fatalf("WebSocket with Host %q: got %v and no response, want %d", tc.host, err, tc.want)
		}
		if resp.StatusCode != tc.want {
			t.Errorf("WebSocket with Host %q: got %d, want %d", tc.host, resp.StatusCode, tc.want)
		}
	}
}

// TestWritesNeedTheirContentType: every route that takes a body refuses a
// body without Content-Type, and every type a form or a CORS-simple request
// can send, with 415 naming the header and the types it accepts, in the
// route's own error format; nothing is written. The types it accepts pass.
func TestWritesNeedTheirContentType(t *testing.T) {
	hs := startHardenedServer(t, hardenedOptions{})
	routes := writeRoutes(hs.srv)
	want := map[string][]string{
		"POST /api/v1/events":             {"application/json", "application/x-ndjson"},
		"POST /api/v1/webhooks/:provider": {"application/json"},
		"POST /v1/traces":                 {"application/x-protobuf", "application/json"},
		"POST /v1/logs":                   {"application/x-protobuf", "application/json"},
		"POST /v1/metrics":                {"application/x-protobuf", "application/json"},
		"POST /sandbox/mail/v1/send":      {"application/json"},
		"PUT /sandbox/faults":             {"application/json"},
	}
	for key := range want {
		if !slices.ContainsFunc(routes, func(r route) bool { return r.method+" "+r.pattern == key }) {
			t.Errorf("route %s: not registered, want it (got %v)", key, routes)
		}
	}
	refused := []string{"", "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "application/jsonx", "json", "application/json; ="}
	table := web.WriteContentTypes()
	for key, types := range want {
		if got := table[key]; !slices.Equal(got[:min(len(got), len(types))], types) {
			t.Errorf("writeContentTypes[%q]: got %v, want %v first", key, got, types)
		}
	}
	for _, r := range routes {
		accepted, ok := table[r.method+" "+r.pattern]
		if !ok {
			accepted = []string{"application/json"} // the default for a write route not listed
		}
		_, body := goodBody(r)
		for _, ct := range refused {
			if mt, _, _ := strings.Cut(ct, ";"); slices.Contains(accepted, mt) {
				continue // the login form's own type
			}
			h := map[string]string{}
			if ct != "" {
				h["Content-Type"] = ct
			}
			got := send(t, r.method, hs.ts.URL+r.path, h, body)
			if got.status != http.StatusUnsupportedMediaType {
				t.Errorf("%s %s with Content-Type %q: got %d %s, want 415", r.method, r.path, ct, got.status, got.body)
				continue
			}
			msg := errorMessage(t, got.body)
			if !strings.HasPrefix(msg, "Content-Type: ") {
				t.Errorf("%s %s with Content-Type %q: got message %q, want it to name Content-Type", r.method, r.path, ct, msg)
			}
			for _, a := range accepted {
				if !strings.Contains(msg, a) {
					t.Errorf("%s %s with Content-Type %q: got message %q, want it to name %s", r.method, r.path, ct, msg, a)
				}
			}
			if strings.HasPrefix(r.pattern, "/sandbox/") && !strings.Contains(got.body, `"type":"invalid_request_error"`) {
				t.Errorf("%s %s: got %s, want the sandbox's error format", r.method, r.path, got.body)
			}
		}
	}
	checkNothingWritten(t, hs)

	for _, r := range routes {
		for _, ct := range table[r.method+" "+r.pattern] {
			_, body := goodBody(r)
			got := send(t, r.method, hs.ts.URL+r.path, map[string]string{"Content-Type": ct + "; charset=utf-8"}, body)
			if got.status == http.StatusUnsupportedMediaType || got.status == http.StatusForbidden {
				t.Errorf("%s %s with Content-Type %s: got %d %s, want it past the guard", r.method, r.path, ct, got.status, got.body)
			}
		}
	}
	// A DELETE carries no body and needs no Content-Type.
	if got := send(t, http.MethodDelete, hs.ts.URL+"/sandbox/faults", nil, ""); got.status != http.StatusOK {
		t.Errorf("DELETE /sandbox/faults without Content-Type: got %d %s, want 200", got.status, got.body)
	}
	// Requests for no route keep their 404 and 405.
	if got := send(t, http.MethodPost, hs.ts.URL+"/api/v1/nothing", map[string]string{"Content-Type": "text/plain"}, "x"); got.status != http.StatusNotFound {
		t.Errorf("POST /api/v1/nothing: got %d, want 404", got.status)
	}
	if got := send(t, http.MethodPost, hs.ts.URL+"/sandbox/faults", map[string]string{"Content-Type": "text/plain"}, "x"); got.status != http.StatusMethodNotAllowed {
		t.Errorf("POST /sandbox/faults: got %d, want 405", got.status)
	}
}

// TestCrossOriginWritesRefused: on every route that takes a body, what a
// page on another origin sends (Sec-Fetch-Site cross-site or same-site, or
// an Origin that is not the server's) is refused with 403 naming the
// header, even with the right Content-Type; nothing is written. The
// server's own pages and clients that are not browsers pass.
func TestCrossOriginWritesRefused(t *testing.T) {
	hs := startHardenedServer(t, hardenedOptions{})
	self := hs.ts.URL
	refused := []struct {
		name   string
		header map[string]string
		names  string
	}{
		{"Sec-Fetch-Site cross-site", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, "Sec-Fetch-Site"},
		{"Sec-Fetch-Site same-site (another port)", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:1"}, "Sec-Fetch-Site"},
		{"Sec-Fetch-Site cross-site, no Origin", map[string]string{"Sec-Fetch-Site": "cross-site"}, "Sec-Fetch-Site"},
		{"foreign Origin, old browser", map[string]string{"Origin": "https://evil.example"}, "Origin"},
		{"Origin of another port", map[string]string{"Origin": "http://127.0.0.1:1"}, "Origin"},
		{"Origin null (sandboxed frame)", map[string]string{"Origin": "null"}, "Origin"},
	}
	routes := writeRoutes(hs.srv)
	for _, r := range routes {
		ct, body := goodBody(r)
		for _, tc := range refused {
			h := map[string]string{"Content-Type": ct}
			for k, v := range tc.header {
				h[k] = v
			}
			got := send(t, r.method, hs.ts.URL+r.path, h, body)
			if got.status != http.StatusForbidden {
				t.Errorf("%s %s, %s: got %d %s, want 403", r.method, r.path, tc.name, got.status, got.body)
				continue
			}
			if msg := errorMessage(t, got.body); !strings.HasPrefix(msg, tc.names+": ") {
				t.Errorf("%s %s, %s: got message %q, want it to name %s", r.method, r.path, tc.name, msg, tc.names)
			}
		}
	}
	checkNothingWritten(t, hs)

	allowed := []struct {
		name   string
		header map[string]string
	}{
		{"not a browser", map[string]string{}},
		{"same origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": self}},
		{"same origin, old browser", map[string]string{"Origin": self}},
		{"typed by the user", map[string]string{"Sec-Fetch-Site": "none"}},
	}
	for _, r := range routes {
		ct, body := goodBody(r)
		for _, tc := range allowed {
			h := map[string]string{"Content-Type": ct}
			for k, v := range tc.header {
				h[k] = v
			}
			if got := send(t, r.method, hs.ts.URL+r.path, h, body); got.status == http.StatusForbidden || got.status == http.StatusUnsupportedMediaType {
				t.Errorf("%s %s, %s: got %d %s, want it past the guard", r.method, r.path, tc.name, got.status, got.body)
			}
		}
	}
	if got := send(t, http.MethodGet, hs.ts.URL+"/api/v1/executions/exec_same_origin", nil, ""); got.status != http.StatusOK {
		t.Errorf("the same-origin event: got %d %s, want it stored", got.status, got.body)
	}
	// Reads are not writes: a cross-site GET passes this guard (a page on
	// another site cannot read the answer without CORS).
	if got := send(t, http.MethodGet, hs.ts.URL+"/api/v1/executions", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, ""); got.status != http.StatusOK {
		t.Errorf("cross-site GET /api/v1/executions: got %d, want 200", got.status)
	}
}

// TestCrossOriginWriteWithToken: a client that sends the ingest token as a
// Bearer token is not a page of another site riding on the user's
// browser, whatever Origin it sends; a wrong token gets the 403.
func TestCrossOriginWriteWithToken(t *testing.T) {
	const token = "t0ken-for-tools"
	hs := startHardenedServer(t, hardenedOptions{token: token})
	ev := `{"type":"execution","execution_id":"exec_tool","name":"tool"}`
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"Bearer " + token, http.StatusOK},
		{"bearer  " + token, http.StatusOK},
		{"Bearer " + token + "x", http.StatusForbidden},
		{"", http.StatusForbidden},
		{"Basic " + token, http.StatusForbidden},
	} {
		h := map[string]string{"Content-Type": "application/json", "Origin": "https://tool.example", "Sec-Fetch-Site": "cross-site"}
		if tc.auth != "" {
			h["Authorization"] = tc.auth
		}
		if got := send(t, http.MethodPost, hs.ts.URL+"/api/v1/events", h, ev); got.status != tc.want {
			t.Errorf("cross-site POST with Authorization %q: got %d %s, want %d", tc.auth, got.status, got.body, tc.want)
		}
	}
}

// TestLiveRoutesOutliveServerTimeouts: with read and write timeouts far
// shorter than a live connection lives, the NDJSON stream and the
// WebSocket still deliver an event committed after both have passed. The
// server's write deadline, set when a request's header is read, would fail
// every later write; the live handlers move it before each write (the
// stream through http.ResponseController, the WebSocket on its conn), and
// a read deadline does not outlive a request's body.
func TestLiveRoutesOutliveServerTimeouts(t *testing.T) {
	const timeout = 300 * time.Millisecond
	hs := startHardenedServer(t, hardenedOptions{readTimeout: timeout, writeTimeout: timeout})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.ts.URL+"/api/v1/stream?after=0", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/stream: got %d, want 200", resp.StatusCode)
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) != "" {
				lines <- sc.Text()
			}
		}
	}()
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(hs.ts.URL, "http")+"/api/v1/live?after=0", nil)
	if err != nil {
		t.Fatalf("dial /api/v1/live: %v", err)
	}
	defer conn.Close()

	time.Sleep(4 * timeout) // the fault itself: the connections outlive the server's timeouts
	ct, body := goodBody(route{pattern: "/api/v1/events"})
	if got := send(t, http.MethodPost, hs.ts.URL+"/api/v1/events", map[string]string{"Content-Type": ct}, body); got.status != http.StatusOK {
		t.Fatalf("POST /api/v1/events: got %d %s, want 200", got.status, got.body)
	}
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("stream: closed after the server's timeouts, want it open")
		}
		if !strings.Contains(line, "exec_same_origin") {
			t.Errorf("stream: got %s, want the event", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stream: no event within 10s")
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, msg, err := conn.ReadMessage()
	if err != nil {
		t.Fatalf("WebSocket after the server's timeouts: %v, want the event", err)
	}
	if !strings.Contains(string(msg), "exec_same_origin") {
		t.Errorf("WebSocket: got %s, want the event", msg)
	}
}

// TestWriteContentTypesCoverTheRoutes: the table names only routes that
// exist, so a renamed route cannot silently fall back to the default.
func TestWriteContentTypesCoverTheRoutes(t *testing.T) {
	hs := startHardenedServer(t, hardenedOptions{})
	registered := map[string]bool{}
	for _, r := range routesOf(hs.srv) {
		registered[r.method+" "+r.pattern] = true
	}
	for key := range web.WriteContentTypes() {
		if !registered[key] {
			t.Errorf("writeContentTypes[%q]: no such route", key)
		}
	}
}
