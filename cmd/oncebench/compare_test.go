package main

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// The comparison must send what SDKs send: whole agent runs of ten spans,
// 100 spans a request, every run under a trace id of its own drawn at
// random, in both encodings.
func TestCompareRequestsAreWholeRunsWithRandomTraceIDs(t *testing.T) {
	for _, encoding := range []string{"json", "protobuf"} {
		bodies, spans, effects, err := compareRequests(1000, 4, encoding)
		if err != nil {
			t.Fatal(err)
		}
		if spans != 1000 || effects != 100 { // 50 oncetrace-shaped runs, two effects each
			t.Errorf("%s: got %d spans and %d effect events, want 1000 and 100", encoding, spans, effects)
		}
		if len(bodies) != 4 {
			t.Fatalf("%s: got bodies for %d connections, want 4", encoding, len(bodies))
		}
		perTrace := map[pcommon.TraceID]int{}
		requests := 0
		for _, conn := range bodies {
			for _, body := range conn {
				req := ptraceotlp.NewExportRequest()
				if encoding == "json" {
					err = req.UnmarshalJSON(body)
				} else {
					err = req.UnmarshalProto(body)
				}
				if err != nil {
					t.Fatalf("%s: %v", encoding, err)
				}
				if n := req.Traces().SpanCount(); n != 100 {
					t.Errorf("%s: request of %d spans, want 100", encoding, n)
				}
				requests++
				sp := req.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Spans()
				for i := range sp.Len() {
					perTrace[sp.At(i).TraceID()]++
				}
			}
		}
		if requests != 10 || len(perTrace) != 100 {
			t.Errorf("%s: got %d requests and %d traces, want 10 and 100", encoding, requests, len(perTrace))
		}
		sequentialPrefix := 0
		for id, n := range perTrace {
			if n != spansPerTrace {
				t.Errorf("%s: trace %s has %d spans, want %d", encoding, id, n, spansPerTrace)
			}
			if id[0] == 0x0b && id[1] == 0 && id[2] == 0 {
				sequentialPrefix++
			}
		}
		if sequentialPrefix > 1 {
			t.Errorf("%s: %d trace ids in the sequential layout; want random ones", encoding, sequentialPrefix)
		}
	}
}

// -sequential-ids reproduces the layout oncebench used before issue 14.
func TestSequentialIDsKeepTheOldLayout(t *testing.T) {
	ids := sequentialIDs(0x0102)
	want := pcommon.TraceID{0x0b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x02}
	if ids.trace != want {
		t.Errorf("trace id: got %x, want %x", ids.trace, want)
	}
	if got := spanID(ids, 3); got != (pcommon.SpanID{0x5e, 0, 0, 0x01, 0x02, 0, 0, 3}) {
		t.Errorf("span id: got %x", got)
	}
	if randomIDs(1) == randomIDs(1) {
		t.Error("randomIDs drew the same ids twice")
	}
}
