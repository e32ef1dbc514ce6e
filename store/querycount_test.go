package store_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	moderncsqlite "modernc.org/sqlite"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
)

// countingDriver is SQLite's driver with every statement a connection
// runs counted, per database file.
type countingDriver struct{}

var (
	countersMu sync.Mutex
	counters   = map[string]*queryCounter{} // by database path
)

// queryCounter counts the statements the readers of one database ran.
type queryCounter struct{ n atomic.Int64 }

// Count is the number of statements counted so far.
func (c *queryCounter) Count() int64 { return c.n.Load() }

func init() { sql.Register("sqlite-counting", countingDriver{}) }

// openCounting opens the database at path as Open does, its readers'
// statements counted; the readers get BEGIN and ROLLBACK uncounted, so
// the count is of queries.
func openCounting(t *testing.T, path string) (*store.DB, *queryCounter) {
	t.Helper()
	c := &queryCounter{}
	countersMu.Lock()
	counters[path] = c
	countersMu.Unlock()
	sqlite.ReaderDriver = "sqlite-counting"
	defer func() { sqlite.ReaderDriver = "sqlite" }()
	db, err := sqlite.Open(context.Background(), path, sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	return db, c
}

func (countingDriver) Open(dsn string) (driver.Conn, error) {
	path, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	path, err := url.PathUnescape(path)
	if err != nil {
		return nil, err
	}
	countersMu.Lock()
	c := counters[path]
	countersMu.Unlock()
	conn, err := (&moderncsqlite.Driver{}).Open(dsn)
	if err != nil || c == nil {
		return conn, err
	}
	return &countingConn{conn: conn, c: c}, nil
}

// countingConn forwards to SQLite's connection, which implements every
// interface below; database/sql sends a reader's queries through
// QueryContext.
type countingConn struct {
	conn driver.Conn
	c    *queryCounter
}

func (cc *countingConn) Prepare(query string) (driver.Stmt, error) {
	st, err := cc.conn.Prepare(query)
	if err != nil {
		return nil, err
	}
	return &countingStmt{Stmt: st, c: cc.c}, nil
}

func (cc *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := cc.conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &countingStmt{Stmt: st, c: cc.c}, nil
}

func (cc *countingConn) Close() error { return cc.conn.Close() }
func (cc *countingConn) Begin() (driver.Tx, error) {
	return cc.BeginTx(context.Background(), driver.TxOptions{})
}
func (cc *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return cc.conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (cc *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cc.c.n.Add(1)
	return cc.conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (cc *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	cc.c.n.Add(1)
	return cc.conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (cc *countingConn) ResetSession(ctx context.Context) error {
	return cc.conn.(driver.SessionResetter).ResetSession(ctx)
}

func (cc *countingConn) IsValid() bool { return cc.conn.(driver.Validator).IsValid() }

func (cc *countingConn) Ping(ctx context.Context) error { return cc.conn.(driver.Pinger).Ping(ctx) }

type countingStmt struct {
	driver.Stmt
	c *queryCounter
}

func (s *countingStmt) Exec(args []driver.Value) (driver.Result, error) {
	s.c.n.Add(1)
	return s.Stmt.Exec(args)
}

func (s *countingStmt) Query(args []driver.Value) (driver.Rows, error) {
	s.c.n.Add(1)
	return s.Stmt.Query(args)
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.c.n.Add(1)
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.c.n.Add(1)
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}
