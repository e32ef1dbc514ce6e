package main

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/mcp/mcptest"
)

// TestTapMCPWithTheGoSDK is issue 25's story over Streamable HTTP with
// the official Go SDK as client and server, through `serve --tap
// invoices=URL@ADDR --tap-mcp invoices` and through a standalone `oncetrace
// tap --mcp` posting to the server: the answer to the first
// send_invoice_email is lost (lose-response in its _meta: the tap drops
// it and holds the stream), the client times out and calls again. Naive,
// the server sends twice: one step, two attempts (timeout, ok), two
// effects, a critical duplicate_effect. Keyed, the server sends once: one
// effect, no critical finding. get_invoice is never an effect; the
// handshake and notifications are no step.
func TestTapMCPWithTheGoSDK(t *testing.T) {
	var sent mcptest.EffectLog
	upstream, stopUpstream, err := mcptest.ServeHTTP("127.0.0.1:0", mcptest.ServerOptions{OnEffect: sent.Record})
	if err != nil {
		t.Fatal(err)
	}
	defer stopUpstream()
	serveTap := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	srv := startDemoServer(t, filepath.Join(t.TempDir(), "oncetrace.db"), "serve.log", "--tap", "invoices="+upstream+"@"+serveTap, "--tap-mcp", "invoices")
	waitServeTap(t, srv, serveTap)
	standalone := startTapProcess(t, "--mcp", "--upstream", upstream, "--provider", "invoices", "--server", srv.url)

	for _, tc := range []struct {
		name         string
		tap          string
		keyed        bool
		sendEffects  int
		wantCritical []string
		emails       int
	}{
		{"serve-naive", "http://" + serveTap, false, 2, []string{"duplicate_effect"}, 2},
		{"serve-keyed", "http://" + serveTap, true, 1, nil, 1},
		{"standalone-naive", standalone.url, false, 2, []string{"duplicate_effect"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emailsBefore := sent.Count(mcptest.ToolSendInvoiceEmail)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			report, err := mcptest.RunClient(ctx, mcptest.ClientOptions{URL: tc.tap + mcptest.HTTPPath, Name: tc.name + "-agent", Keyed: tc.keyed,
				Fault: "lose-response", FaultTool: mcptest.ToolSendInvoiceEmail, CallTimeout: time.Second})
			if err != nil {
				t.Fatalf("the agent loop: %v\nserve's log:\n%s", err, srv.logText())
			}
			if c := report.Call(mcptest.ToolSendInvoiceEmail); c == nil || len(c.Tries) != 2 || c.Tries[0].Outcome != mcptest.OutcomeTimeout {
				t.Fatalf("the client's send_invoice_email: got %+v, want a timeout, then a retry", c)
			}
			if n := sent.Count(mcptest.ToolSendInvoiceEmail) - emailsBefore; n != tc.emails {
				t.Fatalf("emails the server sent: got %d, want %d", n, tc.emails)
			}
			if report.SessionID == "" {
				t.Fatal("the client has no Mcp-Session-Id")
			}

			var got mcpExecution
			var last string
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				got = mcpExecution{}
				getJSON(t, srv.url+"/api/v1/executions/"+url.PathEscape(report.SessionID), &got)
				_, sends := got.step(mcptest.ToolSendInvoiceEmail)
				_, charges := got.step(mcptest.ToolChargeCard)
				last = fmt.Sprintf("%+v", got)
				if len(sends) == 2 && len(charges) == 1 && len(got.critical()) == len(tc.wantCritical) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the execution %s: got %s, want it recorded\nserve's log:\n%s", report.SessionID, last, srv.logText())
				}
			}
			if len(got.Steps) != 3 {
				t.Errorf("steps: got %d, want 3, each a tool (the handshake and notifications are none)", len(got.Steps))
			}
			send, outcomes := got.step(mcptest.ToolSendInvoiceEmail)
			if strings.Join(outcomes, " ") != "timeout ok" {
				t.Errorf("send_invoice_email's attempts: got %v, want timeout ok, in one step", outcomes)
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
	var status struct {
		tapStatus
		MCP struct {
			Calls   int `json:"calls"`
			Dropped int `json:"dropped"`
		} `json:"mcp"`
	}
	getJSON(t, standalone.url+"/_oncetrace/tap", &status)
	if status.MCP.Calls != 4 || status.MCP.Dropped != 1 || status.Recorded < 3 {
		t.Errorf("the standalone tap's status: got %+v, want 4 calls, 1 answer dropped, the batches recorded", status)
	}
}

// TestTapMCPFlags: --mcp reads the MCP flags and a queue of its own; a
// flag of the other mode is refused, as is --tap-mcp naming no tap.
func TestTapMCPFlags(t *testing.T) {
	o, err := tapFlags([]string{"--mcp", "--upstream", "http://127.0.0.1:1/mcp", "--provider", "invoices", "--mcp-key-arg", "idempotency_key",
		"--mcp-effect-id", "/structuredContent/message_id", "--fault", "lose-response=0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.mcp || o.mcpKeyArg != "idempotency_key" || o.mcpEffectID != "/structuredContent/message_id" || o.mcpKeyMeta != "io.oncetrace/idempotency-key" ||
		len(o.faults) != 1 || !strings.HasSuffix(o.queueDir, filepath.Join("tap-queue", "invoices@mcp")) {
		t.Errorf("got %+v, want MCP mode with its flags, the default key name, and a queue apart from the plain tap's", o)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tap", "--mcp", "--upstream", "http://127.0.0.1:1", "--provider", "x", "--effect-id-field", "id"}, "--effect-id-field is not used with --mcp"},
		{[]string{"tap", "--upstream", "http://127.0.0.1:1", "--provider", "x", "--mcp-key-arg", "k"}, "--mcp-key-arg needs --mcp"},
		{[]string{"tap", "--mcp", "--upstream", "http://127.0.0.1:1", "--provider", "x", "--mcp-effect-id", "id"}, "starts with /"},
		{[]string{"serve", "--db", filepath.Join(t.TempDir(), "x.db"), "--tap", "a=http://127.0.0.1:1@127.0.0.1:0", "--tap-mcp", "b"}, `--tap-mcp "b"`},
	} {
		_, errOut, code := runCLI(t, tc.args...)
		if code != 2 && code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: got exit %d and %q, want an error naming %q", tc.args, code, errOut, tc.want)
		}
	}
}
