package ingest_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oncetrace/oncetrace/ingest"
)

// smallOTLPLimits keep the requests over them small.
var smallOTLPLimits = func() ingest.Limits {
	lim := ingest.DefaultLimits
	lim.Spans, lim.SpanAttributes, lim.SpanEvents, lim.AttributeBytes = 4, 3, 2, 64
	return lim
}()

// otlpRequest builds a request of one resource, one scope and n spans,
// each shaped by span.
func otlpRequest(n int, span func(i int, sp ptrace.Span)) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "agent")
	ss := rs.ScopeSpans().AppendEmpty()
	for i := 0; i < n; i++ {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
		sp.SetSpanID(pcommon.SpanID{0, 0, 0, 0, 0, 0, 0, byte(i + 1)})
		sp.SetName(fmt.Sprintf("span-%d", i))
		sp.SetStartTimestamp(1_782_828_131_000_000_000)
		if span != nil {
			span(i, sp)
		}
	}
	return td
}

// checkOTLPLimit checks a request both ways: its protobuf refused before
// decoding (OTLPDecodeEstimate), its JSON after (CheckOTLPLimits), with
// the same status and words; want "" for a request within the limits.
func checkOTLPLimit(t *testing.T, td ptrace.Traces, lim ingest.Limits, status int, want string) {
	t.Helper()
	req := ptraceotlp.NewExportRequestFromTraces(td)
	pb, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	js, err := req.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	_, wireErr := ingest.OTLPDecodeEstimate(pb, ingest.OTLPTraces, true, lim, 1<<30)
	decoded := ptraceotlp.NewExportRequest()
	if err := decoded.UnmarshalJSON(js); err != nil {
		t.Fatal(err)
	}
	checkErr := ingest.CheckOTLPLimits(decoded.Traces(), lim)
	for _, got := range []struct {
		how string
		err error
	}{{"protobuf, before decoding", wireErr}, {"JSON, decoded", checkErr}} {
		if want == "" {
			if got.err != nil {
				t.Errorf("%s: got %v, want no error", got.how, got.err)
			}
			continue
		}
		var re *ingest.RequestError
		if !errors.As(got.err, &re) || re.Status != status || re.Msg != want {
			t.Errorf("%s: got %v, want %d %q", got.how, got.err, status, want)
		}
	}
}

func TestOTLPLimits(t *testing.T) {
	lim := smallOTLPLimits
	attrs := func(m pcommon.Map, n int) {
		for i := 0; i < n; i++ {
			m.PutStr(fmt.Sprintf("a%d", i), "v")
		}
	}
	for _, tc := range []struct {
		name   string
		td     ptrace.Traces
		status int
		want   string
	}{
		{"at every limit", otlpRequest(4, func(_ int, sp ptrace.Span) {
			attrs(sp.Attributes(), 3)
			for range 2 {
				attrs(sp.Events().AppendEmpty().Attributes(), 3)
				attrs(sp.Links().AppendEmpty().Attributes(), 3)
			}
			sp.Attributes().PutStr("a0", strings.Repeat("x", 64))
		}), 0, ""},
		{"too many spans", otlpRequest(5, nil), 413, "spans: more than the limit of 4 spans in one request"},
		// The first problem in the request's order is named, as the walk
		// over the protobuf meets it (a recorded LangGraph run's export).
		{"a span over a limit before the one span too many", otlpRequest(6, func(i int, sp ptrace.Span) {
			if i == 1 {
				sp.Attributes().PutStr("exception.stacktrace", strings.Repeat("x", 65))
			}
		}), 400, `span 0000000000000002 ("span-1"): attribute "exception.stacktrace": 65 bytes, more than the limit of 64`},
		{"the one span too many before a span over a limit", otlpRequest(6, func(i int, sp ptrace.Span) {
			if i == 5 {
				sp.Attributes().PutStr("exception.stacktrace", strings.Repeat("x", 65))
			}
		}), 413, "spans: more than the limit of 4 spans in one request"},
		{"too many attributes", otlpRequest(2, func(i int, sp ptrace.Span) { attrs(sp.Attributes(), 3+i) }),
			400, `span 0000000000000002 ("span-1"): more than the limit of 3 attributes`},
		{"too many events", otlpRequest(1, func(_ int, sp ptrace.Span) {
			sp.Events().AppendEmpty()
			sp.Events().AppendEmpty()
			sp.Events().AppendEmpty()
		}),
			400, `span 0000000000000001 ("span-0"): more than the limit of 2 events`},
		{"too many links", otlpRequest(1, func(_ int, sp ptrace.Span) {
			sp.Links().AppendEmpty()
			sp.Links().AppendEmpty()
			sp.Links().AppendEmpty()
		}),
			400, `span 0000000000000001 ("span-0"): more than the limit of 2 links`},
		{"an event's attributes", otlpRequest(1, func(_ int, sp ptrace.Span) {
			sp.Events().AppendEmpty()
			attrs(sp.Events().AppendEmpty().Attributes(), 4)
		}), 400, `span 0000000000000001 ("span-0"): event 1: more than the limit of 3 attributes`},
		{"a link's attribute value", otlpRequest(1, func(_ int, sp ptrace.Span) {
			sp.Links().AppendEmpty().Attributes().PutStr("big", strings.Repeat("x", 65))
		}), 400, `span 0000000000000001 ("span-0"): link 0: attribute "big": 65 bytes, more than the limit of 64`},
		{"a string value", otlpRequest(1, func(_ int, sp ptrace.Span) {
			sp.Attributes().PutStr("gen_ai.prompt", strings.Repeat("x", 100))
		}), 400, `span 0000000000000001 ("span-0"): attribute "gen_ai.prompt": 100 bytes, more than the limit of 64`},
		{"an array of empty values", otlpRequest(1, func(_ int, sp ptrace.Span) {
			s := sp.Attributes().PutEmptySlice("many")
			for range 9 {
				s.AppendEmpty()
			}
		}), 400, `span 0000000000000001 ("span-0"): attribute "many": 72 bytes, more than the limit of 64`},
		{"a map nested in an array", otlpRequest(1, func(_ int, sp ptrace.Span) {
			m := sp.Attributes().PutEmptySlice("deep").AppendEmpty().SetEmptyMap()
			m.PutStr("key", strings.Repeat("x", 40))
			m.PutEmptyBytes("b").FromRaw([]byte("0123456789"))
		}), 400, `span 0000000000000001 ("span-0"): attribute "deep": 78 bytes, more than the limit of 64`}, // 8 + (8+3+40) + (8+1+10)
		{"the resource's attributes", func() ptrace.Traces {
			td := otlpRequest(1, nil)
			attrs(td.ResourceSpans().At(0).Resource().Attributes(), 3)
			return td
		}(), 400, "resource: more than the limit of 3 attributes"},
		{"the scope's attributes", func() ptrace.Traces {
			td := otlpRequest(1, nil)
			attrs(td.ResourceSpans().At(0).ScopeSpans().At(0).Scope().Attributes(), 4)
			return td
		}(), 400, "scope: more than the limit of 3 attributes"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkOTLPLimit(t, tc.td, lim, tc.status, tc.want) })
	}
	t.Run("no limits", func(t *testing.T) {
		checkOTLPLimit(t, otlpRequest(20, func(_ int, sp ptrace.Span) { attrs(sp.Attributes(), 200) }), ingest.Limits{}, 0, "")
	})
}

// A request of 100,000 spans is refused before it is decoded, having cost
// next to nothing (the measured 7–15 s of a held writer).
func TestOTLPManySpansRefusedUndecoded(t *testing.T) {
	var spans []byte
	for i := 0; i < 100_000; i++ {
		var sp []byte
		sp = protowire.AppendBytes(protowire.AppendTag(sp, 1, protowire.BytesType), []byte("0123456789abcdef"))
		sp = protowire.AppendBytes(protowire.AppendTag(sp, 2, protowire.BytesType), fmt.Appendf(nil, "%08d", i))
		sp = protowire.AppendFixed64(protowire.AppendTag(sp, 7, protowire.Fixed64Type), 1)
		spans = protowire.AppendBytes(protowire.AppendTag(spans, 2, protowire.BytesType), sp)
	}
	rs := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), spans)
	body := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rs)
	var err error
	allocs := testing.AllocsPerRun(3, func() {
		_, err = ingest.OTLPDecodeEstimate(body, ingest.OTLPTraces, true, ingest.DefaultLimits, 128<<20)
	})
	var re *ingest.RequestError
	if !errors.As(err, &re) || re.Status != http.StatusRequestEntityTooLarge || re.Msg != "spans: more than the limit of 10000 spans in one request" {
		t.Fatalf("100,000 spans: got %v, want 413 naming the limit of 10000 spans", err)
	}
	if allocs > 20 {
		t.Errorf("allocations refusing 100,000 spans: got %.0f, want at most 20", allocs)
	}
}

// TestOTLPEstimate: what OTLPDecodeEstimate foresees for the costliest
// shapes (a few bytes on the wire each) is at least half of what decoding
// them allocates in all, the rest being the garbage of slices that grow;
// and for the real exports of four agent frameworks, no more than four
// times the allocations.
func TestOTLPEstimate(t *testing.T) {
	field := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	repeat := func(num protowire.Number, n int) []byte {
		b := make([]byte, 0, 2*n)
		for range n {
			b = protowire.AppendVarint(protowire.AppendTag(b, num, protowire.BytesType), 0)
		}
		return b
	}
	span := func(extra []byte) []byte {
		return append(field(2, []byte("01234567")), extra...)
	}
	traces := func(spans ...[]byte) []byte {
		var ss []byte
		for _, sp := range spans {
			ss = append(ss, field(2, sp)...)
		}
		return field(1, field(2, ss))
	}
	const n = 1 << 18
	manySpans := make([][]byte, n/8)
	for i := range manySpans {
		manySpans[i] = span(nil)
	}
	for _, tc := range []struct {
		name   string
		signal ingest.OTLPSignal
		body   []byte
	}{
		{"spans", ingest.OTLPTraces, traces(manySpans...)},
		{"attributes", ingest.OTLPTraces, traces(span(repeat(9, n)))},
		{"events", ingest.OTLPTraces, traces(span(repeat(11, n)))},
		{"links", ingest.OTLPTraces, traces(span(repeat(13, n)))},
		{"event attributes", ingest.OTLPTraces, traces(span(field(11, repeat(3, n))))},
		{"resource attributes", ingest.OTLPTraces, field(1, field(1, repeat(1, n)))},
		{"array values", ingest.OTLPTraces, traces(span(field(9, field(2, field(5, repeat(1, n))))))},
		{"list values", ingest.OTLPTraces, traces(span(field(9, field(2, field(6, repeat(1, n))))))},
		{"log records", ingest.OTLPLogs, field(1, field(2, repeat(2, n)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			est, err := ingest.OTLPDecodeEstimate(tc.body, tc.signal, true, ingest.Limits{}, 1<<40)
			if err != nil {
				t.Fatal(err)
			}
			allocated := allocatedBy(func() {
				var err error
				if tc.signal == ingest.OTLPLogs {
					err = plogotlp.NewExportRequest().UnmarshalProto(tc.body)
				} else {
					err = ptraceotlp.NewExportRequest().UnmarshalProto(tc.body)
				}
				if err != nil {
					t.Fatal(err)
				}
			})
			if est < int64(allocated)/2 {
				t.Errorf("estimate: got %d for %d bytes, want at least half of the %d allocated decoding them", est, len(tc.body), allocated)
			}
		})
	}
	files, _ := filepath.Glob("testdata/frameworks/*/*/otlp-*.pb")
	if len(files) == 0 {
		t.Fatal("no framework fixtures in testdata/frameworks")
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		est, err := ingest.OTLPDecodeEstimate(body, ingest.OTLPTraces, true, ingest.DefaultLimits, 1<<40)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		allocated := allocatedBy(func() {
			if err := ptraceotlp.NewExportRequest().UnmarshalProto(body); err != nil {
				t.Fatal(err)
			}
		})
		if est > 4*int64(allocated) || est < int64(allocated)/2 {
			t.Errorf("%s: estimate %d for %d allocated, want within ½ to 4 times", f, est, allocated)
		}
	}
}

// The estimate stops at the ceiling: a body whose decoding would take more
// than the whole budget is not walked to its end.
func TestOTLPEstimateStopsAtTheCeiling(t *testing.T) {
	var records []byte
	for range 1 << 20 {
		records = protowire.AppendVarint(protowire.AppendTag(records, 2, protowire.BytesType), 0)
	}
	scope := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), records)
	body := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), scope)
	est, err := ingest.OTLPDecodeEstimate(body, ingest.OTLPLogs, true, ingest.DefaultLimits, 1<<20)
	if err != nil || est != 1<<20+1 {
		t.Fatalf("estimate over a ceiling of 1 MiB: got %d, %v; want the ceiling plus one", est, err)
	}
	js := []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[` + strings.Repeat("{},", 100_000) + `{}]}]}]}]}`)
	if est, err := ingest.OTLPDecodeEstimate(js, ingest.OTLPTraces, false, ingest.DefaultLimits, 1<<20); err != nil || est != 1<<20+1 {
		t.Fatalf("JSON estimate over a ceiling of 1 MiB: got %d, %v; want the ceiling plus one", est, err)
	}
}
