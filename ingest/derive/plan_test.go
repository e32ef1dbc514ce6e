package derive

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// The plans are pure functions of what their pass loaded: these tests
// build them from events and loaded values alone, without a database.

var planBase = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func attemptEvent(id string, a trace.Attempt) trace.Event {
	return trace.Event{ID: id, Type: trace.EventAttempt, Attempt: &a}
}

func effectEvent(id string, f trace.Effect) trace.Event {
	return trace.Event{ID: id, Type: trace.EventEffect, Effect: &f}
}

func spanEvent(id string, sp trace.Span) trace.Event {
	return trace.Event{ID: id, Type: trace.EventSpan, Span: &sp}
}

func executionEvent(id string, x trace.Execution) trace.Event {
	return trace.Event{ID: id, Type: trace.EventExecution, Execution: &x}
}

// byEntity groups events as the writer's commit does (touched).
func byEntity(events ...trace.Event) (touched map[string][]trace.Event, entities []string) {
	touched = map[string][]trace.Event{}
	for _, ev := range events {
		touched[ev.Entity()] = append(touched[ev.Entity()], ev)
	}
	return touched, slices.Sorted(maps.Keys(touched))
}

func TestPlanNumbers(t *testing.T) {
	step := store.StepRef{ExecutionID: "x1", StepID: "send"}
	span := func(id, spanID string, at int) trace.Event {
		return attemptEvent(id, trace.Attempt{ExecutionID: "x1", StepID: "send", TraceID: "t1", SpanID: spanID,
			StartedAt: planBase.Add(time.Duration(at) * time.Second)})
	}
	sent := func(id string, n int) trace.Event {
		return attemptEvent(id, trace.Attempt{ExecutionID: "x1", StepID: "send", Number: n})
	}
	for _, tc := range []struct {
		name   string
		events []trace.Event
		stored bool // the step has attempts stored already
		want   map[string]int
	}{
		{name: "spans by start, around the numbers sent",
			events: []trace.Event{span("e1", "s-late", 9), sent("e2", 1), span("e3", "s-early", 1)},
			want:   map[string]int{"s-early": 2, "s-late": 3, "1": 1}},
		{name: "numbers sent alone", events: []trace.Event{sent("e1", 2), sent("e2", 1)},
			want: map[string]int{"1": 1, "2": 2}},
		{name: "a step stored already is left to the fold", stored: true,
			events: []trace.Event{span("e1", "s1", 1)}, want: map[string]int{}},
		{name: "a span reported twice is one attempt", events: []trace.Event{span("e1", "s1", 1), span("e2", "s1", 2)},
			want: map[string]int{"s1": 1}},
		{name: "an attempt told apart by nothing leaves the step to PutAttempt",
			events: []trace.Event{span("e1", "s1", 1), attemptEvent("e2", trace.Attempt{ExecutionID: "x1", StepID: "send"})},
			want:   map[string]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			touched, _ := byEntity(tc.events...)
			bySteps := newAttemptSteps(touched)
			if len(bySteps) != 1 || len(bySteps[step]) == 0 {
				t.Fatalf("steps: got %v, want the one step %v", bySteps, step)
			}
			numbered := planNumbers(bySteps, touched, map[store.StepRef]bool{step: tc.stored})
			got := map[string]int{}
			for entity, n := range numbered {
				if n.Derived != (n.Attempt.SpanID != "") {
					t.Errorf("%q: got derived %v, want it derived exactly when identified by its span", entity, n.Derived)
				}
				name := n.Attempt.SpanID
				if name == "" {
					name = fmt.Sprint(n.Attempt.Number)
				}
				got[name] = n.Attempt.Number
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("numbers: got %v, want %v", got, tc.want)
			}
		})
	}
}

// rowKind names what a folded row stores, and the executions it creates.
func rowKind(r foldedRow) string {
	kind := "none"
	switch {
	case r.execution != nil:
		kind = "execution " + r.execution.ID
	case r.attempt != nil:
		kind = fmt.Sprintf("attempt %s/%s/%d", r.attempt.ExecutionID, r.attempt.StepID, r.attempt.Number)
	case r.span != nil:
		kind = "span " + r.span.TraceID + "/" + r.span.SpanID
	case r.effect != nil:
		kind = "effect " + r.effect.Provider + "/" + r.effect.ID
	}
	return fmt.Sprintf("%s ensure%v", kind, r.ensure)
}

func TestPlanFold(t *testing.T) {
	numberedEvent := attemptEvent("a-span", trace.Attempt{ExecutionID: "x1", StepID: "pay", TraceID: "t9", SpanID: "s9"})
	for _, tc := range []struct {
		name     string
		events   []trace.Event
		numbered bool // the number pass stored numberedEvent
		known    map[string]bool
		check    func(t *testing.T, p *foldPlan)
	}{
		{name: "rows in entity order, each after the executions it creates",
			events: []trace.Event{
				effectEvent("f1", trace.Effect{Provider: "stripe", ID: "ch_1", ExecutionID: "x2", IdempotencyKey: "k1"}),
				executionEvent("x", trace.Execution{ID: "x1"}),
				attemptEvent("a1", trace.Attempt{ExecutionID: "x1", StepID: "pay", Number: 1, IdempotencyKey: "k1", TraceID: "t1",
					StartedAt: planBase}),
				spanEvent("s1", trace.Span{ExecutionID: "x1", TraceID: "t1", SpanID: "s1"}),
			},
			check: func(t *testing.T, p *foldPlan) {
				var got []string
				for _, r := range p.rows {
					got = append(got, rowKind(r))
				}
				want := []string{"attempt x1/pay/1 ensure[x1]", "effect stripe/ch_1 ensure[x2 x2]", "span t1/s1 ensure[x1]",
					"execution x1 ensure[]"}
				if !slices.Equal(got, want) {
					t.Errorf("rows: got %q, want %q", got, want)
				}
				if got, want := setList(p.executions), []string{"x1", "x2"}; !slices.Equal(got, want) {
					t.Errorf("executions: got %v, want %v", got, want)
				}
				if got, want := setList(p.keys), []string{"k1"}; !slices.Equal(got, want) {
					t.Errorf("keys: got %v, want %v", got, want)
				}
				if got, want := p.stray.Traces, []string{"t1", "t1", "x1"}; !slices.Equal(got, want) {
					t.Errorf("stray traces: got %v, want %v (the attempt's, the span's, the execution's)", got, want)
				}
				if got, want := p.stray.Starts, []time.Time{planBase}; !slices.Equal(got, want) {
					t.Errorf("stray starts: got %v, want %v", got, want)
				}
				if got, want := setList(p.renamedTraces), []string{"t1"}; !slices.Equal(got, want) {
					t.Errorf("renamed traces: got %v, want %v", got, want)
				}
				if !p.changedSteps["x1"]["pay"] || len(p.steps) != 1 {
					t.Errorf("changed steps: got %v and %v, want x1/pay", p.changedSteps, p.steps)
				}
			}},
		{name: "providers not known, each once, in the order met",
			events: []trace.Event{
				effectEvent("f1", trace.Effect{Provider: "stripe", ID: "b"}),
				effectEvent("f2", trace.Effect{Provider: "stripe", ID: "a"}),
				effectEvent("f3", trace.Effect{Provider: "mail", ID: "c"}),
				effectEvent("f4", trace.Effect{Provider: "known", ID: "d"}),
			},
			known: map[string]bool{"known": true},
			check: func(t *testing.T, p *foldPlan) {
				if got, want := p.providers, []string{"mail", "stripe"}; !slices.Equal(got, want) {
					t.Errorf("providers: got %v, want %v", got, want)
				}
				if got := len(p.effectRefs); got != 4 {
					t.Errorf("effect refs: got %d, want 4", got)
				}
			}},
		{name: "effects by trace: naming their execution or not, lone HTTP spans",
			events: []trace.Event{
				effectEvent("f1", trace.Effect{Provider: "p", ID: "1", TraceID: "t-named", ExecutionID: "x1"}),
				effectEvent("f2", trace.Effect{Provider: "p", ID: "2", TraceID: "t-unnamed"}),
				spanEvent("s1", trace.Span{ExecutionID: "t-lone", TraceID: "t-lone", SpanID: "h", Role: trace.RoleHTTP}),
			},
			known: map[string]bool{"p": true},
			check: func(t *testing.T, p *foldPlan) {
				for name, got := range map[string][]string{
					"traces": setList(p.traces), "naming": setList(p.namingEffects), "unnamed": setList(p.unnamedTraces),
					"effect traces": p.stray.EffectTraces, "lone": p.stray.LoneTraces, "renamed": setList(p.renamedTraces),
				} {
					want := map[string][]string{"traces": {"t-named", "t-unnamed"}, "naming": {"t-named"}, "unnamed": {"t-unnamed"},
						"effect traces": {"t-named", "t-unnamed"}, "lone": {"t-lone"}, "renamed": {}}[name]
					if !slices.Equal(got, want) && len(got)+len(want) > 0 {
						t.Errorf("%s: got %v, want %v", name, got, want)
					}
				}
				if !p.ch.spans[[2]string{"t-lone", "h"}] || !p.ch.effects[trace.EffectRef{Provider: "p", ID: "2"}] {
					t.Errorf("changes: got spans %v effects %v, want the span and both effects", p.ch.spans, p.ch.effects)
				}
			}},
		{name: "an attempt the number pass stored is noted, not stored again", numbered: true,
			events: []trace.Event{numberedEvent},
			check: func(t *testing.T, p *foldPlan) {
				if len(p.rows) != 1 || rowKind(p.rows[0]) != "none ensure[]" {
					t.Errorf("rows: got %d (%v), want one that stores nothing", len(p.rows), p.rows)
				}
				if !p.executions["x1"] || !p.changedSteps["x1"]["pay"] || !slices.Equal(p.stray.Traces, []string{"t9"}) {
					t.Errorf("notes: got executions %v, steps %v, stray traces %v, want x1, pay, t9", p.executions, p.changedSteps,
						p.stray.Traces)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			touched, entities := byEntity(tc.events...)
			numbered := map[string]store.NumberedAttempt{}
			if tc.numbered {
				a := *numberedEvent.Attempt
				a.Number = 1
				numbered[numberedEvent.Entity()] = store.NumberedAttempt{Attempt: a, Derived: true}
			}
			tc.check(t, planFold(entities, touched, numbered, tc.known, false))
		})
	}
}

func TestPlanFoldKeepsExecutionsForTheCache(t *testing.T) {
	touched, entities := byEntity(executionEvent("x", trace.Execution{ID: "x1"}), attemptEvent("a", trace.Attempt{ExecutionID: "x1", StepID: "s", Number: 1}))
	for _, withCache := range []bool{false, true} {
		p := planFold(entities, touched, nil, nil, withCache)
		want := 0
		if withCache {
			want = 1
		}
		if len(p.cached) != want {
			t.Errorf("with cache %v: got %d executions kept, want %d", withCache, len(p.cached), want)
		}
	}
}

func TestTracePlaceholders(t *testing.T) {
	unnamed := map[string]bool{"t3": true, "t1": true, "t2": true}
	got := tracePlaceholders(unnamed, map[string][]string{"t2": {"x2"}, "t4": {"x4"}})
	if want := []string{"t1", "t3"}; !slices.Equal(got, want) {
		t.Errorf("placeholders: got %v, want %v", got, want)
	}
}

func TestStrayCandidates(t *testing.T) {
	noted := store.StrayCandidates{Traces: []string{"b", "a", "b"}, EffectTraces: []string{"e", "e"}, LoneTraces: []string{"l"}}
	steps := map[store.StepRef]bool{{ExecutionID: "x", StepID: "s"}: true}
	got := strayCandidates(noted, steps)
	if !slices.Equal(got.Traces, []string{"a", "b"}) || !slices.Equal(got.EffectTraces, []string{"e"}) ||
		!slices.Equal(got.LoneTraces, []string{"l"}) || len(got.Steps) != 1 {
		t.Errorf("candidates: got %+v, want traces [a b], effect traces [e], lone [l], one step", got)
	}
}

func TestEffectOwners(t *testing.T) {
	run := trace.Run{
		Execution: trace.Execution{ID: "x1"},
		Effects: []trace.Effect{
			{Provider: "p", ID: "1", ExecutionID: "x1", IdempotencyKey: "own"},
			{Provider: "p", ID: "2", IdempotencyKey: "other", TraceID: "t1"},
			{Provider: "p", ID: "3", JoinedExecutionID: "x9", TraceID: "t-stray", StrayTrace: true},
		},
		Peers: []trace.Attempt{{ExecutionID: "x2", StepID: "s", IdempotencyKey: "own"}},
	}
	for _, tc := range []struct {
		name       string
		own        map[string]bool
		wantOwners []string
		wantKeys   []string
	}{
		{name: "keys of the run's own attempts are its peers'", own: map[string]bool{"own": true},
			wantOwners: []string{"x1", "x2", "x9"}, wantKeys: []string{"other"}},
		{name: "keys not known to be its own are looked up", wantOwners: []string{"x1", "x9"}, wantKeys: []string{"other", "own"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := effectOwners([]trace.Run{run}, func(string) map[string]bool { return tc.own })
			if got := setList(q.owners); !slices.Equal(got, tc.wantOwners) {
				t.Errorf("owners: got %v, want %v", got, tc.wantOwners)
			}
			if got := setList(q.keys); !slices.Equal(got, tc.wantKeys) {
				t.Errorf("keys: got %v, want %v", got, tc.wantKeys)
			}
			if got := setList(q.traces); !slices.Equal(got, []string{"t1"}) {
				t.Errorf("traces: got %v, want [t1] (a stray trace joins no owner)", got)
			}
			if q.soleOwner(1) {
				t.Error("sole owner: got true, want false: others own its effects")
			}
		})
	}
	alone := effectOwners([]trace.Run{{Execution: trace.Execution{ID: "x1"}, Effects: run.Effects[:1]}},
		func(string) map[string]bool { return nil })
	if !alone.soleOwner(1) || alone.soleOwner(2) {
		t.Errorf("sole owner of its own effect: got %v for one run, %v for two, want true, false", alone.soleOwner(1), alone.soleOwner(2))
	}
}

func TestPlanSave(t *testing.T) {
	f1 := trace.Effect{Provider: "p", ID: "1", IdempotencyKey: "k", At: planBase}
	f2 := trace.Effect{Provider: "p", ID: "2", At: planBase.Add(time.Second)}
	f3 := trace.Effect{Provider: "p", ID: "3", At: planBase.Add(2 * time.Second)}
	run := trace.Run{Execution: trace.Execution{ID: "x1"}, Effects: []trace.Effect{f1, f2, f3}}
	states := map[trace.EffectRef]trace.MatchState{f1.Ref(): trace.MatchDuplicate, f2.Ref(): trace.MatchMatched}
	an := trace.RunAnalysis{Findings: []trace.Finding{{Rule: "r", ExecutionID: "x1"}}}
	cache := newRunCache()
	cache.noteStored([]trace.Effect{f1}, map[trace.EffectRef]trace.MatchState{f1.Ref(): trace.MatchDuplicate})
	for _, tc := range []struct {
		name        string
		entry       *cachedRun
		wantStates  []string
		wantEffects []string // the run's effects whose search terms are stored
	}{
		{name: "a run read whole writes every state it has", wantStates: []string{"p/1", "p/2"},
			wantEffects: []string{"p/1", "p/2", "p/3"}},
		{name: "a cached run skips the states the writer stored", entry: &cachedRun{},
			wantStates: []string{"p/2"}, wantEffects: []string{"p/1", "p/2", "p/3"}},
		{name: "a run patched from one saved indexes its earliest, new and changed effects",
			entry:      &cachedRun{patchedSaved: true, added: map[trace.EffectRef]bool{f3.Ref(): true}},
			wantStates: []string{"p/2"}, wantEffects: []string{"p/1", "p/3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planSave(run, an, states, tc.entry, cache, map[string]bool{"s": true}, nil)
			var gotStates, gotEffects []string
			for ref := range plan.States {
				gotStates = append(gotStates, ref.Provider+"/"+ref.ID)
			}
			slices.Sort(gotStates)
			for _, f := range plan.Run.Effects {
				gotEffects = append(gotEffects, f.Provider+"/"+f.ID)
			}
			if !slices.Equal(gotStates, tc.wantStates) {
				t.Errorf("states: got %v, want %v", gotStates, tc.wantStates)
			}
			if !slices.Equal(gotEffects, tc.wantEffects) {
				t.Errorf("effects: got %v, want %v", gotEffects, tc.wantEffects)
			}
			if len(plan.stored) != len(plan.States) || len(plan.Findings) != 1 || !plan.Steps["s"] {
				t.Errorf("plan: got %d stored, %d findings, steps %v, want one stored a state, the finding, step s",
					len(plan.stored), len(plan.Findings), plan.Steps)
			}
		})
	}
}

func TestUnjudgedEffects(t *testing.T) {
	runs := []trace.Run{{Effects: []trace.Effect{{Provider: "p", ID: "1"}, {Provider: "p", ID: "2"}}}}
	got := unjudgedEffects(runs, map[trace.EffectRef]trace.MatchState{{Provider: "p", ID: "1"}: trace.MatchMatched})
	if want := []trace.EffectRef{{Provider: "p", ID: "2"}}; !slices.Equal(got, want) {
		t.Errorf("unjudged: got %v, want %v", got, want)
	}
}

func TestNewCritical(t *testing.T) {
	old := trace.Finding{Rule: "a", Severity: trace.SeverityCritical, ExecutionID: "x"}
	fresh := trace.Finding{Rule: "b", Severity: trace.SeverityCritical, ExecutionID: "x"}
	warning := trace.Finding{Rule: "c", Severity: "warning", ExecutionID: "x"}
	got := newCritical([]trace.Finding{old}, []trace.Finding{old, fresh, warning})
	if len(got) != 1 || got[0].Rule != "b" {
		t.Errorf("new critical: got %v, want only rule b", got)
	}
}
