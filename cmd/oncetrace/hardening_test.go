package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The attacks of issue 11 that a hostile client or a rebound page makes on
// a running server, against the real binary: foreign Host headers, slow
// headers and bodies, idle keep-alive connections by the thousand.

// TestServeListenFlags: the defaults, the environment, the flag replacing
// it, and the mistakes refused at start-up.
func TestServeListenFlags(t *testing.T) {
	t.Setenv("ONCETRACE_ALLOWED_HOSTS", "")
	t.Setenv("ONCETRACE_ADDR", "127.0.0.1:8080") // a developer's own settings must not change the defaults seen
	t.Setenv("ONCETRACE_OTLP_ADDR", "")
	c, err := serveFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"127.0.0.1", "::1", "localhost"}; !slices.Equal(c.allowedHosts, want) {
		t.Errorf("default allowed hosts: got %v, want %v", c.allowedHosts, want)
	}
	l := c.listen
	if l.readHeaderTimeout != 10*time.Second || l.readTimeout != 30*time.Second || l.writeTimeout != time.Minute ||
		l.idleTimeout != 30*time.Second || l.maxConnsPerIP != 64 {
		t.Errorf("default timeouts and cap: got %+v, want 10s, 30s, 1m, 30s and 64", l)
	}
	srv := l.httpServer(http.NotFoundHandler())
	if srv.ReadHeaderTimeout != 10*time.Second || srv.ReadTimeout != 30*time.Second || srv.WriteTimeout != time.Minute || srv.IdleTimeout != 30*time.Second {
		t.Errorf("http.Server: got %v %v %v %v, want every timeout set", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}

	c, err = serveFlags([]string{"--allowed-hosts", "oncetrace.example.com, ops.example.com", "--allowed-hosts", "[::1]:8080",
		"--otlp-addr", "127.0.0.2:4318", "--read-timeout", "5s", "--max-conns-per-ip", "0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"oncetrace.example.com", "ops.example.com", "[::1]:8080", "127.0.0.2", "localhost"} {
		if !slices.Contains(c.allowedHosts, h) {
			t.Errorf("--allowed-hosts and --otlp-addr: got %v, want %s among them", c.allowedHosts, h)
		}
	}
	if c.listen.readTimeout != 5*time.Second || c.listen.maxConnsPerIP != 0 {
		t.Errorf("--read-timeout 5s --max-conns-per-ip 0: got %v and %d", c.listen.readTimeout, c.listen.maxConnsPerIP)
	}
	if newConnLimiter(0, 0, "", nil) != nil {
		t.Error("--max-conns-per-ip 0: got a limiter, want none")
	}

	t.Setenv("ONCETRACE_ALLOWED_HOSTS", "env.example.com")
	if c, err = serveFlags(nil); err != nil || !slices.Contains(c.allowedHosts, "env.example.com") {
		t.Errorf("ONCETRACE_ALLOWED_HOSTS: got %v %v, want env.example.com allowed", c.allowedHosts, err)
	}
	if c, err = serveFlags([]string{"--allowed-hosts", "flag.example.com"}); err != nil || slices.Contains(c.allowedHosts, "env.example.com") {
		t.Errorf("--allowed-hosts with ONCETRACE_ALLOWED_HOSTS: got %v %v, want the flag to replace the environment", c.allowedHosts, err)
	}
	if c, err = serveFlags([]string{"--allowed-hosts", "*"}); err != nil || !slices.Equal(c.allowedHosts, []string{"*"}) {
		t.Errorf("--allowed-hosts '*': got %v %v, want any host", c.allowedHosts, err)
	}

	// A listener on every interface answers to the machine's names.
	c, err = serveFlags([]string{"--addr", "0.0.0.0:8080", "--insecure"})
	if err != nil {
		t.Fatal(err)
	}
	name, _ := os.Hostname()
	for _, h := range []string{"127.0.0.1", "localhost", name} {
		if !slices.Contains(c.allowedHosts, h) {
			t.Errorf("--addr 0.0.0.0:8080: got %v, want %s among them", c.allowedHosts, h)
		}
	}

	for _, tc := range []struct{ args []string }{
		{[]string{"--allowed-hosts", "https://oncetrace.example.com"}},
		{[]string{"--allowed-hosts", "*.example.com"}},
		{[]string{"--allowed-hosts", "example.com/ui"}},
		{[]string{"--read-timeout", "-1s"}},
		{[]string{"--idle-timeout", "-5s"}},
		{[]string{"--max-conns-per-ip", "-1"}},
	} {
		_, err := serveFlags(tc.args)
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(tc.args[0], "-")) {
			t.Errorf("serve %v: got %v, want an error naming %s", tc.args, err, tc.args[0])
		}
	}
}

// rawRequest sends req on a new connection to addr with the given Host and
// returns the status code, or 0 with the error.
func rawStatus(addr, method, path, host string, header map[string]string, body string) (int, error) {
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Host = host
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := demoHTTP.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestServeRefusesForeignHosts: DNS rebinding against the real server.
// Host attacker.test (and Origin http://attacker.test, as a rebound page
// sends) gets 421 on reads, writes, the WebSocket upgrade and the OTLP
// port; the loopback names and --allowed-hosts pass.
func TestServeRefusesForeignHosts(t *testing.T) {
	otlpAddr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	s := startDemoServer(t, filepath.Join(t.TempDir(), "hosts.db"), "hosts.log", "--otlp-addr", otlpAddr, "--allowed-hosts", "oncetrace.example.com")
	addr := strings.TrimPrefix(s.url, "http://")
	port := strings.Split(addr, ":")[1]
	event := `{"type":"execution","execution_id":"exec_rebound","name":"rebound"}`
	json := map[string]string{"Content-Type": "application/json"}
	type request struct {
		addr, method, path string
		header             map[string]string
		body               string
	}
	requests := []request{
		{addr, http.MethodGet, "/", nil, ""},
		{addr, http.MethodGet, "/api/v1/executions", nil, ""},
		{addr, http.MethodGet, "/api/v1/effects", nil, ""},
		{addr, http.MethodGet, "/sandbox/log", nil, ""},
		{addr, http.MethodGet, "/outbox", nil, ""},
		{addr, http.MethodGet, "/healthz", nil, ""},
		{addr, http.MethodPost, "/api/v1/events", json, event},
		{addr, http.MethodPost, "/sandbox/mail/v1/send", json, `{"to":"jordan@acme.dev","subject":"hi","body":"rebound"}`},
		{otlpAddr, http.MethodPost, "/v1/traces", json, `{}`},
	}
	for _, host := range []string{"attacker.test", "attacker.test:" + port, "oncetrace.example.com.attacker.test"} {
		for _, r := range requests {
			h := map[string]string{"Origin": "http://" + host}
			for k, v := range r.header {
				h[k] = v
			}
			got, err := rawStatus(r.addr, r.method, r.path, host, h, r.body)
			if err != nil || got != http.StatusMisdirectedRequest {
				t.Errorf("%s %s%s with Host %q: got %d %v, want 421", r.method, r.addr, r.path, host, got, err)
			}
		}
		ws := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
		conn, resp, err := ws.Dial("ws://"+addr+"/api/v1/live", http.Header{"Host": {host}, "Origin": {"http://" + host}})
		if conn != nil {
			conn.Close()
		}
		if resp == nil || resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("WebSocket /api/v1/live with Host %q: got %v %v, want 421", host, resp, err)
		}
	}
	for _, host := range []string{addr, "localhost:" + port, "[::1]:" + port, "oncetrace.example.com", "oncetrace.example.com:443"} {
		for _, r := range requests[:6] {
			if got, err := rawStatus(r.addr, r.method, r.path, host, nil, ""); err != nil || got != http.StatusOK {
				t.Errorf("GET %s with Host %q: got %d %v, want 200", r.path, host, got, err)
			}
		}
		ws := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
		conn, resp, err := ws.Dial("ws://"+addr+"/api/v1/live", http.Header{"Host": {host}})
		if err != nil {
			t.Errorf("WebSocket /api/v1/live with Host %q: got %v %v, want 101", host, resp, err)
		} else {
			conn.Close()
		}
	}
	var list struct{ Executions []any }
	getJSON(t, s.url+"/api/v1/executions", &list)
	if len(list.Executions) != 0 {
		t.Errorf("executions after the rebound requests: got %v, want none", list.Executions)
	}
	var log struct{ Log []any }
	getJSON(t, s.url+"/sandbox/log", &log)
	if len(log.Log) != 0 {
		t.Errorf("sandbox log after the rebound requests: got %v, want nothing sent", log.Log)
	}
	s.stop(t)
}

// readClosed waits for the server to answer or close conn and returns
// what it read and when, from start.
func readClosed(conn net.Conn, start time.Time, limit time.Duration) (answer string, after time.Duration, err error) {
	_ = conn.SetReadDeadline(start.Add(limit))
	data, err := io.ReadAll(conn)
	if err != nil && isReset(err) {
		err = nil
	}
	return string(data), time.Since(start), err
}

func isReset(err error) bool {
	return strings.Contains(err.Error(), "connection reset")
}

// TestServeCutsSlowClients: a header sent a byte at a time is cut off at
// --read-header-timeout, a body sent a byte at a time at --read-timeout,
// long before the 60 s the attack held them; the slow body stores nothing.
func TestServeCutsSlowClients(t *testing.T) {
	s := startDemoServer(t, filepath.Join(t.TempDir(), "slow.db"), "slow.log", "--read-header-timeout", "1s", "--read-timeout", "2s")
	addr := strings.TrimPrefix(s.url, "http://")

	// drip writes prefix, then one byte of drip every 100 ms until the
	// server gives up on it.
	drip := func(name, prefix string, drip byte) (string, time.Duration) {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		if _, err := conn.Write([]byte(prefix)); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			for {
				select {
				case <-done:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := conn.Write([]byte{drip}); err != nil {
					return
				}
			}
		}()
		answer, after, err := readClosed(conn, start, 20*time.Second)
		close(done)
		if err != nil {
			t.Fatalf("%s: the server still held the connection after %v: %v", name, after, err)
		}
		return answer, after
	}

	_, after := drip("slow header", "GET /api/v1/executions HTTP/1.1\r\nHost: "+addr+"\r\nX-Slow: ", 'a')
	t.Logf("slow header: closed after %v", after.Round(time.Millisecond))
	if after < 900*time.Millisecond || after > 4*time.Second {
		t.Errorf("slow header: closed after %v, want about --read-header-timeout (1s)", after)
	}

	body := `{"type":"execution","execution_id":"exec_slow","name":"` + strings.Repeat("s", 100)
	answer, after := drip("slow body", "POST /api/v1/events HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"+body, 's')
	status := ""
	if line, _, ok := strings.Cut(answer, "\r\n"); ok {
		status = line
	}
	t.Logf("slow body: %q after %v", status, after.Round(time.Millisecond))
	if after < 1900*time.Millisecond || after > 5*time.Second {
		t.Errorf("slow body: answered or closed after %v, want about --read-timeout (2s)", after)
	}
	if status != "" && !strings.Contains(status, " 4") {
		t.Errorf("slow body: got %q, want a 4xx or the connection closed", status)
	}
	if got, err := rawStatus(addr, http.MethodGet, "/api/v1/executions/exec_slow", addr, nil, ""); err != nil || got != http.StatusNotFound {
		t.Errorf("the slow body's execution: got %d %v, want 404 (nothing stored)", got, err)
	}
	s.stop(t)
}

// procFDs is how many file descriptors process pid holds.
func procFDs(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	return len(entries)
}

// procRSS is process pid's resident set in MiB.
func procRSS(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return float64(kb) / 1024
		}
	}
	return -1
}

// openKeepAlive opens n connections to addr from localIP, sends one
// keep-alive GET /healthz on each, and returns them (the caller closes
// them). Connections the server closed at once are returned too.
func openKeepAlive(t *testing.T, addr, localIP string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	work := make(chan int)
	for range 50 {
		wg.Go(func() {
			d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(localIP)}}
			for i := range work {
				c, err := d.Dial("tcp", addr)
				if err == nil {
					_, err = c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"))
					if err != nil && (isReset(err) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "broken pipe")) {
						err = nil // refused over the cap
					}
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				conns[i] = c
				mu.Unlock()
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("opening %d connections: %v", n, firstErr)
	}
	return conns
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

// answered reports whether conn got an HTTP answer to its request (it is
// open), or was closed unanswered.
func answered(conn net.Conn) bool {
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitFDs polls until process pid holds at most want descriptors.
func waitFDs(t *testing.T, pid, want int, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := procFDs(t, pid)
		if got <= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serverConns is how many TCP connections the server listening on addr
// holds open on its side, as the kernel lists them (/proc/net/tcp):
// accepted (a socket with an inode: a descriptor holds it), established
// or closed by the client but not yet by the server (CLOSE_WAIT). One the
// server closed is not counted, nor one still in the listen backlog.
func serverConns(t *testing.T, addr string) int {
	t.Helper()
	_, portText, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	local := fmt.Sprintf(":%04X", port)
	n := 0
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 10 || !strings.HasSuffix(f[1], local) || f[9] == "0" {
			continue
		}
		switch f[3] {
		case "01", "08": // ESTABLISHED, CLOSE_WAIT
			n++
		}
	}
	return n
}

// waitServerConns polls until the server on addr holds at most want
// connections, and returns how many it holds when that is true or within
// has passed.
func waitServerConns(t *testing.T, addr string, want int, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := serverConns(t, addr)
		if got <= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServeIdleConnections: the attack's 5,000 idle keep-alive connections
// from one address. With the default cap the server holds 64 of them and
// closes the rest at once; without it, it holds them all. Either way it
// closes every one it holds once it has been idle for --idle-timeout. The
// test asserts what holds whatever the timing: the server never holds
// more than the cap at once, answers at least the cap, and holds none
// after the idle timeout and a margin, counted from the last connection
// opened (polled, not slept).
func TestServeIdleConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 5,500 connections")
	}
	const idle, margin = 2 * time.Second, 3 * time.Second
	for _, tc := range []struct {
		name  string
		flags []string
		conns int
		held  int // the most the server may hold
	}{
		{"default cap", []string{"--idle-timeout", idle.String()}, 5000, defaultMaxConnsPerIP},
		{"no cap", []string{"--idle-timeout", idle.String(), "--max-conns-per-ip", "0"}, 500, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startDemoServer(t, filepath.Join(t.TempDir(), "idle.db"), "idle.log", tc.flags...)
			addr := strings.TrimPrefix(s.url, "http://")
			pid := s.cmd.Process.Pid
			// The health check's connection would count against the cap:
			// closed here, and by the server within the idle timeout at
			// the latest.
			demoHTTP.CloseIdleConnections()
			if got := waitServerConns(t, addr, 0, idle+margin); got != 0 {
				t.Fatalf("before the test: the server holds %d connections %v after the client closed its own, want 0", got, idle+margin)
			}
			base, baseRSS := procFDs(t, pid), procRSS(pid)
			start := time.Now()
			conns := openKeepAlive(t, addr, "127.0.0.1", tc.conns)
			defer closeAll(conns)
			opened := time.Now()
			// No connection is opened from here on, so the server can only
			// hold fewer than now. Connections over the cap still queued
			// are accepted and closed one by one for a few milliseconds
			// more; each is counted while in that window, so the count is
			// polled down to the cap briefly, well inside the idle timeout.
			holding := waitServerConns(t, addr, tc.held, idle/4)
			fds, rss := procFDs(t, pid), procRSS(pid)
			open := 0
			for _, c := range conns {
				if answered(c) {
					open++
				}
			}
			t.Logf("%d connections opened in %v: %d answered, %d held by the server; server fds %d -> %d, RSS %.1f -> %.1f MiB",
				tc.conns, opened.Sub(start).Round(time.Millisecond), open, holding, base, fds, baseRSS, rss)
			if holding > tc.held || fds > base+tc.held+8 {
				t.Errorf("held: got %d connections, %d server fds, want at most %d (+%d base fds)", holding, fds, tc.held, base)
			}
			if open < tc.held {
				t.Errorf("answered: got %d, want at least %d: the cap must not refuse what it allows", open, tc.held)
			}
			// Every connection answered by the time the last was opened
			// has been idle for the timeout by opened+idle.
			got := waitServerConns(t, addr, 0, time.Until(opened.Add(idle+margin)))
			if got != 0 {
				t.Errorf("%v after the last connection opened (--idle-timeout %v): the server holds %d connections, want 0", idle+margin, idle, got)
			}
			// A few more fds than at the start are the database's reader
			// connections the requests opened; the thousands are gone.
			fdsAfter := waitFDs(t, pid, base+8, margin)
			t.Logf("after the idle timeout (%v since the first): server fds %d, RSS %.1f MiB", time.Since(start).Round(time.Millisecond), fdsAfter, procRSS(pid))
			if fdsAfter > base+8 {
				t.Errorf("after --idle-timeout %v: server holds %d fds, want about %d", idle, fdsAfter, base)
			}
			s.stop(t)
		})
	}
}

// TestServeCapsConnectionsPerIP: at --max-conns-per-ip the next
// connection from that address is closed unanswered, on either listener;
// another address is not affected; a connection closed gives its place.
func TestServeCapsConnectionsPerIP(t *testing.T) {
	otlpAddr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	s := startDemoServer(t, filepath.Join(t.TempDir(), "cap.db"), "cap.log", "--max-conns-per-ip", "8", "--otlp-addr", otlpAddr)
	addr := strings.TrimPrefix(s.url, "http://")
	demoHTTP.CloseIdleConnections() // the health check's, which would count against the cap
	if got := waitServerConns(t, addr, 0, 10*time.Second); got != 0 {
		t.Fatalf("before the test: the server holds %d connections 10s after the client closed its own, want 0", got)
	}

	held := openKeepAlive(t, addr, "127.0.0.1", 8)
	defer closeAll(held)
	for i, c := range held {
		if !answered(c) {
			t.Fatalf("connection %d of 8: refused, want it answered", i+1)
		}
	}
	over := openKeepAlive(t, addr, "127.0.0.1", 1)
	defer closeAll(over)
	if answered(over[0]) {
		t.Errorf("connection 9 from 127.0.0.1: answered, want it closed")
	}
	overOTLP := openKeepAlive(t, otlpAddr, "127.0.0.1", 1)
	defer closeAll(overOTLP)
	if answered(overOTLP[0]) {
		t.Errorf("connection 9 from 127.0.0.1 on --otlp-addr: answered, want it closed (one count over both listeners)")
	}
	other := openKeepAlive(t, addr, "127.0.0.2", 1)
	defer closeAll(other)
	if !answered(other[0]) {
		t.Errorf("a connection from 127.0.0.2: closed, want it answered (another client)")
	}

	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		again := openKeepAlive(t, addr, "127.0.0.1", 1)
		ok := answered(again[0])
		again[0].Close()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("after closing one of the 8: a new connection from 127.0.0.1 is still refused")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(s.logText(), "over --max-conns-per-ip") {
		t.Errorf("log: got\n%s\nwant the refusals logged", s.logText())
	}
	s.stop(t)
}

// TestServeLiveOutlivesTimeouts: with --read-timeout and --write-timeout
// of 1s, the stream and the WebSocket opened before still deliver an event
// committed 3 s later.
func TestServeLiveOutlivesTimeouts(t *testing.T) {
	s := startDemoServer(t, filepath.Join(t.TempDir(), "live.db"), "live.log", "--read-timeout", "1s", "--write-timeout", "1s")
	resp, err := http.Get(s.url + "/api/v1/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 8)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) != "" {
				lines <- sc.Text()
			}
		}
	}()
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(s.url, "http")+"/api/v1/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	time.Sleep(3 * time.Second) // the fault itself: longer than both timeouts the connections must outlive
	got, err := rawStatus(strings.TrimPrefix(s.url, "http://"), http.MethodPost, "/api/v1/events", strings.TrimPrefix(s.url, "http://"),
		map[string]string{"Content-Type": "application/json"}, `{"type":"execution","execution_id":"exec_late","name":"late"}`)
	if err != nil || got != http.StatusOK {
		t.Fatalf("POST /api/v1/events: got %d %v, want 200", got, err)
	}
	select {
	case line, ok := <-lines:
		if !ok || !strings.Contains(line, "exec_late") {
			t.Errorf("stream after 3s: got %q (open %v), want the event", line, ok)
		}
	case <-time.After(10 * time.Second):
		t.Error("stream: no event within 10s")
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, msg, err := conn.ReadMessage(); err != nil || !strings.Contains(string(msg), "exec_late") {
		t.Errorf("WebSocket after 3s: got %s %v, want the event", msg, err)
	}
	conn.Close()
	resp.Body.Close()
	s.stop(t)
}
