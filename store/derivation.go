package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
)

// DerivationVersion returns the derivation version the database's derived
// rows were computed by, 0 when none was recorded (a database from before
// versions were).
func (db *DB) DerivationVersion(ctx context.Context) (int, error) {
	var v int
	err := db.read.QueryRowContext(ctx, `SELECT version FROM derivation WHERE id = 1`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: derivation version: %w", err)
	}
	return v, nil
}

// SetDerivationVersion records that the derived rows are now those of
// version v.
func (db *DB) SetDerivationVersion(ctx context.Context, v int) error {
	return db.Update(ctx, func(tx *Tx) error {
		if err := tx.exec(`INSERT INTO derivation (id, version) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET version = excluded.version`, v); err != nil {
			return fmt.Errorf("store: set derivation version: %w", err)
		}
		return nil
	})
}

// ExecutionIDs returns the id of every execution, in id order: what a
// rebuild of the derived rows walks.
func (db *DB) ExecutionIDs(ctx context.Context) ([]string, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT execution_id FROM executions ORDER BY execution_id`)
	if err != nil {
		return nil, fmt.Errorf("store: execution ids: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: execution ids: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: execution ids: %w", err)
	}
	return ids, nil
}

// derivedTables are the tables a rebuild derives again from the event log;
// the log itself, the messages (an effect's content, not derived) and what
// a prune left to re-derive stay.
var derivedTables = []string{"findings", "search_terms", "steps", "attempts", "spans", "effects", "executions"}

// ClearDerived deletes every derived row, for a rebuild that folds the
// whole event log again.
func (t *Tx) ClearDerived() error {
	for _, table := range derivedTables {
		if err := t.exec(`DELETE FROM ` + table); err != nil {
			return fmt.Errorf("store: clear %s: %w", table, err)
		}
	}
	return nil
}

// LogAfter returns up to limit events of the raw log with a sequence
// number above after, in order, as the transaction sees them.
func (t *Tx) LogAfter(after int64, limit int) ([]StoredEvent, error) {
	return eventsAfter(t.ctx, t, after, math.MaxInt64, "", limit)
}

// EventCount is how many events the raw log holds.
func (db *DB) EventCount(ctx context.Context) (int, error) {
	var n int
	if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: count events: %w", err)
	}
	return n, nil
}
