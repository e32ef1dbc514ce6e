package store

import "errors"

// ErrUnwritable is matched (errors.Is) by every error of a write that
// failed because the database cannot be written at the moment: the disk is
// full, the file or its file system is read-only, the disk failed, the
// database cannot be reached, or another process holds it locked. Such a
// write changed nothing (or, when the connection was lost during its
// COMMIT, stored events that a retry finds stored); the same request may
// pass once the cause is gone, so it maps to a retryable status, never to
// a 500.
var ErrUnwritable = errors.New("store: the database cannot be written")

// Reasons an UnwritableError gives, as /healthz reports them.
const (
	ReasonDiskFull = "disk full"
	ReasonReadOnly = "read-only database"
	ReasonIO       = "disk I/O error"
	// ReasonUnreachable: the connection to the database was lost or cannot
	// be opened (a restart, a terminated backend, a network cut).
	ReasonUnreachable = "database unreachable"
	// ReasonBusy: another process held the database locked for longer
	// than the engine waits (SQLite's SQLITE_BUSY after busy_timeout).
	ReasonBusy = "database busy"
	// ReasonStandby: the server is a read-only standby, as the old primary
	// is after a failover; a new connection may reach the new primary
	// (a multi-host URL with target_session_attrs=read-write).
	ReasonStandby = "database is a read-only standby"
	// ReasonConflict: the write transaction conflicted with another
	// instance's, committed in parallel (PostgreSQL's serialization
	// failure or deadlock), and was rolled back whole; run again, it sees
	// the other's rows. It says nothing of the database's health.
	ReasonConflict = "write conflict with another instance"
)

// Transient reports whether the cause usually passes by itself within
// seconds (a lost connection, a lock), so that a write is worth retrying
// at once, rather than only once someone frees space or fixes a file.
func (e *UnwritableError) Transient() bool {
	return e.Reason == ReasonUnreachable || e.Reason == ReasonBusy || e.Reason == ReasonStandby || e.Reason == ReasonConflict
}

// UnwritableError is a write the database refused for a cause outside the
// request (SQLite's SQLITE_FULL, SQLITE_READONLY, SQLITE_IOERR and their
// extended codes; PostgreSQL's disk_full, read_only_sql_transaction,
// io_error; Engine.Unwritable says which). Reason is one of the Reason constants; Err is the driver's error.
type UnwritableError struct {
	Reason string
	Err    error
}

func (e *UnwritableError) Error() string { return "store: " + e.Reason + ": " + e.Err.Error() }

func (e *UnwritableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnwritable) true for every UnwritableError.
func (e *UnwritableError) Is(target error) bool { return target == ErrUnwritable }

// Unwritable reports whether err, or an error it wraps, is the database
// saying that it cannot be written, and why. It looks at the driver's
// result code, so it works on errors that did not pass through
// DB.Update yet (a failed statement inside a transaction).
func Unwritable(err error) (*UnwritableError, bool) {
	if err == nil {
		return nil, false
	}
	var ue *UnwritableError
	if errors.As(err, &ue) {
		return ue, true
	}
	if reason, ok := classify(err); ok {
		return &UnwritableError{Reason: reason, Err: err}, true
	}
	return nil, false
}

// classifyWrite returns err as an *UnwritableError when it is one, else
// unchanged.
func classifyWrite(err error) error {
	if ue, ok := Unwritable(err); ok {
		return ue
	}
	return err
}
