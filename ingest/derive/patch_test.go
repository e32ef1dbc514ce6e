package derive

import (
	"slices"
	"testing"

	"github.com/oncetrace/oncetrace/trace"
)

// cachedFixture is a run with step "a" (two attempts sending key k1, in
// trace t1) and step "b" (one sending k2), and effects joined by each.
func cachedFixture() *cachedRun {
	return newCachedRun(trace.Run{
		Execution: trace.Execution{ID: "x1"},
		Steps: []trace.Step{
			{ID: "a", Attempts: []trace.Attempt{
				{ExecutionID: "x1", StepID: "a", Number: 1, IdempotencyKey: "k1", TraceID: "t1"},
				{ExecutionID: "x1", StepID: "a", Number: 2, IdempotencyKey: "k1", TraceID: "t1"},
			}},
			{ID: "b", Attempts: []trace.Attempt{{ExecutionID: "x1", StepID: "b", Number: 1, IdempotencyKey: "k2"}}},
		},
		Effects: []trace.Effect{
			{Provider: "p", ID: "by-k1", IdempotencyKey: "k1"},
			{Provider: "p", ID: "by-t1", TraceID: "t1"},
			{Provider: "p", ID: "named", ExecutionID: "x1"},
		},
	})
}

func TestReplaceAttempts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		changed    map[string][]trace.Attempt
		newKeys    []string
		newTraces  []string
		shrunk     bool
		keys, trcs []string // the run's keys and traces after
	}{
		{name: "nothing changed", keys: []string{"k1", "k2"}, trcs: []string{"t1", "x1"}},
		{name: "one of two attempts loses the key: still held",
			changed: map[string][]trace.Attempt{"a": {
				{Number: 1, IdempotencyKey: "k1", TraceID: "t1"}, {Number: 2, TraceID: "t1"}}},
			keys: []string{"k1", "k2"}, trcs: []string{"t1", "x1"}},
		{name: "a step's key and trace replaced",
			changed: map[string][]trace.Attempt{"a": {{Number: 1, IdempotencyKey: "k3", TraceID: "t3"}}},
			newKeys: []string{"k3"}, newTraces: []string{"t3"}, shrunk: true,
			keys: []string{"k2", "k3"}, trcs: []string{"t3", "x1"}},
		{name: "a new step", changed: map[string][]trace.Attempt{"c": {{Number: 1, IdempotencyKey: "k2"}}},
			keys: []string{"k1", "k2"}, trcs: []string{"t1", "x1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := cachedFixture()
			got := e.replaceAttempts(tc.changed)
			slices.Sort(got.newKeys)
			slices.Sort(got.newTraces)
			if !slices.Equal(got.newKeys, tc.newKeys) || !slices.Equal(got.newTraces, tc.newTraces) || got.shrunk != tc.shrunk {
				t.Errorf("changes: got %+v, want new keys %v, new traces %v, shrunk %v", got, tc.newKeys, tc.newTraces, tc.shrunk)
			}
			if k, tr := setList(e.keys), setList(e.traces); !slices.Equal(k, tc.keys) || !slices.Equal(tr, tc.trcs) {
				t.Errorf("held: got keys %v traces %v, want %v and %v", k, tr, tc.keys, tc.trcs)
			}
		})
	}
}

func TestPatchEffects(t *testing.T) {
	ref := func(id string) trace.EffectRef { return trace.EffectRef{Provider: "p", ID: id} }
	for _, tc := range []struct {
		name    string
		changed map[string][]trace.Attempt // replaced first, as patch does
		added   []trace.Effect
		written []string
		want    []string
		fresh   []string
	}{
		{name: "nothing changed keeps the run's slice", want: []string{"by-k1", "by-t1", "named"}},
		{name: "an effect written again is replaced by its row", added: []trace.Effect{{Provider: "p", ID: "named", ExecutionID: "x1"}},
			written: []string{"named"}, want: []string{"by-k1", "by-t1", "named"}},
		{name: "an effect written away from the run goes", written: []string{"named"}, want: []string{"by-k1", "by-t1"}},
		{name: "effects joined by a lost key or trace go, new ones join",
			changed: map[string][]trace.Attempt{"a": {{Number: 1, IdempotencyKey: "k3"}}},
			added:   []trace.Effect{{Provider: "p", ID: "by-k3", IdempotencyKey: "k3"}},
			want:    []string{"by-k3", "named"}, fresh: []string{"by-k3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := cachedFixture()
			before := e.raw.Effects
			terms := e.replaceAttempts(tc.changed)
			added := map[trace.EffectRef]trace.Effect{}
			for _, f := range tc.added {
				added[f.Ref()] = f
			}
			written := map[trace.EffectRef]bool{}
			for _, id := range tc.written {
				written[ref(id)] = true
			}
			effects, fresh := e.patchEffects(added, written, terms.shrunk)
			var got []string
			for _, f := range effects {
				got = append(got, f.ID)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("effects: got %v, want %v", got, tc.want)
			}
			var gotFresh []string
			for r := range fresh {
				gotFresh = append(gotFresh, r.ID)
			}
			if !slices.Equal(gotFresh, tc.fresh) {
				t.Errorf("fresh: got %v, want %v", gotFresh, tc.fresh)
			}
			if len(e.effects) != len(tc.want) {
				t.Errorf("the run's set: got %d effects, want %d", len(e.effects), len(tc.want))
			}
			if unchanged := len(tc.written)+len(tc.added)+len(tc.changed) == 0; unchanged != sameSlice(effects, before) {
				t.Errorf("kept the cached slice: got %v, want %v", sameSlice(effects, before), unchanged)
			}
		})
	}
}
