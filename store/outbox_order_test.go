package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// The outbox pages by a stored rank of the state (effects.state_rank): an
// effect filtered by its state is found only if the rank moved with the
// state through each statement that changes it: an orphan when it arrives
// alone, matched when its attempt arrives (the orphan recheck), a
// duplicate when a second effect of the step arrives (the run analysis).
func TestOutboxRankFollowsState(t *testing.T) {
	db, w := openDB(t)
	ctx := context.Background()
	start := time.Date(2026, 6, 30, 9, 0, 0, 0, time.UTC)
	page := func(state trace.MatchState) []string {
		t.Helper()
		rows, _, err := db.Effects(ctx, store.EffectFilter{State: state})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rows {
			if r.State != state && state != "" {
				t.Errorf("filter %q returned %s in state %s", state, r.ID, r.State)
			}
			ids = append(ids, fmt.Sprintf("%s %s", r.State, r.ID))
		}
		return ids
	}
	expect := func(when string, state trace.MatchState, want ...string) {
		t.Helper()
		if got := page(state); !slices.Equal(got, want) {
			t.Errorf("%s, filter %q: got %q, want %q", when, state, got, want)
		}
	}

	write(t, w, map[string]any{"type": "effect", "provider": "mail", "effect_id": "m_late", "idempotency_key": "ik_1", "at": stamp(start.Add(time.Second))})
	expect("alone", trace.MatchOrphan, "orphan m_late")
	expect("alone", trace.MatchMatched)

	write(t, w, map[string]any{"type": "attempt", "execution_id": "exec_1", "step_id": "send", "attempt": 1, "effect": "write",
		"provider": "mail", "idempotency_key": "ik_1", "started_at": stamp(start), "ended_at": stamp(start.Add(2 * time.Second)), "outcome": "ok"})
	expect("with its attempt", trace.MatchMatched, "matched m_late")
	expect("with its attempt", trace.MatchOrphan)

	// No time: it sorts first among its provider's duplicates (as time 0).
	write(t, w, map[string]any{"type": "effect", "provider": "mail", "effect_id": "m_untimed", "idempotency_key": "ik_1"})
	expect("sent twice", trace.MatchDuplicate, "duplicate m_untimed", "duplicate m_late")
	expect("sent twice", trace.MatchMatched)
	expect("sent twice", "", "duplicate m_untimed", "duplicate m_late")
}
