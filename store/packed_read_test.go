package store_test

import (
	"context"
	"encoding/json"
	"testing"
)

// TestAttemptsReadWithTheUnitSeparatorInTheirText: attempts and a run's
// effects are read with their text fields joined by the unit separator
// (0x1f, store/packed.go); one whose own text holds it reads back
// unchanged all the same, beside one that does not.
func TestAttemptsReadWithTheUnitSeparatorInTheirText(t *testing.T) {
	db, w := openDB(t)
	ctx := context.Background()
	write(t, w,
		map[string]any{"type": "attempt", "execution_id": "x", "step_id": "plain", "attempt": 1, "tool": "send_email", "effect": "write",
			"idempotency_key": "k1", "args": map[string]any{"to": "a@acme.dev"}, "outcome": "ok", "worker": "w1"},
		map[string]any{"type": "attempt", "execution_id": "x", "step_id": "odd", "attempt": 1, "tool": "send\x1femail", "effect": "write",
			"idempotency_key": "k2", "args": map[string]any{"to\x1f": "b\x1f@acme.dev"}, "outcome": "error", "error": "lost\x1f\x1fanswer", "worker": "w1"},
		map[string]any{"type": "attempt", "execution_id": "x", "step_id": "odd", "attempt": 2, "tool": "send\x1femail", "effect": "write",
			"idempotency_key": "k2", "outcome": "ok", "worker": "w2"},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "msg_1", "idempotency_key": "k1", "target": "a@acme.dev"},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "msg_2", "idempotency_key": "k2", "target": "b\x1f@acme.dev"},
	)
	read, err := db.ReadExecution(ctx, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	type fields struct{ Step, Tool, Key, Args, Error, Worker string }
	var got []fields
	for _, step := range read.Run.Steps {
		for _, a := range step.Attempts {
			got = append(got, fields{a.StepID, a.Tool, a.IdempotencyKey, string(a.Args), a.Error, a.Worker})
		}
	}
	want := []fields{
		{"odd", "send\x1femail", "k2", `{"to\u001f":"b\u001f@acme.dev"}`, "lost\x1f\x1fanswer", "w1"},
		{"odd", "send\x1femail", "k2", "", "", "w2"},
		{"plain", "send_email", "k1", `{"to":"a@acme.dev"}`, "", "w1"},
	}
	if len(got) != len(want) {
		t.Fatalf("attempts: got %q, want %q", got, want)
	}
	for i := range want {
		// Args are compared as JSON: how the store spells the escape is its own.
		var g, w any
		_ = json.Unmarshal([]byte(got[i].Args), &g)
		_ = json.Unmarshal([]byte(want[i].Args), &w)
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		got[i].Args, want[i].Args = string(gj), string(wj)
		if got[i] != want[i] {
			t.Errorf("attempt %d: got %q, want %q", i, got[i], want[i])
		}
	}
	targets := map[string]string{}
	for _, f := range read.Run.Effects {
		targets[f.ID] = f.Target
	}
	if len(read.Run.Effects) != 2 || targets["msg_1"] != "a@acme.dev" || targets["msg_2"] != "b\x1f@acme.dev" || len(read.States) != 2 {
		t.Errorf("effects: got %+v, states %v, want msg_1 and msg_2 with their targets unchanged", read.Run.Effects, read.States)
	}
	keyed, err := db.AttemptsWithKey(ctx, "k2")
	if err != nil || len(keyed) != 2 || keyed[0].Error != "lost\x1f\x1fanswer" || keyed[1].Worker != "w2" {
		t.Errorf("attempts with the key: got %+v (%v), want the two odd ones unchanged", keyed, err)
	}
}
