package ingest_test

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/oncetrace/oncetrace/ingest"
)

// fuzzOTLPLimits are small, so that the fuzzer reaches each limit.
var fuzzOTLPLimits = func() ingest.Limits {
	lim := ingest.DefaultLimits
	lim.Spans, lim.SpanAttributes, lim.SpanEvents, lim.AttributeBytes = 16, 8, 4, 256
	return lim
}()

// otlpFuzzSeeds are the exports of four agent frameworks (protobuf, and
// the same as OTLP/JSON) and hand-made requests at the edges: over each
// limit, tool calls with arguments that are JSON, not JSON, or JSON with
// a key twice.
func otlpFuzzSeeds(f *testing.F) {
	files, _ := filepath.Glob("testdata/frameworks/*/*/otlp-*.pb")
	if len(files) == 0 {
		f.Fatal("no framework fixtures in testdata/frameworks")
	}
	add := func(td ptrace.Traces) {
		req := ptraceotlp.NewExportRequestFromTraces(td)
		pb, err := req.MarshalProto()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(pb, false)
		// The JSON of the small ones only: the fuzzer minimizes what it
		// finds, and large inputs take it long.
		if js, err := req.MarshalJSON(); err != nil {
			f.Fatal(err)
		} else if len(js) <= 16<<10 {
			f.Add(js, true)
		}
	}
	for _, file := range files {
		pb, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(pb); err != nil {
			f.Fatalf("%s: %v", file, err)
		}
		add(req.Traces())
	}
	tool := func(args string) ptrace.Traces {
		return otlpRequest(2, func(i int, sp ptrace.Span) {
			sp.SetEndTimestamp(sp.StartTimestamp() + 1000)
			if i == 0 {
				return
			}
			sp.SetParentSpanID(sp.SpanID())
			sp.Attributes().PutStr("gen_ai.operation.name", "execute_tool")
			sp.Attributes().PutStr("gen_ai.tool.name", "send_email")
			sp.Attributes().PutStr("gen_ai.tool.call.arguments", args)
			sp.Events().AppendEmpty().SetName("oncetrace.effect")
		})
	}
	for _, args := range []string{`{"to":"a@x"}`, `{"to":"a@x","to":"b@x"}`, `not json`, `[[[[[[[[1]]]]]]]]`, `{"args":[],"kwargs":{"to":"a"}}`} {
		add(tool(args))
	}
	add(otlpRequest(17, nil))
	add(otlpRequest(1, func(_ int, sp ptrace.Span) {
		for range 9 {
			sp.Attributes().PutStr(strings.Repeat("k", sp.Attributes().Len()+1), "v")
		}
		sp.Attributes().PutEmptySlice("list").AppendEmpty().SetEmptyMap().PutStr("k", strings.Repeat("v", 300))
		for range 5 {
			sp.Events().AppendEmpty()
			sp.Links().AppendEmpty()
		}
	}))
	f.Add([]byte{}, false)
	f.Add([]byte("{}"), true)
	f.Add([]byte("\x0a\x02\x12\x00"), false)
}

// FuzzMapOTLP: an export request in either encoding, whatever its bytes,
// never panics the checks before and after decoding or the mapping; a
// protobuf request refused before decoding is refused after too, with the
// same status; every span becomes events or a rejection; and every mapped
// event is a fixed point of ParseEvent, as native events are.
func FuzzMapOTLP(f *testing.F) {
	otlpFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		est, wireErr := ingest.OTLPDecodeEstimate(data, ingest.OTLPTraces, !isJSON, fuzzOTLPLimits, 1<<30)
		if est < 0 {
			t.Fatalf("estimate: got %d, want ≥ 0", est)
		}
		wireStatus := requestStatus(t, "before decoding", wireErr)
		req := ptraceotlp.NewExportRequest()
		var err error
		if isJSON {
			err = req.UnmarshalJSON(data)
		} else {
			err = req.UnmarshalProto(data)
		}
		if err != nil {
			return // a 400 naming the decoder's error
		}
		td := req.Traces()
		checkStatus := requestStatus(t, "decoded", ingest.CheckOTLPLimits(td, fuzzOTLPLimits))
		if wireStatus != 0 && checkStatus != wireStatus {
			t.Fatalf("limits: refused before decoding with %d (%v), but decoded it gets %d; want the same refusal", wireStatus, wireErr, checkStatus)
		}

		// Mapping, with the default limits whatever the small ones said.
		res := ingest.MapOTLP(td, ingest.OTLPConfig{Limits: ingest.DefaultLimits})
		if got, spans := len(res.Events)+res.Rejected, td.SpanCount(); got < spans {
			t.Fatalf("mapped: got %d events and %d rejections for %d spans, want each span stored or rejected", len(res.Events), res.Rejected, spans)
		}
		if res.Rejected > 0 && len(res.Reasons) == 0 {
			t.Fatalf("mapped: got %d rejections and no reason, want the first ones said", res.Rejected)
		}
		for _, ev := range res.Events {
			if !strings.HasPrefix(ev.ID, "otlp:") {
				t.Fatalf("event id: got %q, want otlp:…: ids come from spans, never from positions", ev.ID)
			}
			again, err := ingest.ParseEvent(ev.Body, ingest.DefaultLimits)
			if err != nil {
				t.Fatalf("re-parsing mapped event %s: %v", ev.Body, err)
			}
			if again.ID != ev.ID || !bytes.Equal(again.Body, ev.Body) || !reflect.DeepEqual(again, ev) {
				t.Fatalf("re-parsed: got %+v, want %+v", again, ev)
			}
		}
	})
}

// requestStatus is err's status: 0 for none; a failure for anything but
// a 400 or 413 *RequestError.
func requestStatus(t *testing.T, when string, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var re *ingest.RequestError
	if !errors.As(err, &re) || (re.Status != http.StatusBadRequest && re.Status != http.StatusRequestEntityTooLarge) {
		t.Fatalf("%s: got %v (%T), want a 400 or 413 *ingest.RequestError", when, err, err)
	}
	return re.Status
}
