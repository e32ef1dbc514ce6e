package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

//go:embed migrations/*.sql
var migrations embed.FS

// ErrNotFound is returned when a requested row does not exist.
var ErrNotFound = errors.New("not found")

// Sync is SQLite's synchronous setting in WAL mode.
type Sync string

const (
	// SyncNormal survives a crash of the process; a power loss may lose the
	// last transactions.
	SyncNormal Sync = "normal"
	// SyncFull also survives a power loss, at the cost of an fsync a commit.
	SyncFull Sync = "full"
)

// DB is oncetrace's database: one writer connection, a pool of readers.
type DB struct {
	Path  string
	write *sql.DB
	read  *sql.DB

	// writeConn is the writer's one connection, held for the life of the
	// DB so that its prepared statements live as long: compiling SQL was a
	// quarter of the writer's time. writeMu serialises transactions on it.
	writeConn *sql.Conn
	writeMu   sync.Mutex
	mu        sync.Mutex // guards prepared
	prepared  map[string]*sql.Stmt

	// health is what the last write transaction found (health.go).
	health writeHealth

	pruneStats pruneCounters // prune.go
}

// ErrNoDatabase is returned by OpenExisting when there is no database file
// at the path.
var ErrNoDatabase = errors.New("no such database")

// Open opens (creating if needed) the database file at path and applies
// pending migrations.
func Open(ctx context.Context, path string, sync Sync) (*DB, error) {
	return open(ctx, path, sync, true)
}

// OpenExisting is Open for a database that must already exist: a command
// that reads or trims one must fail on a mistyped path, not pass on a new,
// empty database. SQLite itself refuses to create the file (mode=rw), so
// nothing can appear between a check and the open.
func OpenExisting(ctx context.Context, path string, sync Sync) (*DB, error) {
	return open(ctx, path, sync, false)
}

func open(ctx context.Context, path string, sync Sync, create bool) (*DB, error) {
	if sync == "" {
		sync = SyncNormal
	}
	if sync != SyncNormal && sync != SyncFull {
		return nil, fmt.Errorf("store: sync must be normal or full, not %q", sync)
	}
	// Pragmas go in the DSN so that every pooled connection gets them;
	// busy_timeout first, so the others wait rather than fail.
	pragmas := []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(" + strings.ToUpper(string(sync)) + ")", "foreign_keys(1)"}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=" + url.QueryEscape(pragmas[0])
	for _, p := range pragmas[1:] {
		dsn += "&_pragma=" + url.QueryEscape(p)
	}
	if !create {
		dsn += "&mode=rw"
	}
	// The writer begins IMMEDIATE so that a transaction never has to
	// upgrade its lock half way.
	write, err := sql.Open("sqlite", dsn+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	if !create {
		if err := write.PingContext(ctx); err != nil {
			write.Close()
			// The stat only names the cause; the open above already refused.
			if _, statErr := os.Stat(path); errors.Is(statErr, fs.ErrNotExist) {
				return nil, fmt.Errorf("store: open %s: %w", path, ErrNoDatabase)
			}
			return nil, fmt.Errorf("store: open %s: %w", path, err)
		}
	}
	read, err := sql.Open(readerDriver, dsn+"&_pragma=query_only(1)")
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	n := max(4, runtime.NumCPU())
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	db := &DB{Path: path, write: write, read: read, prepared: map[string]*sql.Stmt{}}
	if err := db.vacuumIncrementallyWhenNew(ctx); err != nil { // prune.go
		db.Close()
		return nil, err
	}
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if db.writeConn, err = write.Conn(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return db, nil
}

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
	return errors.Join(connErr, db.read.Close(), db.write.Close())
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
	st, err := db.writeConn.PrepareContext(context.Background(), query)
	if err != nil {
		return nil, err
	}
	db.prepared[query] = st
	return st, nil
}

// migrate applies the embedded migrations not yet recorded, in order, one
// transaction each.
func (db *DB) migrate(ctx context.Context) error {
	if _, err := db.write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT (datetime('now')))`); err != nil {
		return fmt.Errorf("store: create migrations table: %w", err)
	}
	names, err := migrations.ReadDir("migrations")
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
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM migrations WHERE name = ?`, name).Scan(&n); err != nil {
		return fmt.Errorf("store: migration %s: %w", name, err)
	}
	if n > 0 {
		return nil
	}
	body, err := migrations.ReadFile("migrations/" + name)
	if err != nil {
		return fmt.Errorf("store: migration %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, string(body)); err != nil {
		return fmt.Errorf("store: migration %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO migrations (name) VALUES (?)`, name); err != nil {
		return fmt.Errorf("store: migration %s: %w", name, err)
	}
	return tx.Commit()
}
