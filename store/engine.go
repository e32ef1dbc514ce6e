package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"io/fs"
	"net"
	"strings"
	"sync"
	"time"
)

// Engine is what a database engine gives the store: its connections, its
// migrations and its SQL dialect; store/sqlite and store/postgres
// implement it. The store's SQL is written once, in the SQL both engines
// share (ON CONFLICT DO NOTHING, coalesce, ||), and what differs is a
// named operation each engine writes for itself (ListSQL, PairsSQL,
// EntityKeySQL, Vacuum, PageBytes, Sizes, BeginWrite, ExecutionLocks,
// DeriveLock, TailMark, Notify ...), never a switch on the engine's name
// outside the engines.
//
// Rebind only numbers SQLite's ? placeholders ($1, $2, ... on
// PostgreSQL), outside string literals and comments. PostgreSQL's
// refuses, by panicking with the reason, any SQLite form (INSERT OR
// IGNORE, char(N), ifnull, json_each, ...), naming the shared form or the
// operation to write instead; the store's suite prepares every query on
// PostgreSQL (queries_test.go), so a refused or broken query fails it by
// name.
type Engine interface {
	// Name is "sqlite" or "postgres".
	Name() string
	// Target names the database in messages: a file path, or a URL
	// without its password.
	Target() string
	// Connect opens the writer's pool, which the store holds to one
	// connection, and the readers' pool.
	Connect(ctx context.Context) (write, read *sql.DB, err error)
	// Prepare runs on the writer's pool before the migrations.
	Prepare(ctx context.Context, write *sql.DB) error
	// Migrations holds the engine's numbered migrations, NNNN_name.sql,
	// applied in order, one transaction each.
	Migrations() fs.FS
	// Rebind turns a query written in the store's dialect into the
	// engine's (above). It is called once per query text.
	Rebind(query string) string
	// ListSQL and PairsSQL are the JSON list parameter: a list bound as
	// one parameter, a JSON array of strings (jsonList) or of [a, b] pairs
	// of strings (jsonPairs), so that a query's text stays the same
	// whatever the list's length and is prepared once. Each is a
	// parenthesised subquery holding the one placeholder: ListSQL's rows
	// are the elements, as text, in a column value; PairsSQL's the pairs,
	// as text, in columns a and b. A query says `x IN list`, `(x, y) IN
	// pairs` or `FROM list AS alias`; the store writes them listParam and
	// pairsParam (run.go), which its dialect replaces with these.
	ListSQL() string
	PairsSQL() string
	// BeginWrite, SchemaLock, AllExecutions, ExecutionLocks, DeriveLock, TailMark and
	// Notify are statements in the engine's own
	// dialect, which the store runs as they are.
	//
	// BeginWrite is the statement that begins a write transaction on the
	// writer's connection.
	BeginWrite() string
	// ReadTx is how a read transaction begins: it must see one snapshot.
	ReadTx() *sql.TxOptions
	// SchemaLock is run first in a transaction that changes the schema
	// (a migration), "" for none: of several instances starting at once
	// on one database, one applies it and the others find it applied.
	SchemaLock() string
	// ExecutionLocks is run first in a write transaction, with the keys
	// of what a commit writes (hashes of the executions its events name,
	// in [0, 2^62), sorted, as one int64 array); "" for none. PostgreSQL
	// serialises there the commits of one execution, while those of
	// others store their events in parallel.
	ExecutionLocks() string
	// AllExecutions is run before ExecutionLocks, with the lock taken
	// shared, or alone, exclusive, by a commit that writes more executions
	// than it takes locks for (maxExecutionLocks): that commit then waits
	// for every other and holds them all off, as the lock table is
	// bounded. "" for none.
	AllExecutions(exclusive bool) string
	// DeriveLock is run before a commit derives rows from its events, ""
	// for none: derivation reads across executions (effects joined by
	// trace, key and time, findings between executions), so PostgreSQL
	// serialises it across instances, each seeing all the others
	// committed before it.
	DeriveLock() string
	// TailMark is run in a write transaction before it stores its first
	// event, after ExecutionLocks, "" for none: it
	// tells readers that sequence numbers above the log's newest may
	// still be taken by a transaction not yet committed (TailBound).
	TailMark() string
	// TailBound is the highest sequence number a reader of the log may
	// pass: every event at or below it that will ever be stored is
	// stored and visible now. ok is false when there is no bound (one
	// writer, whose commits take sequence numbers in commit order).
	TailBound(ctx context.Context, read *sql.DB) (bound int64, ok bool, err error)
	// Notify is run last in a write transaction that stored events, with
	// the last sequence number it stored, "" for none: it tells the other
	// instances (Listen) when the commit lands.
	Notify() string
	// Unwritable classifies a driver error meaning the database cannot be
	// written at the moment (a full disk, a read-only file, an I/O error).
	Unwritable(err error) (reason string, ok bool)
	// EntityKey is how the engine stores an event's entity
	// (trace.Event.Entity, NUL-separated): PostgreSQL's text cannot hold
	// NUL. EntityKeySQL is the same key in SQL, of SQL expressions for
	// its parts.
	EntityKey(entity string) string
	EntityKeySQL(parts ...string) string
	// Sizes is what the database holds on disk.
	Sizes(ctx context.Context, read *sql.DB) (FileSizes, error)
	// PageBytes is the database's size as a prune reports it before and
	// after (PruneResult.BytesBefore): what the data takes, which a
	// vacuum shrinks.
	PageBytes(ctx context.Context, read *sql.DB) (int64, error)
	// Vacuum gives the space a prune freed back as the engine can, and
	// returns how (PruneResult.Vacuum).
	Vacuum(ctx context.Context, run VacuumRun) (mode string, err error)
	// Shared reports whether other instances may write the database too:
	// a live tail then follows the store's notices (Notify) rather than
	// this instance's commits.
	Shared() bool
	// Durability names what a commit survives, for the server's log:
	// SQLite's sync setting, or the server's own for PostgreSQL.
	Durability() string
}

// VacuumRun is what the store lends an engine's Vacuum.
type VacuumRun struct {
	// Read is the readers' pool.
	Read *sql.DB
	// WithWriter runs fn on the writer's connection outside any
	// transaction (VACUUM cannot run in one), holding the writer from
	// other writes, and returns how long it held it.
	WithWriter func(fn func(*sql.Conn) error) (time.Duration, error)
	// Account reports one step of the vacuum ("vacuum" or "checkpoint")
	// to the prune's batches: the pages it handled and how long it held
	// the writer.
	Account func(phase string, items int, hold time.Duration)
	// NextChunk sizes a vacuum done in chunks as the prune sizes its
	// batches (to about half its MaxHold): the size of the next chunk,
	// after one of size that did done pages holding the writer hold.
	NextChunk func(size, done int, hold time.Duration) int
	// ConvertMax is PruneOptions.VacuumConvertMax.
	ConvertMax int64
}

// classifiers are the Unwritable of every engine opened, so that
// Unwritable works on any error of any of them.
var (
	classifiersMu sync.Mutex
	classifiers   = map[string]func(error) (string, bool){}
)

func registerClassifier(e Engine) {
	classifiersMu.Lock()
	defer classifiersMu.Unlock()
	classifiers[e.Name()] = e.Unwritable
}

func classify(err error) (string, bool) {
	if lostConnection(err) {
		return ReasonUnreachable, true
	}
	classifiersMu.Lock()
	defer classifiersMu.Unlock()
	for _, c := range classifiers {
		if reason, ok := c(err); ok {
			return reason, true
		}
	}
	return "", false
}

// dialect rebinds queries once per text, after writing the engine's
// operations into them (operations).
type dialect struct {
	engine     Engine
	operations *strings.Replacer
	cache      sync.Map // query -> rebound query
}

func newDialect(e Engine) *dialect {
	return &dialect{engine: e, operations: strings.NewReplacer(listParam, e.ListSQL(), pairsParam, e.PairsSQL())}
}

// testHookRebind, set by the store's tests before any database opens, sees
// every query text the store runs, with the engine's operations written in
// and before Rebind, the first time a database runs it: every query passes
// through rebind, so the tests can plan all of them on SQLite
// (indexes_test.go) and prepare all of them on PostgreSQL
// (queries_test.go).
var testHookRebind func(query string)

func (d *dialect) rebind(query string) string {
	if q, ok := d.cache.Load(query); ok {
		return q.(string)
	}
	written := d.operations.Replace(query)
	if testHookRebind != nil {
		testHookRebind(written)
	}
	q := d.engine.Rebind(written)
	d.cache.Store(query, q)
	return q
}

// pool is a database/sql pool whose queries are rebound for its engine.
type pool struct {
	*sql.DB
	d *dialect
}

func (p pool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.DB.QueryContext(ctx, p.d.rebind(query), args...)
}

func (p pool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.DB.QueryRowContext(ctx, p.d.rebind(query), args...)
}

func (p pool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return p.DB.ExecContext(ctx, p.d.rebind(query), args...)
}

// readTx is a read transaction whose queries are rebound.
type readTx struct {
	tx *sql.Tx
	d  *dialect
}

func (t readTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.d.rebind(query), args...)
}

func (t readTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.d.rebind(query), args...)
}

func (db *DB) entityKey(entity string) string { return db.engine.EntityKey(entity) }

// entitySQL is the entity key of SQL expressions for its parts
// (Engine.EntityKeySQL).
func (t *Tx) entitySQL(parts ...string) string { return t.db.engine.EntityKeySQL(parts...) }

// lostConnection reports the errors of a lost connection that database/sql
// and the network give whatever the engine: a connection the driver
// declared bad, one closed under a sql.Conn, a refused or reset socket.
func lostConnection(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false // the caller's own deadline, which net.Error also matches
	}
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne)
}
