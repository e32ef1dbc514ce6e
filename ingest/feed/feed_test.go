package feed

import (
	"net/http"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

func TestTraceContext(t *testing.T) {
	h := http.Header{}
	h.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if tr, sp := TraceContext(h); tr != "4bf92f3577b34da6a3ce929d0e0e4736" || sp != "00f067aa0ba902b7" {
		t.Errorf("TraceContext: got %q %q", tr, sp)
	}
	h.Set("Traceparent", "00-zz-00f067aa0ba902b7-01")
	if tr, sp := TraceContext(h); tr != "" || sp != "" {
		t.Errorf("TraceContext of a bad header: got %q %q, want none", tr, sp)
	}
}

func TestEvent(t *testing.T) {
	e := trace.Effect{Provider: "smtp", ID: "<m@x>", Target: "a@b", TraceID: "t", SpanID: "s", At: time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC)}
	ev := Event(e, EventID("smtp", e))
	if ev["id"] != "smtp:smtp:<m@x>" || ev["trace_id"] != "t" || ev["span_id"] != "s" || ev["at"] != "2026-06-30T14:00:00Z" {
		t.Errorf("Event: got %v", ev)
	}
	if _, ok := ev["idempotency_key"]; ok {
		t.Errorf("Event: an empty key is left out, got %v", ev)
	}
}
