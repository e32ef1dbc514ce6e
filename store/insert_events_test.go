package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// TestInsertEventsOrderAndDuplicates inserts a request of 600 events (a
// few multi-row statements of different sizes) holding an id twice and an
// id a previous transaction stored: the new events take increasing
// sequence numbers in the request's order, an id repeated in the request
// is stored once, with its first occurrence's body, and an id stored
// before is skipped.
func TestInsertEventsOrderAndDuplicates(t *testing.T) {
	ctx := context.Background()
	db := openEngine(t)
	defer db.Close()
	event := func(id, name string) trace.Event {
		ev, err := ingest.ParseEvent(fmt.Appendf(nil, `{"type":"execution","id":%q,"execution_id":"x_%s","name":%q}`, id, id, name), ingest.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	received := time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC)
	if err := db.Update(ctx, func(tx *store.Tx) error {
		_, err := tx.InsertEvents([]trace.Event{event("ev_0100", "before")}, received)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var events []trace.Event
	for i := range 600 {
		events = append(events, event(fmt.Sprintf("ev_%04d", (i*7919)%600), "first"))
	}
	events = append(events[:300], append([]trace.Event{event(events[10].ID, "second")}, events[300:]...)...)
	var seqs []int64
	var stored map[string][]store.StoredBody
	if err := db.Update(ctx, func(tx *store.Tx) error {
		var err error
		if seqs, err = tx.InsertEvents(events, received); err != nil {
			return err
		}
		stored, err = tx.EntitiesEvents([]string{events[10].Entity(), event("ev_0100", "").Entity()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != len(events) {
		t.Fatalf("seqs: got %d, want %d", len(seqs), len(events))
	}
	var last int64
	inserted := 0
	for i, ev := range events {
		duplicate := ev.ID == "ev_0100" || i == 300
		switch {
		case duplicate && seqs[i] != 0:
			t.Errorf("event %d (%s), a duplicate: got seq %d, want 0", i, ev.ID, seqs[i])
		case !duplicate && seqs[i] <= last:
			t.Errorf("event %d (%s): got seq %d, want one above %d (the request's order)", i, ev.ID, seqs[i], last)
		case !duplicate:
			last = seqs[i]
			inserted++
		}
	}
	if inserted != 599 {
		t.Errorf("inserted: got %d, want 599", inserted)
	}
	for entity, want := range map[string]string{events[10].Entity(): "first", event("ev_0100", "").Entity(): "before"} {
		got := stored[entity]
		if len(got) != 1 || string(event(got[0].ID, want).Body) != string(got[0].Body) {
			t.Errorf("stored events of %q: got %d, want one named %q: %+v", entity, len(got), want, got)
		}
	}
}
