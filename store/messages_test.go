package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// TestMessages: a message is kept once under its effect, copies are
// counted, it reads back with its effect, and MessagesKept tells which
// effects have one in one query.
func TestMessages(t *testing.T) {
	db, w := openDB(t)
	ctx := context.Background()
	write(t, w, map[string]any{"type": "effect", "provider": "smtp", "effect_id": "<a@agent>", "execution_id": "x", "step_id": "step-4",
		"target": "jordan@acme.dev", "at": stamp(base)})
	first := store.Message{Provider: "smtp", EffectID: "<a@agent>", From: "billing@acme.dev", Recipients: []string{"jordan@acme.dev", "ap@acme.dev"},
		ReceivedAt: base, Raw: []byte("Subject: first\r\n\r\nbody\r\n")}
	if err := db.PutMessage(ctx, first); err != nil {
		t.Fatal(err)
	}
	again := first
	again.ReceivedAt, again.Raw = base.Add(time.Minute), []byte("Subject: second\r\n\r\nbody\r\n")
	if err := db.PutMessage(ctx, again); err != nil {
		t.Fatal(err)
	}
	m, err := db.Message(ctx, "smtp", "<a@agent>")
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Raw) != string(first.Raw) || m.Received != 2 || !m.ReceivedAt.Equal(base) || !m.LastReceivedAt.Equal(base.Add(time.Minute)) ||
		m.From != "billing@acme.dev" || len(m.Recipients) != 2 || m.Recipients[1] != "ap@acme.dev" {
		t.Errorf("message: got raw %q, received %d at %v/%v, from %q to %v; want the first copy, 2 received, the envelope",
			m.Raw, m.Received, m.ReceivedAt, m.LastReceivedAt, m.From, m.Recipients)
	}
	if m.Effect.ExecutionID != "x" || m.Effect.StepID != "step-4" || m.Effect.Target != "jordan@acme.dev" || m.State == "" {
		t.Errorf("message's effect: got %+v state %q, want x step-4 with its state", m.Effect, m.State)
	}

	if _, err := db.Message(ctx, "smtp", "<none@agent>"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a message never kept: got %v, want ErrNotFound", err)
	}
	kept, err := db.MessagesKept(ctx, []trace.EffectRef{{Provider: "smtp", ID: "<a@agent>"}, {Provider: "smtp", ID: "<none@agent>"},
		{Provider: "mail-api", ID: "<a@agent>"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || !kept[trace.EffectRef{Provider: "smtp", ID: "<a@agent>"}] {
		t.Errorf("MessagesKept: got %v, want only smtp <a@agent>", kept)
	}
	if kept, err := db.MessagesKept(ctx, nil); err != nil || len(kept) != 0 {
		t.Errorf("MessagesKept of none: got %v, %v", kept, err)
	}
}
