package store_test

import (
	"context"
	"encoding/json"
	"testing"
)

// TestAttemptsReadWithTheUnitSeparatorInTheirText: attempts are read with
// their text fields joined by the unit separator (0x1f); an attempt whose
// own text holds it reads back unchanged all the same, beside one that
// does not, on every path that reads attempts.
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
	keyed, err := db.AttemptsWithKey(ctx, "k2")
	if err != nil || len(keyed) != 2 || keyed[0].Error != "lost\x1f\x1fanswer" || keyed[1].Worker != "w2" {
		t.Errorf("attempts with the key: got %+v (%v), want the two odd ones unchanged", keyed, err)
	}
}
