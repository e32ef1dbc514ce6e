package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// paddedAttempts are n attempt events of execution x, each with about 2 KiB
// of arguments, so that a batch needs new pages.
func paddedAttempts(t *testing.T, x string, n int) []trace.Event {
	t.Helper()
	pad := strings.Repeat("p", 2048)
	out := make([]trace.Event, n)
	for i := range out {
		raw, err := json.Marshal(map[string]any{"type": "attempt", "id": fmt.Sprintf("%s-%d", x, i), "execution_id": x,
			"step_id": fmt.Sprintf("step-%d", i), "attempt": 1, "tool": "lookup", "effect": "read",
			"args": map[string]string{"pad": pad}, "started_at": stamp(base.Add(time.Duration(i) * time.Second))})
		if err != nil {
			t.Fatal(err)
		}
		if out[i], err = ingest.ParseEvent(raw, ingest.DefaultLimits); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// storedIDs is the id of every event in the raw log.
func storedIDs(t *testing.T, db *store.DB) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	err := db.ExportEvents(context.Background(), func(_ int64, body []byte) error {
		var ev struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			return err
		}
		ids[ev.ID] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestFullDatabaseRefusesWritesAndRecovers fills the database as a full
// disk does (SQLite's max_page_count on the writer's connection): writes
// fail with an *UnwritableError naming the disk, nothing of a failed
// request is stored, nothing acknowledged is lost, and once there is room
// a probe finds it and writes pass again.
func TestFullDatabaseRefusesWritesAndRecovers(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	db, w := openDB(t)
	if h := db.WriteHealth(); !h.OK {
		t.Fatalf("health before any write: got %+v, want OK", h)
	}
	acked := map[string]bool{}
	for _, ev := range paddedAttempts(t, "exec_before", 20) {
		acked[ev.ID] = true
		if _, err := w.Write(ctx, []trace.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	if h := db.WriteHealth(); !h.OK || h.Checked.IsZero() {
		t.Fatalf("health after writes: got %+v, want OK and checked", h)
	}

	pages, err := store.PageCount(db)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := store.SetMaxPageCount(db, pages); err != nil || got != pages {
		t.Fatalf("max_page_count: got %d, %v, want %d", got, err, pages)
	}

	// Eight clients at once, so that the writer groups them: a group that
	// meets the full disk fails as a whole, and no request of it is
	// acknowledged.
	type outcome struct {
		events []trace.Event
		err    error
	}
	results := make([]outcome, 8)
	var wg sync.WaitGroup
	for i := range results {
		results[i].events = paddedAttempts(t, fmt.Sprintf("exec_full_%d", i), 40)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res writer.Result
			res, results[i].err = w.Write(ctx, results[i].events)
			if results[i].err == nil && res.Accepted != len(results[i].events) {
				t.Errorf("client %d: accepted %d, want %d", i, res.Accepted, len(results[i].events))
			}
		}()
	}
	wg.Wait()
	failed := 0
	for i, r := range results {
		if r.err == nil {
			for _, ev := range r.events {
				acked[ev.ID] = true
			}
			continue
		}
		failed++
		var ue *store.UnwritableError
		if !errors.Is(r.err, store.ErrUnwritable) || !errors.As(r.err, &ue) || ue.Reason != store.ReasonDiskFull {
			t.Errorf("client %d: got %v, want an *UnwritableError with reason %q", i, r.err, store.ReasonDiskFull)
		}
	}
	if failed == 0 {
		t.Fatalf("got every write of 8×40 events of 2 KiB accepted by a full database, want them refused")
	}
	h := db.WriteHealth()
	if h.OK || h.Reason != store.ReasonDiskFull || h.Since.IsZero() || !strings.Contains(h.Error, "full") {
		t.Fatalf("health on a full database: got %+v, want not OK, reason %q, since set, SQLite's error", h, store.ReasonDiskFull)
	}
	// A probe needs room for store.ProbeBytes: there is none yet.
	if h := db.ProbeWrite(ctx, 0); h.OK {
		t.Fatalf("probe on a full database: got OK, want %q", store.ReasonDiskFull)
	}
	// A probe waits for its interval after the last try.
	before := db.WriteHealth().Checked
	if h := db.ProbeWrite(ctx, time.Hour); h.OK || !h.Checked.Equal(before) {
		t.Fatalf("probe within its interval: got %+v, want the health unchanged (checked %v)", h, before)
	}

	// Room again: the probe sees it without any client writing.
	if _, err := store.SetMaxPageCount(db, 1<<30); err != nil {
		t.Fatal(err)
	}
	if h := db.ProbeWrite(ctx, 0); !h.OK || h.Reason != "" {
		t.Fatalf("probe with room: got %+v, want OK", h)
	}
	// What failed was not stored: re-sent, all of it is new.
	for i, r := range results {
		if r.err == nil {
			continue
		}
		res, err := w.Write(ctx, r.events)
		if err != nil {
			t.Fatalf("client %d after recovery: %v", i, err)
		}
		if res.Accepted != len(r.events) || res.Duplicates != 0 {
			t.Errorf("client %d re-sent after its write failed: got %d accepted, %d duplicates, want %d, 0 (a failed write stored something)",
				i, res.Accepted, res.Duplicates, len(r.events))
		}
		for _, ev := range r.events {
			acked[ev.ID] = true
		}
	}
	stored := storedIDs(t, db)
	for id := range acked {
		if !stored[id] {
			t.Errorf("event %s: acknowledged, not stored", id)
		}
	}
	if len(stored) != len(acked) {
		t.Errorf("stored events: got %d, want the %d acknowledged", len(stored), len(acked))
	}
}

func TestUnwritableIgnoresOtherErrors(t *testing.T) {
	for _, err := range []error{nil, errors.New("store: something else"), context.Canceled, fmt.Errorf("wrapped: %w", store.ErrNotFound)} {
		if ue, ok := store.Unwritable(err); ok {
			t.Errorf("Unwritable(%v): got %v, want false", err, ue)
		}
	}
}
