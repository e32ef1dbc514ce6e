package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/postgres"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/web"
)

// openDB opens --db: a postgres:// (or postgresql://) URL selects the
// PostgreSQL engine, anything else is a SQLite file, created if missing.
// sync is SQLite's; PostgreSQL's durability is the server's.
func openDB(ctx context.Context, target string, sync sqlite.Sync) (*store.DB, error) {
	if postgres.IsURL(target) {
		return postgres.Open(ctx, target)
	}
	return sqlite.Open(ctx, target, sync)
}

// openExistingDB opens the database of a command that reads or trims one
// (audit, export, prune): a mistyped --db must fail, exit 2, rather than
// create an empty database and report it clean. serve and import create.
func openExistingDB(ctx context.Context, command, target string) (*store.DB, error) {
	var db *store.DB
	var err error
	if postgres.IsURL(target) {
		db, err = postgres.OpenExisting(ctx, target)
	} else {
		db, err = sqlite.OpenExisting(ctx, target, sqlite.SyncNormal)
	}
	if errors.Is(err, store.ErrNoDatabase) {
		create := "serve and import create one"
		if postgres.IsURL(target) {
			create = "create it with createdb, then serve or import make oncetrace's tables in it"
		}
		return nil, fmt.Errorf("%s: no such database: %s (%s; check --db or ONCETRACE_DB)", command, redactedTarget(target), create)
	}
	return db, err
}

// redactedTarget is --db as a message may show it: without a password.
func redactedTarget(target string) string {
	if postgres.IsURL(target) {
		return postgres.Redacted(target)
	}
	return target
}

// followSharedDatabase makes the hub publish every instance's commits on a
// PostgreSQL database: LISTEN for their notices, and read the events from
// the store, starting after the newest stored now.
func followSharedDatabase(ctx context.Context, db *store.DB, dsn string, hub *web.Hub, logger *slog.Logger) error {
	from, err := db.LastSeq(ctx)
	if err != nil {
		return err
	}
	follower := hub.FollowStore(ctx, db, from, logger)
	go func() {
		err := postgres.Listen(ctx, dsn, follower.Notice, func(err error) {
			logger.Warn("live: listening for other instances' commits", "err", err)
		})
		if err != nil {
			logger.Error("live: listener stopped", "err", err)
		}
	}()
	return nil
}
