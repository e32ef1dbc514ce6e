package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// demoServer is one `oncetrace serve` process a demo test started.
type demoServer struct {
	cmd    *exec.Cmd
	url    string
	logs   string
	exited chan error
}

// startDemoServer runs the binary TestMain built as `serve` on a free
// loopback port with dbPath and extra flags, waits for /healthz, and kills
// that process (by its PID) if the test ends with it still running.
func startDemoServer(t *testing.T, dbPath, logName string, extra ...string) *demoServer {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	logs := filepath.Join(t.TempDir(), logName)
	logFile, err := os.Create(logs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cliBinary, append([]string{"serve", "--addr", addr, "--db", dbPath}, extra...)...)
	cmd.Env = cliEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start serve: %v", err)
	}
	s := &demoServer{cmd: cmd, url: "http://" + addr, logs: logs, exited: make(chan error, 1)}
	go func() {
		s.exited <- cmd.Wait()
		logFile.Close()
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL) // only the process this test started
			<-s.exited
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := demoHTTP.Get(s.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case err := <-s.exited:
			s.exited <- err
			t.Fatalf("serve exited before /healthz answered: %v\n%s", err, s.logText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve: /healthz did not answer 200 within 30s\n%s", s.logText())
		}
	}
}

func (s *demoServer) logText() string {
	b, _ := os.ReadFile(s.logs)
	return string(b)
}

// stop sends SIGTERM to the server and waits for a clean exit.
func (s *demoServer) stop(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(s.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatalf("kill -TERM %d: %v", s.cmd.Process.Pid, err)
	}
	select {
	case err := <-s.exited:
		s.exited <- err
		if err != nil {
			t.Errorf("serve after SIGTERM: got %v, want exit 0\n%s", err, s.logText())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve (pid %d) still running 30s after SIGTERM\n%s", s.cmd.Process.Pid, s.logText())
	}
}

// demoHTTP bounds every request of these tests, so that a server that
// accepts and never answers fails the test instead of hanging it.
var demoHTTP = &http.Client{Timeout: 20 * time.Second}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := demoHTTP.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: got %s, want 200", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: decode: %v", url, err)
	}
}

// demoExecution is what the tests read of GET /api/v1/executions/{id}.
type demoExecution struct {
	Execution struct {
		Status string `json:"status"`
	} `json:"execution"`
	Audit struct {
		State string `json:"state"`
	} `json:"audit"`
	Steps []struct {
		StepID   string `json:"step_id"`
		Attempts []struct {
			Attempt      int    `json:"attempt"`
			Outcome      string `json:"outcome"`
			Deduplicated bool   `json:"deduplicated"`
			Args         struct {
				MessageID string `json:"message_id"`
			} `json:"args"`
		} `json:"attempts"`
	} `json:"steps"`
	Effects []struct {
		Provider string `json:"provider"`
		EffectID string `json:"effect_id"`
		State    string `json:"state"`
	} `json:"effects"`
	Gaps []struct {
		Kind    string  `json:"kind"`
		Seconds float64 `json:"seconds"`
	} `json:"gaps"`
	Findings []struct {
		Rule     string `json:"rule"`
		Severity string `json:"severity"`
	} `json:"findings"`
}

func (d demoExecution) critical() []string {
	var rules []string
	for _, f := range d.Findings {
		if f.Severity == "critical" && !slices.Contains(rules, f.Rule) {
			rules = append(rules, f.Rule)
		}
	}
	sort.Strings(rules)
	return rules
}

// hasAttempt reports whether a step has an attempt with that outcome and
// dedupe flag.
func (d demoExecution) hasAttempt(step, outcome string, dedup bool) bool {
	for _, st := range d.Steps {
		if st.StepID != step {
			continue
		}
		for _, a := range st.Attempts {
			if a.Outcome == outcome && a.Deduplicated == dedup {
				return true
			}
		}
	}
	return false
}

func (d demoExecution) attempts() string {
	var parts []string
	for _, st := range d.Steps {
		for _, a := range st.Attempts {
			s := fmt.Sprintf("%s#%d %s", st.StepID, a.Attempt, a.Outcome)
			if a.Deduplicated {
				s += " deduplicated"
			}
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ", ")
}

// longestCrashGap is the longest gap of kind crash, 0 when there is none.
func (d demoExecution) longestCrashGap() float64 {
	longest := 0.0
	for _, g := range d.Gaps {
		if g.Kind == "crash" {
			longest = max(longest, g.Seconds)
		}
	}
	return longest
}

type attemptWant struct {
	step, outcome string
	dedup         bool
}

// TestDemoScenariosEndToEnd runs `oncetrace demo` as a process against a
// real server, with the server's gap threshold under the demo's gap, and
// reads the audit of every scenario back through the API.
func TestDemoScenariosEndToEnd(t *testing.T) {
	const gap = 2 * time.Second
	srv := startDemoServer(t, filepath.Join(t.TempDir(), "demo.db"), "serve.log", "--gap-threshold", "1s")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	demo := exec.CommandContext(ctx, cliBinary, "demo", "--server", srv.url, "--gap", gap.String(), "--run", "e2e",
		"--journal-dir", t.TempDir())
	demo.Env = cliEnv()
	started := time.Now()
	out, err := demo.CombinedOutput()
	t.Logf("demo took %s", time.Since(started).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("oncetrace demo: got %v, want exit 0\n%s\nserver log:\n%s", err, out, srv.logText())
	}

	tests := []struct {
		scenario string
		critical []string // exactly these critical rules, sorted
		effects  int      // of the mail API; the CRM reports exactly one besides
		state    string   // of every mail effect
		audit    string   // the execution's audit state
		// gap: "crash" wants a crash gap at least as long as the demo's
		// --gap; "none" wants no gap at all (one process, never idle for
		// the threshold); "" does not look.
		gap      string
		attempts []attemptWant // each must be present
	}{
		{"naive", []string{"duplicate_effect"}, 2, "duplicate", "critical", "none",
			[]attemptWant{{"step-1", "timeout", false}, {"step-1", "ok", false}}},
		{"crash", []string{"duplicate_effect", "reexecuted_after_crash"}, 2, "duplicate", "critical", "crash",
			[]attemptWant{{"step-1", "lost", false}, {"step-1", "ok", false}}},
		{"safe", nil, 1, "matched", "clean", "none",
			[]attemptWant{{"step-1", "timeout", false}, {"step-1", "ok", true}, {"step-2", "ok", false}}},
		{"safe-rerun", nil, 1, "matched", "clean", "",
			[]attemptWant{{"step-1", "ok", false}, {"step-1", "replayed", false}}},
		{"key-only", nil, 1, "matched", "clean", "",
			[]attemptWant{{"step-1", "ok", false}, {"step-1", "ok", true}}},
		{"crash-safe", nil, 1, "matched", "clean", "crash",
			[]attemptWant{{"step-1", "ok", false}, {"step-1", "replayed", false}, {"step-2", "ok", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			id := "demo-" + tt.scenario + "-e2e"
			var d demoExecution
			getJSON(t, srv.url+"/api/v1/executions/"+id, &d)

			if d.Execution.Status != "completed" {
				t.Errorf("status: got %q, want completed", d.Execution.Status)
			}
			if got := d.critical(); !slices.Equal(got, tt.critical) {
				t.Errorf("critical findings: got %v, want %v", got, tt.critical)
			}
			if d.Audit.State != tt.audit {
				t.Errorf("audit state: got %q, want %q", d.Audit.State, tt.audit)
			}
			var mail []string
			crm := 0
			for _, e := range d.Effects {
				switch {
				case e.Provider == "crm" && e.State == "matched":
					crm++
				case e.Provider == "sandbox-mail" && e.State == tt.state:
					mail = append(mail, e.EffectID)
				default:
					t.Errorf("effect %s: got provider %q state %q, want sandbox-mail %s or a matched crm record", e.EffectID, e.Provider, e.State, tt.state)
				}
			}
			if len(mail) != tt.effects || crm != 1 {
				t.Errorf("effects: got %d mail and %d crm, want %d and 1", len(mail), crm, tt.effects)
			}
			switch tt.gap {
			case "crash":
				if got := d.longestCrashGap(); got < gap.Seconds() {
					t.Errorf("longest crash gap: got %.3f s (gaps %+v), want ≥ %.0f s", got, d.Gaps, gap.Seconds())
				}
			case "none":
				if len(d.Gaps) != 0 {
					t.Errorf("gaps: got %+v, want none", d.Gaps)
				}
			}
			for _, w := range tt.attempts {
				if !d.hasAttempt(w.step, w.outcome, w.dedup) {
					t.Errorf("attempts: got [%s], want a %s attempt %s (deduplicated %v)", d.attempts(), w.step, w.outcome, w.dedup)
				}
			}
			// Where the send happened once, every CRM record points at that
			// one email, whether the CRM step ran or was replayed.
			if tt.effects == 1 && len(mail) == 1 {
				for _, st := range d.Steps {
					for _, a := range st.Attempts {
						if st.StepID == "step-2" && a.Args.MessageID != mail[0] {
							t.Errorf("step-2 attempt %d message_id: got %q, want %q", a.Attempt, a.Args.MessageID, mail[0])
						}
					}
				}
			}
			if !strings.Contains(string(out), id) {
				t.Errorf("demo output: got no line naming %s\n%s", id, out)
			}
		})
	}
}

// demoExecutionList is what GET /api/v1/executions says about the demo.
type demoExecutionList struct {
	Executions []struct {
		ID     string            `json:"execution_id"`
		Status string            `json:"status"`
		Labels map[string]string `json:"labels"`
	} `json:"executions"`
}

// finished reports whether all six demo executions exist and completed.
func (l demoExecutionList) finished() bool {
	if len(l.Executions) != len(scenarios) {
		return false
	}
	for _, e := range l.Executions {
		if e.Status != "completed" {
			return false
		}
	}
	return true
}

func (l demoExecutionList) String() string {
	var parts []string
	for _, e := range l.Executions {
		parts = append(parts, e.ID+" "+e.Status)
	}
	return fmt.Sprintf("%d [%s]", len(l.Executions), strings.Join(parts, ", "))
}

// TestServeDemoOncePerDatabase starts `serve --demo` on a fresh database:
// the pages answer while the demo still runs in the background, the six
// scenarios arrive, and a restart on the same file adds nothing.
func TestServeDemoOncePerDatabase(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "demo.db")
	flags := []string{"--demo", "--demo-gap", "1500ms", "--gap-threshold", "1s"}
	srv := startDemoServer(t, dbPath, "first.log", flags...)

	// The demo needs two gaps of 1.5 s and two 1 s timeouts, so it cannot
	// have finished when the first page has answered, unless that page
	// waited for it.
	resp, err := demoHTTP.Get(srv.url + "/")
	if err != nil {
		t.Fatalf("GET /: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: got %s, want 200", resp.Status)
	}
	var list demoExecutionList
	getJSON(t, srv.url+"/api/v1/executions", &list)
	if list.finished() {
		t.Fatalf("executions right after GET /: got the finished demo %s, want it still running: the first page waited for the demo", list)
	}

	for deadline := time.Now().Add(90 * time.Second); !list.finished(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("executions after 90 s: got %s, want %d completed\n%s", list, len(scenarios), srv.logText())
		}
		getJSON(t, srv.url+"/api/v1/executions", &list)
	}
	var names []string
	for _, e := range list.Executions {
		if !strings.HasPrefix(e.ID, "demo-"+e.Labels["scenario"]+"-") {
			t.Errorf("execution %s: got scenario label %q, want the id to name it", e.ID, e.Labels["scenario"])
		}
		names = append(names, e.Labels["scenario"])
		if e.Labels["scenario"] == "crash" {
			var d demoExecution
			getJSON(t, srv.url+"/api/v1/executions/"+e.ID, &d)
			if got := d.longestCrashGap(); got < 1.5 {
				t.Errorf("%s longest crash gap: got %.3f s (gaps %+v), want ≥ 1.5 s (--demo-gap)", e.ID, got, d.Gaps)
			}
		}
	}
	sort.Strings(names)
	var want []string
	for _, sc := range scenarios {
		want = append(want, sc.name)
	}
	sort.Strings(want)
	if !slices.Equal(names, want) {
		t.Errorf("demo scenarios: got %v, want %v", names, want)
	}
	srv.stop(t)

	// The same database again: the server must see the demo and skip it.
	srv = startDemoServer(t, dbPath, "second.log", flags...)
	const skipped = "this database already holds the demo"
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(srv.logText(), skipped); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("second start: got no %q in the log within 30 s\n%s", skipped, srv.logText())
		}
	}
	getJSON(t, srv.url+"/api/v1/executions", &list)
	if len(list.Executions) != len(scenarios) {
		t.Errorf("executions after a restart: got %s, want still %d", list, len(scenarios))
	}
	srv.stop(t)
}
