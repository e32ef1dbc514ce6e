package store_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
)

// TestFindingCountsAndFileSizes: the counts are the stored findings by rule
// and severity, and the sizes are the files' own.
func TestFindingCountsAndFileSizes(t *testing.T) {
	sqliteOnly(t)
	db, w := openDB(t)
	ctx := context.Background()
	if got, err := db.FindingCounts(ctx); err != nil || len(got) != 0 {
		t.Fatalf("FindingCounts of an empty database: got %v, %v; want none", got, err)
	}
	attempt := func(exec string, n int) map[string]any {
		return map[string]any{"type": "attempt", "execution_id": exec, "step_id": "step-4", "attempt": n, "tool": "send_invoice_email",
			"effect": "write", "provider": "mail-api", "idempotency_key": "ik_" + exec,
			"started_at": stamp(base.Add(time.Duration(n) * time.Second)), "ended_at": stamp(base.Add(time.Duration(n)*time.Second + 100*time.Millisecond)), "outcome": "ok"}
	}
	effect := func(exec, id string) map[string]any {
		return map[string]any{"type": "effect", "provider": "mail-api", "effect_id": id, "idempotency_key": "ik_" + exec,
			"execution_id": exec, "step_id": "step-4", "at": stamp(base.Add(time.Second))}
	}
	// Two executions with a duplicate email each, and one orphan email.
	write(t, w, attempt("exec_a", 1), effect("exec_a", "msg_a1"), effect("exec_a", "msg_a2"),
		attempt("exec_b", 1), effect("exec_b", "msg_b1"), effect("exec_b", "msg_b2"),
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "msg_orphan", "at": stamp(base)})
	got, err := db.FindingCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.FindingCount{{Rule: "duplicate_effect", Severity: "critical", Count: 2}, {Rule: "orphan_effect", Severity: "warning", Count: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FindingCounts: got %+v, want %+v", got, want)
	}

	sz, err := db.FileSizes()
	if err != nil {
		t.Fatal(err)
	}
	main, err := os.Stat(db.Path)
	if err != nil {
		t.Fatal(err)
	}
	wal, err := os.Stat(db.Path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if sz.Main != main.Size() || sz.WAL != wal.Size() || sz.WAL == 0 {
		t.Errorf("FileSizes: got %+v, want main %d and WAL %d (not 0 after writes)", sz, main.Size(), wal.Size())
	}
	// After a clean close the WAL is folded back and removed: 0 bytes, not an error.
	closed, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "closed.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if sz, err := closed.FileSizes(); err != nil || sz.WAL != 0 || sz.Main == 0 {
		t.Errorf("FileSizes after a clean close: got %+v, %v; want a main file and WAL 0", sz, err)
	}
}
