package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// These tests follow docs/otlp.md's mapping table row by row: each case
// sends the attributes of one row in some combination and checks which
// one won (first match wins).

var otlpBase = time.Date(2026, 6, 30, 14, 2, 11, 0, time.UTC)

// testSpan describes one span compactly: ids are the last byte of the
// trace or span id, times are milliseconds after otlpBase.
type testSpan struct {
	trace   byte // 0 means trace 1
	id      byte // 0 means no span id
	parent  byte // 0 means a root span
	name    string
	start   int // ms; -1 means no start time
	end     int // ms; 0 means start+10, -1 means unfinished
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

func traceIDOf(n byte) pcommon.TraceID { return pcommon.TraceID([16]byte{15: n}) }
func spanIDOf(n byte) pcommon.SpanID   { return pcommon.SpanID([8]byte{7: n}) }
func traceHex(n byte) string           { return traceIDOf(n).String() }
func ms(n int) time.Time               { return otlpBase.Add(time.Duration(n) * time.Millisecond) }
func tsOf(n int) pcommon.Timestamp     { return pcommon.NewTimestampFromTime(ms(n)) }

// otlpEventID is the id MapOTLP gives the event of a finished span.
func otlpEventID(traceN, spanN byte) string {
	return "otlp:" + traceHex(traceN) + ":" + spanIDOf(spanN).String()
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

// mapSpans maps the spans and fails on any rejection.
func mapSpans(t *testing.T, resource map[string]any, spans ...testSpan) map[string]trace.Event {
	t.Helper()
	res := ingest.MapOTLP(buildTraces(t, resource, spans...), ingest.DefaultLimits)
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

// tool is a plain tool span's attributes plus extra ones.
func tool(extra map[string]any) map[string]any {
	attrs := map[string]any{"gen_ai.operation.name": "execute_tool"}
	for k, v := range extra {
		attrs[k] = v
	}
	return attrs
}

func TestMapOTLPExecutionID(t *testing.T) {
	all := map[string]any{"oncetrace.execution.id": "exec-oncetrace", "temporalWorkflowID": "wf-temporal",
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
			want: map[byte]string{1: "wf-temporal"}},
		{name: "restate.invocation.id third", spans: []testSpan{{id: 1, name: "step",
			attrs: without("oncetrace.execution.id", "temporalWorkflowID")}}, want: map[byte]string{1: "inv-restate"}},
		{name: "dbos.operation.workflow_id fourth", spans: []testSpan{{id: 1, name: "step",
			attrs: without("oncetrace.execution.id", "temporalWorkflowID", "restate.invocation.id")}}, want: map[byte]string{1: "wf-dbos"}},
		{name: "operationUUID fifth", spans: []testSpan{{id: 1, name: "step", attrs: map[string]any{"operationUUID": "op-uuid"}}},
			want: map[byte]string{1: "op-uuid"}},
		{name: "the trace id when nothing names it", spans: []testSpan{{id: 1, name: "step"}},
			want: map[byte]string{1: traceHex(1)}},
		{name: "inherited from the parent span in the same export", spans: []testSpan{
			{id: 1, name: "workflow", attrs: map[string]any{"temporalWorkflowID": "wf-1"}},
			{id: 2, parent: 1, name: "activity", start: 1}},
			want: map[byte]string{1: "wf-1", 2: "wf-1"}},
		{name: "inherited from the grandparent", spans: []testSpan{
			{id: 1, name: "workflow", attrs: map[string]any{"oncetrace.execution.id": "exec-gp"}},
			{id: 2, parent: 1, name: "agent", start: 1},
			{id: 3, parent: 2, name: "tool", start: 2}},
			want: map[byte]string{1: "exec-gp", 2: "exec-gp", 3: "exec-gp"}},
		{name: "a span's own attribute beats an ancestor's, whatever their rank", spans: []testSpan{
			{id: 1, name: "workflow", attrs: map[string]any{"oncetrace.execution.id": "exec-parent"}},
			{id: 2, parent: 1, name: "tool", start: 1, attrs: map[string]any{"operationUUID": "op-child"}}},
			want: map[byte]string{1: "exec-parent", 2: "op-child"}},
		{name: "from the resource when no span names it", resource: map[string]any{"oncetrace.execution.id": "exec-res"},
			spans: []testSpan{{id: 2, parent: 9, name: "tool"}}, want: map[byte]string{2: "exec-res"}},
		{name: "a span's attribute beats the resource", resource: map[string]any{"oncetrace.execution.id": "exec-res"},
			spans: []testSpan{{id: 2, name: "tool", attrs: map[string]any{"temporalWorkflowID": "wf-span"}}},
			want:  map[byte]string{2: "wf-span"}},
		{name: "a parent outside the export passes nothing on", spans: []testSpan{{id: 2, parent: 9, name: "tool"}},
			want: map[byte]string{2: traceHex(1)}},
		{name: "the root invoke_agent span's execution is its trace", spans: []testSpan{
			{id: 1, name: "invoke_agent billing-agent", attrs: map[string]any{"gen_ai.operation.name": "invoke_agent"}},
			{id: 2, parent: 1, name: "execute_tool send", start: 1, attrs: tool(nil)}},
			want: map[byte]string{1: traceHex(1), 2: traceHex(1)}},
		{name: "one execution id across two traces", spans: []testSpan{
			{trace: 1, id: 1, name: "run", attrs: map[string]any{"oncetrace.execution.id": "exec-shared"}},
			{trace: 2, id: 1, name: "run", attrs: map[string]any{"oncetrace.execution.id": "exec-shared"}}},
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
		a := map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent"}
		for k, v := range attrs {
			a[k] = v
		}
		return testSpan{id: 1, name: "invoke_agent billing-agent", attrs: a}
	}
	for _, tc := range []struct {
		name     string
		resource map[string]any
		span     testSpan
		want     string // "" means no labels
	}{
		{name: "gen_ai.conversation.id first", span: root(map[string]any{"gen_ai.conversation.id": "conv_42", "session.id": "sess_7"}), want: "conv_42"},
		{name: "session.id second", span: root(map[string]any{"session.id": "sess_7"}), want: "sess_7"},
		{name: "from the resource", resource: map[string]any{"session.id": "sess_res"}, span: root(nil), want: "sess_res"},
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

func TestMapOTLPStepID(t *testing.T) {
	all := map[string]any{"oncetrace.step.id": "step-4", "gen_ai.tool.call.id": "call_1", "tool.id": "tool_1", "temporalActivityID": "act_1"}
	for _, tc := range []struct {
		name  string
		attrs map[string]any
		want  string
	}{
		{"oncetrace.step.id first", all, "step-4"},
		{"gen_ai.tool.call.id second", map[string]any{"gen_ai.tool.call.id": "call_1", "tool.id": "tool_1", "temporalActivityID": "act_1"}, "call_1"},
		{"tool.id third", map[string]any{"tool.id": "tool_1", "temporalActivityID": "act_1"}, "tool_1"},
		{"temporalActivityID fourth", map[string]any{"temporalActivityID": "act_1"}, "act_1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapSpans(t, nil, testSpan{id: 1, name: "execute_tool send", attrs: tc.attrs})
			if got := attemptOf(t, events, 1).StepID; got != tc.want {
				t.Errorf("step id: got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestMapOTLPStepHashFallback: without a step id, a span's step is a hash
// of its parent, name and ordinal among same-named siblings by start time,
// so the same spans map to the same steps however the export orders them.
func TestMapOTLPStepHashFallback(t *testing.T) {
	spans := []testSpan{
		{id: 1, name: "invoke_agent a", attrs: map[string]any{"gen_ai.operation.name": "invoke_agent"}},
		{id: 2, parent: 1, name: "chat gpt-4o", start: 10},
		{id: 3, parent: 1, name: "chat gpt-4o", start: 20},
		{id: 4, parent: 1, name: "search", start: 15},
		{id: 5, parent: 4, name: "chat gpt-4o", start: 16},
	}
	first := mapSpans(t, nil, spans...)
	steps := map[byte]string{}
	hashed := regexp.MustCompile(`^span-[0-9a-f]{12}$`)
	for _, n := range []byte{2, 3, 4, 5} {
		a := attemptOf(t, first, n)
		if !hashed.MatchString(a.StepID) {
			t.Errorf("span %d: step id: got %q, want span- and 12 hex digits", n, a.StepID)
		}
		if a.Number != 1 {
			t.Errorf("span %d: attempt: got %d, want 1 (a hashed step is its own step)", n, a.Number)
		}
		steps[n] = a.StepID
	}
	if steps[2] == steps[3] {
		t.Errorf("two same-named siblings: got one step %q, want two (ordinals 0 and 1)", steps[2])
	}
	if steps[2] == steps[5] {
		t.Errorf("same name under another parent: got one step %q, want two", steps[2])
	}

	reversed := slices.Clone(spans)
	slices.Reverse(reversed)
	second := mapSpans(t, nil, reversed...)
	for n, want := range steps {
		if got := attemptOf(t, second, n).StepID; got != want {
			t.Errorf("span %d mapped again in reverse order: step id: got %q, want %q (stable)", n, got, want)
		}
	}
}

func TestMapOTLPAttemptNumber(t *testing.T) {
	step := func(extra map[string]any) map[string]any {
		a := map[string]any{"gen_ai.tool.call.id": "call_1"}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	for _, tc := range []struct {
		name  string
		spans []testSpan
		want  map[byte]int
	}{
		{name: "oncetrace.attempt first", spans: []testSpan{
			{id: 1, name: "t", attrs: step(map[string]any{"oncetrace.attempt": 3, "http.request.resend_count": 0})}},
			want: map[byte]int{1: 3}},
		{name: "oncetrace.attempt as a string", spans: []testSpan{
			{id: 1, name: "t", attrs: step(map[string]any{"oncetrace.attempt": "4"})}},
			want: map[byte]int{1: 4}},
		{name: "http.request.resend_count + 1", spans: []testSpan{
			{id: 1, name: "t", start: 0, attrs: step(map[string]any{"http.request.resend_count": 2})},
			{id: 2, name: "t", start: 50, attrs: step(map[string]any{"http.request.resend_count": 0})}},
			want: map[byte]int{1: 3, 2: 1}},
		{name: "rank among the step's spans by start, not export order", spans: []testSpan{
			{id: 1, name: "t", start: 30, attrs: step(nil)},
			{id: 2, name: "t", start: 10, attrs: step(nil)},
			{id: 3, name: "t", start: 20, attrs: step(nil)}},
			want: map[byte]int{1: 3, 2: 1, 3: 2}},
		{name: "equal starts rank by span id", spans: []testSpan{
			{id: 2, name: "t", start: 10, attrs: step(nil)},
			{id: 1, name: "t", start: 10, attrs: step(nil)}},
			want: map[byte]int{1: 1, 2: 2}},
		{name: "other steps do not count", spans: []testSpan{
			{id: 1, name: "t", start: 0, attrs: map[string]any{"gen_ai.tool.call.id": "call_0"}},
			{id: 2, name: "t", start: 10, attrs: step(nil)}},
			want: map[byte]int{1: 1, 2: 1}},
		// An effect span is no attempt, even when it names the step.
		{name: "an effect span of the step does not count", spans: []testSpan{
			{id: 1, name: "t", start: 0, attrs: map[string]any{"oncetrace.step.id": "step-4"}},
			{id: 2, parent: 1, name: "oncetrace.effect", start: 5, attrs: map[string]any{"oncetrace.step.id": "step-4",
				"oncetrace.effect.provider": "mail-api", "oncetrace.effect.id": "msg_1"}},
			{id: 3, name: "t", start: 20, attrs: map[string]any{"oncetrace.step.id": "step-4"}}},
			want: map[byte]int{1: 1, 3: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapSpans(t, nil, tc.spans...)
			for n, want := range tc.want {
				if got := attemptOf(t, events, n).Number; got != want {
					t.Errorf("span %d: attempt: got %d, want %d", n, got, want)
				}
			}
		})
	}
}

func TestMapOTLPToolName(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs map[string]any
		want  string
	}{
		{"gen_ai.tool.name first", map[string]any{"gen_ai.tool.name": "send_invoice_email", "tool.name": "send_mail"}, "send_invoice_email"},
		{"tool.name second", map[string]any{"tool.name": "send_mail"}, "send_mail"},
		{"the span name last", nil, "execute_tool send"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapSpans(t, nil, testSpan{id: 1, name: "execute_tool send", attrs: tc.attrs})
			if got := attemptOf(t, events, 1).Tool; got != tc.want {
				t.Errorf("tool: got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMapOTLPArgsAndResult(t *testing.T) {
	for _, tc := range []struct {
		name             string
		attrs            map[string]any
		wantArgs, wantRe string // canonical JSON; "" means none
	}{
		{name: "objects", attrs: map[string]any{
			"gen_ai.tool.call.arguments": map[string]any{"to": "jordan@acme.dev", "n": 2},
			"gen_ai.tool.call.result":    map[string]any{"status": "sent"}},
			wantArgs: `{"n":2,"to":"jordan@acme.dev"}`, wantRe: `{"status":"sent"}`},
		{name: "JSON strings", attrs: map[string]any{
			"gen_ai.tool.call.arguments": `{"to": "jordan@acme.dev", "n": 2}`,
			"gen_ai.tool.call.result":    `["a", 1]`},
			wantArgs: `{"n":2,"to":"jordan@acme.dev"}`, wantRe: `["a",1]`},
		{name: "a string that is not JSON stays a string", attrs: map[string]any{
			"gen_ai.tool.call.arguments": "send it to jordan", "gen_ai.tool.call.result": "sent"},
			wantArgs: `"send it to jordan"`, wantRe: `"sent"`},
		{name: "arrays", attrs: map[string]any{"gen_ai.tool.call.arguments": []any{"a", int64(1), true}},
			wantArgs: `["a",1,true]`},
		{name: "input.value and output.value second", attrs: map[string]any{
			"input.value": `{"query":"acme"}`, "output.value": `{"customer":"acme"}`},
			wantArgs: `{"query":"acme"}`, wantRe: `{"customer":"acme"}`},
		{name: "gen_ai attributes beat input.value and output.value", attrs: map[string]any{
			"gen_ai.tool.call.arguments": `{"a":1}`, "input.value": `{"b":2}`,
			"gen_ai.tool.call.result": `{"c":3}`, "output.value": `{"d":4}`},
			wantArgs: `{"a":1}`, wantRe: `{"c":3}`},
		{name: "none", attrs: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := attemptOf(t, mapSpans(t, nil, testSpan{id: 1, name: "execute_tool send", attrs: tc.attrs}), 1)
			if got := string(a.Args); got != tc.wantArgs {
				t.Errorf("args: got %s, want %s", got, tc.wantArgs)
			}
			if got := string(a.Result); got != tc.wantRe {
				t.Errorf("result: got %s, want %s", got, tc.wantRe)
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
		{"oncetrace.idempotency.key first", map[string]any{"oncetrace.idempotency.key": "ik_a94a",
			"http.request.header.idempotency-key": []any{"ik_header"}}, "ik_a94a"},
		// HTTP header attributes are string arrays (semantic conventions).
		{"http.request.header.idempotency-key, a string array", map[string]any{
			"http.request.header.idempotency-key": []any{"ik_header", "ik_second"}}, "ik_header"},
		{"http.request.header.idempotency-key as a plain string", map[string]any{
			"http.request.header.idempotency-key": "ik_plain"}, "ik_plain"},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := attemptOf(t, mapSpans(t, nil, testSpan{id: 1, name: "POST /send", attrs: tc.attrs}), 1)
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
			attrs := map[string]any{}
			if tc.value != nil {
				attrs["oncetrace.deduplicated"] = tc.value
			}
			a := attemptOf(t, mapSpans(t, nil, testSpan{id: 1, name: "t", attrs: attrs}), 1)
			if a.Deduplicated != tc.want {
				t.Errorf("deduplicated: got %v, want %v", a.Deduplicated, tc.want)
			}
		})
	}
}

func TestMapOTLPEffectClass(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs map[string]any
		want  trace.EffectClass
	}{
		{"oncetrace.effect write", map[string]any{"oncetrace.effect": "write"}, trace.EffectWrite},
		{"oncetrace.effect read", map[string]any{"oncetrace.effect": "read"}, trace.EffectRead},
		{"oncetrace.effect unsafe", map[string]any{"oncetrace.effect": "unsafe"}, trace.EffectUnsafe},
		{"oncetrace.effect beats the HTTP method", map[string]any{"oncetrace.effect": "write", "http.request.method": "GET"}, trace.EffectWrite},
		{"GET is a read", map[string]any{"http.request.method": "GET"}, trace.EffectRead},
		{"HEAD is a read", map[string]any{"http.request.method": "HEAD"}, trace.EffectRead},
		{"a lowercase get is a read", map[string]any{"http.request.method": "get"}, trace.EffectRead},
		{"POST is unknown", map[string]any{"http.request.method": "POST"}, ""},
		{"an unknown oncetrace.effect falls through", map[string]any{"oncetrace.effect": "maybe", "http.request.method": "HEAD"}, trace.EffectRead},
		{"nothing is unknown", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := attemptOf(t, mapSpans(t, nil, testSpan{id: 1, name: "t", attrs: tc.attrs}), 1)
			if a.Effect != tc.want {
				t.Errorf("effect class: got %q, want %q", a.Effect, tc.want)
			}
		})
	}
}

func TestMapOTLPOutcome(t *testing.T) {
	for _, tc := range []struct {
		name      string
		span      testSpan
		want      trace.Outcome
		wantError string
	}{
		{name: "status unset is ok", span: testSpan{}, want: trace.OutcomeOK},
		{name: "status ok is ok, its message ignored", span: testSpan{status: ptrace.StatusCodeOk, message: "fine"}, want: trace.OutcomeOK},
		{name: "ERROR is error with error.type and the message", span: testSpan{status: ptrace.StatusCodeError,
			message: "deadline exceeded", attrs: map[string]any{"error.type": "TimeoutError"}},
			want: trace.OutcomeError, wantError: "TimeoutError: deadline exceeded"},
		{name: "ERROR with a message only", span: testSpan{status: ptrace.StatusCodeError, message: "deadline exceeded"},
			want: trace.OutcomeError, wantError: "deadline exceeded"},
		{name: "ERROR with error.type only", span: testSpan{status: ptrace.StatusCodeError,
			attrs: map[string]any{"error.type": "TimeoutError"}}, want: trace.OutcomeError, wantError: "TimeoutError"},
		{name: "ERROR with neither", span: testSpan{status: ptrace.StatusCodeError}, want: trace.OutcomeError},
		{name: "oncetrace.outcome overrides ERROR and keeps the message", span: testSpan{status: ptrace.StatusCodeError,
			message: "network timeout after 10s", attrs: map[string]any{"oncetrace.outcome": "timeout"}},
			want: trace.OutcomeTimeout, wantError: "network timeout after 10s"},
		{name: "oncetrace.outcome ok overrides ERROR", span: testSpan{status: ptrace.StatusCodeError,
			attrs: map[string]any{"oncetrace.outcome": "ok"}}, want: trace.OutcomeOK},
		{name: "oncetrace.replayed is replayed", span: testSpan{attrs: map[string]any{"oncetrace.replayed": true}},
			want: trace.OutcomeReplayed},
		{name: "oncetrace.replayed beats ERROR", span: testSpan{status: ptrace.StatusCodeError, message: "x",
			attrs: map[string]any{"oncetrace.replayed": true}}, want: trace.OutcomeReplayed, wantError: "x"},
		{name: "oncetrace.outcome beats oncetrace.replayed", span: testSpan{
			attrs: map[string]any{"oncetrace.replayed": true, "oncetrace.outcome": "ok"}}, want: trace.OutcomeOK},
		{name: "oncetrace.replayed false is nothing", span: testSpan{attrs: map[string]any{"oncetrace.replayed": false}},
			want: trace.OutcomeOK},
		{name: "an unfinished span is running: no outcome, no end", span: testSpan{end: -1,
			attrs: map[string]any{"oncetrace.outcome": "timeout"}}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := tc.span
			sp.id, sp.name = 1, "execute_tool send"
			res := ingest.MapOTLP(buildTraces(t, nil, sp), ingest.DefaultLimits)
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

func TestMapOTLPRejectsAnUnknownOutcome(t *testing.T) {
	res := ingest.MapOTLP(buildTraces(t, nil,
		testSpan{id: 1, name: "t", attrs: map[string]any{"oncetrace.outcome": "cancelled"}},
		testSpan{id: 2, name: "u"}), ingest.DefaultLimits)
	if res.Rejected != 1 || len(res.Events) != 1 {
		t.Fatalf("got %d events and %d rejected, want 1 and 1", len(res.Events), res.Rejected)
	}
	if len(res.Reasons) != 1 || !strings.Contains(res.Reasons[0], "outcome") || !strings.Contains(res.Reasons[0], spanIDOf(1).String()) {
		t.Errorf("reasons: got %q, want one naming the span and outcome", res.Reasons)
	}
}

func TestMapOTLPWorker(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resource map[string]any
		attrs    map[string]any
		want     string
	}{
		{name: "service.instance.id first", resource: map[string]any{"service.instance.id": "worker-7", "host.name": "build-7", "process.pid": 4121}, want: "worker-7"},
		{name: "host.name and process.pid second", resource: map[string]any{"host.name": "build-7", "process.pid": 4121}, want: "build-7:4121"},
		{name: "process.pid alone", resource: map[string]any{"process.pid": 4121}, want: "pid-4121"},
		{name: "host.name alone", resource: map[string]any{"host.name": "build-7"}, want: "build-7"},
		{name: "only the resource counts, not span attributes", attrs: map[string]any{"service.instance.id": "worker-7"}, want: ""},
		{name: "none", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := attemptOf(t, mapSpans(t, tc.resource, testSpan{id: 1, name: "t", attrs: tc.attrs}), 1)
			if a.Worker != tc.want {
				t.Errorf("worker: got %q, want %q", a.Worker, tc.want)
			}
		})
	}
}

func TestMapOTLPEffects(t *testing.T) {
	effectAttrs := func(id string, extra map[string]any) map[string]any {
		a := map[string]any{"oncetrace.effect.provider": "mail-api", "oncetrace.effect.id": id, "oncetrace.effect.target": "jordan@acme.dev"}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	keyed := map[string]any{"gen_ai.tool.call.id": "call_1", "oncetrace.idempotency.key": "ik_1"}
	type want struct {
		id, step, key, target string
		at                    int
	}
	for _, tc := range []struct {
		name  string
		spans []testSpan
		want  []want
	}{
		{name: "span events named oncetrace.effect, other events ignored", spans: []testSpan{
			{id: 1, name: "execute_tool send", attrs: keyed, events: []testSpanEvent{
				{name: "log", at: 2},
				{name: "oncetrace.effect", at: 3, attrs: effectAttrs("msg_1", nil)},
				{name: "oncetrace.effect", at: 4, attrs: effectAttrs("msg_2", map[string]any{"oncetrace.idempotency.key": "ik_own"})}}}},
			want: []want{{id: "msg_1", step: "call_1", key: "ik_1", target: "jordan@acme.dev", at: 3},
				{id: "msg_2", step: "call_1", key: "ik_own", target: "jordan@acme.dev", at: 4}}},
		{name: "a span named oncetrace.effect belongs to its parent's step", spans: []testSpan{
			{id: 1, name: "execute_tool send", attrs: keyed},
			{id: 2, parent: 1, name: "oncetrace.effect", start: 5, attrs: effectAttrs("msg_1", nil)}},
			want: []want{{id: "msg_1", step: "call_1", key: "ik_1", target: "jordan@acme.dev", at: 5}}},
		{name: "an effect span whose parent is not in the export has no step", spans: []testSpan{
			{id: 2, parent: 9, name: "oncetrace.effect", start: 5, attrs: effectAttrs("msg_1", nil)}},
			want: []want{{id: "msg_1", target: "jordan@acme.dev", at: 5}}},
		{name: "an effect event on the agent root has no step", spans: []testSpan{
			{id: 1, name: "invoke_agent a", attrs: map[string]any{"gen_ai.operation.name": "invoke_agent"},
				events: []testSpanEvent{{name: "oncetrace.effect", at: 1, attrs: effectAttrs("msg_1", nil)}}}},
			want: []want{{id: "msg_1", target: "jordan@acme.dev", at: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapSpans(t, nil, tc.spans...)
			var got []want
			for _, f := range effectsOf(events) {
				if f.Provider != "mail-api" || f.ExecutionID != traceHex(1) {
					t.Errorf("effect %s: provider %q, execution %q; want mail-api, %s", f.ID, f.Provider, f.ExecutionID, traceHex(1))
				}
				got = append(got, want{id: f.ID, step: f.StepID, key: f.IdempotencyKey, target: f.Target, at: int(f.At.Sub(otlpBase) / time.Millisecond)})
			}
			slices.SortFunc(got, func(a, b want) int { return strings.Compare(a.id, b.id) })
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("effects: got %+v, want %+v", got, tc.want)
			}
			for _, ev := range events {
				if ev.Attempt != nil && ev.Attempt.Tool == "oncetrace.effect" {
					t.Errorf("an effect span became an attempt: %s", ev.Body)
				}
			}
		})
	}
}

func TestMapOTLPRejectsEffectsWithoutProviderOrID(t *testing.T) {
	res := ingest.MapOTLP(buildTraces(t, nil,
		testSpan{id: 1, name: "execute_tool send", events: []testSpanEvent{
			{name: "oncetrace.effect", at: 1, attrs: map[string]any{"oncetrace.effect.id": "msg_1"}}}},
		testSpan{id: 2, parent: 1, name: "oncetrace.effect", start: 2, attrs: map[string]any{"oncetrace.effect.provider": "mail-api"}},
	), ingest.DefaultLimits)
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

func TestMapOTLPAgentRoot(t *testing.T) {
	agent := map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent"}
	for _, tc := range []struct {
		name       string
		span       testSpan
		wantName   string // "" means the span is an attempt
		wantStatus trace.Status
	}{
		{name: "invoke_agent by gen_ai.operation.name", span: testSpan{name: "agent run", attrs: agent},
			wantName: "billing-agent", wantStatus: trace.StatusCompleted},
		{name: "invoke_workflow by span name, named by gen_ai.workflow.name", span: testSpan{name: "invoke_workflow nightly",
			attrs: map[string]any{"gen_ai.workflow.name": "nightly-billing"}}, wantName: "nightly-billing", wantStatus: trace.StatusCompleted},
		{name: "named by the span when no name attribute", span: testSpan{name: "invoke_agent"},
			wantName: "invoke_agent", wantStatus: trace.StatusCompleted},
		{name: "ERROR is failed", span: testSpan{name: "invoke_agent billing-agent", attrs: agent, status: ptrace.StatusCodeError},
			wantName: "billing-agent", wantStatus: trace.StatusFailed},
		{name: "unfinished is running", span: testSpan{name: "invoke_agent billing-agent", attrs: agent, end: -1},
			wantName: "billing-agent", wantStatus: trace.StatusRunning},
		{name: "an invoke_agent span with a parent is a step", span: testSpan{parent: 9, name: "invoke_agent sub", attrs: agent}},
		{name: "a root span of another kind is a step", span: testSpan{name: "POST /charge"}},
		{name: "a name that only starts with invoke_agent is a step", span: testSpan{name: "invoke_agents"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := tc.span
			sp.id = 1
			res := ingest.MapOTLP(buildTraces(t, nil, sp), ingest.DefaultLimits)
			if res.Rejected != 0 || len(res.Events) != 1 {
				t.Fatalf("got %d events, %d rejected (%v), want one event", len(res.Events), res.Rejected, res.Reasons)
			}
			ev := res.Events[0]
			if tc.wantName == "" {
				if ev.Attempt == nil {
					t.Fatalf("got a %s event, want an attempt", ev.Type)
				}
				return
			}
			x := ev.Execution
			if x == nil {
				t.Fatalf("got a %s event, want an execution", ev.Type)
			}
			if x.Name != tc.wantName || x.Status != tc.wantStatus {
				t.Errorf("execution: got name %q status %q, want %q %q", x.Name, x.Status, tc.wantName, tc.wantStatus)
			}
			if !x.StartedAt.Equal(otlpBase) {
				t.Errorf("started_at: got %v, want %v", x.StartedAt, otlpBase)
			}
			if wantEnd := tc.wantStatus != trace.StatusRunning; x.EndedAt.IsZero() == wantEnd {
				t.Errorf("ended_at: got %v, want set: %v", x.EndedAt, wantEnd)
			}
		})
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
	res := ingest.MapOTLP(buildTraces(t, nil, spans...), ingest.DefaultLimits)
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
		{id: 1, name: "invoke_agent billing-agent", end: 100, attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent"}},
		{id: 2, parent: 1, name: "execute_tool send", start: 10, status: ptrace.StatusCodeError,
			attrs: map[string]any{"gen_ai.tool.call.id": "call_1", "oncetrace.outcome": "timeout", "gen_ai.tool.call.arguments": map[string]any{"b": 1, "a": 2}}},
		{id: 3, parent: 1, name: "execute_tool send", start: 30, attrs: map[string]any{"gen_ai.tool.call.id": "call_1"},
			events: []testSpanEvent{{name: "oncetrace.effect", at: 35, attrs: map[string]any{"oncetrace.effect.provider": "mail-api", "oncetrace.effect.id": "msg_1"}}}},
		{id: 4, parent: 1, name: "chat", start: 50},
	}
	bodies := func(spans []testSpan) map[string]string {
		out := map[string]string{}
		for id, ev := range mapSpans(t, map[string]any{"service.instance.id": "w1"}, spans...) {
			out[id] = string(ev.Body)
		}
		return out
	}
	want := bodies(spans)
	if len(want) != 5 {
		t.Fatalf("events: got %d, want 5 (execution, 3 attempts, 1 effect)", len(want))
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

// TestMapOTLPRunningSpanCompletesLater: an exporter may send a span before
// it ends and again once it has; the second export must complete the
// attempt, not be dropped as a duplicate of the first.
func TestMapOTLPRunningSpanCompletesLater(t *testing.T) {
	span := testSpan{id: 2, parent: 1, name: "execute_tool send", start: 10,
		attrs: map[string]any{"gen_ai.tool.call.id": "call_1", "oncetrace.effect": "write"}}
	root := testSpan{id: 1, name: "invoke_agent billing-agent", end: 100, attrs: map[string]any{"gen_ai.operation.name": "invoke_agent"}}
	runningSpan, runningRoot := span, root
	runningSpan.end, runningRoot.end = -1, -1
	running := ingest.MapOTLP(buildTraces(t, nil, runningRoot, runningSpan), ingest.DefaultLimits)
	finished := ingest.MapOTLP(buildTraces(t, nil, root, span), ingest.DefaultLimits)
	for i := range running.Events {
		if running.Events[i].ID == finished.Events[i].ID {
			t.Errorf("event %d: running and finished both have id %s, want different ids", i, running.Events[i].ID)
		}
	}

	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), store.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := ingest.NewWriter(db, ingest.DefaultWriterConfig)
	defer w.Close()
	for _, res := range []ingest.OTLPResult{running, finished, running, finished} {
		if _, err := w.Write(context.Background(), res.Events); err != nil {
			t.Fatal(err)
		}
	}
	run, err := db.Run(context.Background(), traceHex(1))
	if err != nil {
		t.Fatal(err)
	}
	if run.Execution.Status != trace.StatusCompleted {
		t.Errorf("execution status: got %q, want completed", run.Execution.Status)
	}
	if len(run.Steps) != 1 || len(run.Steps[0].Attempts) != 1 {
		t.Fatalf("steps: got %+v, want one step with one attempt", run.Steps)
	}
	a := run.Steps[0].Attempts[0]
	if a.Outcome != trace.OutcomeOK || !a.EndedAt.Equal(ms(20)) || len(a.Conflicts) != 0 {
		t.Errorf("attempt: got outcome %q ended %v conflicts %v, want ok at %v, no conflicts", a.Outcome, a.EndedAt, a.Conflicts, ms(20))
	}
}

// TestMapOTLPAttemptsAcrossExports: ranks are computed within one export,
// so attempts of one step that arrive in different exports (a long retry,
// a re-run after a crash) need their number on the span; docs/otlp.md says
// so. With it, they become attempts 1 and 2 of one step.
func TestMapOTLPAttemptsAcrossExports(t *testing.T) {
	for _, attr := range []struct {
		name  string
		value func(n int) any
	}{
		{"oncetrace.attempt", func(n int) any { return n }},
		{"http.request.resend_count", func(n int) any { return n - 1 }},
	} {
		t.Run(attr.name, func(t *testing.T) {
			db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), store.SyncNormal)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			w := ingest.NewWriter(db, ingest.DefaultWriterConfig)
			defer w.Close()
			for n := 1; n <= 2; n++ {
				// Each attempt in its own trace, one execution by its id.
				res := ingest.MapOTLP(buildTraces(t, nil, testSpan{trace: byte(n), id: 1, name: "execute_tool send", start: 1000 * n,
					attrs: map[string]any{"oncetrace.execution.id": "exec_1", "oncetrace.step.id": "step-4", attr.name: attr.value(n)}}), ingest.DefaultLimits)
				if _, err := w.Write(context.Background(), res.Events); err != nil {
					t.Fatal(err)
				}
			}
			run, err := db.Run(context.Background(), "exec_1")
			if err != nil {
				t.Fatal(err)
			}
			if len(run.Steps) != 1 || len(run.Steps[0].Attempts) != 2 {
				t.Fatalf("steps: got %+v, want one step with two attempts", run.Steps)
			}
			for i, a := range run.Steps[0].Attempts {
				if a.Number != i+1 || len(a.Conflicts) != 0 {
					t.Errorf("attempt %d: got number %d, conflicts %v, want %d and none", i, a.Number, a.Conflicts, i+1)
				}
			}
		})
	}
}

// TestMapOTLPEventsParse: every mapped event is a valid native event, so
// an OTLP export and its NDJSON export round-trip to the same ids.
func TestMapOTLPEventsParse(t *testing.T) {
	events := mapSpans(t, map[string]any{"host.name": "build-7", "process.pid": 4121},
		testSpan{id: 1, name: "invoke_agent a", attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "session.id": "s1"}},
		testSpan{id: 2, parent: 1, name: "t", start: 1, attrs: map[string]any{"oncetrace.idempotency.key": "ik",
			"gen_ai.tool.call.arguments": `{"x":1}`}, events: []testSpanEvent{{name: "oncetrace.effect", at: 3,
			attrs: map[string]any{"oncetrace.effect.provider": "p", "oncetrace.effect.id": "e"}}}})
	for id, ev := range events {
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
}

// BenchmarkMapOTLP100Spans is the OTLP-specific part of ingest, without
// the store: decoding a protobuf export request of 100 spans (ten agent
// runs) and mapping it onto validated events.
func BenchmarkMapOTLP100Spans(b *testing.B) {
	var spans []testSpan
	for run := range byte(10) {
		tr := run + 1
		spans = append(spans, testSpan{trace: tr, id: 1, name: "invoke_agent billing-agent", end: 20000,
			attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent"}})
		for i := range 9 {
			attrs := map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_invoice_email",
				"gen_ai.tool.call.id": fmt.Sprintf("call_%d", i/2), "oncetrace.idempotency.key": fmt.Sprintf("ik_%d_%d", run, i/2),
				"oncetrace.effect": "write", "gen_ai.tool.call.arguments": `{"to":"jordan@acme.dev","subject":"Your June invoice"}`}
			sp := testSpan{trace: tr, id: byte(i + 2), parent: 1, name: "execute_tool send_invoice_email", start: 100 * (i + 1), attrs: attrs}
			if i%2 == 1 {
				sp.events = []testSpanEvent{{name: "oncetrace.effect", at: 100*(i+1) + 5,
					attrs: map[string]any{"oncetrace.effect.provider": "mail-api", "oncetrace.effect.id": fmt.Sprintf("msg_%d_%d", run, i)}}}
			}
			spans = append(spans, sp)
		}
	}
	req := ptraceotlp.NewExportRequestFromTraces(buildTraces(b, map[string]any{"service.instance.id": "worker-1"}, spans...))
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
		res := ingest.MapOTLP(decoded.Traces(), ingest.DefaultLimits)
		if res.Rejected != 0 || len(res.Events) != 140 {
			b.Fatalf("got %d events, %d rejected (%v), want 140 and 0", len(res.Events), res.Rejected, res.Reasons)
		}
	}
	b.ReportMetric(float64(b.N*len(spans))/b.Elapsed().Seconds(), "spans/s")
}
