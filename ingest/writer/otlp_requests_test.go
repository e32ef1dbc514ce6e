package writer_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

// These tests follow spans of one run across export requests (docs/otlp.md,
// "Within one export request"), through the writer and the store.

func openStore(t *testing.T) (*store.DB, *writer.Writer) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w := writer.New(db, writer.DefaultConfig)
	t.Cleanup(func() { w.Close() })
	return db, w
}

// writeRequests maps each export request on its own and writes its events.
func writeRequests(t *testing.T, w *writer.Writer, requests ...[]testSpan) {
	t.Helper()
	for _, spans := range requests {
		res := ingest.MapOTLP(buildTraces(t, nil, spans...), defaultOTLPConfig)
		if res.Rejected != 0 {
			t.Fatalf("rejected: got %d (%v), want 0", res.Rejected, res.Reasons)
		}
		if _, err := w.Write(context.Background(), res.Events); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMapOTLPNoSilentMerge: identity derived from a span comes from its
// span id, never from its place in a request, so spans exported in two
// requests never fold into one entity.
func TestMapOTLPNoSilentMerge(t *testing.T) {
	chat := func(id byte, start int) testSpan {
		return testSpan{id: id, parent: 1, name: "chat gpt-4o", start: start,
			attrs: kv{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 100 * int(id)}}
	}
	send := func(id byte, start int) testSpan {
		return testSpan{id: id, parent: 1, name: "execute_tool send", start: start,
			attrs: tool(kv{"gen_ai.tool.name": "send_invoice_email", "gen_ai.tool.call.id": "call_" + spanHex(id),
				"gen_ai.tool.call.arguments": `{"to":"jordan@acme.dev"}`})}
	}
	// Each request holds one span, first in it; the later span comes first.
	requests := [][]testSpan{{chat(3, 30)}, {chat(2, 10)}, {send(5, 50)}, {send(4, 40)}}
	var events []trace.Event
	for _, r := range requests {
		events = append(events, mapSpans(t, nil, r...)[otlpEventID(1, r[0].id)])
	}

	t.Run("two model calls: two span events", func(t *testing.T) {
		a, b := events[0], events[1]
		if a.Span == nil || b.Span == nil {
			t.Fatalf("got %s and %s events, want two span events", a.Type, b.Type)
		}
		if a.ID == b.ID || a.Entity() == b.Entity() {
			t.Errorf("got ids %s, %s and entities %q, %q: want two of each", a.ID, b.ID, a.Entity(), b.Entity())
		}
	})
	t.Run("one tool call retried: one step, two attempts", func(t *testing.T) {
		a, b := events[2].Attempt, events[3].Attempt
		if a == nil || b == nil {
			t.Fatalf("got %s and %s events, want two attempts", events[2].Type, events[3].Type)
		}
		if a.StepID != b.StepID {
			t.Errorf("step ids: got %q and %q, want one step", a.StepID, b.StepID)
		}
		if events[2].ID == events[3].ID || events[2].Entity() == events[3].Entity() {
			t.Errorf("got ids %s, %s and entities %q, %q: want two of each", events[2].ID, events[3].ID, events[2].Entity(), events[3].Entity())
		}
	})
	t.Run("stored", func(t *testing.T) {
		db, w := openStore(t)
		writeRequests(t, w, requests...)
		run, err := db.Run(context.Background(), traceHex(1))
		if err != nil {
			t.Fatal(err)
		}
		var calls []string
		for _, s := range run.ModelCalls() {
			calls = append(calls, s.SpanID)
		}
		if len(calls) != 2 || calls[0] != spanHex(2) || calls[1] != spanHex(3) {
			t.Errorf("model calls: got %v, want spans 2 and 3 by start", calls)
		}
		if len(run.Steps) != 1 || len(run.Steps[0].Attempts) != 2 {
			t.Fatalf("steps: got %+v, want one step with two attempts", run.Steps)
		}
		for i, a := range run.Steps[0].Attempts {
			if wantSpan := spanHex(byte(4 + i)); a.Number != i+1 || a.SpanID != wantSpan || len(a.Conflicts) != 0 {
				t.Errorf("attempt %d: got number %d span %s conflicts %v, want %d, %s, none", i, a.Number, a.SpanID, a.Conflicts, i+1, wantSpan)
			}
		}
	})
}

// TestMapOTLPRunningSpanCompletesLater: an exporter may send a span before
// it ends and again once it has; the second export must complete the
// attempt, not be dropped as a duplicate of the first.
func TestMapOTLPRunningSpanCompletesLater(t *testing.T) {
	span := testSpan{id: 2, parent: 1, name: "execute_tool send", start: 10,
		attrs: tool(kv{"gen_ai.tool.call.arguments": `{"to":"j"}`, "oncetrace.effect": "write"})}
	chat := testSpan{id: 3, parent: 1, name: "chat", start: 30, attrs: kv{"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 7}}
	root := testSpan{id: 1, name: "invoke_agent billing-agent", end: 100, attrs: kv{"gen_ai.operation.name": "invoke_agent"}}
	runningSpan, runningChat, runningRoot := span, chat, root
	runningSpan.end, runningChat.end, runningRoot.end = -1, -1, -1
	running := ingest.MapOTLP(buildTraces(t, nil, runningRoot, runningSpan, runningChat), defaultOTLPConfig)
	finished := ingest.MapOTLP(buildTraces(t, nil, root, span, chat), defaultOTLPConfig)
	if len(running.Events) != 3 || len(finished.Events) != 3 {
		t.Fatalf("events: got %d running and %d finished, want 3 and 3", len(running.Events), len(finished.Events))
	}
	for i := range running.Events {
		if running.Events[i].ID == finished.Events[i].ID {
			t.Errorf("event %d: running and finished both have id %s, want different ids", i, running.Events[i].ID)
		}
		if running.Events[i].Entity() != finished.Events[i].Entity() {
			t.Errorf("event %d: entities %q and %q, want one", i, running.Events[i].Entity(), finished.Events[i].Entity())
		}
	}

	db, w := openStore(t)
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
	if a.Number != 1 || a.Outcome != trace.OutcomeOK || !a.EndedAt.Equal(ms(20)) || len(a.Conflicts) != 0 {
		t.Errorf("attempt: got #%d outcome %q ended %v conflicts %v, want #1 ok at %v, no conflicts", a.Number, a.Outcome, a.EndedAt, a.Conflicts, ms(20))
	}
	if calls := run.ModelCalls(); len(calls) != 1 || !calls[0].EndedAt.Equal(ms(40)) || calls[0].InputTokens != 7 {
		t.Errorf("model calls: got %+v, want one, ended at %v with 7 input tokens", calls, ms(40))
	}
}

// TestMapOTLPAttemptsAcrossExports: attempts of one step that arrive in
// different exports (a long retry, a re-run after a crash) are numbered
// by the number on the span, else by start time across all of them.
func TestMapOTLPAttemptsAcrossExports(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs func(n int) map[string]any
	}{
		{"oncetrace.attempt", func(n int) map[string]any { return kv{"oncetrace.step.id": "step-4", "oncetrace.attempt": n} }},
		{"http.request.resend_count", func(n int) map[string]any {
			return kv{"oncetrace.step.id": "step-4", "http.request.resend_count": n - 1}
		}},
		{"neither: by start time", func(n int) map[string]any { return kv{"oncetrace.step.id": "step-4"} }},
		{"neither, and no step id: same tool and arguments, by start time", func(n int) map[string]any {
			return tool(kv{"gen_ai.tool.name": "send", "gen_ai.tool.call.id": "call_" + spanHex(byte(n)), "gen_ai.tool.call.arguments": `{"to":"j"}`})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, w := openStore(t)
			// Each attempt in its own trace and request, the second
			// exported first; one execution by its id.
			var requests [][]testSpan
			for n := 2; n >= 1; n-- {
				requests = append(requests, []testSpan{{trace: byte(n), id: byte(n + 1), parent: 1, name: "execute_tool send", start: 1000 * n,
					attrs: with(tc.attrs(n), kv{"oncetrace.execution.id": "exec_1"})}})
			}
			writeRequests(t, w, requests...)
			run, err := db.Run(context.Background(), "exec_1")
			if err != nil {
				t.Fatal(err)
			}
			if len(run.Steps) != 1 || len(run.Steps[0].Attempts) != 2 {
				t.Fatalf("steps: got %+v, want one step with two attempts", run.Steps)
			}
			for i, a := range run.Steps[0].Attempts {
				if a.Number != i+1 || !a.StartedAt.Equal(ms(1000*(i+1))) || len(a.Conflicts) != 0 {
					t.Errorf("attempt %d: got #%d started %v, conflicts %v, want #%d started %v, none",
						i, a.Number, a.StartedAt, a.Conflicts, i+1, ms(1000*(i+1)))
				}
			}
		})
	}
}
