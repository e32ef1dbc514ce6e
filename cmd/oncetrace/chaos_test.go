package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The agents chaos runs in these tests are this test binary itself: with
// ONCETRACE_CHAOS_TEST_AGENT set, it is that agent and nothing else. They
// export no traces (except the isolation agent's native events): the
// verdict must come from the effects alone.
const chaosTestAgentEnv = "ONCETRACE_CHAOS_TEST_AGENT"

func init() {
	if name := os.Getenv(chaosTestAgentEnv); name != "" {
		os.Exit(chaosTestAgent(name))
	}
}

// chaosTestAgent charges through ONCETRACE_UPSTREAM_PAY and, for naive and
// keyed, then sends a receipt through ONCETRACE_UPSTREAM_MAIL:
//
//   - naive: a timed-out or failed charge is retried without a key; the
//     receipt is keyed;
//   - keyed: both keyed, with keys unique to the process (the provider
//     keeps keys across runs, as a real one does);
//   - giveup: one try at the charge; exit 1 when it fails;
//   - swallow: one try, and exit 0 whatever happened;
//   - hang: one try with no client timeout;
//   - isolation: as naive for the charge, reusing one execution id in
//     every run and posting native events to ONCETRACE_URL;
//   - mcp-mixed: a keyed charge, then a stdio MCP server's tools
//     (chaosTestMCPAgent).
func chaosTestAgent(name string) int {
	if name == "mcp-mixed" {
		return chaosTestMCPAgent() // chaos_mcp_test.go
	}
	run := os.Getenv("ONCETRACE_CHAOS_RUN")
	pay, mail := os.Getenv("ONCETRACE_UPSTREAM_PAY"), os.Getenv("ONCETRACE_UPSTREAM_MAIL")
	client := &http.Client{Timeout: 2 * time.Second}
	if name == "hang" {
		client.Timeout = 0
	}
	header := map[string]string{}
	var ev *chaosTestEvents
	if name == "isolation" {
		ev = &chaosTestEvents{server: os.Getenv("ONCETRACE_URL"), execution: "exec-fixed"}
		header["X-Oncetrace-Execution"], header["X-Oncetrace-Step"] = ev.execution, "step-1"
		ev.post(map[string]any{"type": "execution", "execution_id": ev.execution, "name": "isolation-agent", "status": "running", "started_at": now()})
	}
	tries := 3
	if name == "giveup" || name == "swallow" || name == "hang" {
		tries = 1
	}
	chargeKey := ""
	if name == "keyed" {
		chargeKey = fmt.Sprintf("charge-%s-%d", run, os.Getpid())
	}
	if err := chaosTestCall(client, pay+"/v1/charges", chargeKey, header, tries, ev); err != nil {
		if name == "swallow" {
			return 0
		}
		fmt.Fprintf(os.Stderr, "agent %s: charge: giving up: %v\n", name, err)
		return 1
	}
	if name == "naive" || name == "keyed" {
		if err := chaosTestCall(client, mail+"/v1/send", fmt.Sprintf("receipt-%s-%d", run, os.Getpid()), nil, 3, nil); err != nil {
			fmt.Fprintf(os.Stderr, "agent %s: receipt: giving up: %v\n", name, err)
			return 1
		}
	}
	if ev != nil {
		ev.post(map[string]any{"type": "execution", "execution_id": ev.execution, "status": "completed", "ended_at": now()})
	}
	return 0
}

// chaosTestCall POSTs up to tries times, with the key on every try when
// there is one, and notes each try as an attempt when ev is set.
func chaosTestCall(client *http.Client, url, key string, header map[string]string, tries int, ev *chaosTestEvents) error {
	var err error
	for n := 1; n <= tries; n++ {
		started := now()
		err = chaosTestPost(client, url, key, header)
		if ev != nil {
			outcome := "ok"
			if err != nil {
				outcome = "error"
			}
			ev.post(map[string]any{"type": "attempt", "execution_id": ev.execution, "step_id": "step-1", "attempt": n, "tool": "charge",
				"effect": "write", "provider": "pay", "started_at": started, "ended_at": now(), "outcome": outcome})
		}
		if err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func chaosTestPost(client *http.Client, url, key string, header map[string]string) error {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("amount=1240&currency=usd"))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	return nil
}

// chaosTestEvents posts native events, as an instrumented agent would.
type chaosTestEvents struct {
	server, execution string
}

func (e *chaosTestEvents) post(event map[string]any) {
	b, _ := json.Marshal(event)
	resp, err := http.Post(e.server+"/api/v1/events", "application/json", bytes.NewReader(b))
	if err != nil {
		fmt.Fprintln(os.Stderr, "post event:", err)
		return
	}
	resp.Body.Close()
}

// stripeUpstream keeps Stripe's idempotency contract: a POST whose
// Idempotency-Key it has seen gets the stored answer, marked
// Idempotent-Replayed, and nothing new happens; any other POST is a new
// effect with a new id.
type stripeUpstream struct {
	prefix string
	mu     sync.Mutex
	n      int
	keys   map[string]string
}

func newStripeUpstream(t *testing.T, prefix string) *httptest.Server {
	s := httptest.NewServer(&stripeUpstream{prefix: prefix, keys: map[string]string{}})
	t.Cleanup(s.Close)
	return s
}

func (u *stripeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	if r.Method != http.MethodPost {
		io.WriteString(w, `{"object":"list","data":[]}`)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	u.mu.Lock()
	defer u.mu.Unlock()
	if body, ok := u.keys[key]; ok && key != "" {
		w.Header().Set("Idempotent-Replayed", "true")
		io.WriteString(w, body)
		return
	}
	u.n++
	body := fmt.Sprintf(`{"id":"%s_%d","object":"charge"}`, u.prefix, u.n)
	if key != "" {
		u.keys[key] = body
	}
	io.WriteString(w, body)
}

// runChaosCLI runs the binary TestMain built as `oncetrace chaos --json`
// with the test binary as the agent, and returns the report, the exit
// code and stderr.
func runChaosCLI(t *testing.T, agent string, flags ...string) (chaosReport, int, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"chaos", "--json", "--env", chaosTestAgentEnv + "=" + agent}, flags...)
	args = append(args, "--", self)
	stdout, stderr, code := runCLIWithin(t, 4*time.Minute, args...)
	var report chaosReport
	if code != 2 {
		if err := json.Unmarshal([]byte(stdout), &report); err != nil {
			t.Fatalf("chaos --json: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
	}
	return report, code, stderr
}

// outcomes maps each run's label to its outcome.
func outcomes(r chaosReport) map[string]string {
	m := map[string]string{}
	for _, run := range r.Runs {
		m[run.Run] = run.Outcome
	}
	return m
}

func TestChaosVerdictsOnAgentsWithoutTracing(t *testing.T) {
	pay, mail := newStripeUpstream(t, "ch"), newStripeUpstream(t, "msg")
	upstreams := []string{"--upstream", "PAY=" + pay.URL, "--upstream", "mail=" + mail.URL}
	tests := []struct {
		agent    string
		flags    []string
		sites    int
		want     map[string]string
		wantExit int
	}{
		{agent: "naive", sites: 2, wantExit: 1, want: map[string]string{
			"1-lose-response": chaosDuplicate, "1-fail-before": chaosSafe, "2-lose-response": chaosSafe, "2-fail-before": chaosSafe}},
		{agent: "keyed", sites: 2, wantExit: 0, want: map[string]string{
			"1-lose-response": chaosSafe, "1-fail-before": chaosSafe, "2-lose-response": chaosSafe, "2-fail-before": chaosSafe}},
		{agent: "giveup", sites: 1, wantExit: 0, want: map[string]string{"1-lose-response": chaosFailed, "1-fail-before": chaosFailed}},
		{agent: "swallow", sites: 1, wantExit: 1, want: map[string]string{"1-lose-response": chaosSafe, "1-fail-before": chaosLost}},
	}
	for _, tt := range tests {
		t.Run(tt.agent, func(t *testing.T) {
			report, code, stderr := runChaosCLI(t, tt.agent, append(upstreams, "--faults", "lose-response,fail-before")...)
			if code != tt.wantExit {
				t.Errorf("exit code: got %d, want %d\n%s", code, tt.wantExit, stderr)
			}
			if len(report.CallSites) != tt.sites {
				t.Fatalf("call sites: got %+v, want %d", report.CallSites, tt.sites)
			}
			if s := report.CallSites[0]; s.Upstream != "PAY" || s.Method != "POST" || s.Path != "/v1/charges" {
				t.Errorf("call site 1: got %+v, want PAY POST /v1/charges", s)
			}
			if tt.sites == 2 {
				if s := report.CallSites[1]; s.Upstream != "mail" || s.Path != "/v1/send" {
					t.Errorf("call site 2: got %+v, want mail POST /v1/send", s)
				}
			}
			got := outcomes(report)
			for label, want := range tt.want {
				if got[label] != want {
					t.Errorf("run %s: got %q, want %q (all: %v)", label, got[label], want, got)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("runs: got %v, want %v", got, tt.want)
			}
			for _, run := range report.Runs {
				if !run.Struck {
					t.Errorf("run %s: the fault did not strike", run.Run)
				}
				if run.Run == "1-lose-response" && tt.agent == "naive" && (run.Effects["PAY"] != 2 || run.BaselineEffects["PAY"] != 1) {
					t.Errorf("naive 1-lose-response: effects %v of %v, want PAY 2 of 1", run.Effects, run.BaselineEffects)
				}
				if run.Outcome == chaosFailed && !strings.Contains(run.StderrTail, "giving up") {
					t.Errorf("run %s: stderr tail %q, want the agent's own words", run.Run, run.StderrTail)
				}
			}
		})
	}
}

// TestChaosTimeoutKillsTheRun: an agent with no client timeout waits on a
// lost response until chaos's --timeout kills it: agent failed, timed out.
func TestChaosTimeoutKillsTheRun(t *testing.T) {
	pay := newStripeUpstream(t, "ch")
	started := time.Now()
	report, code, stderr := runChaosCLI(t, "hang", "--upstream", "pay="+pay.URL, "--timeout", "8s")
	if code != 0 {
		t.Fatalf("exit code: got %d, want 0 (an agent that fails loudly is fine)\n%s", code, stderr)
	}
	if len(report.Runs) != 1 {
		t.Fatalf("runs: got %+v, want 1", report.Runs)
	}
	run := report.Runs[0]
	if run.Outcome != chaosFailed || !run.TimedOut || !strings.Contains(run.Note, "timed out") {
		t.Errorf("the hanging run: got outcome %q, timed out %v, note %q; want agent failed, timed out", run.Outcome, run.TimedOut, run.Note)
	}
	if took := time.Since(started); took > 3*time.Minute {
		t.Errorf("chaos took %s: the hanging agent was not killed at --timeout", took)
	}
}

// TestChaosRunsAreIsolated: the agent reuses one execution id in every run
// and reports its attempts; each run's findings and effects are its own.
// In one merged database the fail-before run, which came after the
// lose-response run, would show the duplicate too. Run in this process,
// so that the race detector sees chaos itself.
func TestChaosRunsAreIsolated(t *testing.T) {
	pay := newStripeUpstream(t, "ch")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	keep := t.TempDir()
	var out, errOut bytes.Buffer
	failed, err := runChaosCommand([]string{"--json", "--keep", keep, "--upstream", "pay=" + pay.URL, "--faults", "lose-response,fail-before",
		"--env", chaosTestAgentEnv + "=isolation", "--", self}, &out, &errOut)
	if err != nil {
		t.Fatalf("chaos: %v\n%s", err, errOut.String())
	}
	if !failed {
		t.Errorf("failed: got false, want true (the lose-response run duplicates)")
	}
	var report chaosReport
	if err := json.Unmarshal(out.Bytes(), &report); err != nil {
		t.Fatalf("report: %v\n%s", err, out.String())
	}
	if len(report.Baseline.Findings) != 0 || len(report.Baseline.Executions) != 1 {
		t.Errorf("baseline: findings %+v, executions %+v; want none and exec-fixed", report.Baseline.Findings, report.Baseline.Executions)
	}
	byRun := map[string]chaosRun{}
	for _, run := range report.Runs {
		byRun[run.Run] = run
		if len(run.Executions) != 1 || run.Executions[0].ID != "exec-fixed" || run.Executions[0].Path != "/executions/exec-fixed" {
			t.Errorf("run %s: executions %+v, want exec-fixed alone", run.Run, run.Executions)
		}
		if want := filepath.Join(keep, run.Run+".db"); run.Database != want {
			t.Errorf("run %s: database %q, want %q", run.Run, run.Database, want)
		}
		if _, err := os.Stat(run.Database); err != nil {
			t.Errorf("run %s: kept database: %v", run.Run, err)
		}
	}
	lost := byRun["1-lose-response"]
	if lost.Outcome != chaosDuplicate || lost.Effects["pay"] != 2 {
		t.Errorf("1-lose-response: outcome %q, effects %v; want duplicate with 2", lost.Outcome, lost.Effects)
	}
	if len(lost.Findings) == 0 || lost.Findings[0].Rule != "duplicate_effect" || lost.Findings[0].Step != "step-1" {
		t.Errorf("1-lose-response: findings %+v, want duplicate_effect at step-1", lost.Findings)
	}
	failBefore := byRun["1-fail-before"]
	if failBefore.Outcome != chaosSafe || failBefore.Effects["pay"] != 1 || len(failBefore.Findings) != 0 {
		t.Errorf("1-fail-before: outcome %q, effects %v, findings %+v; want safe, 1 effect, no finding of the run before it",
			failBefore.Outcome, failBefore.Effects, failBefore.Findings)
	}
	if site := report.CallSites[0]; site.Step != "step-1" || site.Tool != "charge" {
		t.Errorf("call site 1: got %+v, want step-1 charge from the run's events", site)
	}
}

// TestChaosSharedServer: with --server, a run's executions are those its
// events and requests named; an execution that had events before the run
// is said to, since its findings are not only the run's. The verdict
// still comes from the run's own effects.
func TestChaosSharedServer(t *testing.T) {
	srv := startDemoServer(t, filepath.Join(t.TempDir(), "shared.db"), "serve.log")
	pay := newStripeUpstream(t, "ch")
	report, code, stderr := runChaosCLI(t, "isolation", "--server", srv.url, "--upstream", "pay="+pay.URL, "--faults", "lose-response,fail-before")
	if code != 1 {
		t.Fatalf("exit code: got %d, want 1\n%s", code, stderr)
	}
	if report.Server != srv.url {
		t.Errorf("server: got %q, want %q", report.Server, srv.url)
	}
	if x := report.Baseline.Executions; len(x) != 1 || x[0].ID != "exec-fixed" || x[0].EarlierEvents || x[0].URL != srv.url+"/executions/exec-fixed" {
		t.Errorf("baseline executions: got %+v, want exec-fixed on the server, without earlier events", x)
	}
	got := outcomes(report)
	if got["1-lose-response"] != chaosDuplicate || got["1-fail-before"] != chaosSafe {
		t.Errorf("outcomes: got %v, want 1-lose-response duplicate, 1-fail-before safe", got)
	}
	for _, run := range report.Runs {
		if len(run.Executions) != 1 || run.Executions[0].ID != "exec-fixed" || !run.Executions[0].EarlierEvents {
			t.Errorf("run %s: executions %+v, want exec-fixed, said to have events from before the run", run.Run, run.Executions)
		}
	}
}

func TestChaosFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad fault", []string{"chaos", "--upstream", "pay=http://127.0.0.1:1", "--faults", "lose-response,explode", "--", "true"}, "--faults"},
		{"no upstream", []string{"chaos", "--", "true"}, "--upstream"},
		{"bad upstream name", []string{"chaos", "--upstream", "my-api=http://127.0.0.1:1", "--", "true"}, "-upstream"},
		{"no command", []string{"chaos", "--upstream", "pay=http://127.0.0.1:1"}, "no command"},
		{"demo with a command", []string{"chaos", "--demo", "--", "true"}, "--demo"},
		{"mcp names no upstream", []string{"chaos", "--mcp", "invoices", "--", "true"}, "--mcp invoices: no --upstream"},
		{"mcp names a stdio server", []string{"chaos", "--mcp-stdio", "invoices=cat", "--mcp", "invoices", "--", "true"}, "--mcp-stdio server"},
		{"mcp-stdio quote not closed", []string{"chaos", "--mcp-stdio", "invoices='node server.mjs", "--", "true"}, "not closed"},
		{"mcp-stdio without a command", []string{"chaos", "--mcp-stdio", "invoices=", "--", "true"}, "no command"},
		{"mcp-stdio name taken", []string{"chaos", "--upstream", "inv=http://127.0.0.1:1", "--mcp-stdio", "INV=cat", "--", "true"}, "given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := runCLIWithin(t, 4*time.Minute, tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and a message naming %s", code, stderr, tt.want)
			}
		})
	}
}

// TestChaosBaselineMustSucceed: an agent that fails without faults stops
// chaos with exit 2 and its stderr.
func TestChaosBaselineMustSucceed(t *testing.T) {
	_, stderr, code := runCLIWithin(t, 4*time.Minute, "chaos", "--upstream", "pay=http://127.0.0.1:1", "--", "sh", "-c", "echo 'cannot reach the API' >&2; exit 3")
	if code != 2 || !strings.Contains(stderr, "fails without faults") || !strings.Contains(stderr, "cannot reach the API") {
		t.Errorf("exit %d, stderr %q; want 2, saying the agent fails without faults, with its stderr", code, stderr)
	}
}

// TestChaosDemo runs --demo as a user would: naive duplicates under
// lose-response, keyed is safe everywhere.
func TestChaosDemo(t *testing.T) {
	stdout, stderr, code := runCLIWithin(t, 4*time.Minute, "chaos", "--demo", "--json")
	if code != 0 {
		t.Fatalf("exit code: got %d, want 0\n%s", code, stderr)
	}
	var reports map[string]chaosReport
	if err := json.Unmarshal([]byte(stdout), &reports); err != nil {
		t.Fatalf("--demo --json: %v\n%s", err, stdout)
	}
	naive, keyed := reports["naive"], reports["keyed"]
	if got := outcomes(naive)["1-lose-response"]; got != chaosDuplicate {
		t.Errorf("naive 1-lose-response: got %q, want duplicate", got)
	}
	if keyed.Summary.Safe != keyed.Summary.Runs || keyed.Summary.Runs != 3 {
		t.Errorf("keyed: got %+v, want 3 runs, all safe", keyed.Summary)
	}
	if site := naive.CallSites[0]; site.Step != "step-1" || site.Tool != "send_invoice_email" {
		t.Errorf("naive call site: got %+v, want step-1 send_invoice_email", site)
	}
	for _, run := range naive.Runs {
		if run.Run == "1-lose-response" && (len(run.Findings) == 0 || run.Findings[0].Rule != "duplicate_effect") {
			t.Errorf("naive 1-lose-response findings: got %+v, want duplicate_effect", run.Findings)
		}
	}
}
