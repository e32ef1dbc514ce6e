package mcptest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// commands are mcpserver and mcpagent, built once for the test binary.
var commands struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if commands.dir != "" {
		os.RemoveAll(commands.dir)
	}
	os.Exit(code)
}

// builtCommands builds the commands the first time a test asks, with
// BuildInto as a TestMain of a package outside mcptest would.
func builtCommands(t *testing.T) (server, agent string) {
	t.Helper()
	commands.once.Do(func() {
		commands.dir, commands.err = os.MkdirTemp("", "mcptest-commands-")
		if commands.err == nil {
			commands.err = BuildInto(commands.dir, AgentPackage)
		}
	})
	if commands.err != nil {
		t.Fatal(fmt.Errorf("building the commands: %w", commands.err))
	}
	return filepath.Join(commands.dir, "mcpserver"), filepath.Join(commands.dir, "mcpagent")
}

// TestCommands runs the two commands as chaos would: the agent finds the
// server in ONCETRACE_UPSTREAM_<NAME> (mcpserver -http) or in
// ONCETRACE_MCP_<NAME>_COMMAND (mcpserver on stdio).
func TestCommands(t *testing.T) {
	t.Parallel()
	server, agent := builtCommands(t)
	dir := t.TempDir()

	httpEffects := filepath.Join(dir, "http.jsonl")
	cmd := exec.Command(server, "-http", "127.0.0.1:0", "-effects", httpEffects, "-lose-first", ToolSendInvoiceEmail)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("mcpserver -http after SIGTERM: %v, want a clean exit", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("mcpserver -http printed no URL: %v", err)
	}
	url := strings.TrimSpace(line)

	stdioEffects := filepath.Join(dir, "stdio.jsonl")
	for _, tc := range []struct {
		name    string
		env     string
		keyed   bool
		effects string
		sends   int
	}{
		{"http naive", "ONCETRACE_UPSTREAM_INVOICES=" + url, false, httpEffects, 2},
		{"stdio keyed", "ONCETRACE_MCP_INVOICES_COMMAND=" + server + " -effects " + stdioEffects + " -lose-first " + ToolSendInvoiceEmail, true, stdioEffects, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"-upstream", "invoices", "-timeout", callTimeout.String()}
			if tc.keyed {
				args = append(args, "-keyed")
			}
			run := exec.Command(agent, args...)
			run.Env = append(os.Environ(), tc.env)
			run.Stderr = os.Stderr
			out, err := run.Output()
			if err != nil {
				t.Fatalf("mcpagent: %v\n%s", err, out)
			}
			var report ClientReport
			if err := json.Unmarshal(out, &report); err != nil {
				t.Fatalf("mcpagent's report: %v\n%s", err, out)
			}
			if c := report.Call(ToolSendInvoiceEmail); c == nil || len(c.Tries) != 2 || c.Tries[0].Outcome != OutcomeTimeout {
				t.Errorf("send_invoice_email in the report: got %+v, want a timeout and a retry", c)
			}
			effects, err := ReadEffects(tc.effects)
			if err != nil {
				t.Fatal(err)
			}
			if got := CountEffects(effects, ToolSendInvoiceEmail); got != tc.sends {
				t.Errorf("emails sent: got %d, want %d", got, tc.sends)
			}
		})
	}
}
