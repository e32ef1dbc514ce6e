package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// TestWriterReconnectsAfterTheBackendIsTerminated terminates every
// connection oncetrace holds to the database (pg_terminate_backend, as an
// administrator or a failover does): the write that meets the lost
// connection is an UnwritableError that says so, /healthz's WriteHealth
// says degraded, and the next write opens a new connection and commits,
// without reopening the store. Reads come back as well.
func TestWriterReconnectsAfterTheBackendIsTerminated(t *testing.T) {
	if engine != "postgres" {
		t.Skip("PostgreSQL only: SQLite has no connection to lose")
	}
	ctx := context.Background()
	db := openEngine(t)
	defer db.Close()
	insert := func(id string) error { return insertExecutionEvent(db, "reconnect", id) }
	if err := insert("before"); err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open(rawDriver(db))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var terminated int
	if err := admin.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()) t`).Scan(&terminated); err != nil {
		t.Fatal(err)
	}
	if terminated == 0 {
		t.Fatal("terminated no backend: the test did not cut the writer's connection")
	}
	err = insert("lost")
	if err == nil {
		t.Fatal("the write on the terminated connection succeeded: the test did not cut the writer's connection")
	}
	var ue *store.UnwritableError
	if !errors.As(err, &ue) || ue.Reason != store.ReasonUnreachable || !ue.Transient() {
		t.Fatalf("got %v, want an UnwritableError %q", err, store.ReasonUnreachable)
	}
	if h := db.WriteHealth(); h.OK || h.Reason != store.ReasonUnreachable {
		t.Fatalf("health after the lost connection: got %+v, want degraded, %q", h, store.ReasonUnreachable)
	}
	if err := insert("after"); err != nil {
		t.Fatalf("the write after the lost connection: got %v, want it to reconnect and commit", err)
	}
	if h := db.WriteHealth(); !h.OK {
		t.Fatalf("health after the reconnect: got %+v, want ok", h)
	}
	last, err := db.LastSeq(ctx)
	if err != nil {
		t.Fatalf("read after the reconnect: %v", err)
	}
	if last == 0 {
		t.Fatal("no event stored")
	}
}

// TestWriterBusyFromAnotherProcess holds SQLite's write lock from another
// connection (as another process would) past the writer's busy timeout:
// the write is an UnwritableError "database busy", which passes (a 503,
// not a 500), and the first write once the lock is let go commits.
func TestWriterBusyFromAnotherProcess(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	db := openEngine(t)
	defer db.Close()
	if err := store.SetWriterBusyTimeout(db, 50); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open(rawDriver(db))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	insert := func(id string) error { return insertExecutionEvent(db, "busy", id) }
	err = insert("held")
	var ue *store.UnwritableError
	if !errors.As(err, &ue) || ue.Reason != store.ReasonBusy || !ue.Transient() {
		t.Fatalf("got %v, want an UnwritableError %q", err, store.ReasonBusy)
	}
	if h := db.WriteHealth(); h.OK || h.Reason != store.ReasonBusy {
		t.Fatalf("health while locked: got %+v, want degraded, %q", h, store.ReasonBusy)
	}
	if _, err := conn.ExecContext(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	if err := insert("free"); err != nil {
		t.Fatalf("the write after the lock was let go: %v", err)
	}
	if h := db.WriteHealth(); !h.OK {
		t.Fatalf("health after the lock: got %+v, want ok", h)
	}
}

// TestWriterLeavesAStandby: after a failover the old primary takes
// connections but refuses writes (read_only_sql_transaction). That passes
// (a 503, not a 507): the writer drops the connection, and the next one,
// here to the same server made writable again, commits.
func TestWriterLeavesAStandby(t *testing.T) {
	if engine != "postgres" {
		t.Skip("PostgreSQL only")
	}
	ctx := context.Background()
	db := openEngine(t)
	defer db.Close()
	insert := func(id string) error { return insertExecutionEvent(db, "standby", id) }
	admin, err := sql.Open(rawDriver(db))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var name string
	if err := admin.QueryRowContext(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	exec := func(q string) {
		t.Helper()
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// New sessions are read-only, as on a standby; the writer's session is
	// cut so that it opens one.
	exec(`ALTER DATABASE "` + name + `" SET default_transaction_read_only = on`)
	exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	var ue *store.UnwritableError
	var reasons []string
	for range 3 {
		if err := insert("refused"); errors.As(err, &ue) {
			reasons = append(reasons, ue.Reason)
			if ue.Reason == store.ReasonStandby {
				break
			}
		} else {
			t.Fatalf("a write to a read-only server: got %v, want an UnwritableError", err)
		}
	}
	if !slices.Contains(reasons, store.ReasonStandby) || !ue.Transient() {
		t.Fatalf("reasons: got %q, want %q, which passes", reasons, store.ReasonStandby)
	}
	exec(`ALTER DATABASE "` + name + `" SET default_transaction_read_only = off`)
	if err := insert("after"); err != nil {
		t.Fatalf("the write after the server took writes again: got %v, want a new connection to commit", err)
	}
}

// insertExecutionEvent writes one execution event in a transaction of its
// own.
func insertExecutionEvent(db *store.DB, execution, id string) error {
	return db.Update(context.Background(), func(tx *store.Tx) error {
		ev, err := parseExecutionEvent(execution, id)
		if err != nil {
			return err
		}
		_, err = tx.InsertEvents([]trace.Event{ev}, time.Now())
		return err
	})
}

// parseExecutionEvent is an execution event of id, naming execution.
func parseExecutionEvent(execution, id string) (trace.Event, error) {
	return ingest.ParseEvent(fmt.Appendf(nil, `{"type":"execution","id":%q,"execution_id":%q,"name":%q}`, id, execution, execution), ingest.DefaultLimits)
}
