package ingest_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// These tests follow docs/otlp.md's tables ("How spans map") row by row:
// first the role each dialect's spans get, then what each role becomes.
// Where a row lists several attributes, each case sends some of them and
// checks which one won (first match wins). The tests that go through the
// writer and the store (a span's events across export requests) are in
// ingest/writer/otlp_requests_test.go.

var otlpBase = time.Date(2026, 6, 30, 14, 2, 11, 0, time.UTC)

// testSpan describes one span compactly: ids are the last byte of the
// trace or span id, times are milliseconds after otlpBase.
type testSpan struct {
	trace   byte // 0 means trace 1
	id      byte // 0 means no span id
	parent  byte // 0 means a root span
	name    string
	kind    ptrace.SpanKind // 0 is unspecified
	start   int             // ms; -1 means no start time
	end     int             // ms; 0 means start+10, -1 means unfinished
	status  ptrace.StatusCode
	message string
	attrs   map[string]any
	events  []testSpanEvent
}

type testSpanEvent struct {
	name  string
	at    int // ms
	attrs map[string]any
}

// kv is a span's or resource's attributes.
type kv = map[string]any

func traceIDOf(n byte) pcommon.TraceID { return pcommon.TraceID([16]byte{15: n}) }
func spanIDOf(n byte) pcommon.SpanID   { return pcommon.SpanID([8]byte{7: n}) }
func traceHex(n byte) string           { return traceIDOf(n).String() }
func spanHex(n byte) string            { return spanIDOf(n).String() }
func ms(n int) time.Time               { return otlpBase.Add(time.Duration(n) * time.Millisecond) }
func tsOf(n int) pcommon.Timestamp     { return pcommon.NewTimestampFromTime(ms(n)) }

// otlpEventID is the id MapOTLP gives the event of a finished span.
func otlpEventID(traceN, spanN byte) string {
	return "otlp:" + traceHex(traceN) + ":" + spanHex(spanN)
}

// buildTraces puts the spans under one resource and one scope.
func buildTraces(t testing.TB, resource map[string]any, spans ...testSpan) ptrace.Traces {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	if err := rs.Resource().Attributes().FromRaw(resource); err != nil {
		t.Fatal(err)
	}
	out := rs.ScopeSpans().AppendEmpty().Spans()
	for _, s := range spans {
		sp := out.AppendEmpty()
		traceN := s.trace
		if traceN == 0 {
			traceN = 1
		}
		sp.SetTraceID(traceIDOf(traceN))
		if s.id != 0 {
			sp.SetSpanID(spanIDOf(s.id))
		}
		if s.parent != 0 {
			sp.SetParentSpanID(spanIDOf(s.parent))
		}
		sp.SetName(s.name)
		sp.SetKind(s.kind)
		if s.start >= 0 {
			sp.SetStartTimestamp(tsOf(s.start))
		}
		switch {
		case s.end == 0 && s.start >= 0:
			sp.SetEndTimestamp(tsOf(s.start + 10))
		case s.end > 0:
			sp.SetEndTimestamp(tsOf(s.end))
		}
		sp.Status().SetCode(s.status)
		sp.Status().SetMessage(s.message)
		if err := sp.Attributes().FromRaw(s.attrs); err != nil {
			t.Fatal(err)
		}
		for _, e := range s.events {
			ev := sp.Events().AppendEmpty()
			ev.SetName(e.name)
			ev.SetTimestamp(tsOf(e.at))
			if err := ev.Attributes().FromRaw(e.attrs); err != nil {
				t.Fatal(err)
			}
		}
	}
	return td
}

var defaultOTLPConfig = ingest.OTLPConfig{Limits: ingest.DefaultLimits}

// mapSpans maps the spans and fails on any rejection.
func mapSpans(t *testing.T, resource map[string]any, spans ...testSpan) map[string]trace.Event {
	t.Helper()
	return mapSpansWith(t, defaultOTLPConfig, resource, spans...)
}

func mapSpansWith(t *testing.T, cfg ingest.OTLPConfig, resource map[string]any, spans ...testSpan) map[string]trace.Event {
	t.Helper()
	res := ingest.MapOTLP(buildTraces(t, resource, spans...), cfg)
	if res.Rejected != 0 {
		t.Fatalf("rejected: got %d (%v), want 0", res.Rejected, res.Reasons)
	}
	return eventsByID(res)
}

func eventsByID(res ingest.OTLPResult) map[string]trace.Event {
	out := map[string]trace.Event{}
	for _, ev := range res.Events {
		out[ev.ID] = ev
	}
	return out
}

// attemptOf returns the attempt event of a finished span of trace 1.
func attemptOf(t *testing.T, events map[string]trace.Event, spanN byte) *trace.Attempt {
	t.Helper()
	ev, ok := events[otlpEventID(1, spanN)]
	if !ok || ev.Attempt == nil {
		t.Fatalf("span %d: got no attempt event among %v", spanN, keysOf(events))
	}
	return ev.Attempt
}

// spanOf returns the span event (model, HTTP or context) of a finished span
// of trace 1.
func spanOf(t *testing.T, events map[string]trace.Event, spanN byte) *trace.Span {
	t.Helper()
	ev, ok := events[otlpEventID(1, spanN)]
	if !ok || ev.Span == nil {
		t.Fatalf("span %d: got no span event among %v", spanN, keysOf(events))
	}
	return ev.Span
}

// roleOf says what a span of trace 1 became: execution, attempt, effect,
// or the role of its span event (model, http, context).
func roleOf(events map[string]trace.Event, spanN byte) string {
	for _, suffix := range []string{"", ":running"} {
		ev, ok := events[otlpEventID(1, spanN)+suffix]
		switch {
		case !ok:
		case ev.Span != nil:
			return string(ev.Span.Role)
		default:
			return string(ev.Type)
		}
	}
	return "nothing"
}

func keysOf(events map[string]trace.Event) []string {
	var ids []string
	for id, ev := range events {
		ids = append(ids, fmt.Sprintf("%s (%s)", id, ev.Type))
	}
	slices.Sort(ids)
	return ids
}

func effectsOf(events map[string]trace.Event) []*trace.Effect {
	var out []*trace.Effect
	for _, id := range slices.Sorted(maps.Keys(events)) {
		if ev := events[id]; ev.Effect != nil {
			out = append(out, ev.Effect)
		}
	}
	return out
}

// with is base plus extra (extra wins).
func with(base, extra map[string]any) map[string]any {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}
	maps.Copy(out, extra)
	return out
}

// tool is a GenAI tool span's attributes plus extra ones.
func tool(extra map[string]any) map[string]any {
	return with(kv{"gen_ai.operation.name": "execute_tool"}, extra)
}

// toolSpan is a finished tool span of trace 1 whose parent is not in the
// export (so it is not the root).
func toolSpan(id byte, attrs map[string]any) testSpan {
	return testSpan{id: id, parent: 9, name: "execute_tool send", start: int(id), attrs: tool(attrs)}
}

// TestMapOTLPRole: one case per "recognised by" of the role tables. Each
// case maps the span under a plain root span (or as the root itself).
func TestMapOTLPRole(t *testing.T) {
	client, server, internal := ptrace.SpanKindClient, ptrace.SpanKindServer, ptrace.SpanKindInternal
	effect := kv{"oncetrace.effect.provider": "mail-api", "oncetrace.effect.id": "msg_1"}
	for _, tc := range []struct {
		name  string
		root  bool // the span is the trace's root; else a child of a root span
		kind  ptrace.SpanKind
		span  string
		attrs map[string]any
		want  string
	}{
		// The execution root.
		{"root: the trace's root span, of any kind", true, server, "POST /api/chat", nil, "execution"},
		{"root: an invoke_agent root", true, internal, "invoke_agent billing-agent", kv{"gen_ai.operation.name": "invoke_agent"}, "execution"},
		{"root: a GenAI tool span at the root is still the root", true, internal, "execute_tool send", tool(nil), "execution"},
		{"root: a Vercel tool call at the root is still the root", true, internal, "ai.toolCall", kv{"ai.toolCall.name": "send"}, "execution"},
		{"root: a model call at the root is still the root", true, client, "chat gpt-4o", kv{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}, "execution"},
		{"root: a lone HTTP client span at the root is an HTTP call", true, client, "POST", kv{"http.request.method": "POST"}, "http"},
		{"root: an HTTP client span naming a model at the root is the root", true, client, "POST",
			kv{"http.request.method": "POST", "gen_ai.request.model": "gpt-4o"}, "execution"},
		{"root: an HTTP client span naming an agent at the root is the root", true, client, "POST",
			kv{"http.method": "POST", "gen_ai.agent.name": "billing-agent"}, "execution"},
		{"root: an HTTP client span that is a tool call by its dialect at the root is the root", true, client, "POST",
			kv{"http.request.method": "POST", "traceloop.span.kind": "tool"}, "execution"},
		{"root: an HTTP server span at the root is the root", true, server, "POST /api/chat", kv{"http.request.method": "POST"}, "execution"},
		{"root: a CLIENT span without a method at the root is the root", true, client, "redis GET", kv{"db.system": "redis"}, "execution"},

		// oncetrace.* attributes: a tool call, whatever else the span says.
		{"oncetrace: oncetrace.step.id at the root is a tool call", true, server, "POST /run", kv{"oncetrace.step.id": "step-4"}, "attempt"},
		{"oncetrace: oncetrace.step.id beats a GenAI model call", false, client, "chat", kv{"gen_ai.operation.name": "chat", "oncetrace.step.id": "step-4"}, "attempt"},
		{"oncetrace: oncetrace.attempt beats an OpenInference LLM span", false, internal, "llm", kv{"openinference.span.kind": "LLM", "oncetrace.attempt": 2}, "attempt"},
		{"oncetrace: oncetrace.effect beats a Vercel model call", false, internal, "ai.generateText.doGenerate", kv{"oncetrace.effect": "write"}, "attempt"},
		{"oncetrace: oncetrace.outcome beats an OpenLLMetry workflow", false, internal, "nightly.workflow", kv{"traceloop.span.kind": "workflow", "oncetrace.outcome": "ok"}, "attempt"},
		{"oncetrace: oncetrace.idempotency.key beats an HTTP client call", false, client, "POST", kv{"http.request.method": "POST", "oncetrace.idempotency.key": "ik_1"}, "attempt"},
		{"oncetrace: oncetrace.provider beats a model call by gen_ai.request.model", false, client, "completion", kv{"gen_ai.request.model": "gpt-4o", "oncetrace.provider": "mail-api"}, "attempt"},
		{"oncetrace: oncetrace.replayed on a plain span", false, internal, "send", kv{"oncetrace.replayed": true}, "attempt"},
		{"oncetrace: oncetrace.deduplicated on a plain span", false, internal, "send", kv{"oncetrace.deduplicated": false}, "attempt"},
		{"oncetrace: oncetrace.execution.id alone is no tool call", false, internal, "work", kv{"oncetrace.execution.id": "exec_1"}, "context"},

		// GenAI semantic conventions.
		{"GenAI: execute_tool is a tool call", false, internal, "execute_tool send", kv{"gen_ai.operation.name": "execute_tool"}, "attempt"},
		{"GenAI: chat is a model call", false, internal, "chat gpt-4o", kv{"gen_ai.operation.name": "chat"}, "model"},
		{"GenAI: text_completion is a model call", false, internal, "text_completion", kv{"gen_ai.operation.name": "text_completion"}, "model"},
		{"GenAI: generate_content is a model call", false, internal, "generate_content gemini", kv{"gen_ai.operation.name": "generate_content"}, "model"},
		{"GenAI: embeddings is a model call", false, internal, "embeddings", kv{"gen_ai.operation.name": "embeddings"}, "model"},
		{"OpenLLMetry (older): llm.request.type chat is a model call", false, internal, "openai.chat", kv{"llm.request.type": "chat"}, "model"},
		{"OpenLLMetry (older): an unknown llm.request.type is context", false, internal, "x", kv{"llm.request.type": "other"}, "context"},
		{"GenAI: invoke_agent below the root is context", false, internal, "invoke_agent researcher", kv{"gen_ai.operation.name": "invoke_agent"}, "context"},
		{"GenAI: another operation is context", false, internal, "create_agent", kv{"gen_ai.operation.name": "create_agent"}, "context"},

		// Vercel AI SDK.
		{"Vercel: a span named ai.toolCall is a tool call", false, internal, "ai.toolCall", nil, "attempt"},
		{"Vercel: ai.toolCall.name is a tool call whatever the span's name", false, internal, "tool sendEmail", kv{"ai.toolCall.name": "sendEmail"}, "attempt"},
		{"Vercel: ai.generateText.doGenerate is a model call", false, internal, "ai.generateText.doGenerate", nil, "model"},
		{"Vercel: ai.streamText.doStream is a model call", false, internal, "ai.streamText.doStream", nil, "model"},
		{"Vercel: ai.generateObject.doGenerate is a model call", false, internal, "ai.generateObject.doGenerate", nil, "model"},
		{"Vercel: ai.embed.doEmbed is a model call", false, internal, "ai.embed.doEmbed", nil, "model"},
		{"Vercel: ai.operationId names the call when the span name does not", false, internal, "llm", kv{"ai.operationId": "ai.streamText.doStream"}, "model"},
		{"Vercel: the outer ai.generateText is context", false, internal, "ai.generateText", kv{"ai.operationId": "ai.generateText"}, "context"},
		{"Vercel: ai.<fn>.<not do...> is context", false, internal, "ai.generateText.finish", nil, "context"},

		// OpenLLMetry (Traceloop).
		{"OpenLLMetry: traceloop.span.kind tool is a tool call", false, internal, "send.tool", kv{"traceloop.span.kind": "tool"}, "attempt"},
		{"OpenLLMetry: the kind in any case", false, internal, "send.tool", kv{"traceloop.span.kind": "TOOL"}, "attempt"},
		{"OpenLLMetry: a workflow below the root is context", false, internal, "nightly.workflow", kv{"traceloop.span.kind": "workflow"}, "context"},
		{"OpenLLMetry: an agent below the root is context", false, internal, "billing.agent", kv{"traceloop.span.kind": "agent"}, "context"},
		{"OpenLLMetry: a task is context", false, internal, "fetch.task", kv{"traceloop.span.kind": "task"}, "context"},

		// OpenInference (Arize Phoenix).
		{"OpenInference: TOOL is a tool call", false, internal, "send", kv{"openinference.span.kind": "TOOL"}, "attempt"},
		{"OpenInference: the kind in any case", false, internal, "send", kv{"openinference.span.kind": "tool"}, "attempt"},
		{"OpenInference: LLM is a model call", false, internal, "ChatOpenAI", kv{"openinference.span.kind": "LLM"}, "model"},
		{"OpenInference: EMBEDDING is a model call", false, internal, "OpenAIEmbeddings", kv{"openinference.span.kind": "EMBEDDING"}, "model"},
		{"OpenInference: CHAIN below the root is context", false, internal, "RunnableSequence", kv{"openinference.span.kind": "CHAIN"}, "context"},
		{"OpenInference: AGENT below the root is context", false, internal, "AgentExecutor", kv{"openinference.span.kind": "AGENT"}, "context"},
		{"OpenInference: RETRIEVER is context", false, internal, "VectorStoreRetriever", kv{"openinference.span.kind": "RETRIEVER"}, "context"},

		// A CLIENT span naming a model (OpenLLMetry's LLM spans, most SDK instrumentations).
		{"client: a CLIENT span with gen_ai.request.model is a model call", false, client, "openai.chat", kv{"gen_ai.request.model": "gpt-4o"}, "model"},
		{"client: gen_ai.request.model on an INTERNAL span is context", false, internal, "openai.chat", kv{"gen_ai.request.model": "gpt-4o"}, "context"},
		{"client: a model call beats an HTTP call", false, client, "POST", kv{"gen_ai.request.model": "gpt-4o", "http.request.method": "POST"}, "model"},

		// HTTP client calls.
		{"HTTP: a CLIENT span with http.request.method", false, client, "POST", kv{"http.request.method": "POST"}, "http"},
		{"HTTP: a CLIENT span with the older http.method", false, client, "HTTP POST", kv{"http.method": "POST"}, "http"},
		{"HTTP: a SERVER span is context", false, server, "POST /hook", kv{"http.request.method": "POST"}, "context"},
		{"HTTP: an INTERNAL span is context", false, internal, "POST", kv{"http.method": "POST"}, "context"},
		{"HTTP: a CLIENT span without a method is context", false, client, "redis GET", kv{"db.system": "redis"}, "context"},

		// Precedence between the dialects: a tool call beats a model call.
		{"precedence: a TOOL kind beats a chat operation", false, internal, "x", kv{"gen_ai.operation.name": "chat", "openinference.span.kind": "TOOL"}, "attempt"},
		{"precedence: execute_tool beats a CLIENT span's model and method", false, client, "x",
			kv{"gen_ai.operation.name": "execute_tool", "gen_ai.request.model": "gpt-4o", "http.request.method": "POST"}, "attempt"},

		// Effects.
		{"effect: a span named oncetrace.effect", false, internal, "oncetrace.effect", effect, "effect"},
		{"effect: a span named oncetrace.effect beats oncetrace.step.id", false, internal, "oncetrace.effect", with(effect, kv{"oncetrace.step.id": "step-4"}), "effect"},
		{"effect: a root span named oncetrace.effect", true, internal, "oncetrace.effect", effect, "effect"},

		// Context.
		{"context: anything else", false, internal, "load customer", kv{"customer.id": "acme"}, "context"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			span := testSpan{id: 2, name: tc.span, kind: tc.kind, start: 1, attrs: tc.attrs}
			spans := []testSpan{span}
			if !tc.root {
				spans[0].parent = 1
				spans = append(spans, testSpan{id: 1, name: "root", end: 100})
			}
			events := mapSpans(t, nil, spans...)
			if got := roleOf(events, 2); got != tc.want {
				t.Errorf("role: got %s, want %s (events %v)", got, tc.want, keysOf(events))
			}
		})
	}
}

func TestMapOTLPExecutionID(t *testing.T) {
	all := kv{"oncetrace.execution.id": "exec-oncetrace", "temporalWorkflowID": "wf-temporal", "temporalRunID": "run-1",
		"restate.invocation.id": "inv-restate", "dbos.operation.workflow_id": "wf-dbos", "operationUUID": "op-uuid"}
	without := func(names ...string) map[string]any {
		out := map[string]any{}
		for k, v := range all {
			if !slices.Contains(names, k) {
				out[k] = v
			}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		resource map[string]any
		spans    []testSpan
		want     map[byte]string // span of trace 1 -> execution id of its event
		// wantTrace2 is the same for trace 2.
		wantTrace2 map[byte]string
	}{
		{name: "oncetrace.execution.id first", spans: []testSpan{{id: 1, name: "step", attrs: all}},
			want: map[byte]string{1: "exec-oncetrace"}},
		{name: "temporalWorkflowID second", spans: []testSpan{{id: 1, name: "step", attrs: without("oncetrace.execution.id")}},
			want: map[byte]string{1: "wf-temporal/run-1"}},
		{name: "a Temporal workflow id without its run names no execution", spans: []testSpan{{id: 1, name: "step",
			attrs: kv{"temporalWorkflowID": "wf-temporal", "restate.invocation.id": "inv-restate"}}}, want: map[byte]string{1: "inv-restate"}},
		{name: "restate.invocation.id third", spans: []testSpan{{id: 1, name: "step",
			attrs: without("oncetrace.execution.id", "temporalWorkflowID", "temporalRunID")}}, want: map[byte]string{1: "inv-restate"}},
		{name: "dbos.operation.workflow_id fourth", spans: []testSpan{{id: 1, name: "step",
			attrs: without("oncetrace.execution.id", "temporalWorkflowID", "temporalRunID", "restate.invocation.id")}}, want: map[byte]string{1: "wf-dbos"}},
		{name: "operationUUID fifth", spans: []testSpan{{id: 1, name: "step", attrs: kv{"operationUUID": "op-uuid"}}},
			want: map[byte]string{1: "op-uuid"}},
		{name: "the trace id when nothing names it", spans: []testSpan{{id: 1, name: "step"}},
			want: map[byte]string{1: traceHex(1)}},
		{name: "inherited from the parent span in the same export", spans: []testSpan{
			{id: 1, name: "workflow", attrs: kv{"temporalWorkflowID": "wf-1", "temporalRunID": "r"}},
			{id: 2, parent: 1, name: "activity", start: 1}},
			want: map[byte]string{1: "wf-1/r", 2: "wf-1/r"}},
		{name: "inherited from the grandparent, by every role", spans: []testSpan{
			{id: 1, name: "workflow", attrs: kv{"oncetrace.execution.id": "exec-gp"}},
			{id: 2, parent: 1, name: "agent", start: 1},
			{id: 3, parent: 2, name: "tool", start: 2, attrs: tool(nil)},
			{id: 4, parent: 2, name: "chat", start: 3, attrs: kv{"gen_ai.operation.name": "chat"}},
			{id: 5, parent: 3, name: "POST", kind: ptrace.SpanKindClient, start: 4, attrs: kv{"http.request.method": "POST"}}},
			want: map[byte]string{1: "exec-gp", 2: "exec-gp", 3: "exec-gp", 4: "exec-gp", 5: "exec-gp"}},
		{name: "a span's own attribute beats an ancestor's, whatever their rank", spans: []testSpan{
			{id: 1, name: "workflow", attrs: kv{"oncetrace.execution.id": "exec-parent"}},
			{id: 2, parent: 1, name: "tool", start: 1, attrs: kv{"operationUUID": "op-child"}}},
			want: map[byte]string{1: "exec-parent", 2: "op-child"}},
		{name: "from the resource when no span names it", resource: kv{"oncetrace.execution.id": "exec-res"},
			spans: []testSpan{{id: 2, parent: 9, name: "tool"}}, want: map[byte]string{2: "exec-res"}},
		{name: "a span's attribute beats the resource", resource: kv{"oncetrace.execution.id": "exec-res"},
			spans: []testSpan{{id: 2, name: "tool", attrs: kv{"temporalWorkflowID": "wf-span", "temporalRunID": "r"}}},
			want:  map[byte]string{2: "wf-span/r"}},
		{name: "a parent outside the export passes nothing on", spans: []testSpan{{id: 2, parent: 9, name: "tool"}},
			want: map[byte]string{2: traceHex(1)}},
		{name: "the root invoke_agent span's execution is its trace", spans: []testSpan{
			{id: 1, name: "invoke_agent billing-agent", attrs: kv{"gen_ai.operation.name": "invoke_agent"}},
			{id: 2, parent: 1, name: "execute_tool send", start: 1, attrs: tool(nil)}},
			want: map[byte]string{1: traceHex(1), 2: traceHex(1)}},
		{name: "one execution id across two traces", spans: []testSpan{
			{trace: 1, id: 1, name: "run", attrs: kv{"oncetrace.execution.id": "exec-shared"}},
			{trace: 2, id: 1, name: "run", attrs: kv{"oncetrace.execution.id": "exec-shared"}}},
			want: map[byte]string{1: "exec-shared"}, wantTrace2: map[byte]string{1: "exec-shared"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapSpans(t, tc.resource, tc.spans...)
			for traceN, wants := range map[byte]map[byte]string{1: tc.want, 2: tc.wantTrace2} {
				for spanN, want := range wants {
					ev, ok := events[otlpEventID(traceN, spanN)]
					if !ok {
						t.Fatalf("trace %d span %d: no event among %v", traceN, spanN, keysOf(events))
					}
					if got := ev.ExecutionID(); got != want {
						t.Errorf("trace %d span %d: execution id: got %q, want %q", traceN, spanN, got, want)
					}
				}
			}
		})
	}
}

func TestMapOTLPSessionLabel(t *testing.T) {
	root := func(attrs map[string]any) testSpan {
		return testSpan{id: 1, name: "invoke_agent billing-agent",
			attrs: with(kv{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent"}, attrs)}
	}
	for _, tc := range []struct {
		name     string
		resource map[string]any
		span     testSpan
		want     string // "" means no labels
	}{
		{name: "gen_ai.conversation.id first", span: root(kv{"gen_ai.conversation.id": "conv_42", "session.id": "sess_7"}), want: "conv_42"},
		{name: "session.id second", span: root(kv{"session.id": "sess_7"}), want: "sess_7"},
		{name: "from the resource", resource: kv{"session.id": "sess_res"}, span: root(nil), want: "sess_res"},
		{name: "none", span: root(nil), want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapSpans(t, tc.resource, tc.span)
			x := events[otlpEventID(1, 1)].Execution
			if x == nil {
				t.Fatalf("got no execution event among %v", keysOf(events))
			}
			if x.ID != traceHex(1) {
				t.Errorf("execution id: got %q, want the trace id %q (a session is a label, not the execution)", x.ID, traceHex(1))
			}
			var want map[string]string
			if tc.want != "" {
				want = map[string]string{"session": tc.want}
			}
			if fmt.Sprint(x.Labels) != fmt.Sprint(want) {
				t.Errorf("labels: got %v, want %v", x.Labels, want)
			}
		})
	}
}

// TestMapOTLPExecutionName: the root's name, by precedence, and where it
// came from (name_source, which the store's fold ranks).
func TestMapOTLPExecutionName(t *testing.T) {
	all := kv{"gen_ai.agent.name": "billing-agent", "ai.telemetry.functionId": "billing-fn",
		"traceloop.span.kind": "workflow", "traceloop.entity.name": "billing-workflow"}
	for _, tc := range []struct {
		name       string
		span       string
		attrs      map[string]any
		wantName   string
		wantSource string
	}{
		{"gen_ai.agent.name first", "invoke_agent", with(all, kv{"gen_ai.operation.name": "invoke_agent"}), "billing-agent", "gen_ai.agent.name"},
		{"gen_ai.workflow.name counts as the agent's name", "invoke_workflow", kv{"gen_ai.workflow.name": "nightly-billing",
			"ai.telemetry.functionId": "billing-fn"}, "nightly-billing", "gen_ai.agent.name"},
		{"ai.telemetry.functionId second", "ai.generateText", kv{"ai.telemetry.functionId": "billing-fn",
			"traceloop.span.kind": "workflow", "traceloop.entity.name": "billing-workflow"}, "billing-fn", "ai.telemetry.functionId"},
		{"traceloop.entity.name of a workflow third", "billing.workflow", kv{"traceloop.span.kind": "workflow",
			"traceloop.entity.name": "billing-workflow"}, "billing-workflow", "traceloop.entity.name"},
		{"traceloop.entity.name of an agent", "billing.agent", kv{"traceloop.span.kind": "agent",
			"traceloop.entity.name": "billing-agent"}, "billing-agent", "traceloop.entity.name"},
		{"traceloop.entity.name of a task is not a name", "fetch.task", kv{"traceloop.span.kind": "task",
			"traceloop.entity.name": "fetch"}, "fetch.task", "span"},
		{"a Vercel model call's function id is not a name", "ai.generateText.doGenerate", kv{"ai.telemetry.functionId": "billing-fn"},
			"ai.generateText.doGenerate", "span"},
		{"the span name last", "POST /api/chat", nil, "POST /api/chat", "span"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapSpans(t, nil, testSpan{id: 1, name: tc.span, attrs: tc.attrs})
			x := events[otlpEventID(1, 1)].Execution
			if x == nil {
				t.Fatalf("got no execution event among %v", keysOf(events))
			}
			if x.Name != tc.wantName || x.NameSource != tc.wantSource {
				t.Errorf("name: got %q from %q, want %q from %q", x.Name, x.NameSource, tc.wantName, tc.wantSource)
			}
		})
	}
}

// TestMapOTLPAgentBelowTheRoot: an agent span below the root stays a
// context span and also names the execution, through a name-only
// execution event.
func TestMapOTLPAgentBelowTheRoot(t *testing.T) {
	for _, tc := range []struct {
		name       string
		span       string
		attrs      map[string]any
		wantName   string // "" means no name event
		wantSource string
	}{
		{"gen_ai.agent.name", "invoke_agent researcher", kv{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"},
			"researcher", "gen_ai.agent.name"},
		{"an invoke_agent span without a name attribute: its span name", "invoke_agent researcher",
			kv{"gen_ai.operation.name": "invoke_agent"}, "invoke_agent researcher", "span"},
		{"an invoke_workflow span: its span name", "invoke_workflow nightly", kv{"gen_ai.operation.name": "invoke_workflow"},
			"invoke_workflow nightly", "span"},
		{"a Vercel call with a function id", "ai.generateText", kv{"ai.telemetry.functionId": "billing-fn"}, "billing-fn", "ai.telemetry.functionId"},
		{"an OpenLLMetry agent", "billing.agent", kv{"traceloop.span.kind": "agent", "traceloop.entity.name": "billing-agent"},
			"billing-agent", "traceloop.entity.name"},
		{"an OpenLLMetry task names nothing", "fetch.task", kv{"traceloop.span.kind": "task", "traceloop.entity.name": "fetch"}, "", ""},
		{"a Vercel model call names nothing", "ai.generateText.doGenerate", kv{"ai.telemetry.functionId": "billing-fn"}, "", ""},
		{"a plain span names nothing", "load customer", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapSpans(t, nil, testSpan{id: 1, name: "POST /api/chat", kind: ptrace.SpanKindServer, end: 100},
				testSpan{id: 2, parent: 1, name: tc.span, start: 1, attrs: tc.attrs})
			if role := roleOf(events, 2); role != "context" && role != "model" {
				t.Errorf("span 2: got a %s, want a context or model span", role)
			}
			ev, ok := events[otlpEventID(1, 2)+":name"]
			if tc.wantName == "" {
				if ok {
					t.Errorf("got a name event %s, want none", ev.Body)
				}
				return
			}
			if !ok || ev.Execution == nil {
				t.Fatalf("got no name event among %v", keysOf(events))
			}
			x := ev.Execution
			if x.ID != traceHex(1) || x.Name != tc.wantName || x.NameSource != tc.wantSource {
				t.Errorf("name event: got %q named %q from %q, want %q named %q from %q",
					x.ID, x.Name, x.NameSource, traceHex(1), tc.wantName, tc.wantSource)
			}
			if x.Status != "" || !x.StartedAt.IsZero() || !x.EndedAt.IsZero() {
				t.Errorf("name event: got status %q, start %v, end %v; want a name only", x.Status, x.StartedAt, x.EndedAt)
			}
		})
	}
}

// TestMapOTLPNameFold: the store's fold keeps the best-ranked name, in
// whichever order (and export request) the root and the agent span come.
func TestMapOTLPNameFold(t *testing.T) {
	server := testSpan{id: 1, name: "POST /api/chat", kind: ptrace.SpanKindServer, end: 100}
	agentRoot := testSpan{id: 1, name: "invoke_agent billing-agent", end: 100,
		attrs: kv{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent"}}
	vercel := testSpan{id: 2, parent: 1, name: "ai.generateText", start: 1, attrs: kv{"ai.telemetry.functionId": "billing-fn"}}
	for _, tc := range []struct {
		name       string
		root       testSpan
		wantName   string
		wantSource string
	}{
		{"a function id below beats the root's span name", server, "billing-fn", "ai.telemetry.functionId"},
		{"the root's agent name beats a function id below", agentRoot, "billing-agent", "gen_ai.agent.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range [][]testSpan{{tc.root, vercel}, {vercel, tc.root}} {
				var events []trace.Event
				for _, sp := range order { // one export request per span
					for _, ev := range mapSpans(t, nil, sp) {
						if ev.Execution != nil {
							events = append(events, ev)
						}
					}
				}
				x := trace.FoldExecution(events)
				if x.Name != tc.wantName || x.NameSource != tc.wantSource {
					t.Errorf("%s first: got %q from %q, want %q from %q", order[0].name, x.Name, x.NameSource, tc.wantName, tc.wantSource)
				}
			}
		})
	}
}

func TestMapOTLPRootStatus(t *testing.T) {
	for _, tc := range []struct {
		name       string
		span       testSpan
		wantID     string
		wantStatus trace.Status
		wantEnd    int // ms; -1 means none
	}{
		{"ended is completed", testSpan{end: 100}, otlpEventID(1, 1), trace.StatusCompleted, 100},
		{"status OK is completed", testSpan{end: 100, status: ptrace.StatusCodeOk}, otlpEventID(1, 1), trace.StatusCompleted, 100},
		{"ended with status ERROR is failed", testSpan{end: 100, status: ptrace.StatusCodeError, message: "boom"},
			otlpEventID(1, 1), trace.StatusFailed, 100},
		{"no end is running, with its own event id", testSpan{end: -1}, otlpEventID(1, 1) + ":running", trace.StatusRunning, -1},
		{"no end with status ERROR is still running", testSpan{end: -1, status: ptrace.StatusCodeError},
			otlpEventID(1, 1) + ":running", trace.StatusRunning, -1},
		{"an end before the start is taken as the start", testSpan{start: 50, end: 20}, otlpEventID(1, 1), trace.StatusCompleted, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := tc.span
			sp.id, sp.name = 1, "invoke_agent billing-agent"
			events := mapSpans(t, nil, sp)
			if len(events) != 1 {
				t.Fatalf("got %v, want one execution event", keysOf(events))
			}
			x := events[tc.wantID].Execution
			if x == nil {
				t.Fatalf("got %v, want the execution event %s", keysOf(events), tc.wantID)
			}
			if x.Status != tc.wantStatus {
				t.Errorf("status: got %q, want %q", x.Status, tc.wantStatus)
			}
			if !x.StartedAt.Equal(ms(sp.start)) {
				t.Errorf("started_at: got %v, want %v", x.StartedAt, ms(sp.start))
			}
			switch {
			case tc.wantEnd < 0 && !x.EndedAt.IsZero():
				t.Errorf("ended_at: got %v, want none", x.EndedAt)
			case tc.wantEnd >= 0 && !x.EndedAt.Equal(ms(tc.wantEnd)):
				t.Errorf("ended_at: got %v, want %v", x.EndedAt, ms(tc.wantEnd))
			}
		})
	}
}

// TestMapOTLPToolName: the tool's name in each dialect.
func TestMapOTLPToolName(t *testing.T) {
	for _, tc := range []struct {
		name  string
		span  string
		attrs map[string]any
		want  string
	}{
		{"GenAI: gen_ai.tool.name", "execute_tool send_invoice_email", kv{"gen_ai.operation.name": "execute_tool",
			"gen_ai.tool.name": "send_invoice_email"}, "send_invoice_email"},
		{"Vercel: ai.toolCall.name", "ai.toolCall", kv{"ai.toolCall.name": "sendInvoiceEmail"}, "sendInvoiceEmail"},
		{"OpenLLMetry: traceloop.entity.name of a tool", "send_invoice_email.tool", kv{"traceloop.span.kind": "tool",
			"traceloop.entity.name": "send_invoice_email"}, "send_invoice_email"},
		{"OpenInference: tool.name", "ToolCall", kv{"openinference.span.kind": "TOOL", "tool.name": "send_invoice_email"}, "send_invoice_email"},
		{"OpenInference: the span name without tool.name", "send_invoice_email", kv{"openinference.span.kind": "TOOL"}, "send_invoice_email"},
		{"oncetrace: the span name", "send_invoice_email", kv{"oncetrace.step.id": "step-4"}, "send_invoice_email"},
		{"the traceloop.entity.name of another kind is not the tool's", "send", kv{"oncetrace.step.id": "step-4",
			"traceloop.span.kind": "task", "traceloop.entity.name": "helper"}, "send"},
		{"gen_ai.tool.name beats ai.toolCall.name, tool.name and traceloop.entity.name", "x", kv{"gen_ai.operation.name": "execute_tool",
			"gen_ai.tool.name": "a", "ai.toolCall.name": "b", "tool.name": "c", "traceloop.span.kind": "tool", "traceloop.entity.name": "d"}, "a"},
		{"ai.toolCall.name beats tool.name and traceloop.entity.name", "x", kv{"ai.toolCall.name": "b", "tool.name": "c",
			"traceloop.span.kind": "tool", "traceloop.entity.name": "d"}, "b"},
		{"tool.name beats traceloop.entity.name", "x", kv{"tool.name": "c", "traceloop.span.kind": "tool", "traceloop.entity.name": "d"}, "c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapSpans(t, nil, testSpan{id: 2, parent: 9, name: tc.span, attrs: tc.attrs})
			if got := attemptOf(t, events, 2).Tool; got != tc.want {
				t.Errorf("tool: got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestMapOTLPArgsAndResult: a tool's arguments and result in each dialect.
func TestMapOTLPArgsAndResult(t *testing.T) {
	genai := func(args, result any) map[string]any {
		a := tool(nil)
		if args != nil {
			a["gen_ai.tool.call.arguments"] = args
		}
		if result != nil {
			a["gen_ai.tool.call.result"] = result
		}
		return a
	}
	traceloop := func(input, output string) map[string]any {
		return kv{"traceloop.span.kind": "tool", "traceloop.entity.name": "send", "traceloop.entity.input": input, "traceloop.entity.output": output}
	}
	for _, tc := range []struct {
		name             string
		attrs            map[string]any
		wantArgs, wantRe string // canonical JSON; "" means none
	}{
		// The value's shape, the same for every dialect.
		{"objects", genai(kv{"to": "jordan@acme.dev", "n": 2}, kv{"status": "sent"}),
			`{"n":2,"to":"jordan@acme.dev"}`, `{"status":"sent"}`},
		{"JSON strings", genai(`{"to": "jordan@acme.dev", "n": 2}`, `["a", 1]`), `{"n":2,"to":"jordan@acme.dev"}`, `["a",1]`},
		{"a string that is not JSON stays a string", genai("send it to jordan", "sent"), `"send it to jordan"`, `"sent"`},
		{"arrays", genai([]any{"a", int64(1), true}, nil), `["a",1,true]`, ""},
		{"numbers as sent", genai(`{"amount": 12345678901234567, "rate": 0.10}`, nil), `{"amount":12345678901234567,"rate":0.10}`, ""},
		{"none", tool(nil), "", ""},

		// Each dialect.
		{"GenAI: gen_ai.tool.call.arguments and .result", genai(`{"a":1}`, `{"ok":true}`), `{"a":1}`, `{"ok":true}`},
		{"Vercel: ai.toolCall.args and .result", kv{"ai.toolCall.name": "send", "ai.toolCall.args": `{"a":1}`,
			"ai.toolCall.result": `{"ok":true}`}, `{"a":1}`, `{"ok":true}`},
		{"Vercel: ai.toolCall.input and .output", kv{"ai.toolCall.name": "send", "ai.toolCall.input": `{"a":1}`,
			"ai.toolCall.output": `{"ok":true}`}, `{"a":1}`, `{"ok":true}`},
		{"OpenInference: input.value and output.value", kv{"openinference.span.kind": "TOOL", "input.value": `{"query":"acme"}`,
			"output.value": `{"customer":"acme"}`}, `{"query":"acme"}`, `{"customer":"acme"}`},
		{"OpenInference: a plain-text output.value", kv{"openinference.span.kind": "TOOL", "input.value": `{"query":"acme"}`,
			"output.value": "Acme Corp"}, `{"query":"acme"}`, `"Acme Corp"`},
		{"OpenLLMetry: the keyword arguments unwrapped", traceloop(`{"args": [], "kwargs": {"to": "jordan@acme.dev", "n": 2}}`, `{"status":"sent"}`),
			`{"n":2,"to":"jordan@acme.dev"}`, `{"status":"sent"}`},
		{"OpenLLMetry: empty keyword arguments", traceloop(`{"args":[],"kwargs":{}}`, `null`), `{}`, ""},
		{"OpenLLMetry: one positional argument unwrapped", traceloop(`{"args":["jordan@acme.dev"],"kwargs":{}}`, `"sent"`),
			`"jordan@acme.dev"`, `"sent"`},
		{"OpenLLMetry: one positional argument, no kwargs", traceloop(`{"args":[{"to":"j"}]}`, `"sent"`), `{"to":"j"}`, `"sent"`},
		{"OpenLLMetry: several positional arguments stay wrapped", traceloop(`{"args":["a","b"],"kwargs":{}}`, `"sent"`),
			`{"args":["a","b"],"kwargs":{}}`, `"sent"`},
		{"OpenLLMetry: positional and keyword arguments stay wrapped", traceloop(`{"args":["a"],"kwargs":{"b":1}}`, `"sent"`),
			`{"args":["a"],"kwargs":{"b":1}}`, `"sent"`},
		{"OpenLLMetry: unwrapped keyword arguments keep their numbers", traceloop(`{"args":[],"kwargs":{"amount":12345678901234567,"rate":0.10}}`, `1`),
			`{"amount":12345678901234567,"rate":0.10}`, `1`},
		{"OpenLLMetry: an input that is not the wrapper is taken as it is", traceloop(`{"query":"acme"}`, `"x"`), `{"query":"acme"}`, `"x"`},
		{"only traceloop.entity.input is unwrapped", genai(`{"args":[],"kwargs":{"a":1}}`, nil), `{"args":[],"kwargs":{"a":1}}`, ""},

		// Precedence.
		{"gen_ai.tool.call.* beat the others", with(genai(`{"a":1}`, `{"r":1}`), kv{"ai.toolCall.args": `{"b":2}`, "ai.toolCall.result": `{"r":2}`,
			"input.value": `{"c":3}`, "output.value": `{"r":3}`, "traceloop.entity.input": `{"d":4}`, "traceloop.entity.output": `{"r":4}`}),
			`{"a":1}`, `{"r":1}`},
		{"ai.toolCall.args/.result beat .input/.output", kv{"ai.toolCall.name": "send", "ai.toolCall.args": `{"b":2}`, "ai.toolCall.input": `{"b":3}`,
			"ai.toolCall.result": `{"r":2}`, "ai.toolCall.output": `{"r":3}`}, `{"b":2}`, `{"r":2}`},
		{"ai.toolCall.input/.output beat input.value/output.value", kv{"ai.toolCall.name": "send", "ai.toolCall.input": `{"b":3}`,
			"ai.toolCall.output": `{"r":3}`, "input.value": `{"c":3}`, "output.value": `{"r":4}`}, `{"b":3}`, `{"r":3}`},
		{"input.value/output.value beat traceloop.entity.*, which is then not unwrapped", with(traceloop(`{"args":[],"kwargs":{"d":4}}`, `{"r":4}`),
			kv{"input.value": `{"c":3}`, "output.value": `{"r":3}`}), `{"c":3}`, `{"r":3}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := attemptOf(t, mapSpans(t, nil, testSpan{id: 2, parent: 9, name: "send", attrs: tc.attrs}), 2)
			if got := string(a.Args); got != tc.wantArgs {
				t.Errorf("args: got %s, want %s", got, tc.wantArgs)
			}
			if got := string(a.Result); got != tc.wantRe {
				t.Errorf("result: got %s, want %s", got, tc.wantRe)
			}
		})
	}
}

// TestMapOTLPStepID: which tool calls are attempts of one step. Two tool
// spans of one trace (2 and 3) are mapped together.
func TestMapOTLPStepID(t *testing.T) {
	send := func(args any, extra map[string]any) map[string]any {
		a := tool(with(kv{"gen_ai.tool.name": "send"}, extra))
		if args != nil {
			a["gen_ai.tool.call.arguments"] = args
		}
		return a
	}
	hashed := `^tool-[0-9a-f]{16}$`
	for _, tc := range []struct {
		name       string
		a, b       map[string]any // the two spans' attributes
		bName      string         // span 3's name; "" means "execute_tool send"
		wantA      string         // a regexp for span 2's step id
		wantSameAs bool           // span 3 is of span 2's step
	}{
		{name: "oncetrace.step.id first", a: send(`{"to":"j"}`, kv{"oncetrace.step.id": "step-4", "temporalActivityID": "act_1"}),
			b: send(`{"to":"k"}`, kv{"oncetrace.step.id": "step-4"}), wantA: `^step-4$`, wantSameAs: true},
		{name: "temporalActivityID second, whatever the arguments", a: send(`{"to":"j"}`, kv{"temporalActivityID": "act_1"}),
			b: send(`{"to":"k"}`, kv{"temporalActivityID": "act_1"}), wantA: `^act_1$`, wantSameAs: true},
		{name: "same tool and arguments, different call ids: one step", a: send(`{"to":"j"}`, kv{"gen_ai.tool.call.id": "call_1"}),
			b: send(`{"to":"j"}`, kv{"gen_ai.tool.call.id": "call_2"}), wantA: hashed, wantSameAs: true},
		{name: "different arguments: two steps", a: send(`{"to":"j"}`, nil), b: send(`{"to":"k"}`, nil), wantA: hashed},
		{name: "different tools, same arguments: two steps", a: send(`{"to":"j"}`, nil),
			b: send(`{"to":"j"}`, kv{"gen_ai.tool.name": "notify"}), wantA: hashed},
		{name: "the order of keys does not matter", a: send(`{"to":"j","n":2,"cc":{"x":1,"a":2}}`, nil),
			b: send(`{"cc":{"a":2,"x":1},"n":2,"to":"j"}`, nil), wantA: hashed, wantSameAs: true},
		{name: "spacing does not matter", a: send(`{"to": "j", "n": 2}`, nil), b: send(`{"to":"j","n":2}`, nil), wantA: hashed, wantSameAs: true},
		{name: "a map attribute and a JSON string of the same arguments", a: send(kv{"to": "j", "n": int64(2)}, nil),
			b: send(`{"n":2,"to":"j"}`, nil), wantA: hashed, wantSameAs: true},
		{name: "empty arguments are arguments", a: send(`{}`, nil), b: send(`{}`, nil), wantA: hashed, wantSameAs: true},
		{name: "GenAI and Vercel: the same call is the same step", a: send(`{"to":"j"}`, nil),
			b: kv{"ai.toolCall.name": "send", "ai.toolCall.args": `{"to":"j"}`}, bName: "ai.toolCall", wantA: hashed, wantSameAs: true},
		{name: "GenAI and OpenLLMetry's wrapped kwargs: the same step", a: send(`{"to":"j","n":12345678901234567}`, nil),
			b:     kv{"traceloop.span.kind": "tool", "traceloop.entity.name": "send", "traceloop.entity.input": `{"args":[],"kwargs":{"n":12345678901234567,"to":"j"}}`},
			wantA: hashed, wantSameAs: true},
		{name: "GenAI and OpenInference: the same step", a: send(`{"to":"j"}`, nil),
			b: kv{"openinference.span.kind": "TOOL", "tool.name": "send", "input.value": `{"to":"j"}`}, wantA: hashed, wantSameAs: true},
		{name: "no arguments: a step of its own per span", a: send(nil, nil), b: send(nil, nil), wantA: `^span-` + spanHex(2) + `$`},
		{name: "no arguments, one call id reused: one step", a: send(nil, kv{"gen_ai.tool.call.id": "call_1"}),
			b: send(nil, kv{"gen_ai.tool.call.id": "call_1"}), wantA: `^call-call_1$`, wantSameAs: true},
		{name: "no arguments, different call ids: two steps", a: send(nil, kv{"gen_ai.tool.call.id": "call_1"}),
			b: send(nil, kv{"gen_ai.tool.call.id": "call_2"}), wantA: `^call-call_1$`},
		{name: "arguments win over a call id", a: send(`{"to":"j"}`, kv{"gen_ai.tool.call.id": "call_1"}),
			b: send(`{"to":"k"}`, kv{"gen_ai.tool.call.id": "call_1"}), wantA: hashed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bName := cmpOr(tc.bName, "execute_tool send")
			events := mapSpans(t, nil,
				testSpan{id: 2, parent: 1, name: "execute_tool send", start: 10, attrs: tc.a},
				testSpan{id: 3, parent: 1, name: bName, start: 20, attrs: tc.b})
			a, b := attemptOf(t, events, 2), attemptOf(t, events, 3)
			if !regexp.MustCompile(tc.wantA).MatchString(a.StepID) {
				t.Errorf("span 2: step id: got %q, want %s", a.StepID, tc.wantA)
			}
			if same := a.StepID == b.StepID; same != tc.wantSameAs {
				t.Errorf("step ids: got %q and %q, want the same: %v", a.StepID, b.StepID, tc.wantSameAs)
			}
		})
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestMapOTLPStepIDHash: a derived step id is "tool-" and the first 8
// bytes of SHA-256 over the tool name, a NUL and the canonical arguments,
// in hex: the same in every export request, process and release.
func TestMapOTLPStepIDHash(t *testing.T) {
	sum := sha256.Sum256([]byte("send_invoice_email\x00" + `{"amount":12,"to":"jordan@acme.dev"}`))
	want := "tool-" + hex.EncodeToString(sum[:8])
	a := attemptOf(t, mapSpans(t, nil, toolSpan(2, kv{"gen_ai.tool.name": "send_invoice_email",
		"gen_ai.tool.call.arguments": `{"to": "jordan@acme.dev", "amount": 12}`})), 2)
	if a.StepID != want {
		t.Errorf("step id: got %q, want %q", a.StepID, want)
	}
}

// TestMapOTLPAttemptIdentity: a tool call is identified by its span; its
// number is left to the store unless the span says it.
func TestMapOTLPAttemptIdentity(t *testing.T) {
	for _, tc := range []struct {
		name       string
		attrs      map[string]any
		wantNumber int
	}{
		{"by its span, no number", nil, 0},
		{"oncetrace.attempt kept", kv{"oncetrace.attempt": 3}, 3},
		{"oncetrace.attempt as a string", kv{"oncetrace.attempt": "4"}, 4},
		{"http.request.resend_count + 1", kv{"http.request.resend_count": 2}, 3},
		{"http.request.resend_count 0 is attempt 1", kv{"http.request.resend_count": 0}, 1},
		{"oncetrace.attempt beats http.request.resend_count", kv{"oncetrace.attempt": 3, "http.request.resend_count": 0}, 3},
		{"oncetrace.attempt 0 is ignored", kv{"oncetrace.attempt": 0, "http.request.resend_count": 1}, 2},
		{"oncetrace.attempt that is not a number is ignored", kv{"oncetrace.attempt": "second"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapSpans(t, nil, toolSpan(2, with(kv{"gen_ai.tool.call.arguments": `{"to":"j"}`}, tc.attrs)))
			a := attemptOf(t, events, 2)
			if a.Number != tc.wantNumber {
				t.Errorf("attempt number: got %d, want %d", a.Number, tc.wantNumber)
			}
			if a.TraceID != traceHex(1) || a.SpanID != spanHex(2) {
				t.Errorf("trace context: got %q/%q, want %q/%q", a.TraceID, a.SpanID, traceHex(1), spanHex(2))
			}
		})
	}

	// Attempts of one step in one export are not ranked there: each is
	// its own entity, numbered later by the store.
	t.Run("two attempts of one step in one export", func(t *testing.T) {
		args := kv{"gen_ai.tool.call.arguments": `{"to":"j"}`}
		events := mapSpans(t, nil, toolSpan(3, args), toolSpan(2, args))
		a, b := attemptOf(t, events, 2), attemptOf(t, events, 3)
		if a.StepID != b.StepID || a.Number != 0 || b.Number != 0 {
			t.Errorf("got steps %q #%d and %q #%d, want one step, no numbers", a.StepID, a.Number, b.StepID, b.Number)
		}
		ea, eb := events[otlpEventID(1, 2)].Entity(), events[otlpEventID(1, 3)].Entity()
		if ea == eb {
			t.Errorf("entities: both %q, want two", ea)
		}
	})
}

func TestMapOTLPOutcome(t *testing.T) {
	exception := func(typ, msg string) []testSpanEvent {
		return []testSpanEvent{{name: "exception", at: 5, attrs: kv{"exception.type": typ, "exception.message": msg}}}
	}
	errType := func(typ string) map[string]any { return kv{"error.type": typ} }
	for _, tc := range []struct {
		name      string
		span      testSpan
		want      trace.Outcome
		wantError string
	}{
		{name: "status unset is ok", span: testSpan{}, want: trace.OutcomeOK},
		{name: "status ok is ok, its message ignored", span: testSpan{status: ptrace.StatusCodeOk, message: "fine"}, want: trace.OutcomeOK},
		{name: "an exception event on a span that did not fail is ok", span: testSpan{events: exception("TimeoutError", "x")}, want: trace.OutcomeOK},

		// Timeouts: the caller does not know what happened.
		{name: "error.type TimeoutError is a timeout", span: testSpan{status: ptrace.StatusCodeError, message: "deadline exceeded",
			attrs: errType("TimeoutError")}, want: trace.OutcomeTimeout, wantError: "TimeoutError: deadline exceeded"},
		{name: "error.type AbortError is a timeout", span: testSpan{status: ptrace.StatusCodeError, message: "This operation was aborted",
			attrs: errType("AbortError")}, want: trace.OutcomeTimeout, wantError: "AbortError: This operation was aborted"},
		{name: "error.type ETIMEDOUT is a timeout", span: testSpan{status: ptrace.StatusCodeError, attrs: errType("ETIMEDOUT")},
			want: trace.OutcomeTimeout, wantError: "ETIMEDOUT"},
		{name: "error.type DeadlineExceeded is a timeout", span: testSpan{status: ptrace.StatusCodeError, attrs: errType("DeadlineExceeded")},
			want: trace.OutcomeTimeout, wantError: "DeadlineExceeded"},
		{name: "error.type timeout is a timeout", span: testSpan{status: ptrace.StatusCodeError, attrs: errType("timeout")},
			want: trace.OutcomeTimeout, wantError: "timeout"},
		{name: "a type that contains one, in any case", span: testSpan{status: ptrace.StatusCodeError, attrs: errType("httpx.ReadTimeout")},
			want: trace.OutcomeTimeout, wantError: "httpx.ReadTimeout"},
		{name: "an exception.type attribute", span: testSpan{status: ptrace.StatusCodeError, message: "timed out",
			attrs: kv{"exception.type": "TimeoutError"}}, want: trace.OutcomeTimeout, wantError: "TimeoutError: timed out"},
		{name: "an exception event's type and message", span: testSpan{status: ptrace.StatusCodeError,
			events: exception("TimeoutError", "timed out after 10s")}, want: trace.OutcomeTimeout, wantError: "TimeoutError: timed out after 10s"},
		{name: "an exception event's AbortError", span: testSpan{status: ptrace.StatusCodeError, message: "aborted",
			events: exception("AbortError", "signal aborted")}, want: trace.OutcomeTimeout, wantError: "AbortError: aborted"},
		{name: "a message that already names the type", span: testSpan{status: ptrace.StatusCodeError, message: "TimeoutError: timed out",
			attrs: errType("TimeoutError")}, want: trace.OutcomeTimeout, wantError: "TimeoutError: timed out"},

		// Other errors.
		{name: "another error.type is an error", span: testSpan{status: ptrace.StatusCodeError, message: "slow down",
			attrs: errType("RateLimitError")}, want: trace.OutcomeError, wantError: "RateLimitError: slow down"},
		{name: "another exception event is an error", span: testSpan{status: ptrace.StatusCodeError,
			events: exception("ValueError", "bad address")}, want: trace.OutcomeError, wantError: "ValueError: bad address"},
		{name: "error.type comes before the exception event's type", span: testSpan{status: ptrace.StatusCodeError,
			attrs: errType("500"), events: exception("TimeoutError", "x")}, want: trace.OutcomeError, wantError: "500: x"},
		{name: "a type that names nothing leaves it to the message", span: testSpan{status: ptrace.StatusCodeError, message: "boom",
			attrs: errType("Error")}, want: trace.OutcomeError, wantError: "Error: boom"},

		// Timeouts by the message: frameworks that lose the error's type
		// keep its message.
		{name: "a message: timeout after", span: testSpan{status: ptrace.StatusCodeError, message: "timeout after 10s"},
			want: trace.OutcomeTimeout, wantError: "timeout after 10s"},
		{name: "a message: TimeoutError, the type of another error", span: testSpan{status: ptrace.StatusCodeError,
			message: "TimeoutError: The operation was aborted due to timeout", attrs: errType("Error")},
			want: trace.OutcomeTimeout, wantError: "TimeoutError: The operation was aborted due to timeout"},
		{name: "a message: AbortError", span: testSpan{status: ptrace.StatusCodeError, message: "AbortError: This operation was aborted"},
			want: trace.OutcomeTimeout, wantError: "AbortError: This operation was aborted"},
		{name: "a message: The operation was aborted", span: testSpan{status: ptrace.StatusCodeError,
			events: exception("Error", "The operation was aborted due to timeout")},
			want: trace.OutcomeTimeout, wantError: "Error: The operation was aborted due to timeout"},
		{name: "a message: ETIMEDOUT, in any case", span: testSpan{status: ptrace.StatusCodeError, message: "connect etimedout 10.0.0.7:443"},
			want: trace.OutcomeTimeout, wantError: "connect etimedout 10.0.0.7:443"},
		{name: "a message: timed out", span: testSpan{status: ptrace.StatusCodeError, message: "request to mail-api timed out"},
			want: trace.OutcomeTimeout, wantError: "request to mail-api timed out"},
		{name: "a message: deadline exceeded", span: testSpan{status: ptrace.StatusCodeError, message: "context deadline exceeded"},
			want: trace.OutcomeTimeout, wantError: "context deadline exceeded"},
		{name: "an exception event's message, the span's status saying nothing", span: testSpan{status: ptrace.StatusCodeError,
			events: exception("", "TimeoutError: timed out")}, want: trace.OutcomeTimeout, wantError: "TimeoutError: timed out"},
		{name: "a message that only mentions time is an error", span: testSpan{status: ptrace.StatusCodeError, message: "invalid time zone"},
			want: trace.OutcomeError, wantError: "invalid time zone"},
		{name: "a message without an error status is no outcome", span: testSpan{message: "timed out",
			events: exception("TimeoutError", "timed out")}, want: trace.OutcomeOK},
		{name: "ERROR with neither", span: testSpan{status: ptrace.StatusCodeError}, want: trace.OutcomeError},

		// oncetrace.* say it themselves.
		{name: "oncetrace.outcome overrides ERROR and keeps the message", span: testSpan{status: ptrace.StatusCodeError,
			message: "network timeout after 10s", attrs: kv{"oncetrace.outcome": "timeout"}},
			want: trace.OutcomeTimeout, wantError: "network timeout after 10s"},
		{name: "oncetrace.outcome ok overrides a timeout type", span: testSpan{status: ptrace.StatusCodeError,
			attrs: kv{"oncetrace.outcome": "ok", "error.type": "TimeoutError"}}, want: trace.OutcomeOK, wantError: "TimeoutError"},
		{name: "oncetrace.replayed is replayed", span: testSpan{attrs: kv{"oncetrace.replayed": true}}, want: trace.OutcomeReplayed},
		{name: "oncetrace.replayed beats ERROR", span: testSpan{status: ptrace.StatusCodeError, message: "x",
			attrs: kv{"oncetrace.replayed": true}}, want: trace.OutcomeReplayed, wantError: "x"},
		{name: "oncetrace.outcome beats oncetrace.replayed", span: testSpan{
			attrs: kv{"oncetrace.replayed": true, "oncetrace.outcome": "ok"}}, want: trace.OutcomeOK},
		{name: "oncetrace.replayed false is nothing", span: testSpan{attrs: kv{"oncetrace.replayed": false}}, want: trace.OutcomeOK},
		{name: "an unfinished span is running: no outcome, no end", span: testSpan{end: -1,
			attrs: kv{"oncetrace.outcome": "timeout"}}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := tc.span
			sp.id, sp.parent, sp.name, sp.attrs = 2, 9, "execute_tool send", tool(sp.attrs)
			res := ingest.MapOTLP(buildTraces(t, nil, sp), defaultOTLPConfig)
			if res.Rejected != 0 || len(res.Events) != 1 || res.Events[0].Attempt == nil {
				t.Fatalf("got %d events, %d rejected (%v), want one attempt", len(res.Events), res.Rejected, res.Reasons)
			}
			a := res.Events[0].Attempt
			if a.Outcome != tc.want {
				t.Errorf("outcome: got %q, want %q", a.Outcome, tc.want)
			}
			if a.Error != tc.wantError {
				t.Errorf("error: got %q, want %q", a.Error, tc.wantError)
			}
			if wantEnded := tc.want != ""; a.EndedAt.IsZero() == wantEnded {
				t.Errorf("ended_at: got %v, want set: %v", a.EndedAt, wantEnded)
			}
		})
	}
}

func TestMapOTLPRejectsBadOncetraceValues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs map[string]any
		want  string // in the reason
	}{
		{"an unknown oncetrace.outcome", kv{"oncetrace.outcome": "cancelled"}, "outcome"},
		{"an oncetrace.attempt over 1,000,000", kv{"oncetrace.attempt": 1000001}, "attempt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ingest.MapOTLP(buildTraces(t, nil,
				testSpan{id: 1, name: "t", attrs: tc.attrs},
				testSpan{id: 2, name: "u"}), defaultOTLPConfig)
			if res.Rejected != 1 || len(res.Events) != 1 {
				t.Fatalf("got %d events and %d rejected, want 1 and 1", len(res.Events), res.Rejected)
			}
			if len(res.Reasons) != 1 || !strings.Contains(res.Reasons[0], tc.want) || !strings.Contains(res.Reasons[0], spanHex(1)) {
				t.Errorf("reasons: got %q, want one naming the span and %s", res.Reasons, tc.want)
			}
		})
	}
}

// TestMapOTLPToolClass: oncetrace.effect, else the configured globs on the
// tool's name, else unknown.
func TestMapOTLPToolClass(t *testing.T) {
	classes, err := ingest.ParseToolClasses("send_*=write,get_*=read,charge_*=unsafe,*_email=read")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		span    string
		attrs   map[string]any
		classes ingest.ToolClasses
		want    trace.EffectClass
	}{
		{"oncetrace.effect write", "x", kv{"oncetrace.effect": "write"}, classes, trace.EffectWrite},
		{"oncetrace.effect read", "x", kv{"oncetrace.effect": "read"}, classes, trace.EffectRead},
		{"oncetrace.effect unsafe", "x", kv{"oncetrace.effect": "unsafe"}, classes, trace.EffectUnsafe},
		{"oncetrace.effect beats the configured class", "x", kv{"gen_ai.tool.name": "get_customer", "oncetrace.effect": "write"},
			classes, trace.EffectWrite},
		{"an unknown oncetrace.effect value falls through to the globs", "x", kv{"gen_ai.tool.name": "get_customer",
			"oncetrace.effect": "maybe"}, classes, trace.EffectRead},
		{"a glob: write", "x", kv{"gen_ai.tool.name": "send_invoice"}, classes, trace.EffectWrite},
		{"a glob: read", "x", kv{"gen_ai.tool.name": "get_customer"}, classes, trace.EffectRead},
		{"a glob: unsafe", "x", kv{"gen_ai.tool.name": "charge_card"}, classes, trace.EffectUnsafe},
		{"the first glob that matches wins", "x", kv{"gen_ai.tool.name": "send_invoice_email"}, classes, trace.EffectWrite},
		{"a glob on Vercel's tool name", "ai.toolCall", kv{"ai.toolCall.name": "charge_card"}, classes, trace.EffectUnsafe},
		{"a glob on OpenLLMetry's tool name", "x", kv{"traceloop.span.kind": "tool", "traceloop.entity.name": "get_customer"},
			classes, trace.EffectRead},
		{"a glob on OpenInference's tool name", "x", kv{"openinference.span.kind": "TOOL", "tool.name": "send_invoice"}, classes, trace.EffectWrite},
		{"a glob on the span name", "get_customer", kv{"oncetrace.step.id": "s"}, classes, trace.EffectRead},
		{"no glob matches: unknown", "x", kv{"gen_ai.tool.name": "lookup"}, classes, trace.EffectUnknown},
		{"nothing configured: unknown", "x", kv{"gen_ai.tool.name": "send_invoice"}, nil, trace.EffectUnknown},
		{"an HTTP method does not classify", "x", kv{"gen_ai.tool.name": "lookup", "http.request.method": "GET"}, classes, trace.EffectUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := tc.attrs
			if !strings.HasPrefix(tc.span, "ai.") && attrs["traceloop.span.kind"] == nil && attrs["openinference.span.kind"] == nil &&
				attrs["oncetrace.step.id"] == nil {
				attrs = tool(attrs)
			}
			cfg := ingest.OTLPConfig{Limits: ingest.DefaultLimits, ToolClasses: tc.classes}
			a := attemptOf(t, mapSpansWith(t, cfg, nil, testSpan{id: 2, parent: 9, name: tc.span, attrs: attrs}), 2)
			if a.Effect != tc.want {
				t.Errorf("effect class: got %q, want %q", a.Effect, tc.want)
			}
		})
	}
}

func TestMapOTLPProvider(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs map[string]any
		want  string
	}{
		{"oncetrace.provider", kv{"oncetrace.provider": "mail-api"}, "mail-api"},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := attemptOf(t, mapSpans(t, nil, toolSpan(2, tc.attrs)), 2).Provider; got != tc.want {
				t.Errorf("provider: got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMapOTLPIdempotencyKey(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs map[string]any
		want  string
	}{
		{"oncetrace.idempotency.key first", kv{"oncetrace.idempotency.key": "ik_a94a",
			"http.request.header.idempotency-key": []any{"ik_header"}}, "ik_a94a"},
		// HTTP header attributes are string arrays (semantic conventions).
		{"http.request.header.idempotency-key, a string array", kv{
			"http.request.header.idempotency-key": []any{"ik_header", "ik_second"}}, "ik_header"},
		{"http.request.header.idempotency-key as a plain string", kv{
			"http.request.header.idempotency-key": "ik_plain"}, "ik_plain"},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := attemptOf(t, mapSpans(t, nil, toolSpan(2, tc.attrs)), 2)
			if a.IdempotencyKey != tc.want {
				t.Errorf("idempotency key: got %q, want %q", a.IdempotencyKey, tc.want)
			}
		})
	}
}

func TestMapOTLPDeduplicated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value any
		want  bool
	}{
		{"true", true, true},
		{"false", false, false},
		{"a string is not a boolean", "true", false},
		{"absent", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := kv{}
			if tc.value != nil {
				attrs["oncetrace.deduplicated"] = tc.value
			}
			a := attemptOf(t, mapSpans(t, nil, toolSpan(2, attrs)), 2)
			if a.Deduplicated != tc.want {
				t.Errorf("deduplicated: got %v, want %v", a.Deduplicated, tc.want)
			}
		})
	}
}

func TestMapOTLPWorker(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resource map[string]any
		attrs    map[string]any
		want     string
	}{
		{name: "service.instance.id first", resource: kv{"service.instance.id": "worker-7", "host.name": "build-7", "process.pid": 4121}, want: "worker-7"},
		{name: "host.name and process.pid second", resource: kv{"host.name": "build-7", "process.pid": 4121}, want: "build-7:4121"},
		{name: "process.pid alone", resource: kv{"process.pid": 4121}, want: "pid-4121"},
		{name: "host.name alone", resource: kv{"host.name": "build-7"}, want: "build-7"},
		{name: "only the resource counts, not span attributes", attrs: kv{"service.instance.id": "worker-7"}, want: ""},
		{name: "none", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := attemptOf(t, mapSpans(t, tc.resource, toolSpan(2, tc.attrs)), 2)
			if a.Worker != tc.want {
				t.Errorf("worker: got %q, want %q", a.Worker, tc.want)
			}
		})
	}
}

// TestMapOTLPModelSpan: a model call's fields in each dialect.
func TestMapOTLPModelSpan(t *testing.T) {
	for _, tc := range []struct {
		name      string
		span      string
		kind      ptrace.SpanKind
		attrs     map[string]any
		status    ptrace.StatusCode
		message   string
		wantModel string
		wantIn    int64
		wantOut   int64
		wantError string
	}{
		{name: "GenAI: gen_ai.request.model and gen_ai.usage.input/output_tokens", span: "chat gpt-4o",
			attrs: kv{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-2024-08-06",
				"gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 85},
			wantModel: "gpt-4o", wantIn: 1200, wantOut: 85},
		{name: "GenAI: gen_ai.response.model without a request model", span: "chat",
			attrs: kv{"gen_ai.operation.name": "chat", "gen_ai.response.model": "gpt-4o-2024-08-06"}, wantModel: "gpt-4o-2024-08-06"},
		{name: "GenAI: the older gen_ai.usage.prompt/completion_tokens", span: "openai.chat", kind: ptrace.SpanKindClient,
			attrs:     kv{"gen_ai.request.model": "gpt-4o", "gen_ai.usage.prompt_tokens": 30, "gen_ai.usage.completion_tokens": 7},
			wantModel: "gpt-4o", wantIn: 30, wantOut: 7},
		{name: "Vercel: ai.model.id and ai.usage.promptTokens/completionTokens", span: "ai.generateText.doGenerate",
			attrs:     kv{"ai.model.id": "claude-sonnet-4", "ai.usage.promptTokens": 400, "ai.usage.completionTokens": 60},
			wantModel: "claude-sonnet-4", wantIn: 400, wantOut: 60},
		{name: "Vercel: ai.usage.inputTokens/outputTokens", span: "ai.streamText.doStream",
			attrs:     kv{"ai.model.id": "claude-sonnet-4", "ai.usage.inputTokens": 410, "ai.usage.outputTokens": 61},
			wantModel: "claude-sonnet-4", wantIn: 410, wantOut: 61},
		{name: "OpenInference: llm.model_name and llm.token_count.prompt/completion", span: "ChatOpenAI",
			attrs: kv{"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "llm.token_count.prompt": 55,
				"llm.token_count.completion": 12}, wantModel: "gpt-4o-mini", wantIn: 55, wantOut: 12},
		{name: "model: gen_ai.request.model beats ai.model.id and llm.model_name", span: "chat",
			attrs: kv{"gen_ai.operation.name": "chat", "gen_ai.request.model": "a", "ai.model.id": "b", "llm.model_name": "c"}, wantModel: "a"},
		{name: "model: ai.model.id beats llm.model_name", span: "ai.generateText.doGenerate",
			attrs: kv{"ai.model.id": "b", "llm.model_name": "c"}, wantModel: "b"},
		{name: "tokens: gen_ai.usage.* beat llm.token_count.* and ai.usage.*", span: "chat",
			attrs: kv{"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 1, "gen_ai.usage.output_tokens": 2,
				"llm.token_count.prompt": 3, "llm.token_count.completion": 4, "ai.usage.inputTokens": 5, "ai.usage.outputTokens": 6},
			wantIn: 1, wantOut: 2},
		{name: "tokens: llm.token_count.* beat ai.usage.*", span: "ChatOpenAI", attrs: kv{"openinference.span.kind": "LLM",
			"llm.token_count.prompt": 3, "llm.token_count.completion": 4, "ai.usage.promptTokens": 5, "ai.usage.completionTokens": 6},
			wantIn: 3, wantOut: 4},
		{name: "tokens sent as strings", span: "chat", attrs: kv{"gen_ai.operation.name": "chat",
			"gen_ai.usage.input_tokens": "12", "gen_ai.usage.output_tokens": "3"}, wantIn: 12, wantOut: 3},
		{name: "no model, no tokens", span: "embeddings", attrs: kv{"gen_ai.operation.name": "embeddings"}},
		{name: "an error status: its message", span: "chat", attrs: kv{"gen_ai.operation.name": "chat", "error.type": "RateLimitError"},
			status: ptrace.StatusCodeError, message: "429 slow down", wantError: "RateLimitError: 429 slow down"},
		{name: "an error status without a message", span: "chat", attrs: kv{"gen_ai.operation.name": "chat"},
			status: ptrace.StatusCodeError, wantError: "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapSpans(t, nil, testSpan{id: 1, name: "root", end: 100},
				testSpan{id: 2, parent: 1, name: tc.span, kind: tc.kind, start: 5, end: 25, status: tc.status, message: tc.message, attrs: tc.attrs})
			s := spanOf(t, events, 2)
			want := trace.Span{ExecutionID: traceHex(1), TraceID: traceHex(1), SpanID: spanHex(2), ParentSpanID: spanHex(1),
				Role: trace.RoleModel, Name: tc.span, StartedAt: ms(5), EndedAt: ms(25), Error: tc.wantError,
				Model: tc.wantModel, InputTokens: tc.wantIn, OutputTokens: tc.wantOut}
			if fmt.Sprintf("%+v", *s) != fmt.Sprintf("%+v", want) {
				t.Errorf("span:\n got %+v\nwant %+v", *s, want)
			}
		})
	}
}

// TestMapOTLPHTTPSpan: an HTTP client call's fields.
func TestMapOTLPHTTPSpan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		attrs   map[string]any
		status  ptrace.StatusCode
		message string
		want    trace.Span // the HTTP fields and Error
	}{
		{name: "current semantic conventions", attrs: kv{"http.request.method": "POST", "url.full": "https://api.mail.dev/v1/send",
			"http.response.status_code": 202, "http.request.header.idempotency-key": []any{"ik_1"}},
			want: trace.Span{HTTPMethod: "POST", HTTPURL: "https://api.mail.dev/v1/send", HTTPStatus: 202, IdempotencyKey: "ik_1"}},
		{name: "older semantic conventions", attrs: kv{"http.method": "POST", "http.url": "https://api.mail.dev/v1/send", "http.status_code": 500},
			want: trace.Span{HTTPMethod: "POST", HTTPURL: "https://api.mail.dev/v1/send", HTTPStatus: 500}},
		{name: "the current ones beat the older ones", attrs: kv{"http.request.method": "POST", "http.method": "GET",
			"url.full": "https://a/", "http.url": "https://b/", "http.response.status_code": 201, "http.status_code": 200},
			want: trace.Span{HTTPMethod: "POST", HTTPURL: "https://a/", HTTPStatus: 201}},
		{name: "the method upper-cased", attrs: kv{"http.request.method": "post"}, want: trace.Span{HTTPMethod: "POST"}},
		{name: "the idempotency key as a plain string", attrs: kv{"http.request.method": "POST", "http.request.header.idempotency-key": "ik_plain"},
			want: trace.Span{HTTPMethod: "POST", IdempotencyKey: "ik_plain"}},
		{name: "a status code outside 1-999 is dropped", attrs: kv{"http.request.method": "POST", "http.response.status_code": 1000},
			want: trace.Span{HTTPMethod: "POST"}},
		{name: "an error status", attrs: kv{"http.request.method": "POST", "error.type": "ECONNRESET"}, status: ptrace.StatusCodeError,
			want: trace.Span{HTTPMethod: "POST", Error: "ECONNRESET"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapSpans(t, nil, toolSpan(1, nil),
				testSpan{id: 2, parent: 1, name: "POST", kind: ptrace.SpanKindClient, start: 5, end: 25, status: tc.status, message: tc.message, attrs: tc.attrs})
			want := tc.want
			want.ExecutionID, want.TraceID, want.SpanID, want.ParentSpanID = traceHex(1), traceHex(1), spanHex(2), spanHex(1)
			want.Role, want.Name, want.StartedAt, want.EndedAt = trace.RoleHTTP, "POST", ms(5), ms(25)
			if s := spanOf(t, events, 2); fmt.Sprintf("%+v", *s) != fmt.Sprintf("%+v", want) {
				t.Errorf("span:\n got %+v\nwant %+v", *s, want)
			}
		})
	}
}

// TestMapOTLPLoneHTTPRoot: an HTTP client span that starts a trace of its
// own (a fetch made outside any span, as LangGraph's and Mastra's
// exporters leave theirs) is an HTTP call without a parent, not an
// execution named POST; its execution is its trace's, or the one it names.
func TestMapOTLPLoneHTTPRoot(t *testing.T) {
	post := testSpan{id: 1, name: "POST", kind: ptrace.SpanKindClient, start: 5, end: 1005, status: ptrace.StatusCodeError,
		message: "The operation was aborted due to timeout", attrs: kv{"http.request.method": "POST",
			"url.full": "http://127.0.0.1:8080/sandbox/mail/v1/send", "http.request.header.idempotency-key": []any{"ik_1"}}}
	events := mapSpans(t, nil, post)
	if len(events) != 1 {
		t.Fatalf("events: got %v, want one span event", keysOf(events))
	}
	want := trace.Span{ExecutionID: traceHex(1), TraceID: traceHex(1), SpanID: spanHex(1), Role: trace.RoleHTTP, Name: "POST",
		StartedAt: ms(5), EndedAt: ms(1005), Error: "The operation was aborted due to timeout", HTTPMethod: "POST",
		HTTPURL: "http://127.0.0.1:8080/sandbox/mail/v1/send", IdempotencyKey: "ik_1"}
	if s := spanOf(t, events, 1); fmt.Sprintf("%+v", *s) != fmt.Sprintf("%+v", want) {
		t.Errorf("span:\n got %+v\nwant %+v", *s, want)
	}

	named := post
	named.attrs = with(post.attrs, kv{"oncetrace.execution.id": "exec_1"})
	if s := spanOf(t, mapSpans(t, nil, named), 1); s.ExecutionID != "exec_1" || s.Role != trace.RoleHTTP {
		t.Errorf("with oncetrace.execution.id: got %s in %q, want an HTTP call of exec_1", s.Role, s.ExecutionID)
	}
}

// TestMapOTLPContextSpan: any other span is kept with its place in the
// tree, so that an effect below it finds its tool call.
func TestMapOTLPContextSpan(t *testing.T) {
	for _, tc := range []struct {
		name string
		span testSpan
		want trace.Span
	}{
		{name: "name, parent, times", span: testSpan{id: 3, parent: 2, name: "render template", start: 5, end: 25,
			attrs: kv{"gen_ai.request.model": "ignored", "http.method": "ignored"}},
			want: trace.Span{ParentSpanID: spanHex(2), Name: "render template", StartedAt: ms(5), EndedAt: ms(25)}},
		{name: "an error", span: testSpan{id: 3, parent: 2, name: "render", start: 5, end: 25, status: ptrace.StatusCodeError, message: "bad template"},
			want: trace.Span{ParentSpanID: spanHex(2), Name: "render", StartedAt: ms(5), EndedAt: ms(25), Error: "bad template"}},
		{name: "running: no end, its own event id", span: testSpan{id: 3, parent: 2, name: "render", start: 5, end: -1},
			want: trace.Span{ParentSpanID: spanHex(2), Name: "render", StartedAt: ms(5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapSpans(t, nil, tc.span)
			id := otlpEventID(1, 3)
			if tc.span.end < 0 {
				id += ":running"
			}
			ev, ok := events[id]
			if !ok || ev.Span == nil {
				t.Fatalf("got %v, want the span event %s", keysOf(events), id)
			}
			want := tc.want
			want.ExecutionID, want.TraceID, want.SpanID, want.Role = traceHex(1), traceHex(1), spanHex(3), trace.RoleContext
			if fmt.Sprintf("%+v", *ev.Span) != fmt.Sprintf("%+v", want) {
				t.Errorf("span:\n got %+v\nwant %+v", *ev.Span, want)
			}
		})
	}
}

func TestMapOTLPEffects(t *testing.T) {
	effectAttrs := func(id string, extra map[string]any) map[string]any {
		return with(kv{"oncetrace.effect.provider": "mail-api", "oncetrace.effect.id": id, "oncetrace.effect.target": "jordan@acme.dev"}, extra)
	}
	keyed := tool(kv{"oncetrace.idempotency.key": "ik_1"})
	type want struct {
		id, span, key, target string
		at                    int
	}
	for _, tc := range []struct {
		name  string
		spans []testSpan
		want  []want
		// wantExecution is the effects' execution; "" means trace 1's id.
		wantExecution string
	}{
		{name: "span events named oncetrace.effect hang from their span, other events ignored", spans: []testSpan{
			{id: 2, parent: 9, name: "execute_tool send", attrs: keyed, events: []testSpanEvent{
				{name: "log", at: 2},
				{name: "oncetrace.effect", at: 3, attrs: effectAttrs("msg_1", nil)},
				{name: "oncetrace.effect", at: 4, attrs: effectAttrs("msg_2", kv{"oncetrace.idempotency.key": "ik_own"})}}}},
			want: []want{{id: "msg_1", span: spanHex(2), key: "ik_1", target: "jordan@acme.dev", at: 3},
				{id: "msg_2", span: spanHex(2), key: "ik_own", target: "jordan@acme.dev", at: 4}}},
		{name: "a span named oncetrace.effect hangs from its parent, and takes its tool's key", spans: []testSpan{
			{id: 2, parent: 9, name: "execute_tool send", attrs: keyed},
			{id: 3, parent: 2, name: "oncetrace.effect", start: 5, attrs: effectAttrs("msg_1", nil)}},
			want: []want{{id: "msg_1", span: spanHex(2), key: "ik_1", target: "jordan@acme.dev", at: 5}}},
		{name: "the key in the http.request.header.idempotency-key of the effect", spans: []testSpan{
			{id: 2, parent: 9, name: "execute_tool send", attrs: keyed},
			{id: 3, parent: 2, name: "oncetrace.effect", start: 5, attrs: effectAttrs("msg_1", kv{"http.request.header.idempotency-key": []any{"ik_h"}})}},
			want: []want{{id: "msg_1", span: spanHex(2), key: "ik_h", target: "jordan@acme.dev", at: 5}}},
		{name: "under an HTTP span: hangs from it, no key taken (the store walks up to the tool)", spans: []testSpan{
			{id: 2, parent: 9, name: "execute_tool send", attrs: keyed},
			{id: 3, parent: 2, name: "POST", kind: ptrace.SpanKindClient, start: 3, attrs: kv{"http.request.method": "POST"}},
			{id: 4, parent: 3, name: "oncetrace.effect", start: 5, attrs: effectAttrs("msg_1", nil)}},
			want: []want{{id: "msg_1", span: spanHex(3), target: "jordan@acme.dev", at: 5}}},
		{name: "an effect span whose parent is not in the export still names it", spans: []testSpan{
			{id: 3, parent: 9, name: "oncetrace.effect", start: 5, attrs: effectAttrs("msg_1", nil)}},
			want: []want{{id: "msg_1", span: spanHex(9), target: "jordan@acme.dev", at: 5}}},
		{name: "an effect event on the root hangs from the root", spans: []testSpan{
			{id: 1, name: "invoke_agent a", attrs: kv{"gen_ai.operation.name": "invoke_agent"},
				events: []testSpanEvent{{name: "oncetrace.effect", at: 1, attrs: effectAttrs("msg_1", nil)}}}},
			want: []want{{id: "msg_1", span: spanHex(1), target: "jordan@acme.dev", at: 1}}},
		{name: "a root effect span has the trace only", spans: []testSpan{
			{id: 1, name: "oncetrace.effect", start: 5, attrs: effectAttrs("msg_1", nil)}},
			want: []want{{id: "msg_1", target: "jordan@acme.dev", at: 5}}},
		{name: "the execution is inherited", spans: []testSpan{
			{id: 1, name: "run", attrs: kv{"oncetrace.execution.id": "exec_1"}},
			{id: 2, parent: 1, name: "execute_tool send", start: 1, attrs: tool(nil),
				events: []testSpanEvent{{name: "oncetrace.effect", at: 3, attrs: effectAttrs("msg_1", nil)}}}},
			want: []want{{id: "msg_1", span: spanHex(2), target: "jordan@acme.dev", at: 3}}, wantExecution: "exec_1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapSpans(t, nil, tc.spans...)
			wantExecution := cmpOr(tc.wantExecution, traceHex(1))
			var got []want
			for _, f := range effectsOf(events) {
				if f.Provider != "mail-api" || f.ExecutionID != wantExecution || f.TraceID != traceHex(1) || f.StepID != "" {
					t.Errorf("effect %s: provider %q, execution %q, trace %q, step %q; want mail-api, %s, %s, no step",
						f.ID, f.Provider, f.ExecutionID, f.TraceID, f.StepID, wantExecution, traceHex(1))
				}
				got = append(got, want{id: f.ID, span: f.SpanID, key: f.IdempotencyKey, target: f.Target, at: int(f.At.Sub(otlpBase) / time.Millisecond)})
			}
			slices.SortFunc(got, func(a, b want) int { return strings.Compare(a.id, b.id) })
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("effects: got %+v, want %+v", got, tc.want)
			}
			for _, ev := range events {
				if (ev.Attempt != nil && ev.Attempt.Tool == "oncetrace.effect") || (ev.Span != nil && ev.Span.Name == "oncetrace.effect") {
					t.Errorf("an effect span became a %s: %s", ev.Type, ev.Body)
				}
			}
		})
	}
}

func TestMapOTLPRejectsEffectsWithoutProviderOrID(t *testing.T) {
	res := ingest.MapOTLP(buildTraces(t, nil,
		testSpan{id: 1, parent: 9, name: "execute_tool send", attrs: tool(nil), events: []testSpanEvent{
			{name: "oncetrace.effect", at: 1, attrs: kv{"oncetrace.effect.id": "msg_1"}}}},
		testSpan{id: 2, parent: 1, name: "oncetrace.effect", start: 2, attrs: kv{"oncetrace.effect.provider": "mail-api"}},
	), defaultOTLPConfig)
	if res.Rejected != 2 {
		t.Errorf("rejected: got %d, want 2 (one event, one span)", res.Rejected)
	}
	if len(res.Events) != 1 || res.Events[0].Attempt == nil {
		t.Errorf("events: got %d, want the one attempt of span 1", len(res.Events))
	}
	for _, r := range res.Reasons {
		if !strings.Contains(r, "oncetrace.effect.provider and oncetrace.effect.id") {
			t.Errorf("reason: got %q, want it to name the attributes", r)
		}
	}
}

func TestMapOTLPRejectsSpansWithoutIDsOrStart(t *testing.T) {
	spans := []testSpan{{id: 1, name: "good"}}
	for range 3 {
		spans = append(spans, testSpan{id: 0, name: "no span id"})
	}
	for i := range 4 {
		spans = append(spans, testSpan{id: byte(10 + i), name: "no start", start: -1, end: 5})
	}
	res := ingest.MapOTLP(buildTraces(t, nil, spans...), defaultOTLPConfig)
	if res.Rejected != 7 || len(res.Events) != 1 {
		t.Errorf("got %d events and %d rejected, want 1 and 7", len(res.Events), res.Rejected)
	}
	if len(res.Reasons) != 5 {
		t.Errorf("reasons: got %d, want the first 5: %q", len(res.Reasons), res.Reasons)
	}
	if len(res.Reasons) > 0 && !strings.Contains(res.Reasons[0], "span_id") {
		t.Errorf("first reason: got %q, want it to name span_id", res.Reasons[0])
	}
	if len(res.Reasons) == 5 && !strings.Contains(res.Reasons[4], "start_time_unix_nano") {
		t.Errorf("last reason: got %q, want it to name start_time_unix_nano", res.Reasons[4])
	}
}

// TestMapOTLPIsDeterministic: span ids make ingest idempotent only if the
// same spans always give the same events, whatever their order.
func TestMapOTLPIsDeterministic(t *testing.T) {
	spans := []testSpan{
		{id: 1, name: "invoke_agent billing-agent", end: 100, attrs: kv{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent"}},
		{id: 2, parent: 1, name: "execute_tool send", start: 10, status: ptrace.StatusCodeError,
			attrs: tool(kv{"gen_ai.tool.call.id": "call_1", "error.type": "TimeoutError", "gen_ai.tool.call.arguments": kv{"b": 1, "a": 2}})},
		{id: 3, parent: 1, name: "execute_tool send", start: 30, attrs: tool(kv{"gen_ai.tool.call.id": "call_2", "gen_ai.tool.call.arguments": `{"a":2,"b":1}`}),
			events: []testSpanEvent{{name: "oncetrace.effect", at: 35, attrs: kv{"oncetrace.effect.provider": "mail-api", "oncetrace.effect.id": "msg_1"}}}},
		{id: 4, parent: 1, name: "chat", start: 50, attrs: kv{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}},
		{id: 5, parent: 3, name: "POST", kind: ptrace.SpanKindClient, start: 31, attrs: kv{"http.request.method": "POST"}},
		{id: 6, parent: 1, name: "invoke_agent sub", start: 60, attrs: kv{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sub"}},
	}
	bodies := func(spans []testSpan) map[string]string {
		out := map[string]string{}
		for id, ev := range mapSpans(t, kv{"service.instance.id": "w1"}, spans...) {
			out[id] = string(ev.Body)
		}
		return out
	}
	want := bodies(spans)
	if len(want) != 8 {
		t.Fatalf("events: got %d, want 8 (execution, 2 attempts, 1 effect, a model, an HTTP and a context span, a name)", len(want))
	}
	reversed := slices.Clone(spans)
	slices.Reverse(reversed)
	for name, s := range map[string][]testSpan{"again": spans, "reversed": reversed} {
		got := bodies(s)
		for id, body := range want {
			if got[id] != body {
				t.Errorf("%s: event %s: got %s, want %s", name, id, got[id], body)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: got %d events, want %d", name, len(got), len(want))
		}
	}
}

// TestMapOTLPEventsParse: every mapped event is a valid native event, so
// an OTLP export and its NDJSON export round-trip to the same ids.
func TestMapOTLPEventsParse(t *testing.T) {
	events := mapSpans(t, kv{"host.name": "build-7", "process.pid": 4121},
		testSpan{id: 1, name: "invoke_agent a", attrs: kv{"gen_ai.operation.name": "invoke_agent", "session.id": "s1"}},
		testSpan{id: 2, parent: 1, name: "t", start: 1, attrs: kv{"oncetrace.idempotency.key": "ik",
			"gen_ai.tool.call.arguments": `{"x":1}`}, events: []testSpanEvent{{name: "oncetrace.effect", at: 3,
			attrs: kv{"oncetrace.effect.provider": "p", "oncetrace.effect.id": "e"}}}},
		testSpan{id: 3, parent: 2, name: "POST", kind: ptrace.SpanKindClient, start: 2, attrs: kv{"http.request.method": "POST",
			"url.full": "https://p/", "http.response.status_code": 200, "http.request.header.idempotency-key": []any{"ik"}}},
		testSpan{id: 4, parent: 1, name: "chat", start: 4, attrs: kv{"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
			"gen_ai.usage.input_tokens": 1, "gen_ai.usage.output_tokens": 2}},
		testSpan{id: 5, parent: 1, name: "invoke_agent sub", start: 5, end: -1, attrs: kv{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sub"}},
		testSpan{id: 6, parent: 2, name: "oncetrace.effect", start: 6, attrs: kv{"oncetrace.effect.provider": "p", "oncetrace.effect.id": "e2"}})
	types := map[trace.EventType]int{}
	for id, ev := range events {
		types[ev.Type]++
		again, err := ingest.ParseEvent(ev.Body, ingest.DefaultLimits)
		if err != nil {
			t.Errorf("event %s: %v", id, err)
			continue
		}
		if again.ID != id || string(again.Body) != string(ev.Body) {
			t.Errorf("event %s re-parsed: got id %s body %s", id, again.ID, again.Body)
		}
		var obj map[string]any
		if err := json.Unmarshal(ev.Body, &obj); err != nil || obj["type"] == nil {
			t.Errorf("event %s: body %s is not a typed JSON object", id, ev.Body)
		}
	}
	want := map[trace.EventType]int{trace.EventExecution: 2, trace.EventAttempt: 1, trace.EventEffect: 2, trace.EventSpan: 3}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("event types: got %v, want %v", types, want)
	}
}

// BenchmarkMapOTLP100Spans is the OTLP-specific part of ingest, without
// the store: decoding a protobuf export request of 100 spans (ten agent
// runs) and mapping it onto validated events.
func BenchmarkMapOTLP100Spans(b *testing.B) {
	var spans []testSpan
	for run := range byte(10) {
		tr := run + 1
		spans = append(spans, testSpan{trace: tr, id: 1, name: "invoke_agent billing-agent", end: 20000,
			attrs: kv{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent"}})
		for i := range 9 {
			attrs := kv{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_invoice_email",
				"gen_ai.tool.call.id": fmt.Sprintf("call_%d", i), "oncetrace.idempotency.key": fmt.Sprintf("ik_%d_%d", run, i/2),
				"oncetrace.effect": "write", "gen_ai.tool.call.arguments": fmt.Sprintf(`{"to":"jordan@acme.dev","subject":"Your June invoice","n":%d}`, i/2)}
			sp := testSpan{trace: tr, id: byte(i + 2), parent: 1, name: "execute_tool send_invoice_email", start: 100 * (i + 1), attrs: attrs}
			if i%2 == 1 {
				sp.events = []testSpanEvent{{name: "oncetrace.effect", at: 100*(i+1) + 5,
					attrs: kv{"oncetrace.effect.provider": "mail-api", "oncetrace.effect.id": fmt.Sprintf("msg_%d_%d", run, i)}}}
			}
			spans = append(spans, sp)
		}
	}
	req := ptraceotlp.NewExportRequestFromTraces(buildTraces(b, kv{"service.instance.id": "worker-1"}, spans...))
	body, err := req.MarshalProto()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		decoded := ptraceotlp.NewExportRequest()
		if err := decoded.UnmarshalProto(body); err != nil {
			b.Fatal(err)
		}
		res := ingest.MapOTLP(decoded.Traces(), defaultOTLPConfig)
		if res.Rejected != 0 || len(res.Events) != 140 {
			b.Fatalf("got %d events, %d rejected (%v), want 140 and 0", len(res.Events), res.Rejected, res.Reasons)
		}
	}
	b.ReportMetric(float64(b.N*len(spans))/b.Elapsed().Seconds(), "spans/s")
}

// TestMapOTLPAgentNameOnEverySpan: OpenLLMetry copies gen_ai.agent.name
// onto every span; only the root and agent-like context spans name the
// execution, so model and HTTP calls add no execution event of their own.
func TestMapOTLPAgentNameOnEverySpan(t *testing.T) {
	agent := kv{"gen_ai.agent.name": "billing-agent", "traceloop.workflow.name": "billing-agent"}
	events := mapSpans(t, nil,
		testSpan{id: 1, name: "billing-agent.agent", start: 0, end: 100, attrs: kv{"traceloop.span.kind": "agent", "traceloop.entity.name": "billing-agent"}},
		testSpan{id: 2, parent: 1, name: "chat gpt-4o-mini", kind: ptrace.SpanKindClient, start: 10,
			attrs: kv{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.agent.name": "billing-agent"}},
		testSpan{id: 3, parent: 2, name: "POST", kind: ptrace.SpanKindClient, start: 11, attrs: kv{"http.request.method": "POST", "gen_ai.agent.name": "billing-agent"}},
		testSpan{id: 4, parent: 1, name: "plan", start: 30, attrs: agent})
	var named []string
	for id, ev := range events {
		if ev.Type == trace.EventExecution {
			named = append(named, id)
		}
	}
	slices.Sort(named)
	want := []string{otlpEventID(1, 1), otlpEventID(1, 4) + ":name"}
	if !slices.Equal(named, want) {
		t.Errorf("execution events: got %v, want %v (the root's, and the context span's)", named, want)
	}
}
