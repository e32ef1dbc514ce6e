package trace

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// sampleWorld has exec_A (known), exec_B (known only from its steps, its
// attempts not stamped with their ids) and effects of every kind.
func sampleWorld() World {
	return World{
		Executions: []Execution{{ID: "exec_A", Status: StatusCompleted}},
		Steps: []Step{
			{ExecutionID: "exec_A", ID: "s2", Tool: "record", Effect: EffectWrite, Attempts: []Attempt{
				{Number: 1, IdempotencyKey: "ik_shared", StartedAt: at(10), EndedAt: at(11), Outcome: OutcomeOK}}},
			{ExecutionID: "exec_A", ID: "s1", Tool: "send", Effect: EffectWrite, Attempts: []Attempt{
				{Number: 1, IdempotencyKey: "ik_A1", StartedAt: at(0), EndedAt: at(1), Outcome: OutcomeTimeout}}},
			{ExecutionID: "exec_B", ID: "s1", Tool: "send", Effect: EffectWrite, Attempts: []Attempt{
				{Number: 2, IdempotencyKey: "ik_shared", StartedAt: at(3), EndedAt: at(4), Outcome: OutcomeOK},
				{Number: 1, IdempotencyKey: "ik_shared", StartedAt: at(0), EndedAt: at(1), Outcome: OutcomeTimeout}}},
			// A second record of exec_A's s1, as a store might return a late attempt.
			{ExecutionID: "exec_A", ID: "s1", Attempts: []Attempt{
				{Number: 2, IdempotencyKey: "ik_A1", StartedAt: at(2), EndedAt: at(3), Outcome: OutcomeOK, Deduplicated: true}}},
		},
		Effects: []Effect{
			{Provider: "mail-api", ID: "e1", IdempotencyKey: "ik_A1", At: at(0.5)},
			{Provider: "mail-api", ID: "e2", ExecutionID: "exec_B", StepID: "s1", At: at(0.5)},
			{Provider: "crm", ID: "e3", ExecutionID: "exec_A", StepID: "s2", At: at(10.5)},
			{Provider: "crm", ID: "e4", ExecutionID: "exec_Z", StepID: "s9", At: at(20)},
		},
	}
}

func TestWorldRuns(t *testing.T) {
	runs := sampleWorld().Runs()
	if len(runs) != 2 {
		t.Fatalf("got %d runs, want 2", len(runs))
	}
	a, b := runs[0], runs[1]
	if a.Execution.ID != "exec_A" || b.Execution.ID != "exec_B" {
		t.Fatalf("got runs %q, %q, want exec_A, exec_B", a.Execution.ID, b.Execution.ID)
	}
	if want := (Execution{ID: "exec_B", Status: StatusRunning}); !reflect.DeepEqual(b.Execution, want) {
		t.Errorf("execution known only from steps: got %+v, want %+v", b.Execution, want)
	}

	layout := func(r Run) []string {
		var out []string
		for _, s := range r.Steps {
			for _, at := range s.Attempts {
				out = append(out, at.ExecutionID+"/"+at.StepID+"#"+string(rune('0'+at.Number)))
			}
		}
		return out
	}
	if got, want := layout(a), []string{"exec_A/s1#1", "exec_A/s1#2", "exec_A/s2#1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("exec_A steps: got %v, want %v (merged, by first start, attempts by number)", got, want)
	}
	if got, want := layout(b), []string{"exec_B/s1#1", "exec_B/s1#2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("exec_B steps: got %v, want %v (stamped with their ids)", got, want)
	}
	if a.Steps[0].Tool != "send" {
		t.Errorf("merged step tool: got %q, want send", a.Steps[0].Tool)
	}

	ids := func(es []Effect) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	if got, want := ids(a.Effects), []string{"e1", "e3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("exec_A effects: got %v, want %v", got, want)
	}
	if got, want := ids(b.Effects), []string{"e2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("exec_B effects: got %v, want %v", got, want)
	}

	peers := func(r Run) []string {
		var out []string
		for _, p := range r.Peers {
			out = append(out, p.ExecutionID+"/"+p.StepID+"#"+string(rune('0'+p.Number)))
		}
		return out
	}
	if got, want := peers(a), []string{"exec_B/s1#1", "exec_B/s1#2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("exec_A peers: got %v, want %v", got, want)
	}
	if got, want := peers(b), []string{"exec_A/s2#1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("exec_B peers: got %v, want %v", got, want)
	}

	wantFed := map[string]bool{"mail-api": true, "crm": true}
	for _, r := range runs {
		if !reflect.DeepEqual(r.FedProviders, wantFed) {
			t.Errorf("%s fed providers: got %v, want %v", r.Execution.ID, r.FedProviders, wantFed)
		}
	}
}

func TestWorldRunsDoesNotMutateTheWorld(t *testing.T) {
	w := sampleWorld()
	w.Runs()
	if !reflect.DeepEqual(w, sampleWorld()) {
		t.Errorf("got a changed world after Runs, want it untouched")
	}
}

func TestAudit(t *testing.T) {
	got := Audit(sampleWorld(), Config{})
	var summary []string
	for _, f := range got {
		summary = append(summary, string(f.Rule)+" "+f.ExecutionID+" "+f.StepID)
	}
	// ik_shared is sent by exec_A's s2 and exec_B's s1: each execution sees
	// the collision, and the key shared across executions, from its side. e4
	// names an execution that does not exist. exec_A's s1 timed out and its
	// retry was deduplicated: clean.
	want := []string{
		"key_collision exec_A s2",
		"key_collision exec_B s1",
		"key_shared_across_executions exec_A s2",
		"key_shared_across_executions exec_B s1",
		"orphan_effect exec_Z s9",
	}
	if !reflect.DeepEqual(summary, want) {
		t.Errorf("got %v, want %v", summary, want)
	}
}

func TestAuditOrphans(t *testing.T) {
	base := World{
		Executions: []Execution{{ID: "exec_A", Status: StatusCompleted}, {ID: "exec_B", Status: StatusCompleted}},
		Steps: []Step{
			{ExecutionID: "exec_A", ID: "step-4", Tool: "send", Effect: EffectWrite, Attempts: []Attempt{
				{Number: 1, StartedAt: at(0), EndedAt: at(1), Outcome: OutcomeOK}}},
			{ExecutionID: "exec_B", ID: "step-1", Tool: "send", Effect: EffectWrite, Attempts: []Attempt{
				{Number: 1, IdempotencyKey: "ik_B", StartedAt: at(0), EndedAt: at(1), Outcome: OutcomeOK}}},
		},
	}
	tests := []struct {
		name   string
		effect Effect
		orphan bool
	}{
		{"names no execution and carries an unknown key", Effect{Provider: "mail-api", ID: "m", IdempotencyKey: "ik_nobody"}, true},
		{"names a step that does not exist", Effect{Provider: "mail-api", ID: "m", ExecutionID: "exec_A", StepID: "step-9"}, true},
		{"names an execution that does not exist", Effect{Provider: "mail-api", ID: "m", ExecutionID: "exec_Z", StepID: "step-4"}, true},
		{"names its execution and step", Effect{Provider: "mail-api", ID: "m", ExecutionID: "exec_A", StepID: "step-4"}, false},
		{"names the wrong execution but carries another execution's key", Effect{Provider: "mail-api", ID: "m", IdempotencyKey: "ik_B", ExecutionID: "exec_A", StepID: "step-9"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := base
			w.Effects = []Effect{tt.effect}
			var orphans []Finding
			for _, f := range Audit(w, Config{}) {
				if f.Rule == RuleOrphanEffect {
					orphans = append(orphans, f)
				}
			}
			if got := len(orphans) == 1; got != tt.orphan {
				t.Errorf("orphan: got %v, want %v (findings %+v)", got, tt.orphan, orphans)
			}
			state := w.EffectStates()[tt.effect.Ref()]
			if got := state == MatchOrphan; got != tt.orphan {
				t.Errorf("state: got %q, want orphan=%v", state, tt.orphan)
			}
		})
	}
}

func TestAuditDesignExampleAsAWorld(t *testing.T) {
	r := designExample()
	w := World{Executions: []Execution{r.Execution}, Steps: r.Steps, Effects: r.Effects}
	if got := Audit(w, Config{}); len(got) != 0 {
		t.Fatalf("got %+v, want no findings", got)
	}
	w.Effects = append(w.Effects, Effect{Provider: "mail-api", ID: "msg_6a0799", IdempotencyKey: "ik_a94a0b1d", At: at(21.35)})
	got := Audit(w, Config{})
	if len(got) != 1 || got[0].Rule != RuleDuplicateEffect || CriticalCount(got) != 1 {
		t.Errorf("got %+v, want one critical duplicate_effect", got)
	}
}

func TestWorldEffectStates(t *testing.T) {
	got := sampleWorld().EffectStates()
	want := map[EffectRef]MatchState{
		{"mail-api", "e1"}: MatchMatched,
		{"mail-api", "e2"}: MatchMatched,
		{"crm", "e3"}:      MatchMatched,
		{"crm", "e4"}:      MatchOrphan,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}

	// An effect with the key exec_A's s2 and exec_B's s1 share belongs to
	// both, so it makes duplicates of each step's other effect.
	w := sampleWorld()
	w.Effects = append(w.Effects, Effect{Provider: "mail-api", ID: "e5", IdempotencyKey: "ik_shared", At: at(3.5)})
	got = w.EffectStates()
	for _, ref := range []EffectRef{{"mail-api", "e2"}, {"crm", "e3"}, {"mail-api", "e5"}} {
		if got[ref] != MatchDuplicate {
			t.Errorf("%v: got %q, want %q", ref, got[ref], MatchDuplicate)
		}
	}
	if got[EffectRef{"mail-api", "e1"}] != MatchMatched {
		t.Errorf("e1: got %q, want %q", got[EffectRef{"mail-api", "e1"}], MatchMatched)
	}
}

// TestAttemptIndexAgreesWithEffectMatchesAttempt guards the shortcut the
// world audit and the writer's orphan recheck take against the rule it
// stands for.
func TestAttemptIndexAgreesWithEffectMatchesAttempt(t *testing.T) {
	w := sampleWorld()
	w.Effects = append(w.Effects,
		Effect{Provider: "x", ID: "1", IdempotencyKey: "ik_B9", ExecutionID: "exec_A", StepID: "s2"},
		Effect{Provider: "x", ID: "2", ExecutionID: "exec_B", StepID: "s2"},
		Effect{Provider: "x", ID: "3"},
	)
	// Keys scoped by provider: exec_B sends ik_shared to crm only.
	w.Steps[2].Attempts[0].Provider, w.Steps[2].Attempts[1].Provider = "crm", "crm"
	w.Effects = append(w.Effects,
		Effect{Provider: "crm", ID: "4", IdempotencyKey: "ik_shared"},
		Effect{Provider: "payments", ID: "5", IdempotencyKey: "ik_shared"},
		Effect{Provider: "payments", ID: "6", IdempotencyKey: "ik_A1"},
		Effect{Provider: "payments", ID: "7", IdempotencyKey: "ik_nobody"},
	)
	runs := w.Runs()
	idx := IndexAttempts(runAttempts(runs))
	for _, e := range w.Effects {
		want := e.TraceID != ""
		for _, r := range runs {
			for _, s := range r.Steps {
				for _, a := range s.Attempts {
					want = want || EffectMatchesAttempt(e, a)
				}
			}
		}
		if got := idx.Claims(e); got != want {
			t.Errorf("%v: got %v, want %v", e.Ref(), got, want)
		}
	}
}

// TestWorldRunsGivesAnOwnedEffectToItsOwner: an effect naming the execution
// that sent its key reaches the other executions that sent it too (their key
// page), but only its owner's step counts it.
func TestWorldRunsGivesAnOwnedEffectToItsOwner(t *testing.T) {
	w := sampleWorld()
	w.Effects = append(w.Effects, Effect{Provider: "mail-api", ID: "e5", IdempotencyKey: "ik_shared", ExecutionID: "exec_B", StepID: "s1", At: at(3.5)})
	for _, r := range w.Runs() {
		inEffects := false
		for _, e := range r.Effects {
			inEffects = inEffects || e.ID == "e5"
		}
		var inSteps []string
		for stepID, es := range r.StepEffects() {
			for _, e := range es {
				if e.ID == "e5" {
					inSteps = append(inSteps, stepID)
				}
			}
		}
		wantSteps := map[string][]string{"exec_B": {"s1"}}[r.Execution.ID]
		if !inEffects || !reflect.DeepEqual(inSteps, wantSteps) {
			t.Errorf("%s: e5 in effects %v, in steps %v; want true, %v", r.Execution.ID, inEffects, inSteps, wantSteps)
		}
	}
	// exec_B's s1 now has e2 and e5; exec_A's s2 only e3.
	got := w.EffectStates()
	for ref, want := range map[EffectRef]MatchState{{"mail-api", "e2"}: MatchDuplicate, {"mail-api", "e5"}: MatchDuplicate, {"crm", "e3"}: MatchMatched} {
		if got[ref] != want {
			t.Errorf("%v: got %q, want %q", ref, got[ref], want)
		}
	}
}

// TestFoldExecutionNamePrecedence: the best-ranked name wins whatever the
// order, and between names of one rank the root's (the event with a status)
// beats a sub-agent's name-only event.
func TestFoldExecutionNamePrecedence(t *testing.T) {
	root := Event{ID: "root", Type: EventExecution, Execution: &Execution{ID: "x", Name: "orchestrator", NameSource: "gen_ai.agent.name",
		Status: StatusCompleted, StartedAt: at(0), EndedAt: at(9)}}
	sub := Event{ID: "sub", Type: EventExecution, Execution: &Execution{ID: "x", Name: "researcher", NameSource: "gen_ai.agent.name"}}
	span := Event{ID: "span", Type: EventExecution, Execution: &Execution{ID: "x", Name: "POST /api/chat", NameSource: "span",
		Status: StatusRunning, StartedAt: at(0)}}
	fn := Event{ID: "fn", Type: EventExecution, Execution: &Execution{ID: "x", Name: "billing-agent", NameSource: "ai.telemetry.functionId"}}
	for _, tt := range []struct {
		events []Event
		want   string
	}{
		{[]Event{root, sub}, "orchestrator"},
		{[]Event{sub, root}, "orchestrator"},
		{[]Event{span, fn}, "billing-agent"},
		{[]Event{fn, span}, "billing-agent"},
		{[]Event{span, fn, sub}, "researcher"},
	} {
		if got := FoldExecution(slices.Clone(tt.events)).Name; got != tt.want {
			t.Errorf("FoldExecution(%d events): got name %q, want %q", len(tt.events), got, tt.want)
		}
	}
}

// TestFoldAttemptClassBeatsUnknown: an attempt's class is the first one
// its events name in fold order, unknown only when none does: whichever of
// an MCP client's span (unknown) and the proxy's event (write) ends first.
func TestFoldAttemptClassBeatsUnknown(t *testing.T) {
	attempt := func(id string, end float64, class EffectClass) Event {
		return Event{ID: id, Type: EventAttempt, Attempt: &Attempt{ExecutionID: "x", StepID: "s", TraceID: "t", SpanID: "p",
			Effect: class, StartedAt: at(0), EndedAt: at(end), Outcome: OutcomeTimeout}}
	}
	span, proxy, other := attempt("otlp:t:p", 2, EffectUnknown), attempt("mcp:p", 3, EffectWrite), attempt("z", 4, EffectRead)
	for _, tt := range []struct {
		events []Event
		want   EffectClass
	}{
		{[]Event{span, proxy}, EffectWrite},
		{[]Event{proxy, span}, EffectWrite},
		{[]Event{span}, EffectUnknown},
		{[]Event{other, span, proxy}, EffectWrite}, // the first class in fold order
		{[]Event{attempt("a", 1, ""), span}, EffectUnknown},
	} {
		if got := FoldAttempt(slices.Clone(tt.events)).Effect; got != tt.want {
			t.Errorf("FoldAttempt(%d events): got class %q, want %q", len(tt.events), got, tt.want)
		}
	}
}

// strayWorld is an agent whose HTTP requests left its trace (LangGraph
// without a root span of the program's own): exec_1's tool step sent two
// emails from lone HTTP root spans of traces t2 and t3.
func strayWorld(to string) World {
	args := args(`{"to":"` + to + `","subject":"Your June invoice"}`)
	s := step("s1", "send_invoice_email", EffectUnknown, try(1, 0, 1, OutcomeTimeout, args), try(2, 2, 3, OutcomeOK, args))
	return World{
		Executions: []Execution{{ID: "exec_1", Name: "billing-agent", Status: StatusCompleted, StartedAt: at(0)}},
		Steps:      []Step{s},
		Spans: []Span{
			{ExecutionID: "t2", TraceID: "t2", SpanID: "h2", Role: RoleHTTP, Name: "POST", StartedAt: at(0.2)},
			{ExecutionID: "t3", TraceID: "t3", SpanID: "h3", Role: RoleHTTP, Name: "POST", StartedAt: at(2.2)},
		},
		Effects: []Effect{
			{Provider: "mail-api", ID: "m1", Target: "jordan@acme.dev", TraceID: "t2", SpanID: "h2", At: at(0.5), Fingerprint: "mail:aa"},
			{Provider: "mail-api", ID: "m2", Target: "jordan@acme.dev", TraceID: "t3", SpanID: "h3", At: at(2.5), Fingerprint: "mail:aa"},
		},
	}
}

func TestStrayHTTPSpansJoinTheAttemptInFlight(t *testing.T) {
	w := strayWorld("Jordan@acme.dev")
	runs := w.Runs()
	if len(runs) != 1 || runs[0].Execution.ID != "exec_1" {
		t.Fatalf("runs: got %d, want exec_1 alone (a lone HTTP root span is no execution)", len(runs))
	}
	for _, e := range runs[0].Effects {
		if e.JoinedExecutionID != "exec_1" || !strings.HasPrefix(e.Inferred, "inferred: ") {
			t.Errorf("effect %s: joined %q, inferred %q; want exec_1 with a reason", e.ID, e.JoinedExecutionID, e.Inferred)
		}
	}
	if got := runs[0].StepEffects()["s1"]; len(got) != 2 {
		t.Errorf("s1 effects: got %d, want both emails", len(got))
	}
	fs := Audit(w, Config{})
	if got := findingsOf(fs); !slices.Contains(got, "critical duplicate_effect exec_1 s1") || slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "orphan") }) {
		t.Errorf("findings: got %v, want a critical duplicate_effect of s1 and no orphan", got)
	}
	if st := w.EffectStates(); st[EffectRef{"mail-api", "m1"}] != MatchDuplicate || st[EffectRef{"mail-api", "m2"}] != MatchDuplicate {
		t.Errorf("states: got %v, want both duplicates", st)
	}
	checkPathsAgree(t, w, fs)
}

func TestStrayHTTPSpanWithNoMatchingAttemptIsAnOrphan(t *testing.T) {
	w := strayWorld("someone@else.dev")
	fs := Audit(w, Config{})
	if got := findingsOf(fs); !reflect.DeepEqual(got, []string{"warning orphan_effect  ", "warning orphan_effect  ", "warning repeated_effect  ", "warning unkeyed_retry exec_1 s1"}) {
		t.Errorf("findings: got %v, want two orphans (nothing in flight names their recipient), the second repeating the first", got)
	}
	if runs := w.Runs(); len(runs) != 1 {
		t.Errorf("runs: got %d, want exec_1 alone", len(runs))
	}
}
