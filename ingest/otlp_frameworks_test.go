package ingest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// These tests follow docs/otlp.md's sections on the frameworks whose
// entries the span map gained with issue 21 (LangChain and LangGraph
// through OpenInference, Mastra, Google ADK): each span is shaped as the
// framework's own exporter writes it (its source, pinned in
// testdata/frameworks/gen/package.json), and the test checks what it
// became.

// mapScoped maps spans exported under an instrumentation scope of that
// name, as a framework's tracer names its scope.
func mapScoped(t *testing.T, scope string, spans ...testSpan) map[string]trace.Event {
	t.Helper()
	td := buildTraces(t, nil, spans...)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Scope().SetName(scope)
	res := ingest.MapOTLP(td, defaultOTLPConfig)
	if res.Rejected != 0 {
		t.Fatalf("rejected: got %d (%v), want 0", res.Rejected, res.Reasons)
	}
	return eventsByID(res)
}

// TestMapOTLPGoogleADK: ADK for JS (tracer gcp.vertex.agent) exports an
// invocation span, invoke_agent <agent>, call_llm for each model call and
// execute_tool <tool> for each tool call; a tool call that threw is ended
// bare, with no attribute and no error status.
func TestMapOTLPGoogleADK(t *testing.T) {
	const adk = "gcp.vertex.agent"
	invocation := testSpan{id: 1, name: "invocation", end: 900}
	agent := testSpan{id: 2, parent: 1, name: "invoke_agent billing-agent", start: 1, end: 890, attrs: kv{
		"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent", "gen_ai.conversation.id": "s-1"}}
	callLLM := testSpan{id: 3, parent: 2, name: "call_llm", start: 2, end: 50, attrs: kv{
		"gen_ai.system": adk, "gen_ai.request.model": "gemini-2.5-flash", "gen_ai.agent.name": "billing-agent",
		"gcp.vertex.agent.llm_request": `{"model":"gemini-2.5-flash"}`, "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 14}}
	args := `{"to":"jordan@acme.dev","subject":"Your June invoice"}`
	bare := testSpan{id: 4, parent: 2, name: "execute_tool send_invoice_email", start: 60, end: 1060}
	tool := testSpan{id: 5, parent: 2, name: "execute_tool send_invoice_email", start: 1100, end: 1200, attrs: kv{
		"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_invoice_email", "gen_ai.tool.type": "FunctionTool",
		"gen_ai.tool.call.id": "adk-2", "gcp.vertex.agent.tool_call_args": args, "gcp.vertex.agent.tool_response": `{"status":"sent"}`,
		"gcp.vertex.agent.llm_request": "{}", "gcp.vertex.agent.llm_response": "{}"}}
	events := mapScoped(t, adk, invocation, agent, callLLM, bare, tool)

	if x := events[otlpEventID(1, 1)].Execution; x == nil || x.Name != "invocation" {
		t.Errorf("invocation: got %+v, want the execution (named after its span until the agent names it)", x)
	}
	if ev, ok := events[otlpEventID(1, 2)+":name"]; !ok || ev.Execution.Name != "billing-agent" || ev.Execution.NameSource != "gen_ai.agent.name" {
		t.Errorf("invoke_agent: got %v, want a name event billing-agent from gen_ai.agent.name", ev.Execution)
	}
	if s := spanOf(t, events, 3); s.Role != trace.RoleModel || s.Model != "gemini-2.5-flash" || s.InputTokens != 120 || s.OutputTokens != 14 {
		t.Errorf("call_llm: got %+v, want a model call of gemini-2.5-flash, 120 in, 14 out", *s)
	}
	if _, named := events[otlpEventID(1, 3)+":name"]; named {
		t.Errorf("call_llm: a model call named the execution (it carries gen_ai.agent.name)")
	}
	ok := attemptOf(t, events, 5)
	if ok.Tool != "send_invoice_email" || string(ok.Args) != `{"subject":"Your June invoice","to":"jordan@acme.dev"}` ||
		string(ok.Result) != `{"status":"sent"}` || ok.Outcome != trace.OutcomeOK {
		t.Errorf("execute_tool: got tool %q args %s result %s outcome %q, want send_invoice_email, the gcp.vertex.agent.* arguments and response, ok",
			ok.Tool, ok.Args, ok.Result, ok.Outcome)
	}
	failed := attemptOf(t, events, 4)
	if failed.Tool != "send_invoice_email" || failed.Outcome != trace.OutcomeError ||
		failed.Error != "the framework exported this tool call without its result or status (ADK does this for a failed call)" {
		t.Errorf("bare execute_tool: got tool %q outcome %q error %q, want a failed attempt of send_invoice_email saying why", failed.Tool, failed.Outcome, failed.Error)
	}
	if failed.RecognisedBy != "" || len(failed.Args) != 0 {
		t.Errorf("bare execute_tool: got recognised_by %q and args %s, want neither", failed.RecognisedBy, failed.Args)
	}

	t.Run("a bare span that failed keeps its own error", func(t *testing.T) {
		span := bare
		span.status, span.message = ptrace.StatusCodeError, "TimeoutError: The operation was aborted due to timeout"
		a := attemptOf(t, mapScoped(t, adk, span), 4)
		if a.Outcome != trace.OutcomeTimeout || a.Error != span.message {
			t.Errorf("got %q %q, want timeout with its message", a.Outcome, a.Error)
		}
	})
	t.Run("a bare execute_tool span of another tracer is context", func(t *testing.T) {
		if role := roleOf(mapScoped(t, "billing-service", bare), 4); role != "context" {
			t.Errorf("got %s, want context", role)
		}
	})
	t.Run("a running bare span has no outcome yet", func(t *testing.T) {
		span := bare
		span.end = -1
		ev := mapScoped(t, adk, span)[otlpEventID(1, 4)+":running"]
		if ev.Attempt == nil || ev.Attempt.Outcome != "" || ev.Attempt.Error != "" {
			t.Errorf("got %+v, want a running attempt", ev.Attempt)
		}
	})
}

// TestMapOTLPMastra: Mastra's OtelExporter and OtelBridge convert its spans
// with @mastra/otel-exporter's SpanConverter: GenAI attributes plus
// mastra.span.type. Its two converters (the exporter's 1.4, and the 1.3
// the bridge nests) disagree on which span is the model call: the newer
// names the model_inference span "chat", the older the model_generation
// span, which is the whole loop with the run's summed usage, while each
// call is a model_step keeping the provider's answer.
func TestMapOTLPMastra(t *testing.T) {
	body := `{"id":"resp_1","object":"response","model":"gpt-4o-mini-2024-07-18","output":[],"usage":{"input_tokens":120,"output_tokens":28,"total_tokens":148}}`
	for _, tc := range []struct {
		name  string
		span  string
		kind  ptrace.SpanKind
		attrs map[string]any
		want  string
		call  trace.Span // the model call's model and tokens
	}{
		{name: "agent_run below the root is context", span: "invoke_agent billing-agent", kind: ptrace.SpanKindInternal,
			attrs: kv{"gen_ai.operation.name": "invoke_agent", "mastra.span.type": "agent_run", "gen_ai.agent.name": "billing-agent"}, want: "context"},
		{name: "tool_call is a tool call", span: "execute_tool send_invoice_email", kind: ptrace.SpanKindInternal,
			attrs: kv{"gen_ai.operation.name": "execute_tool", "mastra.span.type": "tool_call", "gen_ai.tool.name": "send_invoice_email"}, want: "attempt"},
		{name: "an MCP tool call without the GenAI operation is a tool call", span: "mcp send", kind: ptrace.SpanKindClient,
			attrs: kv{"mastra.span.type": "mcp_tool_call", "gen_ai.tool.name": "send"}, want: "attempt"},

		// The exporter's converter.
		{name: "exporter: model_inference, called chat, is the model call", span: "chat gpt-4o-mini", kind: ptrace.SpanKindClient,
			attrs: kv{"gen_ai.operation.name": "chat", "mastra.span.type": "model_inference", "gen_ai.request.model": "gpt-4o-mini",
				"gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 28},
			want: "model", call: trace.Span{Model: "gpt-4o-mini", InputTokens: 120, OutputTokens: 28}},
		{name: "exporter: the agent_step around it is context", span: "agent_step billing-agent", kind: ptrace.SpanKindInternal,
			attrs: kv{"gen_ai.operation.name": "agent_step", "mastra.span.type": "model_step", "mastra.model_step.step_index": 0,
				"mastra.metadata.modelMetadata": `{"modelId":"gpt-4o-mini"}`, "mastra.metadata.body": body}, want: "context"},
		{name: "exporter: model_generation is the loop: context", span: "model_generation gpt-4o-mini", kind: ptrace.SpanKindInternal,
			attrs: kv{"gen_ai.operation.name": "model_generation", "mastra.span.type": "model_generation"}, want: "context"},

		// The bridge's converter.
		{name: "bridge: model_generation, though called chat, is the loop: context", span: "chat gpt-4o-mini", kind: ptrace.SpanKindClient,
			attrs: kv{"gen_ai.operation.name": "chat", "mastra.span.type": "model_generation", "gen_ai.request.model": "gpt-4o-mini",
				"gen_ai.usage.input_tokens": 480, "gen_ai.usage.output_tokens": 72}, want: "context"},
		{name: "bridge: model_step is the model call, its model and usage from the provider's answer", span: "model_step billing-agent",
			kind: ptrace.SpanKindInternal, attrs: kv{"gen_ai.operation.name": "model_step", "mastra.span.type": "model_step",
				"mastra.metadata.modelMetadata": `{"modelId":"gpt-4o-mini","modelVersion":"v3"}`, "mastra.metadata.body": body},
			want: "model", call: trace.Span{Model: "gpt-4o-mini", InputTokens: 120, OutputTokens: 28}},
		{name: "bridge: a model_step of Chat Completions", span: "model_step billing-agent", kind: ptrace.SpanKindInternal,
			attrs: kv{"gen_ai.operation.name": "model_step", "mastra.span.type": "model_step",
				"mastra.metadata.body": `{"model":"gpt-4o-mini","usage":{"prompt_tokens":55,"completion_tokens":9}}`},
			want: "model", call: trace.Span{Model: "gpt-4o-mini", InputTokens: 55, OutputTokens: 9}},
		{name: "bridge: a model_step whose answer is not JSON has no usage", span: "model_step billing-agent", kind: ptrace.SpanKindInternal,
			attrs: kv{"gen_ai.operation.name": "model_step", "mastra.span.type": "model_step", "mastra.metadata.body": "<html>"},
			want:  "model"},
		{name: "bridge: model_inference, its child, is context", span: "model_inference billing-agent", kind: ptrace.SpanKindInternal,
			attrs: kv{"gen_ai.operation.name": "model_inference", "mastra.span.type": "model_inference"}, want: "context"},
		{name: "a workflow step is context", span: "workflow step", kind: ptrace.SpanKindInternal,
			attrs: kv{"gen_ai.operation.name": "workflow_step", "mastra.span.type": "workflow_step"}, want: "context"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapScoped(t, "@mastra/otel-bridge", testSpan{id: 1, name: "root", end: 100},
				testSpan{id: 2, parent: 1, name: tc.span, kind: tc.kind, start: 1, attrs: tc.attrs})
			if got := roleOf(events, 2); got != tc.want {
				t.Fatalf("role: got %s, want %s", got, tc.want)
			}
			if tc.want != "model" {
				return
			}
			s := spanOf(t, events, 2)
			if s.Model != tc.call.Model || s.InputTokens != tc.call.InputTokens || s.OutputTokens != tc.call.OutputTokens {
				t.Errorf("model call: got %q %d/%d, want %q %d/%d", s.Model, s.InputTokens, s.OutputTokens,
					tc.call.Model, tc.call.InputTokens, tc.call.OutputTokens)
			}
		})
	}

	// A failed tool call: Mastra writes error.type "unknown" and the
	// message; the timeout is in the message only.
	events := mapScoped(t, "@mastra/otel-exporter", testSpan{id: 2, parent: 1, name: "execute_tool send_invoice_email", start: 1,
		status: ptrace.StatusCodeError, attrs: kv{"gen_ai.operation.name": "execute_tool", "mastra.span.type": "tool_call",
			"gen_ai.tool.name": "send_invoice_email", "error.type": "unknown", "error.message": "The operation was aborted due to timeout"}})
	if a := attemptOf(t, events, 2); a.Outcome != trace.OutcomeTimeout || a.Error != "unknown: The operation was aborted due to timeout" {
		t.Errorf("failed tool call: got %q %q, want timeout with Mastra's error.message", a.Outcome, a.Error)
	}
}

// TestMapOTLPLangGraph: LangGraph.js through
// @arizeai/openinference-instrumentation-langchain. Without a span of the
// program's own, the graph's root CHAIN span, named after the graph, is
// the execution; the ReAct agent's nodes are CHAIN spans; a tool's input
// is its arguments as JSON.
func TestMapOTLPLangGraph(t *testing.T) {
	args := `{"to":"jordan@acme.dev","subject":"Your June invoice","body":"..."}`
	events := mapSpans(t, nil,
		testSpan{id: 1, name: "billing-agent", end: 900, attrs: kv{"openinference.span.kind": "CHAIN", "input.value": `{"messages":[]}`}},
		testSpan{id: 2, parent: 1, name: "agent", start: 1, end: 90, attrs: kv{"openinference.span.kind": "CHAIN", "metadata": `{"langgraph_node":"agent"}`}},
		testSpan{id: 3, parent: 2, name: "ChatOpenAI", start: 2, end: 80, attrs: kv{"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
			"llm.token_count.prompt": 210, "llm.token_count.completion": 31}},
		testSpan{id: 4, parent: 1, name: "tools", start: 100, end: 300, attrs: kv{"openinference.span.kind": "CHAIN"}},
		testSpan{id: 5, parent: 4, name: "send_invoice_email", start: 101, end: 290, status: ptrace.StatusCodeError,
			attrs:  kv{"openinference.span.kind": "TOOL", "tool.name": "send_invoice_email", "input.value": args},
			events: []testSpanEvent{{name: "exception", at: 289, attrs: kv{"exception.type": "Error", "exception.message": "The operation was aborted due to timeout"}}}},
		testSpan{id: 6, parent: 4, name: "send_invoice_email", start: 400, end: 500,
			attrs: kv{"openinference.span.kind": "TOOL", "tool.name": "send_invoice_email", "input.value": args, "output.value": `{"output":"sent"}`}})
	if x := events[otlpEventID(1, 1)].Execution; x == nil || x.Name != "billing-agent" || x.NameSource != "span" {
		t.Errorf("root CHAIN: got %+v, want the execution billing-agent, named by its span", x)
	}
	for _, n := range []byte{2, 4} {
		if role := roleOf(events, n); role != "context" {
			t.Errorf("span %d (a node's CHAIN): got %s, want context", n, role)
		}
	}
	if s := spanOf(t, events, 3); s.Role != trace.RoleModel || s.Model != "gpt-4o-mini" || s.InputTokens != 210 {
		t.Errorf("ChatOpenAI: got %+v, want a model call", *s)
	}
	failed, ok := attemptOf(t, events, 5), attemptOf(t, events, 6)
	if failed.StepID != ok.StepID || failed.Tool != "send_invoice_email" {
		t.Errorf("tool calls: got steps %q and %q (tool %q), want one step of send_invoice_email", failed.StepID, ok.StepID, failed.Tool)
	}
	if failed.Outcome != trace.OutcomeTimeout || ok.Outcome != trace.OutcomeOK {
		t.Errorf("outcomes: got %q then %q, want timeout (the message says so) then ok", failed.Outcome, ok.Outcome)
	}
}

// fixtureManifest is what testdata/frameworks/<framework>/<run>/manifest.json
// says of a recorded run (gen/README.md).
type fixtureManifest struct {
	Framework             string `json:"framework"`
	Tool                  string `json:"tool"`
	ModelCalls            int    `json:"model_calls"`
	ToolErrorSpanExported bool   `json:"tool_error_span_exported"`
	SpanNames             struct {
		Root, Tool, Model string
	} `json:"span_names"`
}

// TestMapOTLPFrameworkFixtures: every recorded framework run, mapped with
// the built-in span map, gives one model call per call of the model API,
// one attempt of the run's tool per tool call whose span was exported
// (two: the one that timed out and its retry), none of them by the
// generic rule, and, where the manifest names them, the tool and model
// calls are the spans it names.
func TestMapOTLPFrameworkFixtures(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/frameworks/*/*/manifest.json")
	if len(dirs) < 8 {
		t.Fatalf("framework fixtures: got %d runs, want at least the eight of four frameworks", len(dirs))
	}
	for _, file := range dirs {
		dir := filepath.Dir(file)
		if filepath.Base(filepath.Dir(dir)) == "temporal" {
			continue // a workflow engine's runs, not an agent's: the Temporal tests replay them
		}
		t.Run(filepath.Base(filepath.Dir(dir))+"/"+filepath.Base(dir), func(t *testing.T) {
			var man fixtureManifest
			data, err := os.ReadFile(file)
			if err == nil {
				err = json.Unmarshal(data, &man)
			}
			if err != nil {
				t.Fatal(err)
			}
			pbs, _ := filepath.Glob(filepath.Join(dir, "otlp-*.pb"))
			var models, attempts []string
			for _, pb := range pbs {
				body, err := os.ReadFile(pb)
				if err != nil {
					t.Fatal(err)
				}
				req := ptraceotlp.NewExportRequest()
				if err := req.UnmarshalProto(body); err != nil {
					t.Fatalf("%s: %v", pb, err)
				}
				names := map[string]string{} // span id -> name
				for _, rs := range req.Traces().ResourceSpans().All() {
					for _, ss := range rs.ScopeSpans().All() {
						for _, sp := range ss.Spans().All() {
							names[sp.SpanID().String()] = sp.Name()
						}
					}
				}
				res := ingest.MapOTLP(req.Traces(), defaultOTLPConfig)
				if res.Rejected != 0 {
					t.Fatalf("%s: rejected %d: %v", pb, res.Rejected, res.Reasons)
				}
				for _, ev := range res.Events {
					switch {
					case ev.Span != nil && ev.Span.Role == trace.RoleModel:
						models = append(models, names[ev.Span.SpanID])
					case ev.Attempt != nil:
						a := ev.Attempt
						attempts = append(attempts, names[a.SpanID])
						if a.Tool != man.Tool || a.RecognisedBy != "" {
							t.Errorf("attempt of span %q: got tool %q recognised by %q, want %q by the framework's entry", names[a.SpanID], a.Tool, a.RecognisedBy, man.Tool)
						}
					}
				}
			}
			if len(models) != man.ModelCalls {
				t.Errorf("model calls: got %d %q, want %d", len(models), models, man.ModelCalls)
			}
			wantAttempts := 1
			if man.ToolErrorSpanExported {
				wantAttempts = 2
			}
			if len(attempts) != wantAttempts {
				t.Errorf("attempts: got %d %q, want %d", len(attempts), attempts, wantAttempts)
			}
			for what, got := range map[string][]string{man.SpanNames.Model: models, man.SpanNames.Tool: attempts} {
				for _, name := range got {
					if what != "" && name != what {
						t.Errorf("got a span %q among %q, want only spans named %q", name, got, what)
					}
				}
			}
		})
	}
}
