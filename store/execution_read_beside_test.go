package store_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/store"
)

// besideEvents are executions whose pages need every kind of effect and
// peer a run finds: effects naming it, effects only carrying a key it sent
// (some sent by a peer execution too), effects only of one of its traces
// (an attempt's and a span's), one of its own id's trace, and effects of
// other runs it must not take.
func besideEvents(start time.Time) []map[string]any {
	events := append(executionEvents("a", start, 4, 3, 2), executionEvents("b", start.Add(time.Minute), 3, 2, 1)...)
	events = append(events,
		// b reuses a's key for one step: a peer of a's, and a's of b's.
		map[string]any{"type": "attempt", "execution_id": "b", "step_id": "reuse", "attempt": 1, "effect": "write", "provider": "mail-api",
			"idempotency_key": "a-ik-003", "started_at": stamp(start.Add(2 * time.Minute)), "ended_at": stamp(start.Add(2*time.Minute + time.Second)), "outcome": "ok"},
		// Effects by key alone, by trace alone, and of nobody.
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "by-key", "idempotency_key": "a-ik-002", "at": stamp(start.Add(3 * time.Second))},
		map[string]any{"type": "effect", "provider": "pay-api", "effect_id": "by-key-elsewhere", "idempotency_key": "a-ik-003", "at": stamp(start.Add(4 * time.Second))},
		map[string]any{"type": "attempt", "execution_id": "a", "step_id": "traced", "attempt": 1, "effect": "write", "provider": "mail-api",
			"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7",
			"started_at": stamp(start.Add(5 * time.Second)), "ended_at": stamp(start.Add(6 * time.Second)), "outcome": "ok"},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "by-trace", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
			"span_id": "00f067aa0ba902b8", "at": stamp(start.Add(5500 * time.Millisecond))},
		map[string]any{"type": "span", "execution_id": "b", "trace_id": "5bf92f3577b34da6a3ce929d0e0e4736", "span_id": "10f067aa0ba902b7",
			"role": "http", "name": "POST", "started_at": stamp(start.Add(time.Minute)), "ended_at": stamp(start.Add(time.Minute + time.Second))},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "by-span-trace", "trace_id": "5bf92f3577b34da6a3ce929d0e0e4736",
			"span_id": "10f067aa0ba902b7", "at": stamp(start.Add(time.Minute + 500*time.Millisecond))},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "by-own-id", "trace_id": "a", "at": stamp(start.Add(7 * time.Second))},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "nobody's", "idempotency_key": "ik-unknown", "at": stamp(start.Add(8 * time.Second))},
	)
	return events
}

// TestReadExecutionBesideMatchesAlone reads each execution with its
// effects, peers and findings on a second snapshot (subqueries for its
// keys and traces) and alone (the keys and traces from the attempts read):
// the two reads must be the same, field for field.
func TestReadExecutionBesideMatchesAlone(t *testing.T) {
	db, w, _ := openCountingDB(t)
	write(t, w, besideEvents(time.Date(2026, 7, 1, 9, 0, 0, 0, time.UTC))...)
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		store.SetPairedReads(db, 2)
		beside, err := db.ReadExecution(ctx, id, nearbyAlways)
		if err != nil {
			t.Fatal(err)
		}
		store.SetPairedReads(db, 0)
		alone, err := db.ReadExecution(ctx, id, nearbyAlways)
		if err != nil {
			t.Fatal(err)
		}
		if len(alone.Run.Effects) < 2 || len(alone.Findings) == 0 {
			t.Fatalf("execution %s: got %d effects and %d findings read alone, want effects of several kinds and findings", id, len(alone.Run.Effects), len(alone.Findings))
		}
		if !reflect.DeepEqual(beside, alone) {
			t.Errorf("execution %s: read beside a second snapshot\n%s\nread alone\n%s", id, describeRead(beside), describeRead(alone))
		}
	}
}

func describeRead(r store.ExecutionRead) string {
	s := fmt.Sprintf("token %+v, %d steps, %d peers, %d findings, %d orphans, effects:", r.Token, len(r.Run.Steps), len(r.Run.Peers), len(r.Findings), len(r.Orphans))
	for _, f := range r.Run.Effects {
		s += fmt.Sprintf(" %s/%s(%s)", f.Provider, f.ID, r.States[f.Ref()])
	}
	return s
}
