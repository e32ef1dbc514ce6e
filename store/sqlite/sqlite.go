// Package sqlite is the store's default engine: one embedded SQLite file
// (modernc.org/sqlite, pure Go, so the binary stays static) in WAL mode,
// one writer connection and a pool of readers.
package sqlite

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
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/oncetrace/oncetrace/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Sync is SQLite's synchronous setting in WAL mode.
type Sync string

const (
	// SyncNormal survives a crash of the process; a power loss may lose the
	// last transactions.
	SyncNormal Sync = "normal"
	// SyncFull also survives a power loss, at the cost of an fsync a commit.
	SyncFull Sync = "full"
)

// ReaderDriver is the database/sql driver of the readers' pool: tests wrap
// it to count the statements a read runs.
var ReaderDriver = "sqlite"

// Open opens (creating if needed) the database file at path and applies
// pending migrations.
func Open(ctx context.Context, path string, sync Sync) (*store.DB, error) {
	return open(ctx, path, sync, true)
}

// OpenExisting is Open for a database that must already exist: a command
// that reads or trims one must fail on a mistyped path, not pass on a new,
// empty database. SQLite itself refuses to create the file (mode=rw), so
// nothing can appear between a check and the open.
func OpenExisting(ctx context.Context, path string, sync Sync) (*store.DB, error) {
	return open(ctx, path, sync, false)
}

func open(ctx context.Context, path string, sync Sync, create bool) (*store.DB, error) {
	if sync == "" {
		sync = SyncNormal
	}
	if sync != SyncNormal && sync != SyncFull {
		return nil, fmt.Errorf("store: sync must be normal or full, not %q", sync)
	}
	return store.New(ctx, &engine{path: path, sync: sync, create: create, checkpointPages: checkpointPages, checkpointIdle: checkpointIdle, backstopPages: backstopPages})
}

// engine is store.Engine for one SQLite file.
type engine struct {
	path   string
	sync   Sync
	create bool

	// checkpointPages, checkpointIdle and backstopPages are when the
	// checkpoints run (checkpoint.go): the constants of those names unless
	// a test says otherwise.
	checkpointPages int64
	checkpointIdle  time.Duration
	backstopPages   int
	cp              *checkpointer
}

// writerCacheKiB is the writer connection's page cache: the indexes
// ingest inserts into are keyed by random ids, so SQLite's 2 MiB default
// missed on most inserts (docs/configuration.md, "Durability"). A larger
// one cost about three times its size in resident memory, against the
// 200 MB goal, for no more measured gain.
const writerCacheKiB = 8 << 10

func (e *engine) Name() string   { return "sqlite" }
func (e *engine) Target() string { return e.path }

func (e *engine) Connect(ctx context.Context) (write, read *sql.DB, err error) {
	// Pragmas go in the DSN so that every pooled connection gets them;
	// busy_timeout first, so the others wait rather than fail.
	pragmas := []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(" + strings.ToUpper(string(e.sync)) + ")", "foreign_keys(1)"}
	dsn := "file:" + (&url.URL{Path: e.path}).EscapedPath() + "?_pragma=" + url.QueryEscape(pragmas[0])
	for _, p := range pragmas[1:] {
		dsn += "&_pragma=" + url.QueryEscape(p)
	}
	if !e.create {
		dsn += "&mode=rw"
	}
	// The checkpointer's connection waits for no lock (checkpoint.go): its
	// busy_timeout is 0.
	cp, err := newCheckpointer(strings.Replace(dsn, url.QueryEscape(pragmas[0]), url.QueryEscape("busy_timeout(0)"), 1), e.checkpointPages, e.checkpointIdle)
	if err != nil {
		return nil, nil, fmt.Errorf("store: open %s: %w", e.path, err)
	}
	e.cp = cp
	// The writer's transactions begin IMMEDIATE (BeginWrite); so do any
	// database/sql ones on its pool (migrations). Its commits leave the
	// checkpoints to the checkpointer, which closing the pool stops, but
	// for a backstop.
	base, err := sqlite.NewConnector(dsn + "&_pragma=" + url.QueryEscape(fmt.Sprintf("wal_autocheckpoint(%d)", e.backstopPages)) +
		"&_pragma=" + url.QueryEscape(fmt.Sprintf("cache_size(%d)", -writerCacheKiB)) +
		// The savepoint of each request of a group commit copies every page
		// it changes into a sub-journal first: in a temporary file, that
		// was two write system calls a page, 10 % of ingest's CPU; in
		// memory (temp_store=MEMORY) it is a copy, freed as each request
		// is released (docs/configuration.md, "Durability").
		"&_pragma=temp_store(2)" + "&_txlock=immediate")
	if err != nil {
		cp.close()
		return nil, nil, fmt.Errorf("store: open %s: %w", e.path, err)
	}
	write = sql.OpenDB(writerConnector{Connector: base, cp: cp})
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	if !e.create {
		if err := write.PingContext(ctx); err != nil {
			write.Close()
			// The stat only names the cause; the open above already refused.
			if _, statErr := os.Stat(e.path); errors.Is(statErr, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("store: open %s: %w", e.path, store.ErrNoDatabase)
			}
			return nil, nil, fmt.Errorf("store: open %s: %w", e.path, err)
		}
	}
	read, err = sql.Open(ReaderDriver, dsn+"&_pragma=query_only(1)")
	if err != nil {
		write.Close()
		return nil, nil, fmt.Errorf("store: open %s: %w", e.path, err)
	}
	n := max(4, runtime.NumCPU())
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	return write, read, nil
}

// Prepare makes a new database file one whose freed pages a prune can give
// back a chunk at a time. An existing file keeps its mode: switching it
// takes a VACUUM, which rewrites it whole (see the store's prune).
func (e *engine) Prepare(ctx context.Context, write *sql.DB) error {
	var tables int
	if err := write.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&tables); err != nil {
		return fmt.Errorf("store: open %s: %w", e.path, err)
	}
	if tables > 0 {
		return nil
	}
	// Setting WAL (a DSN pragma) already wrote the file's header, so the
	// switch takes a VACUUM, which an empty file makes instant.
	for _, pragma := range []string{`PRAGMA auto_vacuum = INCREMENTAL`, `VACUUM`} {
		if _, err := write.ExecContext(ctx, pragma); err != nil {
			return fmt.Errorf("store: open %s: %s: %w", e.path, pragma, err)
		}
	}
	return nil
}

func (e *engine) Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the embedded directory exists
	}
	return sub
}

// Rebind keeps the store's queries as they are: they are written in
// SQLite's dialect.
func (e *engine) Rebind(query string) string { return query }

// ListSQL and PairsSQL read the JSON list parameter with json_each, a
// pair's two elements with json_extract.
func (e *engine) ListSQL() string { return `(SELECT value FROM json_each(?))` }

func (e *engine) PairsSQL() string {
	return `(SELECT json_extract(value, '$[0]') AS a, json_extract(value, '$[1]') AS b FROM json_each(?))`
}

// BeginWrite takes the write lock at once, so that a transaction never has
// to upgrade its lock half way.
func (e *engine) BeginWrite() string { return `BEGIN IMMEDIATE` }

// ReadTx is a plain transaction: in WAL mode it is one snapshot, taken at
// its first statement.
func (e *engine) ReadTx() *sql.TxOptions { return nil }

// SchemaLock, AllExecutions, ExecutionLocks, DeriveLock and TailMark are
// nothing, and
// the tail has no bound: the one writer connection, beginning IMMEDIATE,
// serialises writers, so sequence numbers follow commit order.
func (e *engine) SchemaLock() string     { return "" }
func (e *engine) ExecutionLocks() string { return "" }

func (e *engine) AllExecutions(bool) string { return "" }
func (e *engine) DeriveLock() string        { return "" }
func (e *engine) TailMark() string          { return "" }

func (e *engine) TailBound(context.Context, *sql.DB) (int64, bool, error) { return 0, false, nil }

// Notify is nothing: one process owns the file, and its writer tells its
// live tail directly.
func (e *engine) Notify() string { return "" }

func (e *engine) EntityKey(entity string) string { return entity }

// EntityKeySQL joins the parts with NUL, as trace.Event.Entity does.
func (e *engine) EntityKeySQL(parts ...string) string { return strings.Join(parts, " || char(0) || ") }

// Shared is false: one process owns the file.
func (e *engine) Shared() bool { return false }

// Durability is the sync setting: normal or full.
func (e *engine) Durability() string { return string(e.sync) }

func (e *engine) Unwritable(err error) (string, bool) {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return "", false
	}
	// Extended codes keep the primary code in the low byte
	// (SQLITE_IOERR_WRITE = SQLITE_IOERR | 3<<8).
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return store.ReasonDiskFull, true
	case sqlite3.SQLITE_READONLY:
		return store.ReasonReadOnly, true
	case sqlite3.SQLITE_IOERR:
		return store.ReasonIO, true
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED: // another process held the lock past busy_timeout
		return store.ReasonBusy, true
	}
	return "", false
}

// Sizes stats the database file and its -wal file; a missing WAL (after a
// clean close) counts as 0 bytes.
func (e *engine) Sizes(ctx context.Context, read *sql.DB) (store.FileSizes, error) {
	var sz store.FileSizes
	st, err := os.Stat(e.path)
	if err != nil {
		return sz, fmt.Errorf("store: size of %s: %w", e.path, err)
	}
	sz.Main = st.Size()
	st, err = os.Stat(e.path + "-wal")
	switch {
	case err == nil:
		sz.WAL = st.Size()
	case !errors.Is(err, fs.ErrNotExist):
		return sz, fmt.Errorf("store: size of %s-wal: %w", e.path, err)
	}
	return sz, nil
}
