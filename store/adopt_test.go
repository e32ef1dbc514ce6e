package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/store"
)

// TestSpansNamingOnlyTheirTraceJoinTheTracesExecution: an HTTP span whose
// parent never arrived names only its trace (its execution is the trace
// id); once an attempt of a named execution carries the trace, the span
// is that execution's and no execution named after the trace is left,
// whichever came first.
func TestSpansNamingOnlyTheirTraceJoinTheTracesExecution(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	at := time.Date(2026, 7, 1, 9, 0, 0, 0, time.UTC)
	span := map[string]any{"type": "span", "execution_id": traceID, "trace_id": traceID, "span_id": "00f067aa0ba902b7",
		"parent_span_id": "00f067aa0ba902b6", "role": "http", "name": "POST", "started_at": stamp(at), "ended_at": stamp(at.Add(time.Second))}
	attempt := map[string]any{"type": "attempt", "execution_id": "invoice-42/run-1", "step_id": "5", "attempt": 2, "tool": "SendInvoiceEmail",
		"trace_id": traceID, "started_at": stamp(at.Add(time.Minute)), "ended_at": stamp(at.Add(time.Minute + time.Second)), "outcome": "ok"}
	for name, order := range map[string][]map[string]any{"span first": {span, attempt}, "attempt first": {attempt, span}} {
		t.Run(name, func(t *testing.T) {
			db, w := openDB(t)
			for _, ev := range order {
				write(t, w, ev)
			}
			ctx := context.Background()
			r, err := db.ReadExecution(ctx, "invoice-42/run-1", nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Run.Spans) != 1 || r.Run.Spans[0].SpanID != "00f067aa0ba902b7" {
				t.Errorf("spans of invoice-42/run-1: got %+v, want the HTTP span", r.Run.Spans)
			}
			if _, err := db.ReadExecution(ctx, traceID, nil); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("execution named after the trace: got %v, want none", err)
			}
		})
	}
}
