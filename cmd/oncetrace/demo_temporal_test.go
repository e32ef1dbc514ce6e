package main

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/temporal/devserver"
)

// TestDemoTemporal runs `oncetrace demo --temporal` against a real
// Temporal dev server and a real `oncetrace serve`: naive and crash send
// the invoice twice, keyed once, as the demo says and as the sandbox's own
// log counts them.
func TestDemoTemporal(t *testing.T) {
	hostPort, _ := devserver.Start(t)
	srv := startDemoServer(t, filepath.Join(t.TempDir(), "demo.db"), "serve.log")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	demo := exec.CommandContext(ctx, cliBinary, "demo", "--temporal", hostPort+"/default", "--server", srv.url, "--gap", "0s")
	demo.Env = cliEnv()
	started := time.Now()
	out, err := demo.CombinedOutput()
	t.Logf("demo --temporal took %s", time.Since(started).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("oncetrace demo --temporal: got %v, want exit 0\n%s\nserver log:\n%s", err, out, srv.logText())
	}
	want := map[string]string{"naive": "2", "crash": "2", "keyed": "1"}
	line := regexp.MustCompile(`(?m)^demo: temporal (\w+) +(\d+) email\(s\) sent`)
	got := map[string]string{}
	for _, m := range line.FindAllStringSubmatch(string(out), -1) {
		got[m[1]] = m[2]
	}
	for sc, n := range want {
		if got[sc] != n {
			t.Errorf("%s: got %q email(s), want %s\n%s", sc, got[sc], n, out)
		}
	}
	if !strings.Contains(string(out), "was killed (SIGKILL) during the activity") {
		t.Errorf("crash: the output does not say the worker was killed\n%s", out)
	}

	var log struct {
		Log []struct {
			Event   string `json:"event"`
			TraceID string `json:"trace_id"`
		} `json:"log"`
	}
	getJSON(t, srv.url+"/sandbox/log", &log)
	delivered, traces := 0, map[string]bool{}
	for _, l := range log.Log {
		if strings.HasPrefix(l.Event, "delivered") {
			delivered++
			traces[l.TraceID] = true
		}
	}
	if delivered != 5 || len(traces) != 3 || traces[""] {
		t.Errorf("sandbox log: got %d deliveries in traces %v, want 5 (2+2+1) in three traces, each with a traceparent", delivered, traces)
	}
}

// TestDemoTemporalUnknownScenario: a scenario of the local demo is not one
// of the Temporal demo's; the error names the valid ones and exits 2.
func TestDemoTemporalUnknownScenario(t *testing.T) {
	cmd := exec.Command(cliBinary, "demo", "--temporal", "127.0.0.1:1", "--server", "http://127.0.0.1:1", "--scenario", "naive,safe")
	cmd.Env = cliEnv()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("got %v, want exit 2\n%s", err, out)
	}
	if want := `unknown Temporal scenario "safe"; the scenarios are naive, crash, keyed`; !strings.Contains(string(out), want) {
		t.Errorf("got %q, want it to say %q", out, want)
	}
	for _, bad := range []string{"127.0.0.1", "127.0.0.1:7233/", "/default"} {
		cmd := exec.Command(cliBinary, "demo", "--temporal", bad)
		cmd.Env = cliEnv()
		out, err := cmd.CombinedOutput()
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "HOST:PORT[/NAMESPACE]") {
			t.Errorf("--temporal %q: got %v %q, want exit 2 naming HOST:PORT[/NAMESPACE]", bad, err, out)
		}
	}
}
