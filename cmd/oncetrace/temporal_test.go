package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/temporal/devserver"
)

// TestServeFollowsTemporal is issue 26's acceptance for serve --temporal,
// with the real binary and a real dev server: a workflow started after
// serve appears while its activity blocks and is complete once it closes;
// while the cluster is stopped /healthz says it is unreachable, and after
// it comes back (its state kept in --db-filename) a run open across the
// restart and one started after it both end complete, and what was stored
// before is still there.
func TestServeFollowsTemporal(t *testing.T) {
	srv := devserver.StartServer(t, devserver.Options{Persist: true})
	g := &devserver.Gate{}
	c := startBlockingWorker(t, srv.HostPort, g)
	base, logText, _ := startServeOn(t, filepath.Join(t.TempDir(), "oncetrace.db"),
		"--temporal", srv.HostPort+"/default", "--temporal-poll-interval", "200ms")

	first := startBlockingWorkflow(t, c, "invoice-1")
	waitExecutionStatus(t, base, first, "running", logText)
	h := followHealth(t, base)
	if h["state"] != "following" || h["target"] != srv.HostPort+"/default" || h["runs_followed"] != 1.0 {
		t.Errorf("/healthz follow while invoice-1 runs: got %v, want following %s/default with 1 run followed", h, srv.HostPort)
	}
	g.Release("invoice-1")
	waitExecutionStatus(t, base, first, "completed", logText)
	checkFollowedActivity(t, base, first)

	across := startBlockingWorkflow(t, c, "invoice-across")
	waitExecutionStatus(t, base, across, "running", logText)
	srv.Stop()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		h = followHealth(t, base)
		if h["state"] == "unreachable" && h["errors"].(float64) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz follow with the cluster stopped: got %v, want unreachable with errors", h)
		}
	}
	if err := srv.Restart(context.Background()); err != nil {
		t.Fatalf("restart the dev server: %v", err)
	}
	after := startBlockingWorkflow(t, c, "invoice-after")
	waitExecutionStatus(t, base, after, "running", logText)
	g.Release("invoice-across")
	g.Release("invoice-after")
	waitExecutionStatus(t, base, across, "completed", logText)
	waitExecutionStatus(t, base, after, "completed", logText)
	waitExecutionStatus(t, base, first, "completed", logText)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		h = followHealth(t, base)
		if h["state"] == "following" && h["lag_seconds"].(float64) < 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz follow after the restart: got %v, want following with a lag under 10 s", h)
		}
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if want := `oncetrace_follow_up{feed="temporal",target="` + srv.HostPort + `/default"} 1`; !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics: want a line %q", want)
	}
}

const blockingQueue = "oncetrace-serve-temporal-test"

// startBlockingWorker runs a worker of InvoiceWorkflow whose activity
// Block waits for g (devserver's blocking worker).
func startBlockingWorker(t *testing.T, hostPort string, g *devserver.Gate) *devserver.BlockingWorker {
	return devserver.StartBlockingWorker(t, hostPort, "InvoiceWorkflow", blockingQueue, g)
}

// startBlockingWorkflow starts one and returns its oncetrace execution id,
// WORKFLOW_ID/RUN_ID.
func startBlockingWorkflow(t *testing.T, w *devserver.BlockingWorker, id string) string {
	return w.Start(t, id)
}

// waitExecutionStatus waits until the server shows the execution with the
// status, named after the workflow type.
// checkFollowedActivity: the followed run's history made its activity a
// step (temporal.MapHistory), Block, with one attempt that ended ok on the
// test's worker and is recognised as Temporal's.
func checkFollowedActivity(t *testing.T, base, id string) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/execution?execution_id=" + url.QueryEscape(id))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Steps []struct {
			Tool     string `json:"tool"`
			Attempts []struct {
				Outcome      string `json:"outcome"`
				Worker       string `json:"worker"`
				RecognisedBy string `json:"recognised_by"`
			} `json:"attempts"`
		} `json:"steps"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if len(body.Steps) != 1 || body.Steps[0].Tool != "Block" || len(body.Steps[0].Attempts) != 1 ||
		body.Steps[0].Attempts[0].Outcome != "ok" || body.Steps[0].Attempts[0].Worker == "" || body.Steps[0].Attempts[0].RecognisedBy != "temporal" {
		t.Errorf("execution %s: got steps %+v, want its activity Block with one attempt, ok, on its worker, recognised_by temporal", id, body.Steps)
	}
}

func waitExecutionStatus(t *testing.T, base, id, want string, logText func() string) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(base + "/api/v1/execution?execution_id=" + url.QueryEscape(id))
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Execution struct {
				Name   string `json:"name"`
				Status string `json:"status"`
			} `json:"execution"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusNotFound:
			got = "(absent)"
			continue
		case resp.StatusCode != http.StatusOK || err != nil:
			t.Fatalf("GET execution %s: got %d (%v)", id, resp.StatusCode, err)
		}
		got = body.Execution.Status
		if got == want {
			if body.Execution.Name != "InvoiceWorkflow" {
				t.Errorf("execution %s: got name %q, want the workflow type InvoiceWorkflow", id, body.Execution.Name)
			}
			return
		}
	}
	t.Fatalf("execution %s: got status %s after 60 s, want %s\n%s", id, got, want, logText())
}

// followHealth is the one entry of /healthz's follow.
func followHealth(t *testing.T, base string) map[string]any {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string           `json:"status"`
		Follow []map[string]any `json:"follow"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || body.Status != "ok" || len(body.Follow) != 1 {
		t.Fatalf("/healthz: got %d %q with follow %v, want 200 ok with one target", resp.StatusCode, body.Status, body.Follow)
	}
	return body.Follow[0]
}

// TestServeTemporalFlagMistakes: a wrong --temporal flag fails the start
// with an error naming it, before anything listens.
func TestServeTemporalFlagMistakes(t *testing.T) {
	db := filepath.Join(t.TempDir(), "x.db")
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--temporal", "127.0.0.1"}, "--temporal \"127.0.0.1\": want HOST:PORT[/NAMESPACE]"},
		{[]string{"--temporal", "127.0.0.1:7233/"}, "the namespace after / is empty"},
		{[]string{"--temporal", "127.0.0.1:7233", "--temporal", "127.0.0.1:7233/default"}, "\"127.0.0.1:7233/default\": given twice"},
		{[]string{"--temporal-tls-ca-path", "ca.pem"}, "--temporal-tls-ca-path: needs --temporal"},
		{[]string{"--temporal", "127.0.0.1:7233", "--temporal-tls-cert-path", "c.pem"}, "give both or neither"},
		{[]string{"--temporal", "127.0.0.1:7233", "--temporal-tls-ca-path", filepath.Join(t.TempDir(), "absent.pem")}, "--temporal-tls-ca-path: open"},
		{[]string{"--temporal", "127.0.0.1:7233", "--temporal-tls=false", "--temporal-tls-server-name", "x"}, "--temporal-tls=false with TLS options"},
		{[]string{"--temporal", "127.0.0.1:7233", "--temporal-max-runs", "0"}, "--temporal-max-runs: 0 is outside 1 to 10000"},
		{[]string{"--temporal", "127.0.0.1:7233", "--temporal-poll-interval", "1ms"}, "--temporal-poll-interval: 1ms is outside 100ms to 1h"},
	} {
		_, errOut, code := runCLI(t, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.wantErr) {
			t.Errorf("serve %s: got exit %d and %q, want a failure saying %q", strings.Join(tc.args, " "), code, errOut, tc.wantErr)
		}
	}
}

// TestTemporalTLSDefaults: as in Temporal's CLI, an API key or a TLS
// option turns TLS on unless --temporal-tls=false; nothing turns it on
// by itself.
func TestTemporalTLSDefaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags temporalFlags
		tls   bool
	}{
		{"plain", temporalFlags{}, false},
		{"api key", temporalFlags{apiKey: "k"}, true},
		{"api key, tls off", temporalFlags{apiKey: "k", tls: optionalBool{set: true}}, false},
		{"server name", temporalFlags{serverName: "temporal.internal"}, true},
		{"tls asked for", temporalFlags{tls: optionalBool{set: true, value: true}}, true},
	} {
		f := tc.flags
		f.targets, f.lookback, f.pollInterval, f.maxRuns = []string{"127.0.0.1:7233"}, time.Hour, time.Second, 1
		targets, err := f.config()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := targets[0].TLS != nil; got != tc.tls {
			t.Errorf("%s: got TLS %v, want %v", tc.name, got, tc.tls)
		}
		if tc.flags.serverName != "" && targets[0].TLS.ServerName != tc.flags.serverName {
			t.Errorf("%s: got server name %q, want %q", tc.name, targets[0].TLS.ServerName, tc.flags.serverName)
		}
		if targets[0].APIKey != tc.flags.apiKey {
			t.Errorf("%s: got API key %q, want %q", tc.name, targets[0].APIKey, tc.flags.apiKey)
		}
	}
}

// TestServeWithAnAbsentCluster: a cluster nobody answers at delays
// nothing: serve starts, takes events and stays healthy, and /healthz
// says the target is unreachable, with errors counted, no poll and a
// growing lag. No Temporal server is needed.
func TestServeWithAnAbsentCluster(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	absent := ln.Addr().String()
	ln.Close() // nothing listens there now
	base, _, _ := startServeOn(t, filepath.Join(t.TempDir(), "oncetrace.db"), "--temporal", absent)
	resp, err := http.Post(base+"/api/v1/events", "application/json", strings.NewReader(secondEffect))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST /api/v1/events with the cluster absent: got %d, want 200", resp.StatusCode)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		h := followHealth(t, base)
		if h["state"] == "unreachable" && h["errors"].(float64) > 0 && h["last_poll"] == nil && h["lag_seconds"].(float64) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz follow with nothing at %s: got %v, want unreachable, errors, no last_poll", absent, h)
		}
	}
}
