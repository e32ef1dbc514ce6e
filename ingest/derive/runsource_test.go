package derive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

// contractHistory is a small history with what patching a run follows:
// retries, keys shared between executions (peers), effects joined by
// their execution, their key or their trace, an attempt that changes its
// key, orphans, executions that end.
func contractHistory(t *testing.T) []trace.Event {
	t.Helper()
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
	for x := range 6 {
		exec := fmt.Sprintf("exec_%d", x)
		add(map[string]any{"type": "execution", "id": exec + "_start", "execution_id": exec, "status": "running", "started_at": at(x, 0, 0)})
		for s := 1; s <= 3; s++ {
			step := fmt.Sprintf("step-%d", s)
			key := fmt.Sprintf("ik_%s_%d", exec, s)
			if s == 2 {
				key = fmt.Sprintf("ik_shared_%d", x/2) // the neighbouring execution's too
			}
			for n := 1; n <= 2; n++ {
				start := map[string]any{"type": "attempt", "id": fmt.Sprintf("%s_%d_%d_a", exec, s, n), "execution_id": exec, "step_id": step,
					"attempt": n, "tool": "send_email", "provider": "mail-api", "effect": "write", "idempotency_key": key,
					"started_at": at(x, s, 100*n)}
				add(start)
				end := map[string]any{"type": "attempt", "id": fmt.Sprintf("%s_%d_%d_b", exec, s, n), "execution_id": exec, "step_id": step,
					"attempt": n, "ended_at": at(x, s, 100*n+50), "outcome": []string{"timeout", "ok"}[n-1]}
				if s == 3 && n == 2 {
					end["idempotency_key"] = key + "_changed" // a later report of the attempt sends another key
				}
				add(end)
			}
			effect := map[string]any{"type": "effect", "id": fmt.Sprintf("%s_%d_f", exec, s), "provider": "mail-api",
				"effect_id": fmt.Sprintf("msg_%s_%d", exec, s), "at": at(x, s, 120)}
			switch s {
			case 1:
				effect["execution_id"], effect["step_id"] = exec, step
			case 2:
				effect["idempotency_key"] = key
			case 3:
				effect["idempotency_key"] = key + "_changed"
			}
			add(effect)
		}
		add(map[string]any{"type": "effect", "id": exec + "_orphan", "provider": "pay-api", "effect_id": "pay_" + exec,
			"idempotency_key": "ik_nobody_" + exec, "at": at(x, 30, 0)})
		if x%2 == 0 {
			add(map[string]any{"type": "execution", "id": exec + "_end", "execution_id": exec, "status": "completed", "ended_at": at(x, 40, 0)})
		}
	}
	return events
}

// canonicalRun is a run as the contract compares it: without the
// providers (both sources set the same map) and with empty lists nil.
func canonicalRun(run trace.Run) trace.Run {
	run.FedProviders = nil
	if len(run.Steps) == 0 {
		run.Steps = nil
	}
	for i := range run.Steps {
		if len(run.Steps[i].Attempts) == 0 {
			run.Steps[i].Attempts = nil
		}
	}
	if len(run.Effects) == 0 {
		run.Effects = nil
	}
	if len(run.Peers) == 0 {
		run.Peers = nil
	}
	if len(run.Spans) == 0 {
		run.Spans = nil
	}
	return run
}

// sameRun compares what two sources gave for one execution.
func sameRun(t *testing.T, what, id string, got trace.Run, gotErr error, want trace.Run, wantErr error) {
	t.Helper()
	if errors.Is(gotErr, store.ErrNotFound) != errors.Is(wantErr, store.ErrNotFound) {
		t.Fatalf("%s %s: got error %v, want %v", what, id, gotErr, wantErr)
	}
	if gotErr != nil && !errors.Is(gotErr, store.ErrNotFound) || wantErr != nil && !errors.Is(wantErr, store.ErrNotFound) {
		t.Fatalf("%s %s: got %v and %v", what, id, gotErr, wantErr)
	}
	if g, w := canonicalRun(got), canonicalRun(want); !reflect.DeepEqual(g, w) {
		gj, _ := json.MarshalIndent(g, "", " ")
		wj, _ := json.MarshalIndent(w, "", " ")
		t.Fatalf("%s %s: the writer's cache gives\n%s\nthe store reads\n%s", what, id, gj, wj)
	}
}

// TestRunSourceContract writes a history one event a commit, in shuffled
// order, through a Deriver, and holds its two RunSources to one contract:
// at the start of each commit, every run the writer's cache gives is the
// run the store reads; within it, every run the commit patched is the run
// the store reads after the commit's writes.
func TestRunSourceContract(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	events := contractHistory(t)
	rand.New(rand.NewSource(3)).Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	var ids []string
	for x := range 6 {
		ids = append(ids, fmt.Sprintf("exec_%d", x))
	}
	d := New(db, trace.DefaultConfig)
	fromCache, patched := 0, 0
	for _, ev := range events {
		var derived Derived
		var lastSeq int64
		err := db.Update(ctx, func(tx *store.Tx) error {
			var err error
			if lastSeq, err = d.Check(tx, math.MaxInt64); err != nil { // before it stores any
				return err
			}
			stored := storeRuns{tx: tx, fed: d.fed}
			cached := newRunSource(tx, d.fed, d.cache, newChanges())
			for _, id := range ids {
				if d.cache.runs[id] != nil {
					fromCache++
				}
				got, gotErr := cached.Run(id)
				want, wantErr := stored.Run(id)
				sameRun(t, "before the commit", id, got, gotErr, want, wantErr)
			}
			seqs, err := tx.InsertEvents([]trace.Event{ev}, time.Now())
			if err != nil {
				return err
			}
			lastSeq = max(lastSeq, seqs[0])
			if derived, err = d.Derive(tx, map[string][]trace.Event{ev.Entity(): {ev}}); err != nil {
				return err
			}
			for id, e := range derived.a.runs {
				if e == nil {
					continue
				}
				if e.patchedSaved {
					patched++
				}
				want, wantErr := storeRuns{tx: tx, fed: d.fed}.Run(id)
				sameRun(t, "patched by the commit", id, e.raw, nil, want, wantErr)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		d.Committed(lastSeq, derived)
	}
	// Without these the contract held of nothing.
	if fromCache < len(events) || patched < len(events)/2 {
		t.Errorf("runs: got %d given by the cache and %d patched over %d commits, want at least %d and %d",
			fromCache, patched, len(events), len(events), len(events)/2)
	}
}
