package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/mcp/mcptest"
)

// mcpCommands are mcptest's mcpserver and mcpagent, built once for the
// test binary beside cliBinary (TestMain removes them).
var mcpCommands struct {
	once          sync.Once
	server, agent string
	err           error
}

func buildMCPCommands(t *testing.T) (server, agent string) {
	t.Helper()
	mcpCommands.once.Do(func() {
		dir := filepath.Join(filepath.Dir(cliBinary), "mcptest")
		mcpCommands.err = mcptest.BuildInto(dir, mcptest.AgentPackage)
		mcpCommands.server, mcpCommands.agent = filepath.Join(dir, "mcpserver"), filepath.Join(dir, "mcpagent")
	})
	if mcpCommands.err != nil {
		t.Fatal(mcpCommands.err)
	}
	return mcpCommands.server, mcpCommands.agent
}

// runChaosMCP runs `oncetrace chaos --json` with flags, around the agent
// command, and returns the report, the exit code and stderr.
func runChaosMCP(t *testing.T, flags []string, agent ...string) (chaosReport, int, string) {
	t.Helper()
	args := append(append([]string{"chaos", "--json", "--timeout", "30s"}, flags...), "--")
	stdout, stderr, code := runCLIWithin(t, 4*time.Minute, append(args, agent...)...)
	var report chaosReport
	if code != 2 {
		if err := json.Unmarshal([]byte(stdout), &report); err != nil {
			t.Fatalf("chaos --json: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
	}
	return report, code, stderr
}

// checkMCPVerdicts checks a chaos report of mcpagent against mcptest's
// invoice server: the call sites are send_invoice_email then charge_card
// (get_invoice, read-only, is none); naive, losing a response duplicates
// the effect (exit 1); keyed, it is safe (exit 0).
func checkMCPVerdicts(t *testing.T, report chaosReport, code int, stderr string, keyed bool) {
	t.Helper()
	wantExit, want := 1, chaosDuplicate
	if keyed {
		wantExit, want = 0, chaosSafe
	}
	if code != wantExit {
		t.Errorf("exit code: got %d, want %d\n%s", code, wantExit, stderr)
	}
	var sites []string
	for _, s := range report.CallSites {
		sites = append(sites, s.call())
		if s.Upstream != "invoices" || !strings.HasPrefix(s.Step, "tool-") {
			t.Errorf("call site %d: got %+v, want upstream invoices and the step the proxy records", s.N, s)
		}
	}
	if wantSites := []string{"tools/call send_invoice_email", "tools/call charge_card"}; !slices.Equal(sites, wantSites) {
		t.Fatalf("call sites: got %q, want %q (get_invoice is read-only: no call site)", sites, wantSites)
	}
	if report.Baseline.Effects["invoices"] != 2 {
		t.Errorf("baseline effects: got %v, want invoices 2 (an email and a charge)", report.Baseline.Effects)
	}
	got := outcomes(report)
	for _, label := range []string{"1-lose-response", "2-lose-response"} {
		if got[label] != want {
			t.Errorf("run %s: got %q, want %q (all: %v)", label, got[label], want, got)
		}
	}
	for _, run := range report.Runs {
		if !run.Struck {
			t.Errorf("run %s: the fault did not strike", run.Run)
		}
		wantEffects := 2
		if !keyed {
			wantEffects = 3
		}
		if run.Effects["invoices"] != wantEffects {
			t.Errorf("run %s: effects %v, want invoices %d", run.Run, run.Effects, wantEffects)
		}
		duplicate := slices.ContainsFunc(run.Findings, func(f chaosFinding) bool { return f.Rule == "duplicate_effect" })
		if duplicate == keyed {
			t.Errorf("run %s: findings %+v; a duplicate_effect: got %v, want %v", run.Run, run.Findings, duplicate, !keyed)
		}
	}
}

// TestChaosMCPStreamableHTTP: chaos --upstream NAME=URL --mcp NAME in
// front of mcptest's invoice server over Streamable HTTP (in this
// process, one server for every run, as a real one outlives them), with
// mcpagent (the Go SDK's client) as the agent. failed is exit 1.
func TestChaosMCPStreamableHTTP(t *testing.T) {
	_, agent := buildMCPCommands(t)
	for _, keyed := range []bool{false, true} {
		t.Run(map[bool]string{false: "naive", true: "keyed"}[keyed], func(t *testing.T) {
			var made mcptest.EffectLog
			endpoint, stop, err := mcptest.ServeHTTP("127.0.0.1:0", mcptest.ServerOptions{OnEffect: made.Record})
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			cmd := []string{agent, "-upstream", "invoices", "-timeout", "500ms"}
			if keyed {
				cmd = append(cmd, "-keyed")
			}
			// In this process, so that the race detector sees chaos's side.
			var out, errOut bytes.Buffer
			failed, err := runChaosCommand(append([]string{"--json", "--timeout", "30s", "--upstream", "invoices=" + endpoint, "--mcp", "invoices", "--"},
				cmd...), &out, &errOut)
			if err != nil {
				t.Fatalf("chaos: %v\n%s", err, errOut.String())
			}
			var report chaosReport
			if err := json.Unmarshal(out.Bytes(), &report); err != nil {
				t.Fatalf("report: %v\n%s", err, out.String())
			}
			code := map[bool]int{false: 0, true: 1}[failed]
			checkMCPVerdicts(t, report, code, errOut.String(), keyed)
			if u := report.Upstreams; len(u) != 1 || u[0].MCP != chaosMCPHTTP || u[0].URL != endpoint || u[0].Env != "ONCETRACE_UPSTREAM_INVOICES" {
				t.Errorf("upstreams: got %+v, want invoices over Streamable HTTP at %s", u, endpoint)
			}
			recorded := report.Baseline.Effects["invoices"]
			for _, run := range report.Runs {
				recorded += run.Effects["invoices"]
			}
			if n := len(made.Effects()); n != recorded {
				t.Errorf("effects: the server made %d, chaos counted %d over the runs", n, recorded)
			}
		})
	}
}

// TestChaosMCPStdio: chaos --mcp-stdio around mcptest's invoice server,
// with mcpagent (the Go SDK's client) launching the command line chaos
// gives it. Each run's server is a new process; its calls are numbered
// by chaos and its effects those mcp-stdio recorded.
func TestChaosMCPStdio(t *testing.T) {
	server, agent := buildMCPCommands(t)
	for _, keyed := range []bool{false, true} {
		t.Run(map[bool]string{false: "naive", true: "keyed"}[keyed], func(t *testing.T) {
			effects := filepath.Join(t.TempDir(), "effects.jsonl")
			cmd := []string{agent, "-upstream", "invoices", "-timeout", "500ms"}
			if keyed {
				cmd = append(cmd, "-keyed")
			}
			report, code, stderr := runChaosMCP(t, []string{"--mcp-stdio", "invoices=" + server + " -effects " + effects}, cmd...)
			checkMCPVerdicts(t, report, code, stderr, keyed)
			u := report.Upstreams
			if len(u) != 1 || u[0].Env != "ONCETRACE_MCP_INVOICES_COMMAND" || u[0].MCP != chaosMCPStdio || u[0].URL != "" ||
				!slices.Equal(u[0].Command, []string{server, "-effects", effects}) {
				t.Errorf("upstreams: got %+v, want invoices over stdio with its command", u)
			}
			// The server's own count of what it did: each run's recorded
			// effects are real ones.
			made, err := mcptest.ReadEffects(effects)
			if err != nil {
				t.Fatal(err)
			}
			recorded := report.Baseline.Effects["invoices"]
			for _, run := range report.Runs {
				recorded += run.Effects["invoices"]
			}
			if len(made) != recorded {
				t.Errorf("effects: the server made %d, chaos counted %d over the runs", len(made), recorded)
			}
		})
	}
}

// TestChaosMCPStdioNumbersWithHTTP: one agent calls an HTTP API and a
// stdio MCP server; the call sites are numbered in one sequence across
// the proxy and the mcp-stdio process, and each is struck in its run.
func TestChaosMCPStdioNumbersWithHTTP(t *testing.T) {
	server, _ := buildMCPCommands(t)
	pay := newStripeUpstream(t, "ch")
	report, code, stderr := runChaosCLI(t, "mcp-mixed", "--upstream", "pay="+pay.URL, "--mcp-stdio", "invoices="+server)
	if code != 0 {
		t.Fatalf("exit code: got %d, want 0 (every call keyed)\n%s", code, stderr)
	}
	var sites []string
	for _, s := range report.CallSites {
		sites = append(sites, fmt.Sprintf("%d %s %s", s.N, s.Upstream, s.call()))
	}
	want := []string{"1 pay POST /v1/charges", "2 invoices tools/call send_invoice_email", "3 invoices tools/call charge_card"}
	if !slices.Equal(sites, want) {
		t.Fatalf("call sites: got %q, want %q", sites, want)
	}
	for _, run := range report.Runs {
		if run.Outcome != chaosSafe || !run.Struck {
			t.Errorf("run %s: outcome %q, struck %v; want safe, struck", run.Run, run.Outcome, run.Struck)
		}
	}
	if len(report.Runs) != 3 {
		t.Errorf("runs: got %d, want 3", len(report.Runs))
	}
}

// chaosTestMCPAgent is the test agent "mcp-mixed": a keyed charge through
// ONCETRACE_UPSTREAM_PAY, then mcptest's keyed agent loop against the
// stdio server ONCETRACE_MCP_INVOICES_COMMAND launches.
func chaosTestMCPAgent() int {
	if err := chaosTestCall(&http.Client{Timeout: 2 * time.Second}, os.Getenv("ONCETRACE_UPSTREAM_PAY")+"/v1/charges",
		fmt.Sprintf("charge-%s-%d", os.Getenv("ONCETRACE_CHAOS_RUN"), os.Getpid()), nil, 3, nil); err != nil {
		fmt.Fprintf(os.Stderr, "agent mcp-mixed: charge: giving up: %v\n", err)
		return 1
	}
	line, err := shellWords(os.Getenv("ONCETRACE_MCP_INVOICES_COMMAND"))
	if err != nil || len(line) == 0 {
		fmt.Fprintf(os.Stderr, "agent mcp-mixed: ONCETRACE_MCP_INVOICES_COMMAND: %q (%v)\n", os.Getenv("ONCETRACE_MCP_INVOICES_COMMAND"), err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := mcptest.RunClient(ctx, mcptest.ClientOptions{Command: line[0], Args: line[1:], Stderr: os.Stderr, Keyed: true,
		CallTimeout: 500 * time.Millisecond}); err != nil {
		fmt.Fprintf(os.Stderr, "agent mcp-mixed: %v\n", err)
		return 1
	}
	return 0
}

func TestShellWords(t *testing.T) {
	tests := []struct {
		line string
		want []string
	}{
		{"node server.mjs", []string{"node", "server.mjs"}},
		{"  a\tb  ", []string{"a", "b"}},
		{`python -c 'print("hi there")'`, []string{"python", "-c", `print("hi there")`}},
		{`a "b \"c\" \\d" e\ f`, []string{"a", `b "c" \d`, "e f"}},
		{`x'y'"z"`, []string{"xyz"}},
		{`''`, []string{""}},
	}
	for _, tt := range tests {
		got, err := shellWords(tt.line)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("shellWords(%q): got %q, %v; want %q", tt.line, got, err, tt.want)
		}
		if back, err := shellWords(shellJoin(tt.want)); err != nil || !slices.Equal(back, tt.want) {
			t.Errorf("shellWords(shellJoin(%q)) = %q (%q), %v", tt.want, back, shellJoin(tt.want), err)
		}
	}
	for _, bad := range []string{`a 'b`, `a "b`, `a\`} {
		if _, err := shellWords(bad); err == nil {
			t.Errorf("shellWords(%q): got no error", bad)
		}
	}
}
