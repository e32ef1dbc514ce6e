package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
)

// openExistingDB opens the database of a command that reads or trims one
// (audit, export, prune): a mistyped --db must fail, exit 2, rather than
// create an empty database and report it clean. serve and import create.
func openExistingDB(ctx context.Context, command, path string) (*store.DB, error) {
	db, err := sqlite.OpenExisting(ctx, path, sqlite.SyncNormal)
	if errors.Is(err, store.ErrNoDatabase) {
		return nil, fmt.Errorf("%s: no such database: %s (serve and import create one; check --db or ONCETRACE_DB)", command, path)
	}
	return db, err
}
