// Package postgres is the store's engine for a team that outgrows one
// machine: one PostgreSQL database that several oncetrace instances share
// (docs/deploy.md). It speaks to the server through pgx's database/sql
// driver, so the store's SQL runs on it after Rebind.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/oncetrace/oncetrace/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Channel is the LISTEN/NOTIFY channel a commit that stored events
// notifies, with its last sequence number as the payload.
const Channel = "oncetrace_events"

// schemaLockKey is the advisory lock a migration takes first, so that of
// several instances starting at once one applies it; deriveLockKey the
// one a commit takes before it derives rows from its events.
const (
	schemaLockKey        = 0x6f6e6365 // "once"
	deriveLockKey        = 0x6f6e6366
	allExecutionsLockKey = 0x6f6e6367
)

// Commits are serialised across instances only where they must be
// (docs/deploy.md, "Write scaling"): each takes a transaction lock per
// execution it writes (ExecutionLocks), so the commits of one execution
// follow one another, and stores its events in parallel with the others';
// then it takes deriveLockKey to derive, as derivation reads across
// executions. Sequence numbers then no longer follow commit order: the
// live tail reads only up to TailBound.
//
// The advisory lock keys share one bigint space: an execution's is a hash
// of its id below 2^62; a tail mark's has bit 62 set; the two fixed keys
// are below 2^32.
const tailMark = 1 << 62

// IsURL reports whether a --db value names a PostgreSQL database.
func IsURL(target string) bool {
	return strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://")
}

// Open opens the PostgreSQL database the URL names (it must exist; Open
// creates oncetrace's tables in it) and applies pending migrations.
func Open(ctx context.Context, dsn string) (*store.DB, error) {
	return store.New(ctx, &engine{dsn: dsn})
}

// OpenExisting is Open for a database oncetrace must have written already:
// on an empty one it fails with store.ErrNoDatabase, creating nothing.
func OpenExisting(ctx context.Context, dsn string) (*store.DB, error) {
	return store.New(ctx, &engine{dsn: dsn, existing: true})
}

type engine struct {
	dsn      string
	existing bool
}

func (e *engine) Name() string { return "postgres" }

// Target is the URL without its password.
func (e *engine) Target() string { return Redacted(e.dsn) }

// Redacted is a database URL without its password, for messages and logs.
func Redacted(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}

func (e *engine) Connect(ctx context.Context) (write, read *sql.DB, err error) {
	write, err = sql.Open("pgx", e.dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("store: open %s: %w", e.Target(), err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	if err := write.PingContext(ctx); err != nil {
		write.Close()
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "3D000" { // invalid_catalog_name
			return nil, nil, fmt.Errorf("store: open %s: %w", e.Target(), store.ErrNoDatabase)
		}
		return nil, nil, fmt.Errorf("store: open %s: %w", e.Target(), err)
	}
	read, err = sql.Open("pgx", e.dsn)
	if err != nil {
		write.Close()
		return nil, nil, fmt.Errorf("store: open %s: %w", e.Target(), err)
	}
	n := max(4, runtime.NumCPU())
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	return write, read, nil
}

// Prepare creates the migrations table under the schema lock, so that two
// instances starting at once do not race to create it; each migration then
// takes the same lock (store.Engine.SchemaLock).
func (e *engine) Prepare(ctx context.Context, write *sql.DB) error {
	tx, err := write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: open %s: %w", e.Target(), err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, e.SchemaLock()); err != nil {
		return fmt.Errorf("store: open %s: %w", e.Target(), err)
	}
	if e.existing {
		var events sql.NullString
		if err := tx.QueryRowContext(ctx, `SELECT to_regclass('events')::text`).Scan(&events); err != nil {
			return fmt.Errorf("store: open %s: %w", e.Target(), err)
		}
		if !events.Valid {
			return fmt.Errorf("store: open %s: %w", e.Target(), store.ErrNoDatabase)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)`); err != nil {
		return fmt.Errorf("store: open %s: %w", e.Target(), err)
	}
	return tx.Commit()
}

func (e *engine) Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the embedded directory exists
	}
	return sub
}

// Rebind panics on a query it refuses (rebind.go): that is a query of the
// store outside the dialect the engines share, a programming error the
// store's suite finds, since it rebinds every query (store/queries_test.go).
func (e *engine) Rebind(query string) string {
	q, err := rebind(query)
	if err != nil {
		panic(fmt.Sprintf("%v: %s", err, query))
	}
	return q
}

// ListSQL and PairsSQL read the JSON list parameter, bound as text, with
// json_array_elements: ->> takes a pair's elements as text.
func (e *engine) ListSQL() string {
	return `(SELECT value FROM json_array_elements_text(?::json) AS json_list(value))`
}

func (e *engine) PairsSQL() string {
	return `(SELECT json_pair->>0 AS a, json_pair->>1 AS b FROM json_array_elements(?::json) AS json_pair)`
}

// BeginWrite is a plain BEGIN (READ COMMITTED): each statement sees what
// the others committed before it, so a derivation run under DeriveLock
// sees every commit that derived before it.
func (e *engine) BeginWrite() string { return `BEGIN` }

// ReadTx is REPEATABLE READ: one snapshot for the whole transaction.
func (e *engine) ReadTx() *sql.TxOptions {
	return &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
}

func (e *engine) SchemaLock() string {
	return fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", schemaLockKey)
}

// ExecutionLocks takes the keys' locks in the order given (sorted by the
// store), so two instances never wait on each other's; held to the end
// of the transaction.
func (e *engine) ExecutionLocks() string {
	return `SELECT count(pg_advisory_xact_lock(k)) FROM unnest($1::bigint[]) WITH ORDINALITY AS u(k, i)`
}

func (e *engine) AllExecutions(exclusive bool) string {
	if exclusive {
		return fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", allExecutionsLockKey)
	}
	return fmt.Sprintf("SELECT pg_advisory_xact_lock_shared(%d)", allExecutionsLockKey)
}

func (e *engine) DeriveLock() string {
	return fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", deriveLockKey)
}

// TailMark holds, until the transaction ends, a shared lock on the log's
// newest sequence number as it is before this transaction takes any:
// whatever it stores is numbered above it. TailBound reads the marks.
func (e *engine) TailMark() string {
	return fmt.Sprintf(`SELECT pg_advisory_xact_lock_shared(coalesce(pg_sequence_last_value(pg_get_serial_sequence('events', 'seq')::regclass), 0) | %d)`, int64(tailMark))
}

// TailBound is the lowest tail mark held, or, with none, the newest
// sequence number taken. The newest is read first: a transaction marking
// after that read numbers its events above it, and one marked before is
// seen in pg_locks or has committed (its lock goes after its commit is
// visible).
func (e *engine) TailBound(ctx context.Context, read *sql.DB) (int64, bool, error) {
	var newest int64
	if err := read.QueryRowContext(ctx, `SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('events', 'seq')::regclass), 0)`).Scan(&newest); err != nil {
		return 0, false, fmt.Errorf("store: tail bound: %w", err)
	}
	var marked sql.NullInt64
	err := read.QueryRowContext(ctx, fmt.Sprintf(`SELECT min(((classid::bigint << 32) | objid::bigint) - %d) FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 1 AND classid::bigint >= %d
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, int64(tailMark), int64(tailMark>>32))).Scan(&marked)
	if err != nil {
		return 0, false, fmt.Errorf("store: tail bound: %w", err)
	}
	if marked.Valid && marked.Int64 < newest {
		return marked.Int64, true, nil
	}
	return newest, true, nil
}

// Notify is delivered when, and only if, the transaction commits, in
// commit order.
func (e *engine) Notify() string {
	return "SELECT pg_notify('" + Channel + "', $1)"
}

// EntityKey and EntityKeySQL separate an entity's parts with the unit
// separator, U+001F, where trace.Event.Entity has NUL.
func (e *engine) EntityKey(entity string) string { return strings.ReplaceAll(entity, "\x00", "\x1f") }

func (e *engine) EntityKeySQL(parts ...string) string { return strings.Join(parts, " || chr(31) || ") }

func (e *engine) Unwritable(err error) (string, bool) {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) {
		return store.ReasonUnreachable, true
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return "", false
	}
	if strings.HasPrefix(pe.Code, "08") { // connection_exception and its kind
		return store.ReasonUnreachable, true
	}
	switch pe.Code {
	case "57P01", "57P02", "57P03", "53300": // admin_shutdown (pg_terminate_backend, a fast stop), crash_shutdown, cannot_connect_now, too_many_connections
		return store.ReasonUnreachable, true
	case "53100": // disk_full
		return store.ReasonDiskFull, true
	case "25006": // read_only_sql_transaction: a standby (after a failover), or default_transaction_read_only
		return store.ReasonStandby, true
	case "40001", "40P01": // serialization_failure, deadlock_detected: another instance's commit won
		return store.ReasonConflict, true
	case "58030": // io_error
		return store.ReasonIO, true
	}
	return "", false
}

// Sizes is the database's size as the server reports it; its write-ahead
// log is the server's, shared by every database, and not counted.
func (e *engine) Sizes(ctx context.Context, read *sql.DB) (store.FileSizes, error) {
	var sz store.FileSizes
	if err := read.QueryRowContext(ctx, `SELECT pg_database_size(current_database())`).Scan(&sz.Main); err != nil {
		return sz, fmt.Errorf("store: size of %s: %w", e.Target(), err)
	}
	return sz, nil
}

// PageBytes is the database's size as the server reports it (Sizes).
func (e *engine) PageBytes(ctx context.Context, read *sql.DB) (int64, error) {
	sz, err := e.Sizes(ctx, read)
	return sz.Main, err
}

// Vacuum leaves the space to autovacuum, which makes it reusable; giving
// it back to the file system is the operator's VACUUM FULL, which locks
// each table it rewrites.
func (e *engine) Vacuum(ctx context.Context, run store.VacuumRun) (string, error) {
	return "autovacuum", nil
}

// Shared is true: every oncetrace instance on the database writes it.
func (e *engine) Shared() bool { return true }

// Durability is the server's own settings (synchronous_commit and its
// replication).
func (e *engine) Durability() string { return "server" }
