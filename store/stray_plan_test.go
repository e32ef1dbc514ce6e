package store

import (
	"reflect"
	"testing"

	"github.com/oncetrace/oncetrace/trace"
)

// TestPlanStrayJoins checks that only an effect whose stray mark or join
// changes is written, and what each change reports: the executions it
// joined, left or names, its key, and the stray traces whose placeholder
// may go.
func TestPlanStrayJoins(t *testing.T) {
	ref := func(id string) trace.EffectRef { return trace.EffectRef{Provider: "mail", ID: id} }
	tests := []struct {
		name        string
		effects     []trace.Effect
		traces      []string
		stray       map[string]bool
		joins       map[trace.EffectRef]string
		updates     []strayUpdate
		strayTraces []string
		touched     map[string]bool
		keys        []string
	}{
		{"unchanged stray effect, joined as stored",
			[]trace.Effect{{Provider: "mail", ID: "m1", TraceID: "t1", StrayTrace: true, JoinedExecutionID: "x1"}},
			[]string{"t1"}, map[string]bool{"t1": true}, map[trace.EffectRef]string{ref("m1"): "x1"},
			nil, []string{"t1"}, map[string]bool{}, nil},
		{"trace becomes stray, effect joins an execution",
			[]trace.Effect{{Provider: "mail", ID: "m1", TraceID: "t1", IdempotencyKey: "ik_1", ExecutionID: "t1"}},
			[]string{"t1"}, map[string]bool{"t1": true}, map[trace.EffectRef]string{ref("m1"): "x1"},
			[]strayUpdate{{trace.Effect{Provider: "mail", ID: "m1", TraceID: "t1", IdempotencyKey: "ik_1", ExecutionID: "t1"}, true, "x1"}},
			[]string{"t1"}, map[string]bool{"x1": true, "t1": true}, []string{"ik_1"}},
		{"trace stray no more: the join is dropped, whatever was inferred",
			[]trace.Effect{{Provider: "mail", ID: "m1", TraceID: "t1", StrayTrace: true, JoinedExecutionID: "x1", IdempotencyKey: "ik_1"},
				{Provider: "mail", ID: "m2", TraceID: "t1", StrayTrace: true, IdempotencyKey: "ik_1"}},
			[]string{"t1"}, map[string]bool{}, map[trace.EffectRef]string{ref("m1"): "x2"},
			[]strayUpdate{
				{trace.Effect{Provider: "mail", ID: "m1", TraceID: "t1", StrayTrace: true, JoinedExecutionID: "x1", IdempotencyKey: "ik_1"}, false, ""},
				{trace.Effect{Provider: "mail", ID: "m2", TraceID: "t1", StrayTrace: true, IdempotencyKey: "ik_1"}, false, ""}},
			nil, map[string]bool{"x1": true}, []string{"ik_1"}},
		{"join moves from one execution to none",
			[]trace.Effect{{Provider: "mail", ID: "m1", TraceID: "t2", StrayTrace: true, JoinedExecutionID: "x1"}},
			[]string{"t1", "t2"}, map[string]bool{"t1": true, "t2": true}, map[trace.EffectRef]string{},
			[]strayUpdate{{trace.Effect{Provider: "mail", ID: "m1", TraceID: "t2", StrayTrace: true, JoinedExecutionID: "x1"}, true, ""}},
			[]string{"t1", "t2"}, map[string]bool{"x1": true}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := planStrayJoins(tt.effects, tt.traces, tt.stray, tt.joins)
			if !reflect.DeepEqual(plan.updates, tt.updates) {
				t.Errorf("updates: got %+v, want %+v", plan.updates, tt.updates)
			}
			var refs []trace.EffectRef
			for _, u := range tt.updates {
				refs = append(refs, u.effect.Ref())
			}
			if !reflect.DeepEqual(plan.effects, refs) {
				t.Errorf("effects: got %v, want %v", plan.effects, refs)
			}
			if !reflect.DeepEqual(plan.strayTraces, tt.strayTraces) {
				t.Errorf("stray traces: got %v, want %v", plan.strayTraces, tt.strayTraces)
			}
			if !reflect.DeepEqual(plan.touched, tt.touched) {
				t.Errorf("touched: got %v, want %v", plan.touched, tt.touched)
			}
			if !reflect.DeepEqual(plan.keys, tt.keys) {
				t.Errorf("keys: got %v, want %v", plan.keys, tt.keys)
			}
		})
	}
}

// TestAppendNewEffects checks that the identical effects loaded after the
// candidates add only those not loaded yet, in their order.
func TestAppendNewEffects(t *testing.T) {
	m := func(id string) trace.Effect { return trace.Effect{Provider: "mail", ID: id} }
	got := appendNewEffects([]trace.Effect{m("a"), m("b")}, []trace.Effect{m("b"), m("d"), m("c"), m("d")})
	want := []trace.Effect{m("a"), m("b"), m("d"), m("c")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
