package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/postgres"
	"github.com/oncetrace/oncetrace/trace"
)

// Two instances on one PostgreSQL database (docs/deploy.md, "Write
// scaling"): their commits of different executions store events at the
// same time; their commits of one execution, and every commit's
// derivation, run one after the other; and a reader of the log never
// passes an event that a commit still under way may precede.

// twoInstances opens the same fresh PostgreSQL database twice, as two
// oncetrace instances do, and a plain connection to look at its locks.
func twoInstances(t *testing.T) (a, b *store.DB, admin *sql.DB) {
	t.Helper()
	if engine != "postgres" {
		t.Skip("PostgreSQL only: one process writes a SQLite file")
	}
	dsn := cluster.NewDatabase(t)
	var err error
	if a, err = postgres.Open(context.Background(), dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if b, err = postgres.Open(context.Background(), dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if admin, err = sql.Open("pgx", dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	return a, b, admin
}

func executionEvent(t *testing.T, execution, id string) trace.Event {
	t.Helper()
	ev, err := parseExecutionEvent(execution, id)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// waitForLockWaiter polls until some backend waits for an advisory lock
// of this database (the cluster's other databases are other tests'): the
// other instance's commit stands in line behind the one holding it.
func waitForLockWaiter(t *testing.T, admin *sql.DB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := admin.QueryRow(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no commit waited for the other's lock within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCommitsOfTwoInstancesOverlap: each instance's commit stores the
// events of its own execution and then waits, inside its transaction, for
// the other's to have stored its own. With commits serialised across
// instances (the database-wide lock of before), the second could not
// begin until the first ended, and both would wait out the timeout.
func TestCommitsOfTwoInstancesOverlap(t *testing.T) {
	a, b, _ := twoInstances(t)
	stored := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	errs := make(chan error, 2)
	for i, db := range []*store.DB{a, b} {
		go func() {
			execution := fmt.Sprintf("exec_overlap_%d", i)
			errs <- db.UpdateKeys(context.Background(), []string{execution}, func(tx *store.Tx) error {
				if _, err := tx.InsertEvents([]trace.Event{executionEvent(t, execution, execution+"_ev")}, time.Now()); err != nil {
					return err
				}
				close(stored[i])
				select {
				case <-stored[1-i]:
					return nil
				case <-time.After(10 * time.Second):
					return fmt.Errorf("instance %d: the other instance's commit stored nothing while this one was open", i)
				}
			})
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, db := range []*store.DB{a, b} {
		if n, err := db.LastSeq(context.Background()); err != nil || n != 2 {
			t.Errorf("instance %d: last sequence number: got %d, %v; want 2 (both commits' events)", i, n, err)
		}
	}
}

// TestCommitsOfOneExecutionAndDerivationsAreSerial: a commit of an
// execution another instance's open commit holds waits for it, before it
// stores anything; and so do a derivation (Tx.LockDerivation) and a commit
// of more executions than it takes locks for (20,000: one lock each would
// overflow PostgreSQL's lock table), though their executions differ.
func TestCommitsOfOneExecutionAndDerivationsAreSerial(t *testing.T) {
	// More executions than a commit takes locks for: it locks them all.
	many := make([]string, 20_000)
	for i := range many {
		many[i] = fmt.Sprintf("exec_many_%d", i)
	}
	for _, tc := range []struct {
		name       string
		executions [2]string
		secondKeys []string                 // the second commit's keys, when not its execution alone
		hold       func(tx *store.Tx) error // what the first commit holds
	}{
		{"same execution", [2]string{"exec_same", "exec_same"}, nil, func(*store.Tx) error { return nil }},
		{"derivation", [2]string{"exec_one", "exec_other"}, nil, func(tx *store.Tx) error { return tx.LockDerivation() }},
		{"more executions than locks", [2]string{"exec_one", "exec_many_0"}, many, func(*store.Tx) error { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, admin := twoInstances(t)
			release, firstDone := make(chan struct{}), make(chan error, 1)
			held := make(chan struct{})
			go func() {
				firstDone <- a.UpdateKeys(context.Background(), []string{tc.executions[0]}, func(tx *store.Tx) error {
					if _, err := tx.InsertEvents([]trace.Event{executionEvent(t, tc.executions[0], "ev_first")}, time.Now()); err != nil {
						return err
					}
					if err := tc.hold(tx); err != nil {
						return err
					}
					close(held)
					<-release
					return nil
				})
			}()
			<-held
			var committedFirst bool
			secondDone := make(chan error, 1)
			go func() {
				keys := tc.secondKeys
				if keys == nil {
					keys = []string{tc.executions[1]}
				}
				secondDone <- b.UpdateKeys(context.Background(), keys, func(tx *store.Tx) error {
					if err := tx.LockDerivation(); err != nil {
						return err
					}
					// Past the locks: the first commit must have ended.
					var n int
					if err := tx.QueryRowContext(context.Background(), `SELECT count(*) FROM events WHERE id = 'ev_first'`).Scan(&n); err != nil {
						return err
					}
					committedFirst = n == 1
					_, err := tx.InsertEvents([]trace.Event{executionEvent(t, tc.executions[1], "ev_second")}, time.Now())
					return err
				})
			}()
			waitForLockWaiter(t, admin)
			close(release)
			if err := <-firstDone; err != nil {
				t.Fatal(err)
			}
			if err := <-secondDone; err != nil {
				t.Fatal(err)
			}
			if !committedFirst {
				t.Error("the second commit went past the lock before the first committed")
			}
		})
	}
}

// TestTailStopsBeforeACommitUnderWay: a commit that took sequence number
// n and is still open holds every reader of the log below n, though a
// later commit with n+1 has landed; once it commits, both come, in order.
func TestTailStopsBeforeACommitUnderWay(t *testing.T) {
	a, b, _ := twoInstances(t)
	ctx := context.Background()
	if err := a.Update(ctx, func(tx *store.Tx) error {
		_, err := tx.InsertEvents([]trace.Event{executionEvent(t, "exec_before", "ev_before")}, time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	stored, release, slowDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		slowDone <- a.UpdateKeys(ctx, []string{"exec_slow"}, func(tx *store.Tx) error {
			if _, err := tx.InsertEvents([]trace.Event{executionEvent(t, "exec_slow", "ev_slow")}, time.Now()); err != nil {
				return err
			}
			close(stored)
			<-release
			return nil
		})
	}()
	<-stored
	if err := b.UpdateKeys(ctx, []string{"exec_fast"}, func(tx *store.Tx) error {
		_, err := tx.InsertEvents([]trace.Event{executionEvent(t, "exec_fast", "ev_fast")}, time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, db := range []*store.DB{a, b} {
		events, err := db.EventsAfter(ctx, 0, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 1 || events[0].Seq != 1 {
			t.Fatalf("with seq 2's commit open: got %d events, want only seq 1 (seq 3 waits for 2)", len(events))
		}
		if last, err := db.LastSeq(ctx); err != nil || last != 1 {
			t.Fatalf("with seq 2's commit open: LastSeq got %d, %v; want 1", last, err)
		}
	}
	close(release)
	if err := <-slowDone; err != nil {
		t.Fatal(err)
	}
	events, err := b.EventsAfter(ctx, 1, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[0].Seq != 2 || events[1].Seq != 3 {
		t.Fatalf("after both committed: got %v, want seq 2 then 3", events)
	}
}

// TestTailMarkOutlivesARolledBackRequest: a request of a group commit
// whose savepoint rolled back took the tail mark with it (the lock goes
// with the savepoint); the next request's events, numbered in the same
// open transaction, must be marked again, or a reader would pass them.
func TestTailMarkOutlivesARolledBackRequest(t *testing.T) {
	a, b, _ := twoInstances(t)
	ctx := context.Background()
	stored, release, openDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		openDone <- a.UpdateKeys(ctx, []string{"exec_open"}, func(tx *store.Tx) error {
			if err := tx.Savepoint(); err != nil {
				return err
			}
			if _, err := tx.InsertEvents([]trace.Event{executionEvent(t, "exec_open", "ev_rolled_back")}, time.Now()); err != nil {
				return err
			}
			if err := tx.RollbackTo(); err != nil {
				return err
			}
			if err := tx.Savepoint(); err != nil {
				return err
			}
			if _, err := tx.InsertEvents([]trace.Event{executionEvent(t, "exec_open", "ev_kept")}, time.Now()); err != nil {
				return err
			}
			if err := tx.Release(); err != nil {
				return err
			}
			close(stored)
			<-release
			return nil
		})
	}()
	<-stored
	if err := b.UpdateKeys(ctx, []string{"exec_later"}, func(tx *store.Tx) error {
		_, err := tx.InsertEvents([]trace.Event{executionEvent(t, "exec_later", "ev_later")}, time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if events, err := b.EventsAfter(ctx, 0, "", 100); err != nil || len(events) != 0 {
		t.Fatalf("with the open commit's seq 2 unseen: got %d events, %v; want none (seq 3 waits for 2)", len(events), err)
	}
	close(release)
	if err := <-openDone; err != nil {
		t.Fatal(err)
	}
	events, err := b.EventsAfter(ctx, 0, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[0].Seq != 2 || events[1].Seq != 3 {
		t.Fatalf("after both committed: got %v, want seq 2 then 3", events)
	}
}
