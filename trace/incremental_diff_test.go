package trace

import (
	"maps"
	"slices"
	"testing"
)

func TestDiffSteps(t *testing.T) {
	step := func(id string, keys ...string) Step {
		s := Step{ID: id}
		for i, k := range keys {
			s.Attempts = append(s.Attempts, Attempt{StepID: id, Number: i + 1, IdempotencyKey: k})
		}
		return s
	}
	old := []Step{step("a", "ka"), step("b", "kb"), step("c", "kc")}
	for _, tc := range []struct {
		name    string
		steps   []Step
		dirty   []string // steps
		keys    []string
		lost    int // attempts
		gained  int
		ordered bool
	}{
		{name: "unchanged", steps: old, ordered: true},
		{name: "one step retried", steps: []Step{old[0], step("b", "kb", "kb"), old[2]},
			dirty: []string{"b"}, keys: []string{"kb"}, lost: 1, gained: 2, ordered: true},
		{name: "a step added", steps: []Step{old[0], step("a2", "kn"), old[1], old[2]},
			dirty: []string{"a2"}, keys: []string{"kn"}, gained: 1, ordered: true},
		{name: "a step gone", steps: []Step{old[0], old[2]}, dirty: []string{"b"}, keys: []string{"kb"}, lost: 1, ordered: true},
		{name: "steps out of order", steps: []Step{old[2], old[0], old[1]}, ordered: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := diffSteps(old, tc.steps)
			dirty, keys := slices.Sorted(maps.Keys(d.dirtySteps)), slices.Sorted(maps.Keys(d.dirtyKeys))
			if !slices.Equal(dirty, tc.dirty) || !slices.Equal(keys, tc.keys) {
				t.Errorf("dirty: got steps %v keys %v, want %v and %v", dirty, keys, tc.dirty, tc.keys)
			}
			if len(d.lost) != tc.lost || len(d.gained) != tc.gained || d.ordered != tc.ordered {
				t.Errorf("got %d lost, %d gained, ordered %v, want %d, %d, %v", len(d.lost), len(d.gained), d.ordered,
					tc.lost, tc.gained, tc.ordered)
			}
		})
	}
}
