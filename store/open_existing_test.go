package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
)

// A command that reads a database must not create one at a mistyped path.
func TestOpenExistingRefusesAMissingFile(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "typo.db"), filepath.Join(dir, "no-such-dir", "x.db")} {
		db, err := sqlite.OpenExisting(ctx, path, sqlite.SyncNormal)
		if err == nil {
			db.Close()
		}
		if !errors.Is(err, store.ErrNoDatabase) {
			t.Errorf("OpenExisting(%s): got error %v, want store.ErrNoDatabase", path, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("OpenExisting(%s) left a file behind: stat says %v", path, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("OpenExisting created %s", e.Name())
	}

	path := filepath.Join(dir, "real.db")
	db, err := sqlite.Open(ctx, path, sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = sqlite.OpenExisting(ctx, path, sqlite.SyncNormal)
	if err != nil {
		t.Fatalf("OpenExisting of a database Open created: %v", err)
	}
	defer db.Close()
	if _, err := db.World(ctx); err != nil {
		t.Errorf("reading the existing database: %v", err)
	}
}
