package trace

import (
	"reflect"
	"testing"
)

func TestStepEffects(t *testing.T) {
	r := run(
		step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"))),
		step("s2", "send", EffectWrite, try(1, 2, 3, OutcomeOK)),
	).with(
		effect("m3", "ik_1", "", 9),       // by key, no names
		effect("m1", "ik_1", "s2", 1),     // the key wins over the names
		effect("m1", "ik_1", "s2", 1),     // a repeat of the same effect
		effect("m2", "", "s2", 2),         // by execution and step
		effect("m4", "ik_other", "s2", 4), // unknown key: the names decide
		effect("m5", "", "s9", 5),         // names a step the run does not have
		Effect{Provider: "mail-api", ID: "m6", StepID: "s2", ExecutionID: "exec_2", At: at(6)}, // another execution
	)
	got := map[string][]string{}
	for stepID, es := range r.StepEffects() {
		for _, e := range es {
			got[stepID] = append(got[stepID], e.ID)
		}
	}
	want := map[string][]string{"s1": {"m1", "m3"}, "s2": {"m2", "m4"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestStepEffectsPrefersTheNamedStepOnACollidingKey(t *testing.T) {
	r := run(
		step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_same"))),
		step("s2", "send", EffectWrite, try(1, 2, 3, OutcomeOK, key("ik_same"))),
	).with(effect("m1", "ik_same", "s2", 1), effect("m2", "ik_same", "", 2))
	got := r.StepEffects()
	if len(got["s1"]) != 1 || got["s1"][0].ID != "m2" || len(got["s2"]) != 1 || got["s2"][0].ID != "m1" {
		t.Errorf("got %v, want s1: [m2], s2: [m1]", got)
	}
}

func TestStepEffectsSortsByTimeThenProviderAndID(t *testing.T) {
	r := run(step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1")))).with(
		Effect{Provider: "mail-api", ID: "b", IdempotencyKey: "ik_1", At: at(1)},
		Effect{Provider: "mail-api", ID: "a", IdempotencyKey: "ik_1", At: at(1)},
		Effect{Provider: "crm", ID: "z", IdempotencyKey: "ik_1", At: at(1)},
		Effect{Provider: "mail-api", ID: "0", IdempotencyKey: "ik_1", At: at(0)},
	)
	var got []string
	for _, e := range r.StepEffects()["s1"] {
		got = append(got, e.Provider+" "+e.ID)
	}
	want := []string{"mail-api 0", "crm z", "mail-api a", "mail-api b"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestEffectStates(t *testing.T) {
	r := run(
		step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"))),
		step("s2", "send", EffectWrite, try(1, 2, 3, OutcomeOK, key("ik_2"))),
	).with(
		effect("m1", "ik_1", "s1", 1),
		effect("m2", "ik_2", "s2", 3),
		effect("m3", "", "s2", 4),
		effect("m4", "ik_nobody", "", 5),
	)
	got := EffectStates(r)
	want := map[EffectRef]MatchState{
		{"mail-api", "m1"}: MatchMatched,
		{"mail-api", "m2"}: MatchDuplicate,
		{"mail-api", "m3"}: MatchDuplicate,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestEffectMatchesAttempt(t *testing.T) {
	a := Attempt{ExecutionID: "exec_1", StepID: "s1", Number: 1, IdempotencyKey: "ik_1"}
	tests := []struct {
		name   string
		effect Effect
		want   bool
	}{
		{"same key", Effect{IdempotencyKey: "ik_1"}, true},
		{"same execution and step, no key", Effect{ExecutionID: "exec_1", StepID: "s1"}, true},
		{"same execution and step, other key", Effect{IdempotencyKey: "ik_2", ExecutionID: "exec_1", StepID: "s1"}, true},
		{"other key, no names", Effect{IdempotencyKey: "ik_2"}, false},
		{"same step in another execution", Effect{ExecutionID: "exec_2", StepID: "s1"}, false},
		{"same execution, no step", Effect{ExecutionID: "exec_1"}, false},
		{"nothing at all", Effect{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EffectMatchesAttempt(tt.effect, a); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if got := EffectMatchesAttempt(Effect{}, Attempt{}); got {
		t.Errorf("empty effect against empty attempt: got %v, want false", got)
	}
}

func TestEffectMatchesAttemptWithinOneProvider(t *testing.T) {
	tests := []struct {
		name            string
		attempt, effect string // the providers each names
		namesTheStep    bool
		want            bool
	}{
		{"same provider", "mail-api", "mail-api", false, true},
		{"attempt names no provider", "", "mail-api", false, true},
		{"effect names no provider", "mail-api", "", false, true},
		{"another provider", "mail-api", "crm", false, false},
		{"another provider, but naming the step", "mail-api", "crm", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Attempt{ExecutionID: "exec_1", StepID: "s1", Number: 1, IdempotencyKey: "ik_1", Provider: tt.attempt}
			e := Effect{Provider: tt.effect, ID: "m1", IdempotencyKey: "ik_1"}
			if tt.namesTheStep {
				e.ExecutionID, e.StepID = "exec_1", "s1"
			}
			if got := EffectMatchesAttempt(e, a); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStepEffectsScopesKeysByProvider(t *testing.T) {
	r := run(
		step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api"))),
		step("s2", "create", EffectWrite, try(1, 2, 3, OutcomeOK, key("ik_1"), provider("crm"))),
	).with(
		effect("m1", "ik_1", "", 1),                        // mail-api: s1's
		effect("c1", "ik_1", "", 3).atProvider("crm"),      // crm: s2's, though s1 sent the key first
		effect("p1", "ik_1", "", 4).atProvider("payments"), // neither sent the key there
	)
	got := map[string][]string{}
	for stepID, es := range r.StepEffects() {
		for _, e := range es {
			got[stepID] = append(got[stepID], e.Provider+" "+e.ID)
		}
	}
	want := map[string][]string{"s1": {"mail-api m1"}, "s2": {"crm c1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestStepEffectsLeavesAPeersEffectToIt: an effect naming another execution
// that sent the same key is that execution's, not this run's step's.
func TestStepEffectsLeavesAPeersEffectToIt(t *testing.T) {
	r := run(step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api")))).
		withPeers(peer("exec_2", "s1", try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api"))),
			peer("exec_3", "s1", try(1, 0, 1, OutcomeOK, key("ik_1"), provider("crm")))).
		with(
			effect("m1", "ik_1", "s1", 1),                // names this run: its own
			namedEffect("m2", "ik_1", "exec_2", "s1", 2), // exec_2 sent ik_1 to mail-api: exec_2's
			namedEffect("m3", "ik_1", "exec_3", "s1", 3), // exec_3 sent ik_1 to crm only: the key wins, s1's
			namedEffect("m4", "ik_1", "exec_9", "s1", 4), // exec_9 sent nothing: the key wins, s1's
			namedEffect("m5", "ik_1", "", "", 5),         // names nobody: s1's
		)
	var got []string
	for _, e := range r.StepEffects()["s1"] {
		got = append(got, e.ID)
	}
	if want := []string{"m1", "m3", "m4", "m5"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestTraceContextJoinsTheToolAttempt: an effect whose span is an HTTP
// client span below a tool attempt belongs to that attempt's step, however
// deep; the key of the HTTP call is the attempt's key; an effect whose
// chain breaks at a span that never arrived belongs to no step, and the
// run is not clean.
func TestTraceContextJoinsTheToolAttempt(t *testing.T) {
	const tr = "0af7651916cd43dd8448eb211c80319c"
	attempt := func(n int, span string, o Outcome) Attempt {
		a := try(n, float64(n), float64(n)+0.5, o)
		a.TraceID, a.SpanID = tr, span
		return a
	}
	r := run(step("tool-1", "send_invoice_email", EffectUnknown, attempt(1, "t1", OutcomeTimeout), attempt(2, "t2", OutcomeOK)))
	r.Execution.ID = tr
	r.Spans = []Span{
		{ExecutionID: tr, TraceID: tr, SpanID: "ctx", ParentSpanID: "t2", Role: RoleContext},
		{ExecutionID: tr, TraceID: tr, SpanID: "h2", ParentSpanID: "ctx", Role: RoleHTTP, IdempotencyKey: "ik_9"},
		{ExecutionID: tr, TraceID: tr, SpanID: "h1", ParentSpanID: "t1", Role: RoleHTTP},
		{ExecutionID: tr, TraceID: tr, SpanID: "hx", ParentSpanID: "missing", Role: RoleHTTP},
	}
	traced := func(id, span string) Effect {
		return Effect{Provider: "sandbox-mail", ID: id, TraceID: tr, SpanID: span, At: at(1)}
	}
	r.Effects = []Effect{traced("m1", "h1"), traced("m2", "h2")}
	if got := r.StepEffects()["tool-1"]; len(got) != 2 {
		t.Errorf("step effects: got %v, want m1 and m2 through their HTTP spans", got)
	}
	if v := Judge(r, AuditRun(r, Config{})); v.State != StateCritical {
		t.Errorf("two emails for one step: got state %q, want critical", v.State)
	}

	r.Effects = []Effect{traced("m2", "h2"), traced("m3", "hx")}
	if got := r.UnattributedEffects(); len(got) != 1 || got[0].ID != "m3" {
		t.Errorf("unattributed: got %v, want m3, whose tool span never arrived", got)
	}
	fs := AuditRun(r, Config{})
	if v := Judge(r, fs); v.State != StateUnverified || len(v.Unattributed) != 1 {
		t.Errorf("an email of no known step: got %+v, want unverified naming it", v)
	}
	found := false
	for _, f := range fs {
		found = found || (f.Rule == RuleOrphanEffect && len(f.Effects) == 1 && f.Effects[0].ID == "m3" && f.ExecutionID == tr)
	}
	if !found {
		t.Errorf("findings: got %+v, want an orphan_effect warning for m3 in this execution", fs)
	}

	r.Effects = []Effect{traced("m2", "h2")}
	if v := Judge(r, AuditRun(r, Config{})); v.State != StateClean {
		t.Errorf("one email joined to its step: got %q, want clean", v.State)
	}

	r.FoldHTTPCalls()
	if got := r.Steps[0].Attempts[1].IdempotencyKey; got != "ik_9" {
		t.Errorf("attempt 2's key from its HTTP call: got %q, want ik_9", got)
	}
	if got := r.Steps[0].Attempts[0].IdempotencyKey; got != "" {
		t.Errorf("attempt 1 sent no key: got %q", got)
	}
}

// TestNumberSpanAttempts: attempts identified by their spans are numbered
// by start, taking the lowest numbers the sent ones leave free, the same
// for any order of input.
func TestNumberSpanAttempts(t *testing.T) {
	a := func(span string, sec float64) Attempt { return Attempt{TraceID: "t", SpanID: span, StartedAt: at(sec)} }
	want := map[string]int{"t/x": 1, "t/y": 3, "t/z": 4}
	for _, in := range [][]Attempt{{a("x", 1), a("y", 2), a("z", 2)}, {a("z", 2), a("y", 2), a("x", 1)}} {
		got := NumberSpanAttempts([]int{2}, in)
		if len(got) != 3 || got["t/x"] != want["t/x"] || got["t/y"] != want["t/y"] || got["t/z"] != want["t/z"] {
			t.Errorf("NumberSpanAttempts: got %v, want %v", got, want)
		}
	}
}

// The states' two orders: the outbox lists duplicates, then orphans, then
// the rest; WorseState lets a duplicate beat matched, matched beat orphan.
func TestMatchStateOrders(t *testing.T) {
	for _, c := range []struct {
		state MatchState
		rank  int
	}{{MatchDuplicate, 0}, {MatchOrphan, 1}, {MatchMatched, 2}, {"", 2}} {
		if got := c.state.OutboxRank(); got != c.rank {
			t.Errorf("%q.OutboxRank(): got %d, want %d", c.state, got, c.rank)
		}
	}
	for _, c := range []struct{ a, b, want MatchState }{
		{"", MatchOrphan, MatchOrphan},
		{MatchOrphan, MatchMatched, MatchMatched},
		{MatchMatched, MatchOrphan, MatchMatched},
		{MatchMatched, MatchDuplicate, MatchDuplicate},
		{MatchDuplicate, MatchOrphan, MatchDuplicate},
		{MatchDuplicate, "", MatchDuplicate},
	} {
		if got := WorseState(c.a, c.b); got != c.want {
			t.Errorf("WorseState(%q, %q): got %q, want %q", c.a, c.b, got, c.want)
		}
	}
}
