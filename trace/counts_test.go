package trace

import (
	"encoding/json"
	"testing"
)

func TestCounts(t *testing.T) {
	r := run(
		step("s1", "send", EffectWrite,
			try(1, 0, 1, OutcomeTimeout, key("ik_1")),
			try(2, 2, 3, OutcomeOK, key("ik_1"), dedup),
			try(3, 4, -1, "")),
		step("s2", "record", EffectWrite, try(1, 5, 5, OutcomeReplayed)),
		step("s3", "fetch", EffectRead, try(1, 6, 7, OutcomeOK)),
	).with(effect("m1", "ik_1", "s1", 0.5), effect("m1", "ik_1", "s1", 0.5), effect("m2", "", "s9", 9))
	got := r.Counts()
	want := Counts{Steps: 3, Attempts: 5, Retries: 2, Dedupes: 1, Replays: 1, Effects: 2}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"steps":3,"attempts":5,"retries":2,"dedupes":1,"replays":1,"effects":2}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

// TestCountsReplayIsNotARetry: a rerun answered from the journal adds an
// attempt but no retry.
func TestCountsReplayIsNotARetry(t *testing.T) {
	r := run(step("s1", "send", EffectWrite,
		try(1, 0, 1, OutcomeOK, key("ik_1")),
		try(2, 5, 5, OutcomeReplayed, key("ik_1"))))
	got := r.Counts()
	if got.Attempts != 2 || got.Retries != 0 || got.Replays != 1 {
		t.Errorf("got attempts %d, retries %d, replays %d, want 2, 0, 1", got.Attempts, got.Retries, got.Replays)
	}
}
