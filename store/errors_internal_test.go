package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// TestReadOnlyIsUnwritable: SQLite's SQLITE_READONLY, here from a write on
// a reader's connection (query_only), is classified as a read-only
// database, through a wrapping error too.
func TestReadOnlyIsUnwritable(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "oncetrace.db"), SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.read.ExecContext(ctx, `INSERT INTO write_probe (id, at, pad) VALUES (1, 0, x'')`)
	if err == nil {
		t.Fatal("write on a query_only connection: got no error")
	}
	ue, ok := Unwritable(errors.Join(errors.New("store: something"), err))
	if !ok || ue.Reason != ReasonReadOnly || !errors.Is(ue, ErrUnwritable) {
		t.Fatalf("Unwritable(%v): got %v, %v, want reason %q", err, ue, ok, ReasonReadOnly)
	}
	// Through Update, the error is noted for /healthz.
	if got := db.noteWrite(err); !errors.As(got, &ue) || db.WriteHealth().Reason != ReasonReadOnly {
		t.Fatalf("noteWrite: got %v, health %+v, want reason %q", got, db.WriteHealth(), ReasonReadOnly)
	}
	if got := db.noteWrite(nil); got != nil || !db.WriteHealth().OK {
		t.Fatalf("a commit after it: got %v, health %+v, want OK", got, db.WriteHealth())
	}
}
