package trace

import (
	"reflect"
	"testing"
	"time"
)

// TestPlanOrphanRecheck checks each way an orphan recheck judges an
// effect: claimed by an attempt's key or step (matched), by nobody
// (orphan, with its finding), or left to the execution its trace context
// names.
func TestPlanOrphanRecheck(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	ref := func(id string) EffectRef { return EffectRef{Provider: "mail", ID: id} }
	keyed := Attempt{ExecutionID: "x1", StepID: "s1", Provider: "mail", IdempotencyKey: "ik_1"}
	stepOnly := Attempt{ExecutionID: "x2", StepID: "s9"}
	tests := []struct {
		name       string
		candidates []Effect
		attempts   []Attempt
		orphans    []EffectRef
		matched    []EffectRef
		rules      []Rule
		effects    []EffectRef
		executions []string
	}{
		{"nothing to judge", nil, nil, nil, nil, nil, nil, []string{}},
		{"matched by key", []Effect{{Provider: "mail", ID: "m1", IdempotencyKey: "ik_1"}}, []Attempt{keyed},
			nil, []EffectRef{ref("m1")}, nil, []EffectRef{ref("m1")}, []string{"x1"}},
		{"matched by the step it names", []Effect{{Provider: "mail", ID: "m1", ExecutionID: "x2", StepID: "s9"}}, []Attempt{stepOnly},
			nil, []EffectRef{ref("m1")}, nil, []EffectRef{ref("m1")}, []string{"x2"}},
		{"key at another provider: orphan", []Effect{{Provider: "pay", ID: "p1", IdempotencyKey: "ik_1"}}, []Attempt{keyed},
			[]EffectRef{{Provider: "pay", ID: "p1"}}, nil, []Rule{RuleOrphanEffect}, []EffectRef{{Provider: "pay", ID: "p1"}}, []string{"x1"}},
		{"named step without an attempt: orphan, its execution touched", []Effect{{Provider: "mail", ID: "m1", ExecutionID: "x3", StepID: "s1"}}, nil,
			[]EffectRef{ref("m1")}, nil, []Rule{RuleOrphanEffect}, []EffectRef{ref("m1")}, []string{"x3"}},
		{"trace context: left to its execution", []Effect{{Provider: "mail", ID: "m1", TraceID: "t1", ExecutionID: "x4"}}, nil,
			nil, nil, nil, nil, []string{"x4"}},
		{"stray trace that joined: left to its execution", []Effect{{Provider: "mail", ID: "m1", TraceID: "t1", StrayTrace: true, JoinedExecutionID: "x5"}}, nil,
			nil, nil, nil, nil, []string{}},
		{"stray trace that joined nothing: orphan", []Effect{{Provider: "mail", ID: "m1", TraceID: "t1", StrayTrace: true}}, nil,
			[]EffectRef{ref("m1")}, nil, []Rule{RuleOrphanEffect}, []EffectRef{ref("m1")}, []string{}},
		{"two identical orphans: each an orphan, the later repeats the earlier", []Effect{
			{Provider: "mail", ID: "m2", Fingerprint: "mail:aa", At: t0.Add(time.Minute)},
			{Provider: "mail", ID: "m1", Fingerprint: "mail:aa", At: t0}}, nil,
			[]EffectRef{ref("m2"), ref("m1")}, nil, []Rule{RuleOrphanEffect, RuleOrphanEffect, RuleRepeatedEffect}, []EffectRef{ref("m2"), ref("m1")}, []string{}},
		{"identical orphans outside the window: no repeat", []Effect{
			{Provider: "mail", ID: "m1", Fingerprint: "mail:aa", At: t0},
			{Provider: "mail", ID: "m2", Fingerprint: "mail:aa", At: t0.Add(2 * time.Hour)}}, nil,
			[]EffectRef{ref("m1"), ref("m2")}, nil, []Rule{RuleOrphanEffect, RuleOrphanEffect}, []EffectRef{ref("m1"), ref("m2")}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := PlanOrphanRecheck(tt.candidates, tt.attempts, Config{RepeatWindow: time.Hour})
			if !reflect.DeepEqual(plan.Orphans, tt.orphans) {
				t.Errorf("orphans: got %v, want %v", plan.Orphans, tt.orphans)
			}
			if !reflect.DeepEqual(plan.Matched, tt.matched) {
				t.Errorf("matched: got %v, want %v", plan.Matched, tt.matched)
			}
			var rules []Rule
			for _, f := range plan.Findings {
				rules = append(rules, f.Rule)
			}
			if !reflect.DeepEqual(rules, tt.rules) {
				t.Errorf("findings: got %v, want %v", rules, tt.rules)
			}
			if !reflect.DeepEqual(plan.Effects, tt.effects) {
				t.Errorf("effects: got %v, want %v", plan.Effects, tt.effects)
			}
			if !reflect.DeepEqual(plan.Executions, tt.executions) {
				t.Errorf("executions: got %v, want %v", plan.Executions, tt.executions)
			}
		})
	}
}
