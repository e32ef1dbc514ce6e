package web_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
)

// TestMCPSpansAndProxyAttemptOneStep: an MCP client instrumented by the
// OpenTelemetry MCP conventions exports its tools/call span (trace T, span
// P, with its arguments) and the server's span under it; the MCP proxy
// records the same call as a native attempt event carrying the call's
// params._meta.traceparent, 00-T-P-01 (docs/otlp.md § Tool calls: MCP).
// Whichever arrives first, they are one execution, one step and one
// attempt, with the fields of both: the span's times and error, the
// proxy's class, provider and worker. The server's span is no attempt. The call's answer was
// lost: the client's span ends at its own timeout, before the proxy gives
// up on the answer, so the span's event folds first and its unclassified
// tool (unknown) must not hide the class the proxy read from the server.
func TestMCPSpansAndProxyAttemptOneStep(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const rootID, clientID, serverID = "00f067aa0ba90201", "00f067aa0ba902b7", "00f067aa0ba902c1"
	const tool = "send_invoice_email"
	const args = `{"to":"jordan@acme.dev","invoice_id":"inv_7"}`
	const s = int64(1_751_292_131_000_000_000)
	const ms = int64(1_000_000)
	canon, err := ingest.CanonicalArgs(json.RawMessage(args), ingest.DefaultLimits.Redact)
	if err != nil {
		t.Fatal(err)
	}
	stepID := ingest.ToolStepID(tool, canon)

	mcpAttrs := func(extra map[string]string) map[string]string {
		attrs := map[string]string{"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
			"mcp.session.id": "191c4850af6c49e08843a3f6c80e5046", "jsonrpc.request.id": "3", "gen_ai.tool.call.arguments": args}
		for k, v := range extra {
			attrs[k] = v
		}
		return attrs
	}
	spans := []string{
		otlpJSONSpan(traceID, rootID, "", "invoke_agent billing-agent", 1, s, s+3000*ms,
			map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent"}, ""),
		otlpJSONSpan(traceID, clientID, rootID, "tools/call "+tool, 3, s+100*ms, s+2100*ms, mcpAttrs(nil), "TimeoutError"),
		otlpJSONSpan(traceID, serverID, clientID, "tools/call "+tool, 2, s+102*ms, s+140*ms,
			mcpAttrs(map[string]string{"gen_ai.tool.call.result": `{"structuredContent":{"id":"msg_1"}}`}), ""),
	}
	at := func(n int64) string { return time.Unix(0, s+n*ms).UTC().Format(time.RFC3339Nano) }
	proxyAttempt := json.RawMessage(fmt.Sprintf(`{"type":"attempt","id":"mcp:invoice-mail:191c4850af6c49e08843a3f6c80e5046:3",
		"execution_id":%q,"step_id":%q,"tool":%q,"effect":"write","provider":"invoice-mail","args":%s,
		"started_at":%q,"ended_at":%q,"outcome":"timeout","error":"the answer to tools/call was lost",
		"trace_id":%q,"span_id":%q,"worker":"invoice-server"}`,
		traceID, stepID, tool, args, at(101), at(2105), traceID, clientID))

	var answers []string
	for _, order := range []string{"spans first", "attempt first"} {
		t.Run(order, func(t *testing.T) {
			srv := startServer(t, order, ingest.DefaultLimits)
			postAttempt := func() { srv.post(t, encodeBody([]json.RawMessage{proxyAttempt}, bodyJSON)) }
			if order == "attempt first" {
				postAttempt()
			}
			postOTLPJSON(t, srv, spans...)
			if order == "spans first" {
				postAttempt()
			}

			var list struct {
				Executions []struct {
					ID string `json:"execution_id"`
				} `json:"executions"`
			}
			if err := json.Unmarshal(srv.get(t, "/api/v1/executions"), &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Executions) != 1 || list.Executions[0].ID != traceID {
				t.Fatalf("executions: got %+v, want the trace's only", list.Executions)
			}
			data := srv.get(t, "/api/v1/executions/"+traceID)
			answers = append(answers, string(data))
			var x struct {
				Execution struct {
					Name     string `json:"name"`
					Attempts int    `json:"attempts"`
				} `json:"execution"`
				Steps []struct {
					StepID   string `json:"step_id"`
					Tool     string `json:"tool"`
					Effect   string `json:"effect"`
					Provider string `json:"provider"`
					Attempts []struct {
						Attempt   int               `json:"attempt"`
						SpanID    string            `json:"span_id"`
						Outcome   string            `json:"outcome"`
						Worker    string            `json:"worker"`
						Error     string            `json:"error"`
						StartedAt time.Time         `json:"started_at"`
						Args      json.RawMessage   `json:"args"`
						Conflicts []json.RawMessage `json:"conflicts"`
					} `json:"attempts"`
				} `json:"steps"`
			}
			if err := json.Unmarshal(data, &x); err != nil {
				t.Fatal(err)
			}
			if x.Execution.Name != "billing-agent" || x.Execution.Attempts != 1 {
				t.Errorf("execution: got %q with %d attempts, want billing-agent with 1 (the server's span is none)", x.Execution.Name, x.Execution.Attempts)
			}
			if len(x.Steps) != 1 || len(x.Steps[0].Attempts) != 1 {
				t.Fatalf("steps: got %+v, want one step of one attempt", x.Steps)
			}
			step, a := x.Steps[0], x.Steps[0].Attempts[0]
			if step.StepID != stepID || step.Tool != tool || step.Effect != "write" || step.Provider != "invoice-mail" {
				t.Errorf("step: got %s %s %s %s, want %s %s write invoice-mail", step.StepID, step.Tool, step.Effect, step.Provider, stepID, tool)
			}
			// The span ended first: its start, end and error; the proxy's
			// worker.
			if a.Attempt != 1 || a.SpanID != clientID || a.Outcome != "timeout" || a.Error != "TimeoutError: failed" ||
				!a.StartedAt.Equal(time.Unix(0, s+100*ms)) || a.Worker != "invoice-server" || string(a.Args) != string(canon) || len(a.Conflicts) != 0 {
				t.Errorf("attempt: got %+v, want attempt 1 of span %s, timeout as the span says, worker invoice-server, the args, no conflict", a, clientID)
			}
		})
	}
	if len(answers) == 2 && answers[0] != answers[1] {
		t.Errorf("the execution differs with the order its events arrived in:\n%s\n%s", answers[0], answers[1])
	}
}
