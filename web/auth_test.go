package web_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
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

// readServer is a real server on a real SQLite file, configured as serve
// configures one; it listens on 127.0.0.1 whatever Exposed says.
type readServer struct {
	ts    *httptest.Server
	srv   *web.Server
	hub   *web.Hub
	db    *store.DB
	clock *testClock
}

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func startReadServer(t *testing.T, ingestToken string, auth web.AuthConfig) *readServer {
	t.Helper()
	return startReadServerOn(t, filepath.Join(t.TempDir(), "oncetrace.db"), ingestToken, auth)
}

func startReadServerOn(t *testing.T, path, ingestToken string, auth web.AuthConfig) *readServer {
	t.Helper()
	db, err := sqlite.Open(context.Background(), path, sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	hub := web.NewHub(0)
	wcfg := writer.DefaultConfig
	wcfg.OnCommit = hub.Publish
	w := writer.New(db, wcfg)
	clock := &testClock{now: time.Now()}
	srv := web.New(web.Config{DB: db, Writer: w, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig,
		IngestToken: ingestToken, Hub: hub, Auth: auth, Now: clock.Now})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		w.Close()
		db.Close()
	})
	return &readServer{ts: ts, srv: srv, hub: hub, db: db, clock: clock}
}

// secretEvents hold what an exposed server must not show to strangers: a
// customer's address and a tool's arguments.
const secretEvents = `{"type":"execution","execution_id":"exec_secret","name":"billing-agent","status":"running","started_at":"2026-06-30T14:02:11.120Z"}
{"type":"attempt","execution_id":"exec_secret","step_id":"step-4","attempt":1,"tool":"send_invoice_email","effect":"write","provider":"mail-api","args":{"to":"jordan@acme.dev"},"idempotency_key":"ik_secret","started_at":"2026-06-30T14:02:11.200Z","ended_at":"2026-06-30T14:02:12.200Z","outcome":"ok"}
{"type":"effect","provider":"mail-api","effect_id":"msg_secret","idempotency_key":"ik_secret","execution_id":"exec_secret","step_id":"step-4","target":"jordan@acme.dev","at":"2026-06-30T14:02:11.350Z"}
`

func (rs *readServer) seed(t *testing.T, token string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, rs.ts.URL+"/api/v1/events", strings.NewReader(secretEvents))
	req.Header.Set("Content-Type", "application/x-ndjson")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := rs.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("seed: got %d %s, want 200", resp.StatusCode, body)
	}
}

// noRedirects is a client that shows redirects instead of following them.
func noRedirects() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type readResult struct {
	status   int
	location string
	wwwAuth  string
	body     string
	cookies  []*http.Cookie
}

// get does one GET with the given headers. Long-lived routes (the stream)
// are cut after their header: the status is what counts.
func get(t *testing.T, client *http.Client, u string, header http.Header) readResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	var body []byte
	if resp.Header.Get("Content-Type") == "application/x-ndjson" {
		cancel() // the stream: its status and header are the answer
	} else {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	}
	return readResult{status: resp.StatusCode, location: resp.Header.Get("Location"), wwwAuth: resp.Header.Get("WWW-Authenticate"),
		body: string(body), cookies: resp.Cookies()}
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// readURLs is every GET route of the server, its parameters filled with
// what seed stored, so the test covers a route added later too.
func readURLs(t *testing.T, srv *web.Server) map[string]string {
	t.Helper()
	fill := strings.NewReplacer(":id", "exec_secret", ":key", "ik_secret", ":provider", "mail-api", "*", "css/oncetrace.css")
	out := map[string]string{}
	for _, r := range web.RoutesOf(srv) {
		if r.Method != http.MethodGet {
			continue
		}
		p := fill.Replace(r.Path)
		switch r.Path {
		case "/execution", "/execution/attempt", "/execution/effect", "/api/v1/execution":
			p += "?id=exec_secret"
		case "/key", "/api/v1/key":
			p += "?key=ik_secret"
		case "/outbox/messages", "/outbox/messages/html", "/outbox/messages/raw", "/api/v1/messages":
			p += "?provider=mail-api&effect_id=msg_secret"
		}
		out[r.Path] = p
	}
	if len(out) < 20 {
		t.Fatalf("routes: got %d GET routes, want the server's (20 or more)", len(out))
	}
	return out
}

// openRoutes stay open on a protected server.
var openRoutes = map[string]bool{"/healthz": true, "/login": true, "/static/*": true, "/favicon.ico": true}

// isPageRoute: a browser is sent to the login form; any other client gets 401.
func isPageRoute(route string) bool {
	return !strings.HasPrefix(route, "/api/") && !strings.HasPrefix(route, "/sandbox/") && route != "/metrics"
}

// TestExposedServerProtectsEveryRead: with only an ingest token on a
// server that is not loopback, every GET route but the open ones answers
// 401 (APIs) or sends to /login (pages) without credentials, leaks nothing
// of the traces, and answers with the token.
func TestExposedServerProtectsEveryRead(t *testing.T) {
	rs := startReadServer(t, "ingest-secret", web.AuthConfig{Exposed: true})
	rs.seed(t, "ingest-secret")
	client := noRedirects()
	for route, u := range readURLs(t, rs.srv) {
		t.Run(route, func(t *testing.T) {
			if openRoutes[route] {
				if got := get(t, client, rs.ts.URL+u, nil); got.status == http.StatusUnauthorized || strings.HasPrefix(got.location, "/login") && route != "/login" {
					t.Errorf("GET %s without credentials: got %d (Location %q), want it open", u, got.status, got.location)
				}
				return
			}
			for _, h := range []http.Header{nil, bearer("wrong-token"), bearer(""), {"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("x:ingest-secret"))}}} {
				got := get(t, client, rs.ts.URL+u, h)
				if strings.Contains(got.body, "jordan@acme.dev") || strings.Contains(got.body, "exec_secret") {
					t.Errorf("GET %s with %v: the answer shows the trace: %.200s", u, h, got.body)
				}
				if isPageRoute(route) {
					want := "/login?next=" + url.QueryEscape(u)
					if got.status != http.StatusSeeOther || got.location != want {
						t.Errorf("GET %s with %v: got %d Location %q, want 303 to %s", u, h, got.status, got.location, want)
					}
				} else {
					if got.status != http.StatusUnauthorized || !strings.HasPrefix(got.wwwAuth, "Bearer") || !strings.Contains(got.body, `"error"`) {
						t.Errorf("GET %s with %v: got %d, WWW-Authenticate %q, body %.120s; want 401 Bearer with a JSON error", u, h, got.status, got.wwwAuth, got.body)
					}
				}
			}
			// The token opens it; the scheme's case does not matter.
			for _, h := range []http.Header{bearer("ingest-secret"), {"Authorization": {"bearer ingest-secret"}}} {
				got := get(t, client, rs.ts.URL+u, h)
				if got.status == http.StatusUnauthorized || got.status == http.StatusSeeOther {
					t.Errorf("GET %s with %v: got %d (Location %q), want it served", u, h, got.status, got.location)
				}
			}
		})
	}
	// And they really are served: the data comes back with the token.
	for _, u := range []string{"/api/v1/executions", "/executions/exec_secret", "/api/v1/executions/exec_secret"} {
		if got := get(t, client, rs.ts.URL+u, bearer("ingest-secret")); got.status != http.StatusOK || !strings.Contains(got.body, "exec_secret") {
			t.Errorf("GET %s with the token: got %d %.120s, want 200 with the execution", u, got.status, got.body)
		}
	}
	if got := get(t, client, rs.ts.URL+"/healthz", nil); got.status != http.StatusOK {
		t.Errorf("GET /healthz without credentials: got %d, want 200 (load balancers probe it)", got.status)
	}
}

// TestLoopbackReadsStayOpen: on loopback an ingest token protects writes
// only, as before; an explicit read token protects reads there too.
func TestLoopbackReadsStayOpen(t *testing.T) {
	rs := startReadServer(t, "ingest-secret", web.AuthConfig{})
	rs.seed(t, "ingest-secret")
	client := noRedirects()
	if got := get(t, client, rs.ts.URL+"/api/v1/executions", nil); got.status != http.StatusOK || !strings.Contains(got.body, "exec_secret") {
		t.Errorf("loopback, GET /api/v1/executions without credentials: got %d, want 200", got.status)
	}
	if got := get(t, client, rs.ts.URL+"/login?next=/outbox", nil); got.status != http.StatusSeeOther || got.location != "/outbox" {
		t.Errorf("loopback, GET /login: got %d to %q, want 303 to /outbox (no login needed)", got.status, got.location)
	}

	explicit := startReadServer(t, "", web.AuthConfig{ReadToken: "read-secret"})
	if got := get(t, client, explicit.ts.URL+"/api/v1/executions", nil); got.status != http.StatusUnauthorized {
		t.Errorf("loopback with --read-token, GET /api/v1/executions without it: got %d, want 401", got.status)
	}
	if got := get(t, client, explicit.ts.URL+"/api/v1/executions", bearer("read-secret")); got.status != http.StatusOK {
		t.Errorf("loopback with --read-token, GET /api/v1/executions with it: got %d, want 200", got.status)
	}
}

// TestReadTokenIsNotTheIngestToken: with both set, each opens only its own
// side.
func TestReadTokenIsNotTheIngestToken(t *testing.T) {
	rs := startReadServer(t, "ingest-secret", web.AuthConfig{Exposed: true, ReadToken: "read-secret"})
	rs.seed(t, "ingest-secret")
	client := noRedirects()
	if got := get(t, client, rs.ts.URL+"/api/v1/executions", bearer("ingest-secret")); got.status != http.StatusUnauthorized {
		t.Errorf("read with the ingest token: got %d, want 401", got.status)
	}
	if got := get(t, client, rs.ts.URL+"/api/v1/executions", bearer("read-secret")); got.status != http.StatusOK {
		t.Errorf("read with the read token: got %d, want 200", got.status)
	}
	req, _ := http.NewRequest(http.MethodPost, rs.ts.URL+"/api/v1/events", strings.NewReader(secretEvents))
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Authorization", "Bearer read-secret")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("write with the read token: got %d, want 401", resp.StatusCode)
	}
}

// login posts the form as the login page would, from the server's origin.
func login(t *testing.T, client *http.Client, base, token, next string, header http.Header) *http.Response {
	t.Helper()
	form := url.Values{"token": {token}, "next": {next}}
	req, _ := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST /login: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestLoginCookieFlow follows what a browser does, with a real client and
// cookie jar: redirected to the form, a wrong token refused, the right one
// exchanged for a session cookie (HttpOnly, SameSite=Strict, not the token)
// that opens pages, the API and the WebSocket, until logout ends it on the
// server too.
func TestLoginCookieFlow(t *testing.T) {
	rs := startReadServer(t, "ingest-secret", web.AuthConfig{Exposed: true, SessionTTL: time.Hour})
	rs.seed(t, "ingest-secret")
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}

	// Unauthenticated: the page leads to the form, which will come back.
	resp, err := browser.Get(rs.ts.URL + "/executions/exec_secret")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/login" || !strings.Contains(string(body), `data-testid="login-form"`) {
		t.Fatalf("GET /executions/exec_secret: ended at %s with %d, want the login form", resp.Request.URL, resp.StatusCode)
	}
	if next := resp.Request.URL.Query().Get("next"); next != "/executions/exec_secret" {
		t.Errorf("login form's next: got %q, want /executions/exec_secret", next)
	}
	if !strings.Contains(string(body), `value="/executions/exec_secret"`) {
		t.Errorf("login form: the next path is not in the form")
	}

	// A wrong token: 401 and the form again, no cookie.
	raw := noRedirects()
	if r := login(t, raw, rs.ts.URL, "guess", "/", nil); r.StatusCode != http.StatusUnauthorized || len(r.Cookies()) != 0 {
		t.Errorf("POST /login with a wrong token: got %d and %d cookies, want 401 and none", r.StatusCode, len(r.Cookies()))
	}

	// The right token: a session cookie, then the page it came from.
	r := login(t, raw, rs.ts.URL, "ingest-secret", "/executions/exec_secret", nil)
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/executions/exec_secret" {
		t.Fatalf("POST /login: got %d to %q, want 303 to /executions/exec_secret", r.StatusCode, r.Header.Get("Location"))
	}
	setCookie := r.Header.Get("Set-Cookie")
	for _, want := range []string{"oncetrace_session=", "Path=/", "HttpOnly", "SameSite=Strict", "Max-Age=3600"} {
		if !strings.Contains(setCookie, want) {
			t.Errorf("Set-Cookie: got %q, want %s", setCookie, want)
		}
	}
	if strings.Contains(setCookie, "Secure") {
		t.Errorf("Set-Cookie over plain HTTP: got %q, want no Secure (the browser would never send it back)", setCookie)
	}
	if strings.Contains(setCookie, "ingest-secret") || strings.Contains(setCookie, base64.RawURLEncoding.EncodeToString([]byte("ingest-secret"))) {
		t.Errorf("Set-Cookie: got %q, want a session, not the token", setCookie)
	}
	session := r.Cookies()[0]

	// Through the browser's jar: the form, then the page.
	resp = login(t, browser, rs.ts.URL, "ingest-secret", "/executions/exec_secret", nil)
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/executions/exec_secret" || !strings.Contains(string(body), "exec_secret") {
		t.Fatalf("after login: ended at %s with %d, want the execution page", resp.Request.URL, resp.StatusCode)
	}
	if !strings.Contains(string(body), `data-testid="logout"`) {
		t.Errorf("execution page after login: no log-out button")
	}
	withCookie := http.Header{"Cookie": {session.Name + "=" + session.Value}}
	for _, u := range []string{"/api/v1/executions", "/sandbox/log", "/metrics", "/outbox"} {
		if got := get(t, raw, rs.ts.URL+u, withCookie); got.status != http.StatusOK {
			t.Errorf("GET %s with the session cookie: got %d, want 200", u, got.status)
		}
	}
	if got := get(t, raw, rs.ts.URL+"/login?next=/outbox", withCookie); got.status != http.StatusSeeOther || got.location != "/outbox" {
		t.Errorf("GET /login with a session: got %d to %q, want 303 to /outbox", got.status, got.location)
	}

	// The WebSocket: refused without the cookie, opened with it.
	wsURL := "ws" + strings.TrimPrefix(rs.ts.URL, "http") + "/api/v1/live"
	if _, resp, err := websocket.DefaultDialer.Dial(wsURL, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("WebSocket without credentials: got err %v, status %v, want 401", err, statusOf(resp))
	}
	conn, resp, err := websocket.DefaultDialer.Dial(wsURL, http.Header{"Cookie": {session.Name + "=" + session.Value}, "Origin": {rs.ts.URL}})
	if err != nil {
		t.Fatalf("WebSocket with the session cookie: %v (status %v), want 101", err, statusOf(resp))
	}
	conn.Close()

	// A tampered session is refused.
	forged := []byte(session.Value)
	forged[10] ^= 1
	if got := get(t, raw, rs.ts.URL+"/api/v1/executions", http.Header{"Cookie": {session.Name + "=" + string(forged)}}); got.status != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/executions with a tampered session: got %d, want 401", got.status)
	}

	// Logout: the cookie is cleared, and a copy of it no longer works.
	req, _ := http.NewRequest(http.MethodPost, rs.ts.URL+"/logout", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", rs.ts.URL)
	req.Header.Set("Cookie", session.Name+"="+session.Value)
	r, err = raw.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/login" || !strings.Contains(r.Header.Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("POST /logout: got %d to %q, Set-Cookie %q; want 303 to /login clearing the cookie", r.StatusCode, r.Header.Get("Location"), r.Header.Get("Set-Cookie"))
	}
	if got := get(t, raw, rs.ts.URL+"/api/v1/executions", withCookie); got.status != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/executions with a logged-out session: got %d, want 401", got.status)
	}
}

func statusOf(resp *http.Response) any {
	if resp == nil {
		return "no response"
	}
	return resp.StatusCode
}

// TestLoginRefusesOtherSites: the form only answers this server's own
// pages, and never sends anyone to another site afterwards.
func TestLoginRefusesOtherSites(t *testing.T) {
	rs := startReadServer(t, "ingest-secret", web.AuthConfig{Exposed: true})
	raw := noRedirects()
	for _, h := range []http.Header{
		{"Origin": {"http://attacker.test"}},
		{"Origin": {"null"}},
		{"Origin": {""}, "Sec-Fetch-Site": {"cross-site"}},
	} {
		req, _ := http.NewRequest(http.MethodPost, rs.ts.URL+"/login", strings.NewReader(url.Values{"token": {"ingest-secret"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range h {
			req.Header[k] = v
		}
		if h.Get("Origin") == "" {
			req.Header.Del("Origin")
		}
		resp, err := raw.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Errorf("POST /login with %v: got %d and %d cookies, want 403 and none", h, resp.StatusCode, len(resp.Cookies()))
		}
	}
	for next, want := range map[string]string{
		"//attacker.test/x":       "/",
		"/\\attacker.test":        "/",
		"https://attacker.test/":  "/",
		"javascript:alert(1)":     "/",
		"/keys/ik%2Fa?x=1":        "/keys/ik%2Fa?x=1",
		"/executions/exec_secret": "/executions/exec_secret",
	} {
		r := login(t, raw, rs.ts.URL, "ingest-secret", next, nil)
		if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != want {
			t.Errorf("POST /login next=%q: got %d to %q, want 303 to %q", next, r.StatusCode, r.Header.Get("Location"), want)
		}
	}
	// Only what an HTML form sends.
	req, _ := http.NewRequest(http.MethodPost, rs.ts.URL+"/login", strings.NewReader(`{"token":"ingest-secret"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", rs.ts.URL)
	if resp, err := raw.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType || len(resp.Cookies()) != 0 {
			t.Errorf("POST /login as JSON: got %d and %d cookies, want 415 and none", resp.StatusCode, len(resp.Cookies()))
		}
	}
	// Behind a proxy that ends TLS the cookie is Secure.
	r := login(t, raw, rs.ts.URL, "ingest-secret", "/", http.Header{"X-Forwarded-Proto": {"https"}})
	if !strings.Contains(r.Header.Get("Set-Cookie"), "Secure") {
		t.Errorf("Set-Cookie with X-Forwarded-Proto https: got %q, want Secure", r.Header.Get("Set-Cookie"))
	}
}

// TestSessionEndsWithItsTTLAndItsToken: a session lasts SessionTTL, and one
// signed under an old token does not open a server with a new one.
func TestSessionEndsWithItsTTLAndItsToken(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "oncetrace.db")
	rs := startReadServerOn(t, dbPath, "old-token", web.AuthConfig{Exposed: true, SessionTTL: time.Hour})
	raw := noRedirects()
	r := login(t, raw, rs.ts.URL, "old-token", "/", nil)
	if len(r.Cookies()) != 1 {
		t.Fatalf("POST /login: got %d cookies, want 1", len(r.Cookies()))
	}
	cookie := http.Header{"Cookie": {r.Cookies()[0].Name + "=" + r.Cookies()[0].Value}}
	if got := get(t, raw, rs.ts.URL+"/api/v1/executions", cookie); got.status != http.StatusOK {
		t.Fatalf("with a fresh session: got %d, want 200", got.status)
	}
	rs.clock.advance(59 * time.Minute)
	if got := get(t, raw, rs.ts.URL+"/api/v1/executions", cookie); got.status != http.StatusOK {
		t.Errorf("59 min into a 1 h session: got %d, want 200", got.status)
	}
	rs.clock.advance(2 * time.Minute)
	if got := get(t, raw, rs.ts.URL+"/", cookie); got.status != http.StatusSeeOther {
		t.Errorf("61 min into a 1 h session: got %d, want 303 to /login", got.status)
	}

	other := startReadServer(t, "new-token", web.AuthConfig{Exposed: true, SessionTTL: time.Hour})
	other.clock.now = rs.clock.Now().Add(-30 * time.Minute) // still inside the session's hour
	if got := get(t, raw, other.ts.URL+"/api/v1/executions", cookie); got.status != http.StatusUnauthorized {
		t.Errorf("a session of the old token on a server with a new one: got %d, want 401", got.status)
	}
}

// TestLinkFromAnotherSiteReloads: a link followed from another site arrives
// without the SameSite=Strict cookie; the answer reloads the same page from
// this origin instead of sending a logged-in user to the form.
func TestLinkFromAnotherSiteReloads(t *testing.T) {
	rs := startReadServer(t, "ingest-secret", web.AuthConfig{Exposed: true})
	raw := noRedirects()
	nav := http.Header{"Sec-Fetch-Site": {"cross-site"}, "Sec-Fetch-Mode": {"navigate"}}
	got := get(t, raw, rs.ts.URL+"/executions/exec_secret?x=1", nav)
	if got.status != http.StatusOK || !strings.Contains(got.body, `http-equiv="refresh"`) || !strings.Contains(got.body, `0;url=/executions/exec_secret?x=1`) {
		t.Errorf("cross-site navigation: got %d %.300s, want a page reloading /executions/exec_secret?x=1", got.status, got.body)
	}
	if strings.Contains(got.body, "jordan@acme.dev") {
		t.Errorf("cross-site navigation: the reload page shows trace data")
	}
	// The reload is same-origin: without a session it goes to the form.
	same := http.Header{"Sec-Fetch-Site": {"same-origin"}, "Sec-Fetch-Mode": {"navigate"}}
	if got := get(t, raw, rs.ts.URL+"/executions/exec_secret?x=1", same); got.status != http.StatusSeeOther {
		t.Errorf("same-origin navigation without a session: got %d, want 303 to /login", got.status)
	}
	// An API is never reloaded.
	if got := get(t, raw, rs.ts.URL+"/api/v1/executions", nav); got.status != http.StatusUnauthorized {
		t.Errorf("cross-site GET /api/v1/executions: got %d, want 401", got.status)
	}
}
