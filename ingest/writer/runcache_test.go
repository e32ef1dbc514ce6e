package writer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/derive"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

// mixedHistory returns events of many executions that exercise what a run
// is made of: retries with and without keys, keys shared between
// executions (peers), one key sent with other arguments, duplicate,
// keyed-only and orphan effects, conflicting outcomes, replays and
// deduplicated answers, executions that end and that never do; and
// executions that record their trace, whose effects hang from their
// attempts' spans by trace context alone, and effects of traces nobody
// exported, one key string sent to two providers.
func mixedHistory(t *testing.T, executions int) []trace.Event {
	t.Helper()
	rng := rand.New(rand.NewSource(13))
	var events []trace.Event
	add := func(v map[string]any) {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := ingest.ParseEvent(raw, ingest.DefaultLimits)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		events = append(events, ev)
	}
	base := time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC)
	at := func(x, s, ms int) string {
		return base.Add(time.Duration(x)*time.Hour + time.Duration(s)*time.Minute + time.Duration(ms)*time.Millisecond).Format(time.RFC3339Nano)
	}
	for x := range executions {
		exec := fmt.Sprintf("exec_%02d", x)
		traceID := ""
		if x%3 == 0 {
			traceID = fmt.Sprintf("%032x", 0xa000+x)
		}
		add(map[string]any{"type": "execution", "id": exec + "_start", "execution_id": exec, "name": "billing-agent",
			"status": "running", "started_at": at(x, 0, 0)})
		steps := 2 + rng.Intn(8)
		for s := 1; s <= steps; s++ {
			step := fmt.Sprintf("step-%d", s)
			key := fmt.Sprintf("ik_%s_%d", exec, s)
			switch rng.Intn(6) {
			case 0:
				key = fmt.Sprintf("ik_shared_%d_%d", x/2, s) // the same key as the neighbouring execution
			case 1:
				key = ""
			}
			effect := []string{"write", "write", "read", "unsafe", ""}[rng.Intn(5)]
			tries := 1 + rng.Intn(3)
			for n := 1; n <= tries; n++ {
				id := fmt.Sprintf("%s_%d_%d", exec, s, n)
				args := map[string]any{"to": "jordan@acme.dev"}
				if rng.Intn(10) == 0 {
					args["to"] = "sam@acme.dev"
				}
				start := map[string]any{"type": "attempt", "id": id + "_a", "execution_id": exec, "step_id": step, "attempt": n,
					"tool": "send_invoice_email", "provider": "mail-api", "args": args, "worker": fmt.Sprintf("w%d", rng.Intn(2)),
					"started_at": at(x, s, 100*n)}
				if effect != "" {
					start["effect"] = effect
				}
				if key != "" {
					start["idempotency_key"] = key
				}
				if traceID != "" {
					start["trace_id"], start["span_id"] = traceID, fmt.Sprintf("%016x", 100*s+n)
				}
				add(start)
				if rng.Intn(5) == 0 {
					continue // never ends: lost or running
				}
				outcome := "ok"
				if n < tries {
					outcome = []string{"timeout", "error"}[rng.Intn(2)]
				}
				end := map[string]any{"type": "attempt", "id": id + "_b", "execution_id": exec, "step_id": step, "attempt": n,
					"started_at": at(x, s, 100*n), "ended_at": at(x, s, 100*n+50), "outcome": outcome}
				if outcome == "ok" && rng.Intn(6) == 0 {
					end["deduplicated"] = true
				}
				if outcome == "ok" && n > 1 && rng.Intn(8) == 0 {
					end["outcome"] = "replayed"
				}
				add(end)
				if rng.Intn(12) == 0 {
					end["id"] = id + "_c"
					end["outcome"] = "error" // a conflicting terminal outcome
					end["ended_at"] = at(x, s, 100*n+70)
					add(end)
				}
			}
			if effect == "read" {
				continue
			}
			for f := range rng.Intn(3) {
				ev := map[string]any{"type": "effect", "id": fmt.Sprintf("%s_%d_f%d", exec, s, f), "provider": "mail-api",
					"effect_id": fmt.Sprintf("msg_%s_%d_%d", exec, s, f), "at": at(x, s, 120+f), "target": "jordan@acme.dev"}
				choice := rng.Intn(3)
				if traceID != "" && rng.Intn(2) == 0 {
					choice = 3
				}
				switch choice {
				case 3:
					// From the span of one of the step's attempts.
					ev["trace_id"], ev["span_id"] = traceID, fmt.Sprintf("%016x", 100*s+1+rng.Intn(tries))
				case 0:
					ev["execution_id"], ev["step_id"] = exec, step
				case 1:
					ev["execution_id"], ev["step_id"] = exec, step
					if key != "" {
						ev["idempotency_key"] = key
					}
				default:
					if key != "" {
						ev["idempotency_key"] = key // by its key alone
					}
				}
				add(ev)
			}
		}
		if rng.Intn(4) == 0 {
			add(map[string]any{"type": "effect", "id": exec + "_orphan", "provider": "mail-api", "effect_id": "msg_" + exec + "_orphan",
				"idempotency_key": "ik_nobody_" + exec, "at": at(x, 30, 0)})
		}
		if x%5 == 1 {
			// Effects of two traces nobody exported, one key string at two
			// providers.
			for i, provider := range []string{"mail-api", "pay-api"} {
				add(map[string]any{"type": "effect", "id": fmt.Sprintf("%s_lost_%d", exec, i), "provider": provider,
					"effect_id": fmt.Sprintf("msg_%s_lost_%d", exec, i), "idempotency_key": "ik_lost_" + exec,
					"trace_id": fmt.Sprintf("%032x", 0xb000+2*x+i), "span_id": "00000000000000d1", "at": at(x, 31, i)})
			}
		}
		if rng.Intn(3) > 0 {
			add(map[string]any{"type": "execution", "id": exec + "_end", "execution_id": exec,
				"status": []string{"completed", "failed"}[rng.Intn(2)], "ended_at": at(x, 40, 0)})
		}
	}
	return events
}

// derivedState is everything the writer derives and stores, as the API
// reads it: every execution's row (counts, audit state, finding counts),
// every finding and every effect's match state.
func derivedState(t *testing.T, db *store.DB) string {
	t.Helper()
	ctx := context.Background()
	var out []string
	var cursor string
	for {
		list, next, err := db.ListExecutions(ctx, store.ExecutionFilter{Cursor: cursor, Limit: store.MaxPageSize})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range list {
			js, _ := json.Marshal(x)
			out = append(out, string(js))
		}
		if next == "" {
			break
		}
		cursor = next
	}
	findings, err := db.Findings(ctx, store.FindingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		js, _ := json.Marshal(f)
		out = append(out, string(js))
	}
	cursor = ""
	for {
		rows, next, err := db.Effects(ctx, store.EffectFilter{Cursor: cursor, Limit: store.MaxPageSize})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			out = append(out, fmt.Sprintf("effect %s/%s %s", r.Provider, r.ID, r.State))
		}
		if next == "" {
			break
		}
		cursor = next
	}
	slices.Sort(out)
	js, _ := json.MarshalIndent(out, "", " ")
	return string(js)
}

// TestIncrementalMatchesRebuild writes a history one event a request, in
// a shuffled order, so that the writer patches the runs it keeps instead
// of reading them whole, then re-derives every execution from scratch
// (derive.Rebuild) and requires the stored state not to have changed.
func TestIncrementalMatchesRebuild(t *testing.T) {
	ctx := context.Background()
	events := mixedHistory(t, 40)
	if len(events) < 500 {
		t.Fatalf("history: got %d events, want at least 500", len(events))
	}
	for _, order := range []string{"in order", "shuffled"} {
		t.Run(order, func(t *testing.T) {
			db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			stream := slices.Clone(events)
			if order == "shuffled" {
				rand.New(rand.NewSource(7)).Shuffle(len(stream), func(i, j int) { stream[i], stream[j] = stream[j], stream[i] })
			}
			w := writer.New(db, writer.DefaultConfig)
			for _, ev := range stream {
				if _, err := w.Write(ctx, []trace.Event{ev}); err != nil {
					t.Fatal(err)
				}
			}
			w.Close()
			incremental := derivedState(t, db)

			if err := db.SetDerivationVersion(ctx, trace.DerivationVersion-1); err != nil {
				t.Fatal(err)
			}
			rebuilt, err := derive.Rebuild(ctx, db, trace.DefaultConfig, nil)
			if err != nil || !rebuilt {
				t.Fatalf("rebuild: got %v, %v, want true, nil", rebuilt, err)
			}
			fresh := derivedState(t, db)
			if incremental != fresh {
				t.Errorf("stored state written one event a request differs from a rebuild:\n%s", lineDiff(incremental, fresh))
			}
		})
	}
}

// TestIncrementalOTLPMatchesRebuild writes one long execution as OTLP
// requests of a few traces each, out of order, and requires the stored
// state to be what a rebuild derives: the execution's own events, which
// every trace's root adds to, come from the writer's cache after the first.
func TestIncrementalOTLPMatchesRebuild(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := writer.New(db, writer.DefaultConfig)
	for _, part := range rand.New(rand.NewSource(3)).Perm(12) {
		res := ingest.MapOTLP(largeExecutionSpans(uint64(part), 30), defaultOTLPConfig)
		if res.Rejected != 0 {
			t.Fatalf("rejected %d: %v", res.Rejected, res.Reasons)
		}
		if _, err := w.Write(ctx, res.Events); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	incremental := derivedState(t, db)
	if err := db.SetDerivationVersion(ctx, trace.DerivationVersion-1); err != nil {
		t.Fatal(err)
	}
	if _, err := derive.Rebuild(ctx, db, trace.DefaultConfig, nil); err != nil {
		t.Fatal(err)
	}
	if fresh := derivedState(t, db); incremental != fresh {
		t.Errorf("stored state written a few traces a request differs from a rebuild:\n%s", lineDiff(incremental, fresh))
	}
	run, err := db.Run(ctx, "large")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(run.Steps); got != 12*3*(3+2) {
		t.Errorf("steps: got %d, want %d (each trace's three reads and two writes)", got, 12*3*(3+2))
	}
}

// lineDiff lists the lines only in a and only in b.
func lineDiff(a, b string) string {
	var la, lb []string
	json.Unmarshal([]byte(a), &la)
	json.Unmarshal([]byte(b), &lb)
	out := ""
	for _, l := range la {
		if !slices.Contains(lb, l) {
			out += "- " + l + "\n"
		}
	}
	for _, l := range lb {
		if !slices.Contains(la, l) {
			out += "+ " + l + "\n"
		}
	}
	return out
}

// TestCacheSeesAnotherHandlesPrune: a prune through another handle on the
// same database (another instance's, on a shared PostgreSQL) deletes rows
// this writer's cache still holds; the derived generation it bumps makes
// the writer read them again, so that events written after it store what
// a rebuild derives.
func TestCacheSeesAnotherHandlesPrune(t *testing.T) {
	ctx := context.Background()
	events := mixedHistory(t, 20)
	path := filepath.Join(t.TempDir(), "oncetrace.db")
	db, err := sqlite.Open(ctx, path, sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	other, err := sqlite.Open(ctx, path, sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	w := writer.New(db, writer.DefaultConfig)
	defer w.Close()
	// The newest event is of an execution the prune keeps, so the log's
	// last sequence number does not move: only the generation tells.
	keep, err := ingest.ParseEvent([]byte(`{"type":"execution","id":"keep_start","execution_id":"keep","status":"running","started_at":"2099-01-01T00:00:00Z"}`), ingest.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range append(slices.Clone(events), keep) {
		if _, err := w.Write(ctx, []trace.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	cut := time.Date(2098, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := other.Prune(ctx, store.PruneOptions{Before: cut, EffectsBefore: cut, Reaudit: derive.Reaudit(trace.DefaultConfig)})
	if err != nil || res.Executions == 0 {
		t.Fatalf("prune through the other handle: got %+v, %v; want executions deleted", res, err)
	}
	// The first part of the history again: new to the log, which the prune
	// emptied, while the writer's cache still remembers the runs.
	for _, ev := range events[:len(events)/2] {
		if _, err := w.Write(ctx, []trace.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	incremental := derivedState(t, db)
	if err := db.SetDerivationVersion(ctx, trace.DerivationVersion-1); err != nil {
		t.Fatal(err)
	}
	if _, err := derive.Rebuild(ctx, db, trace.DefaultConfig, nil); err != nil {
		t.Fatal(err)
	}
	if fresh := derivedState(t, db); incremental != fresh {
		t.Errorf("after another handle's prune, stored state differs from a rebuild:\n%s", lineDiff(incremental, fresh))
	}
}
