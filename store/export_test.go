package store

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
)

// SetMaxPageCount sets SQLite's max_page_count on the writer's connection,
// so that a test can fill the database as a full disk would: a write that
// needs a page more fails with SQLITE_FULL. SQLite never sets it below the
// current size; it returns the value in force.
func SetMaxPageCount(db *DB, pages int64) (int64, error) {
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	var got int64
	err := db.writeConn.QueryRowContext(context.Background(), fmt.Sprintf("PRAGMA max_page_count = %d", pages)).Scan(&got)
	return got, err
}

// PageCount is the database's size in pages, as the writer sees it.
func PageCount(db *DB) (int64, error) {
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	var n int64
	err := db.writeConn.QueryRowContext(context.Background(), "PRAGMA page_count").Scan(&n)
	return n, err
}

// SetAfterRunRead makes fn run inside each ReadExecution between reading
// the run and its findings, until the test ends.
func SetAfterRunRead(t *testing.T, fn func()) {
	testHookAfterRunRead = fn
	t.Cleanup(func() { testHookAfterRunRead = nil })
}

// ReadPool is the readers' pool, for a test that writes through it.
func ReadPool(db *DB) *sql.DB { return db.read.DB }

// NoteWrite is what Update does with a write transaction's outcome.
func NoteWrite(db *DB, err error) error { return db.noteWrite(err) }

// SetWriterBusyTimeout sets SQLite's busy_timeout on the writer's
// connection, so that a test can meet SQLITE_BUSY without waiting the
// default ten seconds.
func SetWriterBusyTimeout(db *DB, ms int) error {
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	_, err := db.writeConn.ExecContext(context.Background(), fmt.Sprintf("PRAGMA busy_timeout = %d", ms))
	return err
}

// RecordQueries makes record see every query text the store runs, with
// the engine's operations written in (Written), the first time each
// database runs it. TestMain sets it before any database opens.
func RecordQueries(record func(query string)) { testHookRebind = record }

// Written is a query of the store with db's engine's operations written in
// (listParam, pairsParam), as the engine's Rebind takes it.
func Written(db *DB, query string) string { return db.d.operations.Replace(query) }

// Rebind is a query of the store as db's engine runs it.
func Rebind(db *DB, query string) string { return db.engine.Rebind(Written(db, query)) }

// SetPairedReads lets at most n of db's reads hold two read connections
// at once (ReadExecution's second snapshot); 0 makes every read read alone.
func SetPairedReads(db *DB, n int) { db.pairedReads = make(chan struct{}, n) }
