package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
)

// TestReadOnlyIsUnwritable: SQLite's SQLITE_READONLY, here from a write on
// a reader's connection (query_only), is classified as a read-only
// database, through a wrapping error too.
func TestReadOnlyIsUnwritable(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = store.ReadPool(db).ExecContext(ctx, `INSERT INTO write_probe (id, at, pad) VALUES (1, 0, x'')`)
	if err == nil {
		t.Fatal("write on a query_only connection: got no error")
	}
	ue, ok := store.Unwritable(errors.Join(errors.New("store: something"), err))
	if !ok || ue.Reason != store.ReasonReadOnly || !errors.Is(ue, store.ErrUnwritable) {
		t.Fatalf("Unwritable(%v): got %v, %v, want reason %q", err, ue, ok, store.ReasonReadOnly)
	}
	// Through Update, the error is noted for /healthz.
	if got := store.NoteWrite(db, err); !errors.As(got, &ue) || db.WriteHealth().Reason != store.ReasonReadOnly {
		t.Fatalf("noteWrite: got %v, health %+v, want reason %q", got, db.WriteHealth(), store.ReasonReadOnly)
	}
	if got := store.NoteWrite(db, nil); got != nil || !db.WriteHealth().OK {
		t.Fatalf("a commit after it: got %v, health %+v, want OK", got, db.WriteHealth())
	}
}
