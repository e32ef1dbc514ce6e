package web_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/oncetrace/oncetrace/web"
)

// TestAttackReadsOfAnExposedServer replays issue 11's finding "with
// --ingest-token on a non-loopback address, every read (UI, read API,
// stream, WebSocket, /sandbox/log) stays open to anyone: traces hold
// customers' emails and tool arguments" as an anonymous client would try
// it against a real server (serve's configuration for a non-loopback
// --addr with only --ingest-token; it listens on 127.0.0.1 all the same,
// and cmd/oncetrace's TestServeExposureProtectsReads checks that serve
// builds exactly this configuration from those flags). Every read is
// refused, stays refused while new events arrive, and nothing of the
// traces comes back; the token holder reads them all.
func TestAttackReadsOfAnExposedServer(t *testing.T) {
	const token = "ingest-secret"
	rs := startReadServer(t, token, web.AuthConfig{Exposed: true})
	rs.seed(t, token)
	// The sandbox has sent a customer an email: /sandbox/log holds it.
	req, _ := http.NewRequest(http.MethodPost, rs.ts.URL+"/sandbox/mail/v1/send",
		strings.NewReader(`{"to":"jordan@acme.dev","subject":"Your June invoice","body":"secret body"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", "ik_sandbox_secret")
	resp, err := rs.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sandbox send with the token: got %d, want 200", resp.StatusCode)
	}
	secrets := []string{"jordan@acme.dev", "exec_secret", "ik_secret", "Your June invoice"}
	leaks := func(body string) string {
		for _, s := range secrets {
			if strings.Contains(body, s) {
				return s
			}
		}
		return ""
	}

	anonymous := noRedirects()
	attacks := []struct {
		name, path string
		header     http.Header
	}{
		{"UI: the executions page", "/", nil},
		{"UI: an execution page", "/executions/exec_secret", nil},
		{"UI: the outbox", "/outbox", nil},
		{"UI: a key page", "/keys/ik_secret", nil},
		{"read API: executions", "/api/v1/executions", nil},
		{"read API: one execution", "/api/v1/executions/exec_secret", nil},
		{"read API: effects", "/api/v1/effects", nil},
		{"read API: findings", "/api/v1/findings", nil},
		{"read API: with the header a script sends", "/api/v1/executions", http.Header{"Accept": {"application/json"}}},
		{"stream", "/api/v1/stream", nil},
		{"stream from the start", "/api/v1/stream?after=0", nil},
		{"sandbox log", "/sandbox/log", nil},
		{"metrics", "/metrics", nil},
		{"a guessed token", "/api/v1/executions", bearer("secret")},
		{"the token's prefix", "/api/v1/executions", bearer("ingest-")},
		{"a forged session cookie", "/api/v1/executions", http.Header{"Cookie": {"oncetrace_session=AQAAAAB" + strings.Repeat("A", 69)}}},
	}
	for _, a := range attacks {
		got := get(t, anonymous, rs.ts.URL+a.path, a.header)
		if s := leaks(got.body); s != "" {
			t.Errorf("%s: GET %s anonymously shows %q", a.name, a.path, s)
		}
		if got.status != http.StatusUnauthorized && !(got.status == http.StatusSeeOther && strings.HasPrefix(got.location, "/login?")) {
			t.Errorf("%s: GET %s anonymously: got %d, want 401 or 303 to /login", a.name, a.path, got.status)
		}
	}

	// The WebSocket: refused before the upgrade, with or without the
	// server's own Origin.
	wsURL := "ws" + strings.TrimPrefix(rs.ts.URL, "http") + "/api/v1/live"
	for _, h := range []http.Header{nil, {"Origin": {rs.ts.URL}}} {
		conn, resp, err := websocket.DefaultDialer.Dial(wsURL, h)
		if err == nil {
			conn.Close()
			t.Errorf("WebSocket with %v: opened, want 401", h)
		} else if resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("WebSocket with %v: got %v (status %v), want 401", h, err, statusOf(resp))
		}
	}

	// The token holder reads everything, live included: a stream opened with
	// it receives an event posted afterwards.
	for _, u := range []string{"/api/v1/executions", "/sandbox/log", "/executions/exec_secret"} {
		if got := get(t, anonymous, rs.ts.URL+u, bearer(token)); got.status != http.StatusOK || leaks(got.body) == "" {
			t.Errorf("GET %s with the token: got %d, want 200 with the trace", u, got.status)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sreq, _ := http.NewRequestWithContext(ctx, http.MethodGet, rs.ts.URL+"/api/v1/stream", nil)
	sreq.Header.Set("Authorization", "Bearer "+token)
	sresp, err := http.DefaultClient.Do(sreq)
	if err != nil {
		t.Fatal(err)
	}
	defer sresp.Body.Close()
	if sresp.StatusCode != http.StatusOK {
		t.Fatalf("stream with the token: got %d, want 200", sresp.StatusCode)
	}
	deadline := time.Now().Add(10 * time.Second)
	for rs.hub.Subscribers() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	post, _ := http.NewRequest(http.MethodPost, rs.ts.URL+"/api/v1/events",
		strings.NewReader(`{"type":"execution","execution_id":"exec_after","status":"running"}`))
	post.Header.Set("Content-Type", "application/json")
	post.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(post); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	lines := bufio.NewScanner(io.LimitReader(sresp.Body, 1<<20))
	for lines.Scan() {
		if strings.Contains(lines.Text(), "exec_after") {
			return
		}
	}
	t.Errorf("stream with the token: the event posted after it opened never came (%v)", lines.Err())
}
