package ingest_test

import (
	"encoding/json"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// TestMapOTLPMCP: spans of the OpenTelemetry MCP conventions. The client's
// tools/call span is a tool call of the tool it names, a step of its tool
// and arguments as the MCP proxy derives it; the server's span of the same
// call is context under it, though GenAI's execute_tool alone would make
// it a second call; initialize, tools/list and notifications are context
// on either side.
func TestMapOTLPMCP(t *testing.T) {
	const args = `{"invoice_id":"inv_7","to":"jordan@acme.dev"}`
	call := func(id, parent byte, kind ptrace.SpanKind, start int, extra kv) testSpan {
		attrs := kv{"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_invoice_email",
			"mcp.session.id": "191c4850af6c49e08843a3f6c80e5046", "jsonrpc.request.id": "3", "gen_ai.tool.call.arguments": args}
		for k, v := range extra {
			attrs[k] = v
		}
		return testSpan{id: id, parent: parent, name: "tools/call send_invoice_email", kind: kind, start: start, end: start + 40, attrs: attrs}
	}
	method := func(id, parent byte, kind ptrace.SpanKind, name string, start int) testSpan {
		attrs := kv{"mcp.method.name": name, "mcp.session.id": "191c4850af6c49e08843a3f6c80e5046"}
		if name != "notifications/initialized" {
			attrs["jsonrpc.request.id"] = "1"
		}
		return testSpan{id: id, parent: parent, name: name, kind: kind, start: start, attrs: attrs}
	}
	events := mapSpans(t, nil,
		testSpan{id: 1, name: "invoke_agent billing-agent", end: 900, attrs: kv{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent"}},
		method(2, 1, ptrace.SpanKindClient, "initialize", 1),
		method(3, 2, ptrace.SpanKindServer, "initialize", 2),
		method(4, 1, ptrace.SpanKindClient, "notifications/initialized", 20),
		method(5, 1, ptrace.SpanKindClient, "tools/list", 30),
		method(6, 5, ptrace.SpanKindServer, "tools/list", 31),
		call(7, 1, ptrace.SpanKindClient, 100, nil),
		call(8, 7, ptrace.SpanKindServer, 101, kv{"gen_ai.tool.call.result": `{"structuredContent":{"id":"msg_1"}}`}),
		// Without gen_ai.operation.name (only recommended) and
		// gen_ai.tool.name: still a tool call, of the tool the span names.
		testSpan{id: 9, parent: 1, name: "tools/call get_invoice", kind: ptrace.SpanKindClient, start: 200,
			attrs: kv{"mcp.method.name": "tools/call", "gen_ai.tool.call.arguments": `{"invoice_id":"inv_7"}`}},
		// A GenAI tool span that the MCP instrumentation added its
		// attributes to rather than start a span of its own.
		testSpan{id: 10, parent: 1, name: "execute_tool charge_card", kind: ptrace.SpanKindInternal, start: 300,
			attrs: kv{"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge_card"}},
		// A failed call: isError is error.type tool_error.
		testSpan{id: 11, parent: 1, name: "tools/call send_invoice_email", kind: ptrace.SpanKindClient, start: 400, status: ptrace.StatusCodeError,
			message: "mailbox full", attrs: kv{"mcp.method.name": "tools/call", "gen_ai.tool.name": "send_invoice_email", "error.type": "tool_error",
				"gen_ai.tool.call.arguments": args}},
	)
	for _, n := range []byte{2, 3, 4, 5, 6, 8} {
		if role := roleOf(events, n); role != string(trace.RoleContext) {
			t.Errorf("span %d: got %s, want context", n, role)
		}
	}
	canon, err := ingest.CanonicalArgs(json.RawMessage(args), ingest.DefaultLimits.Redact)
	if err != nil {
		t.Fatal(err)
	}
	a := attemptOf(t, events, 7)
	if want := ingest.ToolStepID("send_invoice_email", canon); a.StepID != want || a.Tool != "send_invoice_email" || string(a.Args) != args ||
		a.Outcome != trace.OutcomeOK || a.TraceID != traceHex(1) || a.SpanID != spanHex(7) || a.Number != 0 {
		t.Errorf("client tools/call: got %+v, want attempt of step %s identified by its span", *a, want)
	}
	if got := attemptOf(t, events, 9); got.Tool != "get_invoice" {
		t.Errorf("tools/call without gen_ai.tool.name: got tool %q, want get_invoice from the span name", got.Tool)
	}
	if got := attemptOf(t, events, 10); got.Tool != "charge_card" || got.RecognisedBy != "" {
		t.Errorf("GenAI tool span with MCP attributes: got %+v, want a tool call of charge_card", *got)
	}
	if got := attemptOf(t, events, 11); got.Outcome != trace.OutcomeError || got.Error != "tool_error: mailbox full" || got.StepID != a.StepID {
		t.Errorf("failed call: got %+v, want an error attempt of the same step", *got)
	}
	attempts := 0
	for _, ev := range events {
		if ev.Attempt != nil {
			attempts++
		}
	}
	if attempts != 4 {
		t.Errorf("attempts: got %d, want 4 (spans 7, 9, 10, 11)", attempts)
	}

	// The server's spans exported on their own, their client span in
	// another request: still context.
	events = mapSpans(t, nil, call(8, 7, ptrace.SpanKindServer, 101, nil), method(6, 5, ptrace.SpanKindServer, "tools/list", 31))
	if roleOf(events, 8) != "context" || roleOf(events, 6) != "context" {
		t.Errorf("server spans alone: got %s and %s, want context", roleOf(events, 8), roleOf(events, 6))
	}
}
