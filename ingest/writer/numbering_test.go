package writer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand"
	"path/filepath"
	"slices"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

// TestSpanAttemptNumbersIndependentOfRequests writes attempts identified by
// their span, beside attempts sent with a number in the same steps, in one
// request (the writer numbers steps new to a commit itself), one event a
// request in order and shuffled (each step's row is then renumbered in the
// store), and in a few requests in reverse: every way stores the same
// steps, with the numbers NumberSpanAttempts gives.
func TestSpanAttemptNumbersIndependentOfRequests(t *testing.T) {
	ctx := context.Background()
	var events []trace.Event
	add := func(format string, args ...any) {
		ev, err := ingest.ParseEvent(fmt.Appendf(nil, format, args...), ingest.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	spanAttempt := func(step, span, started string) {
		add(`{"type":"attempt","id":"%s_%s_a","execution_id":"numbering","step_id":"%s","trace_id":"t1","span_id":"%s","tool":"send_invoice_email"%s}`,
			step, span, step, span, started)
		add(`{"type":"attempt","id":"%s_%s_b","execution_id":"numbering","step_id":"%s","trace_id":"t1","span_id":"%s","outcome":"ok"}`,
			step, span, step, span)
	}
	sentAttempt := func(step string, n int, started string) {
		add(`{"type":"attempt","id":"%s_%d","execution_id":"numbering","step_id":"%s","attempt":%d,"tool":"send_invoice_email"%s}`,
			step, n, step, n, started)
	}
	at := func(s int) string { return fmt.Sprintf(`,"started_at":"2026-06-30T14:00:%02dZ"`, s) }
	add(`{"type":"execution","id":"numbering_start","execution_id":"numbering","name":"numbering","started_at":"2026-06-30T14:00:00Z"}`)
	spanAttempt("s1", "a", at(2))
	spanAttempt("s1", "b", at(1))
	sentAttempt("s1", 1, at(3))
	spanAttempt("s2", "c", at(5))
	spanAttempt("s2", "d", "")
	spanAttempt("s2", "e", at(4))
	sentAttempt("s3", 2, at(6))
	spanAttempt("s3", "f", at(7))
	spanAttempt("s3", "g", at(8))
	for part := range 2 {
		res := ingest.MapOTLP(largeExecutionSpans(uint64(part), 30), defaultOTLPConfig)
		if res.Rejected != 0 {
			t.Fatalf("rejected %d: %v", res.Rejected, res.Reasons)
		}
		events = append(events, res.Events...)
	}

	one := func(evs []trace.Event) [][]trace.Event {
		out := make([][]trace.Event, len(evs))
		for i, ev := range evs {
			out[i] = []trace.Event{ev}
		}
		return out
	}
	shuffled := slices.Clone(events)
	rand.New(rand.NewSource(5)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	reversed := slices.Clone(events)
	slices.Reverse(reversed)
	third := len(reversed) / 3
	ways := []struct {
		name     string
		requests [][]trace.Event
	}{
		{"one request", [][]trace.Event{events}},
		{"one event a request", one(events)},
		{"shuffled, one event a request", one(shuffled)},
		{"three requests in reverse", [][]trace.Event{reversed[:third], reversed[third : 2*third], reversed[2*third:]}},
	}
	stored := make([]string, len(ways))
	for i, way := range ways {
		db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), fmt.Sprintf("way%d.db", i)), sqlite.SyncNormal)
		if err != nil {
			t.Fatal(err)
		}
		w := writer.New(db, writer.DefaultConfig)
		for _, req := range way.requests {
			if _, err := w.Write(ctx, req); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
		var steps []trace.Step
		for _, id := range []string{"numbering", "large"} {
			run, err := db.Run(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			steps = append(steps, run.Steps...)
		}
		db.Close()
		var lines []string // one a step, one an attempt, for lineDiff
		for _, s := range steps {
			js, _ := json.Marshal(trace.Step{ID: s.ID, Tool: s.Tool, Effect: s.Effect, Provider: s.Provider})
			lines = append(lines, string(js))
			for _, a := range s.Attempts {
				js, _ := json.Marshal(a)
				lines = append(lines, string(js))
			}
		}
		js, _ := json.Marshal(lines)
		stored[i] = string(js)

		numbers := map[string]int{}
		for _, s := range steps {
			for _, a := range s.Attempts {
				if a.ExecutionID == "numbering" {
					numbers[a.StepID+"/"+a.SpanID] = a.Number
				}
			}
		}
		want := map[string]int{"s1/": 1, "s1/b": 2, "s1/a": 3, "s2/d": 1, "s2/e": 2, "s2/c": 3, "s3/f": 1, "s3/": 2, "s3/g": 3}
		if !maps.Equal(numbers, want) {
			t.Errorf("%s: attempt numbers by step/span: got %v, want %v", way.name, numbers, want)
		}
	}
	for i := 1; i < len(ways); i++ {
		if stored[i] != stored[0] {
			t.Errorf("steps written as %s differ from %s:\n%s", ways[i].name, ways[0].name, lineDiff(stored[0], stored[i]))
		}
	}
}
