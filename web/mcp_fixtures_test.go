package web_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// The MCP fixtures under ingest/testdata/frameworks/mcp/<transport>/<run>
// were recorded by `make fixtures` (gen/README.md § MCP fixtures): the
// official TypeScript SDK's client loop calls the SDK's server through
// oncetrace's recording proxy for the transport (mcp-stdio for stdio, tap
// --mcp for Streamable HTTP), which loses the answer to the first send_invoice_email
// (and, keyed, to the first charge_card); the client times out and calls
// again. What is committed is what the proxy posted to POST
// /api/v1/events, byte for byte, beside the mail requests the server made
// and the client's own summary.

const mcpFixturesDir = frameworksDir + "/mcp"

// mcpFixtureTransports must each have a naive and a keyed recording.
var mcpFixtureTransports = []string{"stdio", "http"}

// The server's tools (gen/agents/mcp/billing.mjs).
const (
	mcpGetInvoice       = "get_invoice"
	mcpSendInvoiceEmail = "send_invoice_email"
	mcpChargeCard       = "charge_card"
)

type mcpFixtureRequest struct {
	Seq          int    `json:"seq"`
	Kind         string `json:"kind"` // events or mail
	ContentType  string `json:"content_type"`
	BodyFile     string `json:"body_file"`
	ResponseBody string `json:"response_body"`
}

type mcpFixtureRun struct {
	dir      string
	manifest struct {
		Kind       string `json:"kind"`
		Transport  string `json:"transport"`
		Run        string `json:"run"`
		Provider   string `json:"provider"`
		ClientName string `json:"client_name"`
	}
	requests []mcpFixtureRequest
	// client is the client's summary: its MCP session (HTTP) and each
	// tools/call it made.
	client struct {
		SessionID string `json:"session_id"`
		Calls     []struct {
			Tool    string          `json:"tool"`
			Outcome string          `json:"outcome"`
			Meta    json.RawMessage `json:"_meta"`
		} `json:"calls"`
	}
}

func (r mcpFixtureRun) name() string { return "mcp/" + r.manifest.Transport + "/" + r.manifest.Run }

// mailIDs are the message ids the sandbox mail API answered the server
// with, each once: the emails that went out.
func (r mcpFixtureRun) mailIDs(t *testing.T) []string {
	t.Helper()
	var ids []string
	for _, q := range r.requests {
		if q.Kind != "mail" {
			continue
		}
		var sent struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(q.ResponseBody), &sent); err != nil || sent.ID == "" {
			t.Fatalf("%s: mail request %d: no message id in %q", r.name(), q.Seq, q.ResponseBody)
		}
		if !slices.Contains(ids, sent.ID) {
			ids = append(ids, sent.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// clientKey is the idempotency key the client sent with tool's calls.
func (r mcpFixtureRun) clientKey(tool string) string {
	for _, c := range r.client.Calls {
		var meta map[string]string
		if c.Tool == tool && json.Unmarshal(c.Meta, &meta) == nil {
			return meta["io.oncetrace/idempotency-key"]
		}
	}
	return ""
}

func loadMCPFixtureRuns(t *testing.T) []mcpFixtureRun {
	t.Helper()
	manifests, err := filepath.Glob(filepath.Join(mcpFixturesDir, "*", "*", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var runs []mcpFixtureRun
	for _, m := range manifests {
		r := mcpFixtureRun{dir: filepath.Dir(m)}
		readJSON := func(name string, v any) {
			data, err := os.ReadFile(filepath.Join(r.dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, v); err != nil {
				t.Fatalf("%s/%s: %v", r.dir, name, err)
			}
		}
		readJSON("manifest.json", &r.manifest)
		readJSON("client.json", &r.client)
		lines, err := os.ReadFile(filepath.Join(r.dir, "requests.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
			var q mcpFixtureRequest
			if err := json.Unmarshal(line, &q); err != nil {
				t.Fatalf("%s: requests.jsonl: %v", r.dir, err)
			}
			r.requests = append(r.requests, q)
		}
		runs = append(runs, r)
	}
	for _, transport := range mcpFixtureTransports {
		for _, run := range []string{"naive", "keyed"} {
			if !slices.ContainsFunc(runs, func(r mcpFixtureRun) bool { return r.manifest.Transport == transport && r.manifest.Run == run }) {
				t.Errorf("fixtures: no MCP recording %s/%s under %s", transport, run, mcpFixturesDir)
			}
		}
	}
	return runs
}

// replayMCPEvents posts each recorded events request as the proxy sent it
// and returns how many events the server took as new.
func replayMCPEvents(t *testing.T, srv *testServer, r mcpFixtureRun) int {
	t.Helper()
	accepted := 0
	for _, q := range r.requests {
		if q.Kind != "events" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(r.dir, q.BodyFile))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, srv.ts.URL+"/api/v1/events", bytes.NewReader(data))
		req.Header.Set("Content-Type", q.ContentType)
		resp, err := srv.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var res struct {
			Accepted int               `json:"accepted"`
			Rejected []json.RawMessage `json:"rejected"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &res) != nil || len(res.Rejected) != 0 {
			t.Fatalf("%s: replaying %s: got %d %s, want 200 with nothing rejected", r.name(), q.BodyFile, resp.StatusCode, body)
		}
		accepted += res.Accepted
	}
	return accepted
}

type mcpFixtureExecution struct {
	Execution struct {
		Name string `json:"name"`
	} `json:"execution"`
	Audit struct {
		State string `json:"state"`
	} `json:"audit"`
	Steps []struct {
		StepID   string `json:"step_id"`
		Tool     string `json:"tool"`
		Effect   string `json:"effect"`
		Attempts []struct {
			Outcome        string `json:"outcome"`
			IdempotencyKey string `json:"idempotency_key"`
		} `json:"attempts"`
	} `json:"steps"`
	Effects []struct {
		Provider string `json:"provider"`
		EffectID string `json:"effect_id"`
		StepID   string `json:"step_id"`
	} `json:"effects"`
	Findings []trace.Finding `json:"findings"`
}

// TestMCPFixtures replays each MCP recording into a fresh store and checks
// issue 25's acceptance: naive, one step of send_invoice_email with two
// attempts (timeout, ok), two effects (the two emails the mail API sent)
// and a critical duplicate_effect on that step; keyed, one effect each and
// nothing critical, the audit clean; get_invoice (readOnlyHint) never an
// effect; initialize, tools/list and notifications never attempts.
func TestMCPFixtures(t *testing.T) {
	for _, r := range loadMCPFixtureRuns(t) {
		t.Run(r.name(), func(t *testing.T) {
			srv := startServer(t, r.name(), ingest.DefaultLimits)
			if replayMCPEvents(t, srv, r) == 0 {
				t.Fatal("the recording holds no events")
			}
			var list struct {
				Executions []struct {
					ID string `json:"execution_id"`
				} `json:"executions"`
			}
			if err := json.Unmarshal(srv.get(t, "/api/v1/executions"), &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Executions) != 1 {
				t.Fatalf("executions: got %+v, want the MCP session's alone", list.Executions)
			}
			// The execution is the MCP session: the Mcp-Session-Id the
			// server gave the client over HTTP, mcp-stdio's own over stdio.
			id := list.Executions[0].ID
			switch r.manifest.Transport {
			case "http":
				if id != r.client.SessionID || id == "" {
					t.Errorf("execution: got %q, want the client's Mcp-Session-Id %q", id, r.client.SessionID)
				}
			case "stdio":
				if !strings.HasPrefix(id, "mcp-") {
					t.Errorf("execution: got %q, want mcp-stdio's session, mcp-…", id)
				}
			default:
				t.Errorf("manifest transport %q: want stdio or http", r.manifest.Transport)
			}
			var x mcpFixtureExecution
			if err := json.Unmarshal(srv.get(t, "/api/v1/executions/"+id), &x); err != nil {
				t.Fatal(err)
			}
			checkMCPFixtureRun(t, r, x)

			// A proxy's queue sends a batch again when it cannot tell it
			// arrived: the same events, nothing new.
			before := srv.snapshot(t)
			if n := replayMCPEvents(t, srv, r); n != 0 {
				t.Errorf("replayed again: %d events accepted as new, want 0", n)
			}
			compareSnapshots(t, "replayed twice", srv.snapshot(t), "replayed once", before)
		})
	}
}

func checkMCPFixtureRun(t *testing.T, r mcpFixtureRun, x mcpFixtureExecution) {
	m := r.manifest
	if x.Execution.Name != m.ClientName {
		t.Errorf("execution name: got %q, want the client's %q", x.Execution.Name, m.ClientName)
	}
	// Every step is a tool the client called, each of its attempts a
	// tools/call: the handshake, tools/list and the notifications (the
	// client's notifications/cancelled after each timeout among them) are
	// none.
	attempts := 0
	steps := map[string]int{}
	for i, st := range x.Steps {
		if _, dup := steps[st.Tool]; dup {
			t.Errorf("tool %s: more than one step, want its calls (same arguments) in one", st.Tool)
		}
		steps[st.Tool] = i
		attempts += len(st.Attempts)
	}
	var tools []string
	for tool := range steps {
		tools = append(tools, tool)
	}
	slices.Sort(tools)
	if want := []string{mcpChargeCard, mcpGetInvoice, mcpSendInvoiceEmail}; !slices.Equal(tools, want) {
		t.Fatalf("steps' tools: got %v, want %v", tools, want)
	}
	if attempts != len(r.client.Calls) {
		t.Errorf("attempts: got %d, want %d, one per tools/call the client made", attempts, len(r.client.Calls))
	}
	effectsOf := func(tool string) []string {
		var ids []string
		for _, e := range x.Effects {
			if e.StepID == x.Steps[steps[tool]].StepID {
				ids = append(ids, e.EffectID)
			}
		}
		slices.Sort(ids)
		return ids
	}
	for _, e := range x.Effects {
		if e.Provider != m.Provider {
			t.Errorf("effect %s: provider %q, want the MCP server's %q", e.EffectID, e.Provider, m.Provider)
		}
	}
	outcomes := func(tool string) []string {
		var out []string
		for _, a := range x.Steps[steps[tool]].Attempts {
			out = append(out, a.Outcome)
		}
		return out
	}
	classes := map[string]trace.EffectClass{mcpGetInvoice: trace.EffectRead, mcpSendInvoiceEmail: trace.EffectWrite, mcpChargeCard: trace.EffectWrite}
	for tool, class := range classes {
		if got := x.Steps[steps[tool]].Effect; got != string(class) {
			t.Errorf("%s's class: got %q, want %q (from its annotations)", tool, got, class)
		}
	}

	// get_invoice (readOnlyHint): one attempt, never an effect.
	if got := outcomes(mcpGetInvoice); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("get_invoice's attempts: got %v, want [ok]", got)
	}
	if got := effectsOf(mcpGetInvoice); len(got) != 0 {
		t.Errorf("get_invoice's effects: got %v, want none", got)
	}
	// send_invoice_email: its answer lost, called again; its effects are
	// the emails the mail API sent.
	if got := outcomes(mcpSendInvoiceEmail); !slices.Equal(got, []string{"timeout", "ok"}) {
		t.Errorf("send_invoice_email's attempts: got %v, want [timeout ok] in one step", got)
	}
	sent := effectsOf(mcpSendInvoiceEmail)
	if mails := r.mailIDs(t); !slices.Equal(sent, mails) {
		t.Errorf("send_invoice_email's effects: got %v, want the emails the mail API sent, %v", sent, mails)
	}

	var critical []trace.Finding
	for _, f := range x.Findings {
		if f.Severity == trace.SeverityCritical {
			critical = append(critical, f)
		}
	}
	switch m.Run {
	case "naive":
		if len(sent) != 2 {
			t.Errorf("send_invoice_email's effects: got %v, want two (the retry sent a second email)", sent)
		}
		if got := outcomes(mcpChargeCard); !slices.Equal(got, []string{"ok"}) {
			t.Errorf("charge_card's attempts: got %v, want [ok]", got)
		}
		if got := effectsOf(mcpChargeCard); len(got) != 1 {
			t.Errorf("charge_card's effects: got %v, want one", got)
		}
		if len(critical) != 1 || critical[0].Rule != trace.RuleDuplicateEffect || len(critical[0].Effects) != 2 ||
			critical[0].StepID != x.Steps[steps[mcpSendInvoiceEmail]].StepID {
			t.Errorf("critical findings: got %+v, want one duplicate_effect on send_invoice_email's step naming both emails", critical)
		}
		if x.Audit.State != string(trace.StateCritical) {
			t.Errorf("audit state: got %q, want critical", x.Audit.State)
		}
	case "keyed":
		// Both answers lost, both tools called again with the same key,
		// which the mail API and the server honour.
		if len(sent) != 1 {
			t.Errorf("send_invoice_email's effects: got %v, want one (the retry was answered from the key store)", sent)
		}
		if got := outcomes(mcpChargeCard); !slices.Equal(got, []string{"timeout", "ok"}) {
			t.Errorf("charge_card's attempts: got %v, want [timeout ok]", got)
		}
		if got := effectsOf(mcpChargeCard); len(got) != 1 {
			t.Errorf("charge_card's effects: got %v, want one (the server honoured the key)", got)
		}
		for _, tool := range []string{mcpSendInvoiceEmail, mcpChargeCard} {
			key := r.clientKey(tool)
			for i, a := range x.Steps[steps[tool]].Attempts {
				if key == "" || a.IdempotencyKey != key {
					t.Errorf("%s's attempt %d: key %q, want the client's %q", tool, i+1, a.IdempotencyKey, key)
				}
			}
		}
		if len(critical) != 0 {
			t.Errorf("critical findings: got %+v, want none", critical)
		}
		if x.Audit.State != string(trace.StateClean) {
			t.Errorf("audit state: got %q, want clean", x.Audit.State)
		}
	default:
		t.Errorf("manifest run %q: want naive or keyed", m.Run)
	}
}
