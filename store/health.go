package store

import (
	"context"
	"sync"
	"time"
)

// WriteHealth is whether the database takes writes, as the last write
// transaction (a commit, or a probe) found.
type WriteHealth struct {
	OK bool
	// Reason says why not (a Reason constant), Error what SQLite said.
	Reason string
	Error  string
	// Since is when writes started failing; Checked is when a write was
	// last tried, failed or not.
	Since   time.Time
	Checked time.Time
}

// writeHealth is the DB's WriteHealth, written by every write transaction.
type writeHealth struct {
	mu      sync.Mutex
	state   WriteHealth
	probing bool
}

// ProbeBytes is how much a probe writes: ProbeWrite reports the database
// writable again once a transaction of this size commits.
const ProbeBytes = 1 << 20

// noteWrite records what a write transaction came to and returns its error,
// an *UnwritableError when the database could not be written. An error of
// the request's own (a bad statement, a cancelled context) says nothing of
// the disk and changes nothing.
func (db *DB) noteWrite(err error) error {
	ue, unwritable := Unwritable(err)
	if err != nil && !unwritable {
		return err
	}
	if unwritable && ue.Reason == ReasonConflict {
		db.conflicts.Add(1)
		return ue // the database is healthy: a retry runs after the other commit
	}
	h := &db.health
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	h.state.Checked = now
	if !unwritable {
		h.state = WriteHealth{OK: true, Checked: now}
		return nil
	}
	if h.state.OK || h.state.Reason != ue.Reason {
		h.state.Since = now
	}
	h.state.OK, h.state.Reason, h.state.Error = false, ue.Reason, ue.Err.Error()
	return ue
}

// WriteHealth returns whether the last write committed, and if not why.
// Before any write it is OK.
func (db *DB) WriteHealth() WriteHealth {
	h := &db.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state.Checked.IsZero() {
		return WriteHealth{OK: true}
	}
	return h.state
}

// ProbeWrite finds out whether a database that could not be written can be
// again: when the last write failed and none was tried for interval, it
// commits ProbeBytes to the write_probe table and gives the space back to
// SQLite's free list (where the next writes reuse it), then returns the
// health that left. Nothing else is written, so a probe never changes what
// a reader sees. One probe runs at a time; a caller that finds one running
// gets the health as it is.
func (db *DB) ProbeWrite(ctx context.Context, interval time.Duration) WriteHealth {
	h := &db.health
	h.mu.Lock()
	if h.state.OK || h.state.Checked.IsZero() || h.probing || time.Since(h.state.Checked) < interval {
		state := h.state
		h.mu.Unlock()
		if state.Checked.IsZero() {
			state.OK = true
		}
		return state
	}
	h.probing = true
	// A lost connection or a lock is over once any write commits; only a
	// full disk needs the probe's megabyte to show that space came back.
	pad := ProbeBytes
	if ue := (&UnwritableError{Reason: h.state.Reason}); ue.Transient() {
		pad = 0
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.probing = false
		h.mu.Unlock()
	}()
	err := db.Update(ctx, func(t *Tx) error {
		return t.exec(`INSERT INTO write_probe (id, at, pad) VALUES (1, ?, ?)
			ON CONFLICT (id) DO UPDATE SET at = excluded.at, pad = excluded.pad`, time.Now().UnixNano(), make([]byte, pad))
	})
	if err == nil && pad > 0 {
		// The space goes back to the free list, for the next writes.
		_ = db.Update(ctx, func(t *Tx) error { return t.exec(`UPDATE write_probe SET pad = ? WHERE id = 1`, []byte{}) })
	}
	return db.WriteHealth()
}

// WriteConflicts is how many of this instance's write transactions were
// rolled back for a conflict with another instance's (ReasonConflict)
// since it opened the database.
func (db *DB) WriteConflicts() int64 { return db.conflicts.Load() }
