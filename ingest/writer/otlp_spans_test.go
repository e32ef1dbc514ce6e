package writer_test

import (
	"maps"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// The span builders of ingest/otlp_test.go, copied: these tests map spans
// as those do, then write them through the writer into a real store, which
// the ingest package's own tests must not import.

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
