package trace

import (
	"slices"
	"testing"
)

func TestEffectCause(t *testing.T) {
	send := func(attempts ...Attempt) Step { return step("step-1", "send_invoice_email", EffectWrite, attempts...) }
	for _, tc := range []struct {
		name   string
		step   Step
		effect Effect
		spans  []Span
		want   int // 0: no single attempt
	}{
		{"in flight", send(try(1, 0, 10, OutcomeTimeout), try(2, 10.1, 10.3, OutcomeOK)), effect("m", "", "step-1", 10.2), nil, 2},
		{"first, though it timed out", send(try(1, 0, 10, OutcomeTimeout), try(2, 10.1, 10.3, OutcomeOK)), effect("m", "", "step-1", 0.35), nil, 1},
		// An attempt that never ended runs until the next one starts.
		{"lost attempt until the next", send(try(1, 0, -1, ""), try(2, 6, 6.1, OutcomeOK)), effect("m", "", "step-1", 3), nil, 1},
		{"after every end: the last started", send(try(1, 0, 1, OutcomeTimeout), try(2, 2, 2.1, OutcomeOK)), effect("m", "", "step-1", 5), nil, 2},
		// A deduplicated answer or a replay called nothing.
		{"not the deduplicated one", send(try(1, 0, 1, OutcomeTimeout, key("k")), try(2, 1.1, 1.3, OutcomeOK, key("k"), dedup)), effect("m", "k", "", 1.2), nil, 1},
		{"not a replay", send(try(1, 0, 1, OutcomeOK), try(2, 1.1, 1.3, OutcomeReplayed)), effect("m", "", "step-1", 1.2), nil, 1},
		// The key says which attempt: another key's attempt is not a candidate.
		{"by key", send(try(1, 0, 5, OutcomeTimeout, key("k1")), try(2, 1, 5, OutcomeOK, key("k2"))), effect("m", "k2", "", 2), nil, 2},
		{"two in flight", send(try(1, 0, 5, OutcomeTimeout), try(2, 1, 5, OutcomeOK)), effect("m", "", "step-1", 2), nil, 0},
		{"no time, two candidates", send(try(1, 0, 1, OutcomeTimeout), try(2, 2, 3, OutcomeOK)), Effect{Provider: "mail-api", ID: "m", ExecutionID: "exec_1", StepID: "step-1"}, nil, 0},
		{"no time, one candidate", send(try(1, 0, 1, OutcomeOK)), Effect{Provider: "mail-api", ID: "m", ExecutionID: "exec_1", StepID: "step-1"}, nil, 1},
		// The trace context wins over the clock.
		{"by span", send(try(1, 0, 5, OutcomeTimeout, func(a *Attempt) { a.SpanID = "s1" }), try(2, 1, 5, OutcomeOK, func(a *Attempt) { a.SpanID = "s2" })),
			Effect{Provider: "mail-api", ID: "m", SpanID: "h1", At: at(2)}, []Span{{SpanID: "h1", ParentSpanID: "s1", Role: RoleHTTP}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(tc.step).with(tc.effect)
			r.Spans = tc.spans
			got, ok := r.EffectCause(tc.step, tc.effect)
			if got != tc.want || ok != (tc.want != 0) {
				t.Errorf("cause: got %d, %v, want %d", got, ok, tc.want)
			}
		})
	}
}

func TestIncidents(t *testing.T) {
	retried := step("step-1", "send_invoice_email", EffectWrite, try(1, 0, 10, OutcomeTimeout, worker("w1")), try(2, 10.1, 10.3, OutcomeOK, worker("w1")))
	crashed := step("step-1", "send_invoice_email", EffectWrite, try(1, 0, -1, "", worker("w1")), try(2, 60, 60.2, OutcomeOK, worker("w2")))
	held := step("step-1", "send_invoice_email", EffectWrite, try(1, 0, 10, OutcomeTimeout, key("k")), try(2, 10.1, 10.3, OutcomeOK, key("k"), dedup))

	t.Run("duplicate", func(t *testing.T) {
		r := run(retried).with(effect("m1", "", "step-1", 0.35), effect("m2", "", "step-1", 10.2)).fed("mail-api")
		is := Incidents(r, AuditRun(r, DefaultConfig), Gaps(r, DefaultConfig))
		if len(is) != 1 || is[0].Kind != IncidentDuplicate {
			t.Fatalf("incidents: got %+v, want one duplicate", is)
		}
		if got := []int{is[0].Effects[0].Attempt, is[0].Effects[1].Attempt}; !slices.Equal(got, []int{1, 2}) {
			t.Errorf("causes: got %v, want [1 2]", got)
		}
		if got := is[0].Culprits(); !slices.Equal(got, []int{2}) {
			t.Errorf("culprits: got %v, want [2]", got)
		}
		if is[0].Gap != nil {
			t.Errorf("gap: got %+v, want none", is[0].Gap)
		}
	})
	t.Run("crash: one incident for two rules", func(t *testing.T) {
		r := run(crashed).with(effect("m1", "", "step-1", 0.01), effect("m2", "", "step-1", 60.1)).fed("mail-api")
		is := Incidents(r, AuditRun(r, DefaultConfig), Gaps(r, DefaultConfig))
		if len(is) != 1 {
			t.Fatalf("incidents: got %d, want 1", len(is))
		}
		if got, want := is[0].Rules(), []Rule{RuleDuplicateEffect, RuleReexecutedAfterCrash}; !slices.Equal(got, want) {
			t.Errorf("rules: got %v, want %v", got, want)
		}
		if is[0].Gap == nil || is[0].Gap.WorkerAfter != "w2" {
			t.Errorf("gap: got %+v, want the crash gap to w2", is[0].Gap)
		}
	})
	t.Run("crash with one effect known: repeated", func(t *testing.T) {
		r := run(crashed).with(effect("m1", "", "step-1", 0.01)).fed("mail-api")
		is := Incidents(r, AuditRun(r, DefaultConfig), Gaps(r, DefaultConfig))
		if len(is) != 1 || is[0].Kind != IncidentRepeated || is[0].Culprits() != nil {
			t.Errorf("incidents: got %+v, want one repeated incident without culprits", is)
		}
	})
	t.Run("held only without critical findings", func(t *testing.T) {
		r := run(held).with(effect("m1", "k", "", 0.35)).fed("mail-api")
		is := Incidents(r, AuditRun(r, DefaultConfig), Gaps(r, DefaultConfig))
		if len(is) != 1 || is[0].Kind != IncidentHeld || len(is[0].Findings) != 0 {
			t.Fatalf("incidents: got %+v, want one held incident", is)
		}
		critical := run(held, retried.withID("step-2")).with(effect("m1", "k", "", 0.35),
			effect("m2", "", "step-2", 0.4), effect("m3", "", "step-2", 10.2)).fed("mail-api")
		is = Incidents(critical, AuditRun(critical, DefaultConfig), Gaps(critical, DefaultConfig))
		if len(is) != 1 || is[0].Kind != IncidentDuplicate || is[0].Step.ID != "step-2" {
			t.Errorf("incidents: got %+v, want only step-2's duplicate", is)
		}
	})
	t.Run("key collision stands alone", func(t *testing.T) {
		a := step("step-1", "send_invoice_email", EffectWrite, try(1, 0, 1, OutcomeOK, key("k"), args(`{"to":"a"}`)))
		b := step("step-2", "send_invoice_email", EffectWrite, try(1, 2, 3, OutcomeOK, key("k"), args(`{"to":"b"}`)))
		r := run(a, b)
		is := Incidents(r, AuditRun(r, DefaultConfig), nil)
		if len(is) != 1 || is[0].Kind != IncidentKey || is[0].Findings[0].Rule != RuleKeyCollision {
			t.Errorf("incidents: got %+v, want one key incident", is)
		}
	})
}

// withID is the step under another id, its attempts too.
func (s Step) withID(id string) Step {
	s.ID = id
	s.Attempts = slices.Clone(s.Attempts)
	for i := range s.Attempts {
		s.Attempts[i].StepID = id
	}
	return s
}
