package ingest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// directConfigs are the configurations the direct mapping is held to the
// round trip under: the defaults; tool classes; more keys redacted
// (arguments, results, the session label, URL queries); and limits so
// small that most fields fail one, so that rejections and their reasons
// are compared too.
var directConfigs = func() map[string]ingest.OTLPConfig {
	classes, err := ingest.ParseToolClasses("send_*=write,get_*=read")
	if err != nil {
		panic(err)
	}
	redact := ingest.DefaultLimits
	redact.Redact = ingest.NewRedactor(append(slices.Clone(ingest.DefaultRedactKeys), "to", "session", "q", "subject", "content"))
	small := ingest.DefaultLimits
	small.IDBytes, small.TextBytes, small.JSONBytes, small.Labels, small.LabelBytes, small.AttemptNumber = 64, 24, 200, 0, 4, 1
	small.JSONDepth, small.JSONElements, small.JSONValues = 2, 3, 6
	tiny := small
	tiny.IDBytes, tiny.TextBytes, tiny.JSONDepth = 16, 4, 1
	none := ingest.DefaultLimits
	none.Redact = nil
	return map[string]ingest.OTLPConfig{
		"defaults":     {Limits: ingest.DefaultLimits},
		"tool classes": {Limits: ingest.DefaultLimits, ToolClasses: classes},
		"redact more":  {Limits: redact},
		"redact none":  {Limits: none},
		"small limits": {Limits: small},
		"tiny limits":  {Limits: tiny},
	}
}()

// requireSameMapping fails unless MapOTLP gives exactly what the round
// trip through JSON and ParseEvent gives: the same events in the same
// order, deeply equal (bodies, times, args bytes), and the same rejections.
func requireSameMapping(t *testing.T, name string, td ptrace.Traces, cfg ingest.OTLPConfig) {
	t.Helper()
	want := ingest.MapOTLPRoundTrip(td, cfg)
	got := ingest.MapOTLP(td, cfg)
	if got.Rejected != want.Rejected || !slices.Equal(got.Reasons, want.Reasons) {
		t.Fatalf("%s: rejected %d %q, want %d %q", name, got.Rejected, got.Reasons, want.Rejected, want.Reasons)
	}
	if len(got.Events) != len(want.Events) {
		t.Fatalf("%s: %d events, want %d", name, len(got.Events), len(want.Events))
	}
	for i := range want.Events {
		if !reflect.DeepEqual(got.Events[i], want.Events[i]) {
			t.Fatalf("%s: event %d:\n got %+v\n body %s\nwant %+v\n body %s", name, i,
				describe(got.Events[i]), got.Events[i].Body, describe(want.Events[i]), want.Events[i].Body)
		}
	}
}

// describe shows an event's parts, not their addresses.
func describe(ev trace.Event) string {
	return fmt.Sprintf("%s %s %+v %+v %+v %+v", ev.Type, ev.ID, ev.Execution, ev.Attempt, ev.Effect, ev.Span)
}

// TestMapOTLPDirectIsTheRoundTrip: every recorded framework export maps
// straight to the events, bodies and rejections that writing each span as
// JSON and parsing it back gave, so the stored log and exports are
// byte-identical to before.
func TestMapOTLPDirectIsTheRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("testdata/frameworks/*/*/otlp-*.pb")
	if len(files) < 8 {
		t.Fatalf("framework fixtures: got %d, want the recordings of four frameworks", len(files))
	}
	events := 0
	for _, file := range files {
		pb, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(pb); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for name, cfg := range directConfigs {
			requireSameMapping(t, file+", "+name, req.Traces(), cfg)
		}
		events += len(ingest.MapOTLP(req.Traces(), defaultOTLPConfig).Events)
	}
	if events == 0 {
		t.Fatal("the fixtures mapped to no events: nothing was compared")
	}
}

// TestMapOTLPDirectHandMade compares the two paths on the hand-made spans
// of this package's other tests, which reach every role and attribute.
func TestMapOTLPDirectHandMade(t *testing.T) {
	spans := []testSpan{
		{id: 1, name: "invoke_agent billing-agent", end: 100, attrs: kv{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent", "session.id": "s\xff1"}},
		{id: 2, parent: 1, name: "execute_tool send", start: 10, status: ptrace.StatusCodeError, message: "boom\u2028<x>",
			attrs: tool(kv{"gen_ai.tool.call.id": "call_1", "error.type": "TimeoutError", "gen_ai.tool.call.arguments": kv{"b": 1.5, "a": 2, "token": "t", "q": []any{"x", nil}}})},
		{id: 3, parent: 1, name: "execute_tool send", start: 30, attrs: tool(kv{"gen_ai.tool.call.id": "call_2", "gen_ai.tool.call.arguments": `{"a":2, "b":1e3,"password":"p","n":{"subject":"\u00e9"}}`,
			"gen_ai.tool.call.result": `{"ok":true,"api_key":"k"}`, "oncetrace.attempt": 3, "oncetrace.provider": "mail-api", "oncetrace.deduplicated": true}),
			events: []testSpanEvent{{name: "oncetrace.effect", at: 35, attrs: kv{"oncetrace.effect.provider": "mail-api", "oncetrace.effect.id": "msg_1", "oncetrace.effect.target": "a@b"}}}},
		{id: 4, parent: 1, name: "chat", start: 50, attrs: kv{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": "7"}},
		{id: 5, parent: 3, name: "POST", kind: ptrace.SpanKindClient, start: 31, attrs: kv{"http.request.method": "post", "url.full": "https://u:p@x/?token=1&q=2",
			"http.response.status_code": 201, "http.request.header.idempotency-key": []any{"ik"}, "http.request.resend_count": 1}},
		{id: 6, parent: 1, name: "invoke_agent sub", start: 60, end: -1, attrs: kv{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sub"}},
		{id: 7, parent: 1, name: "t", start: 70, end: -1, attrs: kv{"oncetrace.step.id": "s1", "ai.toolCall.args": "not json", "oncetrace.idempotency.key": "ik2"}},
		{id: 8, parent: 7, name: "oncetrace.effect", start: 71, attrs: kv{"oncetrace.effect.provider": "p", "oncetrace.effect.id": "e2"}},
		{id: 9, parent: 1, name: "tool", start: 80, attrs: kv{"traceloop.span.kind": "tool", "traceloop.entity.name": "lookup",
			"traceloop.entity.input": `{"args":[],"kwargs":{"id":7,"cookie":"c"}}`, "traceloop.entity.output": "null", "oncetrace.outcome": "replayed"}},
		{id: 10, parent: 1, name: "ctx\x01", start: 90, status: ptrace.StatusCodeError, attrs: kv{"exception.type": "23"}},
		{id: 11, parent: 1, name: "t2", start: 91, attrs: kv{"oncetrace.effect": "read", "gen_ai.tool.call.arguments": kv{}, "oncetrace.outcome": "bogus"}},
		{id: 12, parent: 1, name: "oncetrace.effect", start: 92, attrs: kv{"oncetrace.effect.provider": "p"}},
	}
	td := buildTraces(t, kv{"host.name": "build-7", "process.pid": 4121}, spans...)
	for name, cfg := range directConfigs {
		requireSameMapping(t, name, td, cfg)
	}
}

// FuzzMapOTLPDirect: whatever the export request, the direct mapping
// gives what the round trip through JSON gives, under each configuration.
func FuzzMapOTLPDirect(f *testing.F) {
	otlpFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		req := ptraceotlp.NewExportRequest()
		var err error
		if isJSON {
			err = req.UnmarshalJSON(data)
		} else {
			err = req.UnmarshalProto(data)
		}
		if err != nil || ingest.CheckOTLPLimits(req.Traces(), ingest.DefaultLimits) != nil {
			return
		}
		for name, cfg := range directConfigs {
			requireSameMapping(t, name, req.Traces(), cfg)
		}
	})
}

// BenchmarkMapOTLPDirectVsRoundTrip maps one decoded export request of
// 100 spans (ten agent runs of an agent span and nine tool calls with
// arguments, keys and effects, as BenchmarkMapOTLP100Spans sends) both
// ways, to compare the cost per span.
func BenchmarkMapOTLPDirectVsRoundTrip(b *testing.B) {
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
	td := buildTraces(b, kv{"service.instance.id": "worker-1"}, spans...)
	for name, mapOTLP := range map[string]func(ptrace.Traces, ingest.OTLPConfig) ingest.OTLPResult{
		"direct": ingest.MapOTLP, "roundtrip": ingest.MapOTLPRoundTrip} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if res := mapOTLP(td, defaultOTLPConfig); res.Rejected != 0 || len(res.Events) != 140 {
					b.Fatalf("got %d events, %d rejected (%v), want 140 and 0", len(res.Events), res.Rejected, res.Reasons)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
		})
	}
}
