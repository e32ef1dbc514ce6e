package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/mcp/mcptest"
)

// TestMCPStdioPassesThrough: what the client writes reaches the server
// byte for byte (a last line without its newline too), what the server
// writes and its standard error come back, and mcp-stdio ends with the
// server's exit status, even with no oncetrace server to record to.
func TestMCPStdioPassesThrough(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}` + "\n\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\r\n" + `{"last":"line without newline"}`
	cmd := exec.Command(cliBinary, "mcp-stdio", "--provider", "echo", "--server", "http://127.0.0.1:1", "--queue-dir", t.TempDir(),
		"--", "sh", "-c", "cat; echo 'from the server' >&2; exit 7")
	cmd.Env = cliEnv()
	cmd.Stdin = strings.NewReader(in)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Errorf("exit: got %v, want status 7, the server's\n%s", err, errOut.String())
	}
	if out.String() != in {
		t.Errorf("stdout: got %q, want %q", out.String(), in)
	}
	if !strings.Contains(errOut.String(), "from the server") {
		t.Errorf("stderr: got %q, want the server's", errOut.String())
	}
}

// TestMCPStdioForwardsSignals: SIGTERM reaches the server, which decides
// how to end; mcp-stdio ends as it does.
func TestMCPStdioForwardsSignals(t *testing.T) {
	cmd := exec.Command(cliBinary, "mcp-stdio", "--provider", "echo", "--server", "http://127.0.0.1:1", "--queue-dir", t.TempDir(),
		"--", "sh", "-c", "trap 'echo bye; exit 42' TERM; echo ready; while :; do sleep 0.05; done")
	cmd.Env = cliEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := bufio.NewReader(stdout)
	if l, err := lines.ReadString('\n'); err != nil || l != "ready\n" {
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("got %q (%v), want the server's ready", l, err)
	}
	syscall.Kill(cmd.Process.Pid, syscall.SIGTERM) // only the process this test started
	rest, _ := lines.ReadString('\n')
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 42 || rest != "bye\n" {
			t.Errorf("after SIGTERM: got %v and %q, want the server's trap: bye, status 42\n%s", err, rest, errOut.String())
		}
	case <-time.After(20 * time.Second):
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("mcp-stdio still running 20 s after SIGTERM\n%s", errOut.String())
	}
}

// TestMCPStdioRefusesWithoutWhatItNeeds: no provider, no command, a
// command that does not exist: each named, with a shell's statuses.
func TestMCPStdioRefusesWithoutWhatItNeeds(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--", "cat"}, 2, "--provider is required"},
		{[]string{"--provider", "x"}, 2, "no server command"},
		{[]string{"--provider", "x", "--queue-dir", t.TempDir(), "--", "/nonexistent/mcp-server"}, 127, "/nonexistent/mcp-server"},
	} {
		_, stderr, code := runCLI(t, append([]string{"mcp-stdio"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("mcp-stdio %v: got status %d, %q; want %d naming %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

// mcpExecution is what the test reads of GET /api/v1/executions/{id}.
type mcpExecution struct {
	Steps []struct {
		StepID   string `json:"step_id"`
		Tool     string `json:"tool"`
		Attempts []struct {
			Outcome string `json:"outcome"`
			Error   string `json:"error"`
		} `json:"attempts"`
	} `json:"steps"`
	Effects []struct {
		Provider string `json:"provider"`
		EffectID string `json:"effect_id"`
		StepID   string `json:"step_id"`
	} `json:"effects"`
	Findings []struct {
		Rule     string `json:"rule"`
		Severity string `json:"severity"`
	} `json:"findings"`
}

func (e mcpExecution) step(tool string) (id string, outcomes []string) {
	for _, s := range e.Steps {
		if s.Tool == tool {
			for _, a := range s.Attempts {
				outcomes = append(outcomes, a.Outcome)
			}
			return s.StepID, outcomes
		}
	}
	return "", nil
}

func (e mcpExecution) effectsOf(step string) []string {
	var ids []string
	for _, x := range e.Effects {
		if x.StepID == step && step != "" {
			ids = append(ids, x.EffectID)
		}
	}
	return ids
}

func (e mcpExecution) critical() []string {
	var rules []string
	for _, f := range e.Findings {
		if f.Severity == "critical" && !slices.Contains(rules, f.Rule) {
			rules = append(rules, f.Rule)
		}
	}
	return rules
}

// TestMCPStdioWithTheGoSDK is issue 25's story over stdio with the
// official Go SDK as client and server: the client launches `oncetrace
// mcp-stdio -- mcpserver` as its server; the answer to the first
// send_invoice_email is lost (lose-response in its _meta), the client
// times out and calls again. Naive, the server sends twice: one step, two
// attempts (timeout, ok), two effects, a critical duplicate_effect. Keyed,
// the server sends once: one effect, no critical finding. get_invoice is
// never an effect. Recorded into a real `oncetrace serve`.
func TestMCPStdioWithTheGoSDK(t *testing.T) {
	server := mcptest.BuildServer(t)
	srv := startDemoServer(t, filepath.Join(t.TempDir(), "oncetrace.db"), "serve.log")
	for _, tc := range []struct {
		name           string
		keyed          bool
		sendOutcomes   string
		sendEffects    int
		wantCritical   []string
		serverSendings int
	}{
		{"naive", false, "timeout ok", 2, []string{"duplicate_effect"}, 2},
		{"keyed", true, "timeout ok", 1, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			effectsFile := filepath.Join(dir, "effects.jsonl")
			var stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			report, err := mcptest.RunClient(ctx, mcptest.ClientOptions{
				Command: cliBinary,
				Args: []string{"mcp-stdio", "--provider", "invoices", "--server", srv.url, "--queue-dir", filepath.Join(dir, "queue"),
					"--", server, "-effects", effectsFile},
				Env: cliEnv(), Stderr: &stderr, Name: tc.name + "-agent", Keyed: tc.keyed,
				Fault: "lose-response", FaultTool: mcptest.ToolSendInvoiceEmail, CallTimeout: 2 * time.Second})
			if err != nil {
				t.Fatalf("the agent loop: %v\nmcp-stdio's stderr:\n%s", err, stderr.String())
			}
			if c := report.Call(mcptest.ToolSendInvoiceEmail); c == nil || len(c.Tries) != 2 || c.Tries[0].Outcome != mcptest.OutcomeTimeout {
				t.Fatalf("the client's send_invoice_email: got %+v, want a timeout, then a retry", c)
			}
			effects, err := mcptest.ReadEffects(effectsFile)
			if err != nil {
				t.Fatal(err)
			}
			if n := mcptest.CountEffects(effects, mcptest.ToolSendInvoiceEmail); n != tc.serverSendings {
				t.Fatalf("emails the server sent: got %d, want %d", n, tc.serverSendings)
			}

			// mcp-stdio records as it exits, after the client's session
			// closes: wait for what it recorded.
			var got mcpExecution
			var last string
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				var list struct {
					Executions []struct {
						ID   string `json:"execution_id"`
						Name string `json:"name"`
					} `json:"executions"`
				}
				getJSON(t, srv.url+"/api/v1/executions?limit=100", &list)
				for _, e := range list.Executions {
					if e.Name == tc.name+"-agent" {
						got = mcpExecution{}
						getJSON(t, srv.url+"/api/v1/executions/"+url.PathEscape(e.ID), &got)
					}
				}
				_, sends := got.step(mcptest.ToolSendInvoiceEmail)
				_, charges := got.step(mcptest.ToolChargeCard)
				last = fmt.Sprintf("%+v", got)
				if len(sends) == 2 && len(charges) == 1 && len(got.critical()) == len(tc.wantCritical) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the execution %s-agent: got %s, want it recorded\nmcp-stdio's stderr:\n%s", tc.name, last, stderr.String())
				}
			}
			if len(got.Steps) != 3 {
				t.Errorf("steps: got %d, want 3, one a tool (the handshake and notifications are none)", len(got.Steps))
			}
			send, outcomes := got.step(mcptest.ToolSendInvoiceEmail)
			if strings.Join(outcomes, " ") != tc.sendOutcomes {
				t.Errorf("send_invoice_email's attempts: got %v, want %s, in one step", outcomes, tc.sendOutcomes)
			}
			if ids := got.effectsOf(send); len(ids) != tc.sendEffects {
				t.Errorf("send_invoice_email's effects: got %v, want %d", ids, tc.sendEffects)
			}
			read, readOutcomes := got.step(mcptest.ToolGetInvoice)
			if len(readOutcomes) != 1 || len(got.effectsOf(read)) != 0 {
				t.Errorf("get_invoice: got attempts %v and effects %v, want one attempt and no effect", readOutcomes, got.effectsOf(read))
			}
			if c := got.critical(); !slices.Equal(c, tc.wantCritical) {
				t.Errorf("critical findings: got %v, want %v", c, tc.wantCritical)
			}
		})
	}
}

// TestMCPStdioQueuesWhatFails: with the oncetrace server down the relay
// goes on and the calls' recordings wait on disk; the next mcp-stdio of
// the provider takes the same queue and sends them once the server is up.
func TestMCPStdioQueuesWhatFails(t *testing.T) {
	server := mcptest.BuildServer(t)
	queue := t.TempDir()
	down := fmt.Sprintf("http://127.0.0.1:%d", freeLoopbackPort(t))
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	report, err := mcptest.RunClient(ctx, mcptest.ClientOptions{Command: cliBinary,
		Args: []string{"mcp-stdio", "--provider", "invoices", "--server", down, "--queue-dir", queue, "--", server},
		Env:  cliEnv(), Stderr: &stderr, Name: "queued-agent"})
	if err != nil || len(report.Calls) != 3 {
		t.Fatalf("the agent loop with no oncetrace server: %v, %d calls; want the 3 calls answered\n%s", err, len(report.Calls), stderr.String())
	}
	var files []string
	for deadline := time.Now().Add(20 * time.Second); len(files) < 3; time.Sleep(20 * time.Millisecond) {
		files, _ = filepath.Glob(filepath.Join(queue, "0", "*.json"))
		if time.Now().After(deadline) {
			t.Fatalf("queued: got %v, want a batch for each of the 3 calls\n%s", files, stderr.String())
		}
	}

	srv := startDemoServer(t, filepath.Join(t.TempDir(), "oncetrace.db"), "serve.log")
	_, errOut, code := runCLI(t, "mcp-stdio", "--provider", "invoices", "--server", srv.url, "--queue-dir", queue, "--", "true")
	if code != 0 {
		t.Fatalf("the next mcp-stdio: status %d\n%s", code, errOut)
	}
	if left, _ := filepath.Glob(filepath.Join(queue, "0", "*.json")); len(left) != 0 {
		t.Errorf("still queued after the next run: %v\n%s", left, errOut)
	}
	var list struct {
		Executions []struct {
			ID   string `json:"execution_id"`
			Name string `json:"name"`
		} `json:"executions"`
	}
	getJSON(t, srv.url+"/api/v1/executions", &list)
	if len(list.Executions) != 1 || list.Executions[0].Name != "queued-agent" {
		t.Fatalf("executions: got %+v, want queued-agent's", list.Executions)
	}
	var got mcpExecution
	getJSON(t, srv.url+"/api/v1/executions/"+url.PathEscape(list.Executions[0].ID), &got)
	if len(got.Steps) != 3 || len(got.Effects) != 2 {
		t.Errorf("recorded from the queue: got %d steps, %d effects; want 3 steps, 2 effects (the read is none)", len(got.Steps), len(got.Effects))
	}
}
