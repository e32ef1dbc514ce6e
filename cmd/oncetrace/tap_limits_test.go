package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// okUpstream answers every request 200 with an empty body.
var okUpstream = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})

// closedWithin reads each connection until it ends and counts those the
// other side closed (EOF or reset) before the deadline.
func closedWithin(conns []net.Conn, deadline time.Time) int {
	var closed sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for _, c := range conns {
		closed.Go(func() {
			c.SetReadDeadline(deadline)
			_, err := io.Copy(io.Discard, c) // nil at EOF
			if err == nil || isReset(err) {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	closed.Wait()
	return n
}

// TestTapIdleConnections: the attack's idle keep-alive connections to the
// tap, 3,000 from one address. Without the per-address cap the tap holds
// them all, and closes every one at --idle-timeout; with its default cap
// it holds 64 and closes the rest at once.
func TestTapIdleConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 6,000 connections")
	}
	api := httptest.NewServer(okUpstream)
	defer api.Close()
	for _, tc := range []struct {
		name  string
		flags []string
		idle  time.Duration
		held  int
	}{
		{"no per-address cap", []string{"--max-conns-per-ip", "0", "--max-conns", "0"}, 500 * time.Millisecond, 3000},
		// Idle for longer than the 3,000 take to open, so that none of the
		// 64 has given its place to another yet.
		{"the default cap", nil, 2 * time.Second, defaultMaxConnsPerIP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idle := tc.idle
			tp := startTapProcess(t, append([]string{"--upstream", api.URL, "--provider", "idle-test", "--idle-timeout", idle.String()}, tc.flags...)...)
			addr := strings.TrimPrefix(tp.url, "http://")
			base := procFDs(t, tp.pid)
			start := time.Now()
			conns := openKeepAlive(t, addr, "127.0.0.2", 3000) // not the address of the status check's connection
			defer closeAll(conns)
			var open []net.Conn
			for _, c := range conns {
				if answeredEmpty(c) {
					open = append(open, c)
				}
			}
			fds := procFDs(t, tp.pid)
			t.Logf("3000 connections in %v: %d answered and open; tap fds %d -> %d", time.Since(start).Round(time.Millisecond), len(open), base, fds)
			if len(open) != tc.held {
				t.Fatalf("answered and held: got %d, want %d", len(open), tc.held)
			}
			closed := closedWithin(open, time.Now().Add(idle+3*time.Second))
			t.Logf("closed by the tap %v after the first was opened: %d; tap fds %d", time.Since(start).Round(time.Millisecond), closed, procFDs(t, tp.pid))
			if closed != len(open) {
				t.Errorf("closed by --idle-timeout %v within 3 s more: got %d, want all %d", idle, closed, len(open))
			}
		})
	}
}

// answeredEmpty reports whether conn got a 200 to its request; the body,
// empty, is read, so what follows on conn is what the tap does next.
func answeredEmpty(conn net.Conn) bool {
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK && resp.ContentLength == 0
}

// TestTapCapsConnections: at --max-conns-per-ip the next connection from
// that address is closed unanswered, another address is answered, and at
// --max-conns the next from any address is closed.
func TestTapCapsConnections(t *testing.T) {
	api := httptest.NewServer(okUpstream)
	defer api.Close()
	tp := startTapProcess(t, "--upstream", api.URL, "--provider", "cap-test", "--max-conns-per-ip", "4", "--max-conns", "6")
	addr := strings.TrimPrefix(tp.url, "http://")

	held := openKeepAlive(t, addr, "127.0.0.2", 4)
	defer closeAll(held)
	for i, c := range held {
		if !answered(c) {
			t.Fatalf("connection %d of 4 from 127.0.0.2: refused, want it answered", i+1)
		}
	}
	over := openKeepAlive(t, addr, "127.0.0.2", 1)
	defer closeAll(over)
	if answered(over[0]) {
		t.Errorf("connection 5 from 127.0.0.2: answered, want it closed (--max-conns-per-ip 4)")
	}
	// 127.0.0.3 gets the 2 places left of 6 once the status check's
	// connection from 127.0.0.1 has given its place back, and no more.
	demoHTTP.CloseIdleConnections()
	var others []net.Conn
	defer func() { closeAll(others) }()
	for deadline := time.Now().Add(5 * time.Second); ; {
		c := openKeepAlive(t, addr, "127.0.0.3", 1)[0]
		if answered(c) {
			if others = append(others, c); len(others) > 2 {
				t.Fatalf("connections from 127.0.0.3: %d answered beside 127.0.0.2's 4, want 2 (--max-conns 6)", len(others))
			}
			continue
		}
		c.Close()
		if len(others) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections from 127.0.0.3: %d answered, want 2", len(others))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{"over --max-conns-per-ip", "over --max-conns"} {
		if !strings.Contains(tp.logText(), want) {
			t.Errorf("log: got\n%s\nwant %q", tp.logText(), want)
		}
	}
}

// TestTapUpstreamTimeout: an upstream that does not answer gets the client
// a 504 at --upstream-timeout (--tap-upstream-timeout in serve), and the
// charge it makes once it answers is still recorded, as the server's
// effects show.
func TestTapUpstreamTimeout(t *testing.T) {
	const timeout = 500 * time.Millisecond
	for _, tc := range []string{"tap", "serve --tap"} {
		t.Run(tc, func(t *testing.T) {
			stripe := newFakeStripe()
			api := httptest.NewServer(stripe)
			defer api.Close()
			var srv *demoServer
			var tapURL string
			if tc == "tap" {
				srv = startDemoServer(t, filepath.Join(t.TempDir(), "late.db"), "serve.log")
				tapURL = startTapProcess(t, "--upstream", api.URL, "--provider", "stripe-test", "--server", srv.url, "--upstream-timeout", timeout.String()).url
			} else {
				tapAddr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
				srv = startDemoServer(t, filepath.Join(t.TempDir(), "late.db"), "serve.log", "--tap", "stripe-test="+api.URL+"@"+tapAddr,
					"--tap-upstream-timeout", timeout.String())
				waitServeTap(t, srv, tapAddr)
				tapURL = "http://" + tapAddr
			}
			req, _ := http.NewRequest(http.MethodPost, tapURL+"/v1/charges", strings.NewReader(`{"to":"a@b","slow":true}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "ik_late")
			start := time.Now()
			resp, err := demoHTTP.Do(req)
			elapsed := time.Since(start)
			if err != nil {
				t.Fatalf("POST through the tap: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusGatewayTimeout {
				t.Errorf("answer: got %d, want 504", resp.StatusCode)
			}
			if elapsed < timeout || elapsed > timeout+2*time.Second {
				t.Errorf("504 after %v, want at %v, well before %v", elapsed, timeout, timeout+2*time.Second)
			}
			close(stripe.slow) // the API answers now: the charge is made
			var effects struct {
				Effects []struct {
					EffectID       string `json:"effect_id"`
					IdempotencyKey string `json:"idempotency_key"`
				} `json:"effects"`
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				getJSON(t, srv.url+"/api/v1/effects?provider=stripe-test", &effects)
				if len(effects.Effects) > 0 || time.Now().After(deadline) {
					break
				}
			}
			if _, charges, _ := stripe.counts(); charges != 1 || len(effects.Effects) != 1 || !strings.HasPrefix(effects.Effects[0].EffectID, "ch_") ||
				effects.Effects[0].IdempotencyKey != "ik_late" {
				t.Errorf("effects after the late answer: got %+v, want the one charge the API made (%d), with key ik_late\n%s", effects.Effects, charges, srv.logText())
			}
		})
	}
}

// TestTapRecordsNoKeyItDidNotForward: a key named by the request's
// Connection header is hop-by-hop: the API never sees it, and serve's tap
// records none; a key sent normally is recorded.
func TestTapRecordsNoKeyItDidNotForward(t *testing.T) {
	stripe := newFakeStripe()
	api := httptest.NewServer(stripe)
	defer api.Close()
	tapAddr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	srv := startDemoServer(t, filepath.Join(t.TempDir(), "hop.db"), "serve.log", "--tap", "stripe-test="+api.URL+"@"+tapAddr)
	waitServeTap(t, srv, tapAddr)
	charge := func(header map[string]string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+tapAddr+"/v1/charges", strings.NewReader("amount=100&to=cus_1"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := demoHTTP.Do(req)
		if err != nil {
			t.Fatalf("POST through the tap: %v", err)
		}
		defer resp.Body.Close()
		var c struct {
			ID string `json:"id"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST through the tap: got %d %v, want 200 and a charge", resp.StatusCode, err)
		}
		return c.ID
	}
	hidden := charge(map[string]string{"Connection": "Idempotency-Key", "Idempotency-Key": "k1"})
	plain := charge(map[string]string{"Idempotency-Key": "k2"})
	stripe.mu.Lock()
	if n := len(stripe.keys); n != 1 || stripe.keys["k2"] == nil {
		t.Errorf("keys the API saw: got %d, want only k2", n)
	}
	stripe.mu.Unlock()
	var effects struct {
		Effects []struct {
			EffectID       string `json:"effect_id"`
			IdempotencyKey string `json:"idempotency_key"`
		} `json:"effects"`
	}
	getJSON(t, srv.url+"/api/v1/effects?provider=stripe-test", &effects)
	keys := map[string]string{}
	for _, e := range effects.Effects {
		keys[e.EffectID] = e.IdempotencyKey
	}
	if k, ok := keys[hidden]; len(keys) != 2 || !ok || k != "" || keys[plain] != "k2" {
		t.Errorf("effects' keys: got %v, want %s without a key and %s with k2", keys, hidden, plain)
	}
}
