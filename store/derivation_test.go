package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/derive"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// TestRebuildStampsANewDatabase: a database without executions gets the
// binary's derivation version without re-deriving anything.
func TestRebuildStampsANewDatabase(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t)
	if v, err := db.DerivationVersion(ctx); err != nil || v != 0 {
		t.Fatalf("new database: version %d, %v; want 0 (none recorded)", v, err)
	}
	calls := 0
	rebuilt, err := derive.Rebuild(ctx, db, trace.DefaultConfig, func(int, int) { calls++ })
	if err != nil || rebuilt || calls != 0 {
		t.Fatalf("Rebuild of a new database: rebuilt %v, %d progress calls, %v; want nothing rebuilt", rebuilt, calls, err)
	}
	if v, err := db.DerivationVersion(ctx); err != nil || v != trace.DerivationVersion {
		t.Fatalf("after Rebuild: version %d, %v; want %d", v, err, trace.DerivationVersion)
	}
}

// TestRebuildRederivesEveryExecutionOnce: an older version folds every
// event of the log again, with progress up to the total; the same version
// does nothing.
func TestRebuildRederivesEveryExecutionOnce(t *testing.T) {
	ctx := context.Background()
	db, w := openDB(t)
	for _, id := range []string{"exec_a", "exec_b", "exec_c"} {
		write(t, w, map[string]any{"type": "attempt", "execution_id": id, "step_id": "s", "attempt": 1,
			"started_at": stamp(base), "ended_at": stamp(base), "outcome": "ok"})
	}
	if err := db.SetDerivationVersion(ctx, trace.DerivationVersion-1); err != nil {
		t.Fatal(err)
	}
	var done, total int
	rebuilt, err := derive.Rebuild(ctx, db, trace.DefaultConfig, func(d, n int) { done, total = d, n })
	if err != nil || !rebuilt || done != 3 || total != 3 {
		t.Fatalf("Rebuild: rebuilt %v, progress %d/%d, %v; want 3/3", rebuilt, done, total, err)
	}
	if v, _ := db.DerivationVersion(ctx); v != trace.DerivationVersion {
		t.Fatalf("after Rebuild: version %d, want %d", v, trace.DerivationVersion)
	}
	if rebuilt, err := derive.Rebuild(ctx, db, trace.DefaultConfig, nil); err != nil || rebuilt {
		t.Fatalf("second Rebuild: rebuilt %v, %v; want nothing", rebuilt, err)
	}
}

// TestRebuildRefusesANewerDerivation: a database a newer binary derived
// is refused with both versions named, and neither its rows nor its
// version are touched.
func TestRebuildRefusesANewerDerivation(t *testing.T) {
	ctx := context.Background()
	db, w := openDB(t)
	write(t, w, map[string]any{"type": "attempt", "execution_id": "exec_a", "step_id": "s", "attempt": 1,
		"started_at": stamp(base), "ended_at": stamp(base), "outcome": "ok"})
	newer := trace.DerivationVersion + 1
	if err := db.SetDerivationVersion(ctx, newer); err != nil {
		t.Fatal(err)
	}
	before := derivedSnapshot(t, db)
	calls := 0
	rebuilt, err := derive.Rebuild(ctx, db, trace.DefaultConfig, func(int, int) { calls++ })
	refused, ok := errors.AsType[*derive.NewerDerivationError](err)
	if !ok || rebuilt || calls != 0 {
		t.Fatalf("Rebuild of a newer database: rebuilt %v, %d progress calls, %v; want a *NewerDerivationError", rebuilt, calls, err)
	}
	if refused.Stored != newer || refused.Binary != trace.DerivationVersion {
		t.Errorf("refusal names %d and %d, want %d (stored) and %d (binary)", refused.Stored, refused.Binary, newer, trace.DerivationVersion)
	}
	if v, _ := db.DerivationVersion(ctx); v != newer {
		t.Errorf("after the refusal: version %d, want %d still", v, newer)
	}
	if after := derivedSnapshot(t, db); after != before {
		t.Errorf("after the refusal the derived rows changed:\ngot  %s\nwant %s", after, before)
	}
}

// TestRebuildFoldsTheEventLog: a rebuild derives from the raw event log,
// not from the derived rows: rows deleted or altered behind the store's
// back come back as the events make them.
func TestRebuildFoldsTheEventLog(t *testing.T) {
	ctx := context.Background()
	db, w := openDB(t)
	write(t, w,
		map[string]any{"type": "execution", "execution_id": "x", "name": "billing-agent", "status": "completed",
			"started_at": stamp(base), "ended_at": stamp(base.Add(5 * time.Second))},
		map[string]any{"type": "attempt", "execution_id": "x", "step_id": "send", "attempt": 1, "tool": "send_invoice_email",
			"effect": "unsafe", "provider": "mail", "started_at": stamp(base.Add(time.Second)), "ended_at": stamp(base.Add(2 * time.Second)), "outcome": "timeout"},
		map[string]any{"type": "attempt", "execution_id": "x", "step_id": "send", "attempt": 2, "tool": "send_invoice_email",
			"effect": "unsafe", "provider": "mail", "started_at": stamp(base.Add(3 * time.Second)), "ended_at": stamp(base.Add(4 * time.Second)), "outcome": "ok"},
		map[string]any{"type": "effect", "provider": "mail", "effect_id": "m1", "execution_id": "x", "step_id": "send", "at": stamp(base.Add(1500 * time.Millisecond))},
		map[string]any{"type": "effect", "provider": "mail", "effect_id": "m2", "execution_id": "x", "step_id": "send", "at": stamp(base.Add(3500 * time.Millisecond))},
	)
	before := derivedSnapshot(t, db)
	raw, err := sql.Open(rawDriver(db))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, q := range []string{`DELETE FROM attempts`, `DELETE FROM findings`, `UPDATE executions SET retries = 42, audit_state = 'clean'`, `UPDATE effects SET state = 'matched'`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if damaged := derivedSnapshot(t, db); damaged == before {
		t.Fatal("the damage did not show")
	}
	if err := db.SetDerivationVersion(ctx, trace.DerivationVersion-1); err != nil {
		t.Fatal(err)
	}
	if _, err := derive.Rebuild(ctx, db, trace.DefaultConfig, nil); err != nil {
		t.Fatal(err)
	}
	if after := derivedSnapshot(t, db); after != before {
		t.Errorf("after the rebuild:\n%s\nwant what ingest derived:\n%s", after, before)
	}
}

// derivedSnapshot is the list row, the findings and the effect states of
// every execution, as JSON.
func derivedSnapshot(t *testing.T, db *store.DB) string {
	t.Helper()
	ctx := context.Background()
	list, _, err := db.ListExecutions(ctx, store.ExecutionFilter{Limit: store.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	findings, err := db.Findings(ctx, store.FindingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	effects, _, err := db.Effects(ctx, store.EffectFilter{Limit: store.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{"list": list, "findings": findings, "effects": effects})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestChangeTokenNamesEveryState: the change token read before and after
// each kind of change differs from every token read before it (a write, a
// prune, which deletes the newest events too, a re-derivation, which
// writes no event), and two reads with nothing between agree: what is
// built from one read may answer for a later one exactly while it holds.
func TestChangeTokenNamesEveryState(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC()
	db, w := pruneWorld(t, now)
	seen := map[store.ChangeToken]string{}
	mark := func(after string) {
		t.Helper()
		tok, err := db.ChangeToken(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := db.ChangeToken(ctx); err != nil || again != tok {
			t.Fatalf("after %s: read %+v, then %+v with nothing between (%v)", after, tok, again, err)
		}
		if before, ok := seen[tok]; ok {
			t.Errorf("after %s: token %+v, the same as after %s", after, tok, before)
		}
		seen[tok] = after
	}
	mark("the world was written")
	write(t, w, map[string]any{"type": "attempt", "execution_id": "exec_newest", "step_id": "s", "attempt": 1,
		"started_at": stamp(now.Add(-50 * 24 * time.Hour)), "ended_at": stamp(now.Add(-50 * 24 * time.Hour)), "outcome": "ok"})
	mark("a write")
	// The prune deletes exec_newest, whose events are the log's newest.
	if _, err := db.Prune(ctx, store.PruneOptions{Before: now.Add(-30 * 24 * time.Hour), Reaudit: derive.Reaudit(trace.DefaultConfig)}); err != nil {
		t.Fatal(err)
	}
	mark("a prune")
	if err := db.SetDerivationVersion(ctx, trace.DerivationVersion-1); err != nil {
		t.Fatal(err)
	}
	if rebuilt, err := derive.Rebuild(ctx, db, trace.DefaultConfig, nil); err != nil || !rebuilt {
		t.Fatalf("Rebuild: rebuilt %v, %v", rebuilt, err)
	}
	mark("a re-derivation")
}
