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
