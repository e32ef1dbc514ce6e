package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"
)

// reconnectTimeout bounds one attempt to open the writer's connection
// again: a database that accepts TCP but does not answer (a stopped
// process, a network cut) must not hold the writer for ever.
const reconnectTimeout = 5 * time.Second

// writer returns the writer's connection, opening one when there is none
// (at start, or after the database lost the last one). The caller holds
// writeMu, or is New.
func (db *DB) writer(ctx context.Context) (*sql.Conn, error) {
	if db.writeConn != nil {
		return db.writeConn, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reconnectTimeout)
	defer cancel()
	c, err := db.write.DB.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.PingContext(ctx); err != nil {
		discard(c)
		return nil, err
	}
	db.writeConn = c
	return c, nil
}

// dropWriter lets go of a writer's connection the database lost: its
// prepared statements go with it, and the pool closes it rather than
// keep it idle. The next write opens a new one. The caller holds writeMu.
func (db *DB) dropWriter() {
	db.mu.Lock()
	for q, st := range db.prepared {
		st.Close()
		delete(db.prepared, q)
	}
	db.mu.Unlock()
	if db.writeConn != nil {
		discard(db.writeConn)
		db.writeConn = nil
	}
}

// discard closes c and its driver connection: database/sql closes a
// connection whose use reported driver.ErrBadConn instead of pooling it.
func discard(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	_ = c.Close()
}

// connectionLost reports whether err says the writer's connection is gone
// (the database restarted, terminated the backend, or the network was
// cut) or leads to a standby, so that the connection must be replaced
// before the next write.
func connectionLost(err error) bool {
	ue, ok := Unwritable(err)
	return ok && (ue.Reason == ReasonUnreachable || ue.Reason == ReasonStandby)
}

// errNoWriter is a failure to open the writer's connection: the database
// cannot be written until one opens, whatever the driver said (a refused
// connection, a timeout, a server still starting).
func errNoWriter(err error) error {
	err = fmt.Errorf("store: connect the writer: %w", err)
	if ue, ok := Unwritable(err); ok {
		return ue
	}
	return &UnwritableError{Reason: ReasonUnreachable, Err: err}
}
