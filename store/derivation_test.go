package store_test

import (
	"context"
	"testing"

	"github.com/oncetrace/oncetrace/ingest/writer"
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
	rebuilt, err := writer.Rebuild(ctx, db, trace.DefaultConfig, func(int, int) { calls++ })
	if err != nil || rebuilt || calls != 0 {
		t.Fatalf("Rebuild of a new database: rebuilt %v, %d progress calls, %v; want nothing rebuilt", rebuilt, calls, err)
	}
	if v, err := db.DerivationVersion(ctx); err != nil || v != trace.DerivationVersion {
		t.Fatalf("after Rebuild: version %d, %v; want %d", v, err, trace.DerivationVersion)
	}
}

// TestRebuildRederivesEveryExecutionOnce: an older version re-derives every
// execution with progress up to the total; the same version does nothing.
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
	rebuilt, err := writer.Rebuild(ctx, db, trace.DefaultConfig, func(d, n int) { done, total = d, n })
	if err != nil || !rebuilt || done != 3 || total != 3 {
		t.Fatalf("Rebuild: rebuilt %v, progress %d/%d, %v; want 3/3", rebuilt, done, total, err)
	}
	if v, _ := db.DerivationVersion(ctx); v != trace.DerivationVersion {
		t.Fatalf("after Rebuild: version %d, want %d", v, trace.DerivationVersion)
	}
	if rebuilt, err := writer.Rebuild(ctx, db, trace.DefaultConfig, nil); err != nil || rebuilt {
		t.Fatalf("second Rebuild: rebuilt %v, %v; want nothing", rebuilt, err)
	}
}
