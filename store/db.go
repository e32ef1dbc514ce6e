package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"sync"
	"sync/atomic"
)

// ErrNotFound is returned when a requested row does not exist.
var ErrNotFound = errors.New("not found")

// DB is oncetrace's database: one writer connection, a pool of readers, on
// either engine.
type DB struct {
	// Path names the database: the SQLite file, or the PostgreSQL URL
	// without its password.
	Path   string
	engine Engine
	d      *dialect
	write  pool
	read   pool

	// writeConn is the writer's one connection, held as long as it works
	// so that its prepared statements live as long: compiling SQL was a
	// quarter of the writer's time. A connection the database lost is
	// dropped, and the next write opens another (writer.go). writeMu
	// serialises transactions on it and guards writeConn.
	writeConn *sql.Conn
	writeMu   sync.Mutex
	mu        sync.Mutex // guards prepared
	prepared  map[string]*sql.Stmt

	// health is what the last write transaction found (health.go).
	health writeHealth

	pruneStats pruneCounters // prune.go
	conflicts  atomic.Int64  // health.go

	// pairedReads admits the reads that hold two read connections at
	// once (ReadExecution's second snapshot): at most half the pool, so
	// that those waiting for their second can never hold every one.
	pairedReads chan struct{}
}

// ErrNoDatabase is returned when opening a database that must exist finds
// none.
var ErrNoDatabase = errors.New("no such database")

// New opens the database an engine names and applies its pending
// migrations. store/sqlite and store/postgres call it.
func New(ctx context.Context, e Engine) (*DB, error) {
	write, read, err := e.Connect(ctx)
	if err != nil {
		return nil, err
	}
	registerClassifier(e)
	d := newDialect(e)
	// The engine's own statements are in its dialect already.
	for _, q := range []string{e.BeginWrite(), e.SchemaLock(), e.AllExecutions(false), e.AllExecutions(true), e.ExecutionLocks(), e.DeriveLock(), e.TailMark(), e.Notify()} {
		if q != "" {
			d.cache.Store(q, q)
		}
	}
	db := &DB{Path: e.Target(), engine: e, d: d, write: pool{write, d}, read: pool{read, d}, prepared: map[string]*sql.Stmt{},
		pairedReads: make(chan struct{}, read.Stats().MaxOpenConnections/2)}
	if err := e.Prepare(ctx, write); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if _, err = db.writer(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", db.Path, err)
	}
	return db, nil
}

// Engine is the name of the database's engine, for messages: "sqlite" or
// "postgres". What differs between the engines is asked by name of what
// it is (Shared, Durability), never by the engine's name.
func (db *DB) Engine() string { return db.engine.Name() }

// Shared reports whether other instances may write the database too
// (PostgreSQL): a live tail must then follow the store's notices, this
// instance's commits among them, rather than its own commits.
func (db *DB) Shared() bool { return db.engine.Shared() }

// Durability names what a commit survives: SQLite's sync setting
// ("normal", "full"), or "server" for PostgreSQL's own settings.
func (db *DB) Durability() string { return db.engine.Durability() }

// Close closes both pools.
func (db *DB) Close() error {
	db.mu.Lock()
	for _, st := range db.prepared {
		st.Close()
	}
	db.mu.Unlock()
	var connErr error
	if db.writeConn != nil {
		connErr = db.writeConn.Close()
	}
	return errors.Join(connErr, db.read.DB.Close(), db.write.DB.Close())
}

// writerStmt returns the writer's prepared statement for query, preparing
// it the first time.
func (db *DB) writerStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if st, ok := db.prepared[query]; ok {
		return st, nil
	}
	// Prepared on the writer's connection, not the pool (whose one
	// connection that is), so this works inside its open transaction.
	// Callers hold writeMu, so writeConn is set and stays.
	st, err := db.writeConn.PrepareContext(context.Background(), db.d.rebind(query))
	if err != nil {
		return nil, err
	}
	db.prepared[query] = st
	return st, nil
}

// migrate applies the embedded migrations not yet recorded, in order, one
// transaction each.
func (db *DB) migrate(ctx context.Context) error {
	if _, err := db.write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)`); err != nil {
		return fmt.Errorf("store: create migrations table: %w", err)
	}
	names, err := fs.ReadDir(db.engine.Migrations(), ".")
	if err != nil {
		return fmt.Errorf("store: read migrations: %w", err)
	}
	sort.Slice(names, func(i, j int) bool { return names[i].Name() < names[j].Name() })
	for _, entry := range names {
		if err := db.applyMigration(ctx, entry.Name()); err != nil {
			return err
		}
	}
	return nil
}

func (db *DB) applyMigration(ctx context.Context, name string) error {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: migration %s: %w", name, err)
	}
	defer tx.Rollback()
	// Under the write lock, so that of two instances starting at once on
	// one database, one applies it and the other finds it applied.
	if lock := db.engine.SchemaLock(); lock != "" {
		if _, err := tx.ExecContext(ctx, lock); err != nil {
			return fmt.Errorf("store: migration %s: %w", name, err)
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, db.d.rebind(`SELECT count(*) FROM migrations WHERE name = ?`), name).Scan(&n); err != nil {
		return fmt.Errorf("store: migration %s: %w", name, err)
	}
	if n > 0 {
		return nil
	}
	body, err := fs.ReadFile(db.engine.Migrations(), name)
	if err != nil {
		return fmt.Errorf("store: migration %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, string(body)); err != nil {
		return fmt.Errorf("store: migration %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, db.d.rebind(`INSERT INTO migrations (name) VALUES (?)`), name); err != nil {
		return fmt.Errorf("store: migration %s: %w", name, err)
	}
	return tx.Commit()
}
