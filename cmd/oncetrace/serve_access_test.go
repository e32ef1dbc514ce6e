package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/web"
)

// TestServeExposureProtectsReads: the flags of a server on the network
// with only an ingest token give the configuration under which reads need
// that token (web's TestAttackReadsOfAnExposedServer attacks it); on
// loopback reads stay open unless --read-token says otherwise.
func TestServeExposureProtectsReads(t *testing.T) {
	t.Setenv("ONCETRACE_READ_TOKEN", "")
	tests := []struct {
		args          []string
		env           string
		wantExposed   bool
		wantReadToken string // the token reads need; "" open
	}{
		{[]string{"--addr", "0.0.0.0:8080", "--ingest-token", "in"}, "", true, "in"},
		{[]string{"--addr", ":8080", "--ingest-token", "in"}, "", true, "in"},
		{[]string{"--addr", "192.0.2.10:8080", "--ingest-token", "in", "--read-token", "rd"}, "", true, "rd"},
		{[]string{"--addr", "[::]:8080", "--ingest-token", "in"}, "rd-env", true, "rd-env"},
		{[]string{"--addr", "127.0.0.1:8080", "--ingest-token", "in"}, "", false, ""},
		{[]string{"--addr", "localhost:8080", "--ingest-token", "in"}, "", false, ""},
		{[]string{"--addr", "[::1]:8080", "--ingest-token", "in"}, "", false, ""},
		{[]string{"--addr", "127.0.0.1:8080", "--read-token", "rd"}, "", false, "rd"},
		{[]string{"--addr", "0.0.0.0:8080", "--insecure"}, "", true, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " ")+" env="+tt.env, func(t *testing.T) {
			t.Setenv("ONCETRACE_READ_TOKEN", tt.env)
			c, err := serveFlags(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.auth(); got.Exposed != tt.wantExposed {
				t.Errorf("Exposed: got %v, want %v", got.Exposed, tt.wantExposed)
			}
			if got := c.effectiveReadToken(); got != tt.wantReadToken {
				t.Errorf("read token: got %q, want %q", got, tt.wantReadToken)
			}
			// The configuration does what it says on a real server.
			ts := serverWith(t, c)
			status := getStatus(t, ts.URL+"/api/v1/executions", "")
			if tt.wantReadToken == "" && status != http.StatusOK {
				t.Errorf("GET /api/v1/executions without a token: got %d, want 200 (open)", status)
			}
			if tt.wantReadToken != "" {
				if status != http.StatusUnauthorized {
					t.Errorf("GET /api/v1/executions without a token: got %d, want 401", status)
				}
				if got := getStatus(t, ts.URL+"/api/v1/executions", tt.wantReadToken); got != http.StatusOK {
					t.Errorf("GET /api/v1/executions with %q: got %d, want 200", tt.wantReadToken, got)
				}
			}
		})
	}
	if _, err := serveFlags([]string{"--addr", "0.0.0.0:8080", "--read-token", "rd"}); err == nil || !strings.Contains(err.Error(), "without an ingest token") {
		t.Errorf("a read token alone on the network: got %v, want the refusal (writes would be open)", err)
	}
	for _, bad := range [][]string{{"--alert-webhook", "slack.example.com/hook"}, {"--public-url", "ftp://x"}, {"--session-ttl", "0s"}} {
		if _, err := serveFlags(bad); err == nil {
			t.Errorf("serve %v: got no error, want one", bad)
		}
	}
}

// serverWith builds the web server as runServe does from c, on 127.0.0.1.
func serverWith(t *testing.T, c serveConfig) *httptest.Server {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(db, writer.DefaultConfig)
	srv := web.New(web.Config{DB: db, Writer: w, Limits: c.limits, Analysis: c.analysis, IngestToken: c.token, Auth: c.auth()})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		w.Close()
		db.Close()
	})
	return ts
}

func getStatus(t *testing.T, u, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestServeInsecureWarns: --insecure on the network prints what it leaves
// open; on loopback it says it changes nothing.
func TestServeInsecureWarns(t *testing.T) {
	var stderr, logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	c, err := serveFlags([]string{"--addr", "0.0.0.0:8080", "--insecure"})
	if err != nil {
		t.Fatal(err)
	}
	warnInsecure(c, &stderr, logger)
	for _, want := range []string{"WARNING: --insecure", "can WRITE traces", "can READ every trace", "127.0.0.1"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr: got %q, want %q", stderr.String(), want)
		}
	}
	if !strings.Contains(logs.String(), "INSECURE") {
		t.Errorf("log: got %q, want the warning there too", logs.String())
	}

	stderr.Reset()
	logs.Reset()
	c, _ = serveFlags([]string{"--addr", "127.0.0.1:8080", "--insecure"})
	warnInsecure(c, &stderr, logger)
	if stderr.Len() != 0 || !strings.Contains(logs.String(), "changes nothing") {
		t.Errorf("--insecure on loopback: stderr %q, log %q; want no banner and a note", stderr.String(), logs.String())
	}
	stderr.Reset()
	c, _ = serveFlags([]string{"--addr", "0.0.0.0:8080", "--ingest-token", "in"})
	warnInsecure(c, &stderr, logger)
	if stderr.Len() != 0 {
		t.Errorf("without --insecure: stderr %q, want nothing", stderr.String())
	}
}

// TestServeInsecureBannerFromTheBinary: the real binary prints the banner
// before it listens (on a port this test holds, so nothing is exposed).
func TestServeInsecureBannerFromTheBinary(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	_, errOut, _ := runCLI(t, "serve", "--addr", fmt.Sprintf("0.0.0.0:%d", port), "--insecure", "--db", filepath.Join(t.TempDir(), "x.db"))
	if !strings.Contains(errOut, "WARNING: --insecure") || !strings.Contains(errOut, "can READ every trace") {
		t.Errorf("stderr: got %q, want the --insecure banner", errOut)
	}
}

// TestServeAlertsAndMetrics runs the real binary with --alert-webhook to a
// local receiver that fails the first two tries, and --read-token: one
// duplicate email gives one alert (after two retries) linking to the
// execution, and /metrics, behind the read token, counts it.
func TestServeAlertsAndMetrics(t *testing.T) {
	var mu sync.Mutex
	var got []map[string]any
	tries := 0
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		tries++
		if tries <= 2 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		var m map[string]any
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("alert body %q: %v", body, err)
		}
		got = append(got, m)
	}))
	defer receiver.Close()

	dir := t.TempDir()
	logPath := filepath.Join(dir, "serve.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(cliBinary, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "serve.db"),
		"--ingest-token", "in", "--read-token", "rd", "--alert-webhook", receiver.URL, "--public-url", "https://oncetrace.example.com/")
	cmd.Env = cliEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM) // only the process this test started
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}()
	logText := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	urlRE := regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+)`)
	var base string
	for deadline := time.Now().Add(30 * time.Second); base == ""; time.Sleep(20 * time.Millisecond) {
		if m := urlRE.FindStringSubmatch(logText()); m != nil {
			base = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve logged no url= within 30s:\n%s", logText())
		}
	}

	events := `{"type":"attempt","execution_id":"exec_alert","step_id":"step-4","attempt":1,"tool":"send_invoice_email","effect":"write","provider":"mail-api","idempotency_key":"ik_alert","started_at":"2026-06-30T14:02:11.200Z","ended_at":"2026-06-30T14:02:12.200Z","outcome":"ok"}
{"type":"effect","provider":"mail-api","effect_id":"msg_1","idempotency_key":"ik_alert","execution_id":"exec_alert","step_id":"step-4","at":"2026-06-30T14:02:11.350Z"}
{"type":"effect","provider":"mail-api","effect_id":"msg_2","idempotency_key":"ik_alert","execution_id":"exec_alert","step_id":"step-4","at":"2026-06-30T14:02:12.350Z"}
`
	for range 2 { // the second time: duplicates, no new finding
		req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/events", strings.NewReader(events))
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("Authorization", "Bearer in")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /api/v1/events: got %d, want 200", resp.StatusCode)
		}
	}
	// The default backoff: 1 s, then 2 s.
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // room for a second alert, which must not come
	mu.Lock()
	if len(got) != 1 || tries != 3 {
		t.Fatalf("alerts: got %d after %d tries, want 1 after 3\n%s", len(got), tries, logText())
	}
	msg := got[0]
	mu.Unlock()
	if msg["execution_url"] != "https://oncetrace.example.com/executions/exec_alert" {
		t.Errorf("execution_url: got %v", msg["execution_url"])
	}
	if text, _ := msg["text"].(string); !strings.Contains(text, "duplicate_effect") || !strings.Contains(text, "<https://oncetrace.example.com/executions/exec_alert|exec_alert>") {
		t.Errorf("text: got %q, want the rule and a Slack link to the execution", text)
	}
	if f, _ := msg["finding"].(map[string]any); f["rule"] != "duplicate_effect" || f["severity"] != "critical" || f["execution_id"] != "exec_alert" {
		t.Errorf("finding: got %v", msg["finding"])
	}

	// audit --server reads the findings with the read token, and cannot without it.
	if out, errOut, code := runCLI(t, "audit", "--server", base, "--read-token", "rd"); code != 1 || !strings.Contains(out, "duplicate_effect") {
		t.Errorf("audit --server with the read token: got exit %d, %q %q; want 1 and the finding", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, "audit", "--server", base); code != 2 || !strings.Contains(errOut, "401") {
		t.Errorf("audit --server without the read token: got exit %d, %q; want 2 and the 401", code, errOut)
	}
	if status := getStatus(t, base+"/metrics", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /metrics without the read token: got %d, want 401", status)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer rd")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`oncetrace_alerts_total{result="sent"} 1`,
		`oncetrace_alert_retries_total 2`,
		`oncetrace_alerts_total{result="dropped"} 0`,
		`oncetrace_ingest_events_total{api="native",result="accepted"} 3`,
		`oncetrace_ingest_events_total{api="native",result="duplicate"} 3`,
		`oncetrace_findings{rule="duplicate_effect",severity="critical"} 1`,
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics: no line %q", want)
		}
	}
}
