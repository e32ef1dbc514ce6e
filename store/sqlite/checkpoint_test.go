package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// openWithCheckpoints opens a new database file with the checkpointer's
// thresholds given, and returns the engine to look at its checkpointer.
func openWithCheckpoints(t *testing.T, pages int64, idle time.Duration, backstop int) (*store.DB, *engine) {
	t.Helper()
	e := &engine{path: filepath.Join(t.TempDir(), "oncetrace.db"), sync: SyncNormal, create: true, checkpointPages: pages, checkpointIdle: idle, backstopPages: backstop}
	db, err := store.New(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	return db, e
}

// agentRuns is n executions of 10 events each, as the writer's benchmarks
// send them.
func agentRuns(t *testing.T, prefix string, n int) []trace.Event {
	t.Helper()
	var events []trace.Event
	add := func(format string, args ...any) {
		ev, err := ingest.ParseEvent(fmt.Appendf(nil, format, args...), ingest.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	for x := range n {
		exec := fmt.Sprintf("exec_%s_%d", prefix, x)
		add(`{"type":"execution","id":"%s_start","execution_id":"%s","name":"billing-agent","status":"running","started_at":"2026-06-30T14:02:11Z"}`, exec, exec)
		for s := 1; s <= 3; s++ {
			add(`{"type":"attempt","id":"%s_%d_a","execution_id":"%s","step_id":"step-%d","attempt":1,"tool":"send_invoice_email",
				"effect":"write","provider":"mail-api","idempotency_key":"ik_%s_%d","args":{"to":"jordan@acme.dev"},"started_at":"2026-06-30T14:02:1%dZ"}`,
				exec, s, exec, s, exec, s, s)
			add(`{"type":"attempt","id":"%s_%d_b","execution_id":"%s","step_id":"step-%d","attempt":1,
				"started_at":"2026-06-30T14:02:1%dZ","ended_at":"2026-06-30T14:02:1%d.5Z","outcome":"ok","result":{"status":"sent"}}`,
				exec, s, exec, s, s, s)
		}
		add(`{"type":"effect","id":"%s_f","provider":"mail-api","effect_id":"msg_%s","idempotency_key":"ik_%s_1",
			"execution_id":"%s","step_id":"step-1","at":"2026-06-30T14:02:11.2Z"}`, exec, exec, exec, exec)
		add(`{"type":"execution","id":"%s_end","execution_id":"%s","status":"completed","ended_at":"2026-06-30T14:02:20Z"}`, exec, exec)
	}
	return events
}

func walSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// With the writer's automatic checkpoints off, the checkpointer alone keeps
// the log from growing: 20,000 events from 4 clients in requests of 100,
// sustained, never leave a -wal file past a bound that the same ingest
// without checkpoints passes several times over.
func TestWALStaysBoundedUnderSustainedIngest(t *testing.T) {
	const clients, requests, perRequest = 4, 50, 100 // 20,000 events
	// Pages are 4 KiB: the checkpointer's checkpoints every 1000 pages,
	// the writer's own past a log of 4000 (16 MiB); the bound leaves room
	// for the transaction that crosses it.
	const bound = 32 << 20
	db, e := openWithCheckpoints(t, checkpointPages, time.Hour, backstopPages) // no idle truncation
	w := writer.New(db, writer.DefaultConfig)
	ctx := context.Background()
	batches := make([][]trace.Event, clients*requests)
	for i := range batches {
		batches[i] = agentRuns(t, fmt.Sprint(i), perRequest/10)
	}

	var (
		mu      sync.Mutex
		largest int64
		wg      sync.WaitGroup
		errs    = make(chan error, clients)
	)
	for c := range clients {
		wg.Go(func() {
			for r := range requests {
				if _, err := w.Write(ctx, batches[c*requests+r]); err != nil {
					errs <- err
					return
				}
				size := walSize(t, e.path)
				mu.Lock()
				largest = max(largest, size)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	w.Close()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	stats := e.cp.statsNow()
	t.Logf("largest -wal file: %d KiB; checkpoints %+v", largest>>10, stats)
	if largest > bound {
		t.Errorf("-wal file: reached %d bytes, want at most %d", largest, bound)
	}
	if stats.passive < 10 {
		t.Errorf("checkpoints: got %+v, want at least 10 PASSIVE run by the checkpointer (one per 1000 pages)", stats)
	}

	// The same ingest with no checkpoints at all grows the log past the
	// bound: the bound is the checkpointer's doing.
	if testing.Short() {
		return
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, e2 := openWithCheckpoints(t, 1<<40, time.Hour, 0) // never
	defer raw.Close()
	w2 := writer.New(raw, writer.DefaultConfig)
	for _, b := range batches {
		if _, err := w2.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	w2.Close()
	if size := walSize(t, e2.path); size <= bound {
		t.Errorf("-wal file without checkpoints: %d bytes, want more than the bound %d for the bound to mean something", size, bound)
	} else {
		t.Logf("-wal file without checkpoints: %d KiB", size>>10)
	}
}

// Once the writer is idle the checkpointer truncates the log to nothing,
// and closing the database stops it and removes the log, as closing the
// writer's connection did when it checkpointed itself.
func TestCheckpointerTruncatesWhenIdleAndStopsOnClose(t *testing.T) {
	db, e := openWithCheckpoints(t, checkpointPages, 20*time.Millisecond, backstopPages)
	w := writer.New(db, writer.DefaultConfig)
	if _, err := w.Write(context.Background(), agentRuns(t, "idle", 10)); err != nil {
		t.Fatal(err)
	}
	if walSize(t, e.path) == 0 {
		t.Fatal("-wal file: empty after a write")
	}
	// Waits for the condition, not a time: the deadline only ends a test
	// that would otherwise hang.
	deadline := time.Now().Add(30 * time.Second)
	for walSize(t, e.path) != 0 || e.cp.statsNow().truncate == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("-wal file: still %d bytes with the writer idle; checkpoints %+v, want a TRUNCATE", walSize(t, e.path), e.cp.statsNow())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// What was written is there, read through the readers' pool.
	list, _, err := db.ListExecutions(context.Background(), store.ExecutionFilter{Limit: store.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 10 {
		t.Errorf("executions: got %d, want 10", len(list))
	}

	w.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.cp.done:
	default:
		t.Error("checkpointer: still running after Close")
	}
	if _, err := os.Stat(e.path + "-wal"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("-wal file after Close: %v, want it removed", err)
	}
}
