package trace

import (
	"bytes"
	"maps"
	"slices"
)

// RunAuditor analyses one execution again and again as it grows, and gives
// what AnalyseRun gives at a cost that follows what changed rather than
// the run's size: it keeps the last run it saw and what the audit derived
// per step and per key, finds the steps, effects and keys that differ in
// the next run, and recomputes the findings those can reach. Anything it
// cannot bound (the run's spans, its crash gaps, the fed providers or the
// thresholds changed) makes it audit the whole run, as AnalyseRun does.
//
// The runs it is given must not be changed afterwards: the next may share
// their slices (a part that did not change is the same slice, which is how
// it is found unchanged cheaply), but not write into them. The States of
// what it returns hold until the next call. A RunAuditor is not safe for
// concurrent use; its zero value is ready.
type RunAuditor struct {
	cfg          Config
	run          Run
	ready        bool
	crash        []Gap
	effectStep   map[EffectRef]string // the step each effect belongs to
	stepEffects  map[string][]Effect
	stepFindings map[string][]Finding // the step rules' findings, by step
	keyFindings  map[string][]Finding // key_collision and key_shared_across_executions, by key
	states       map[EffectRef]MatchState
	unattributed []Effect
	effects      int // distinct effects
}

// Analyse returns AnalyseRun(r, cfg), recomputing only what changed since
// the last run it analysed.
func (ra *RunAuditor) Analyse(r Run, cfg Config) RunAnalysis {
	var index *effectIndex
	ix := func() *effectIndex {
		if index == nil {
			i := newEffectIndex(r)
			index = &i
		}
		return index
	}
	crash := crashGaps(Gaps(r, cfg.withDefaults()))
	if !ra.ready || ra.cfg != cfg || ra.run.Execution.ID != r.Execution.ID || len(r.Spans) > 0 || len(ra.run.Spans) > 0 ||
		!maps.Equal(ra.run.FedProviders, r.FedProviders) || !slices.Equal(ra.crash, crash) {
		return ra.full(r, cfg, *ix(), crash)
	}

	// What differs: steps, effects, peers, and the keys they carry.
	dirtySteps := map[string]bool{}
	dirtyKeys := map[string]bool{}
	addKeys := func(as []Attempt) {
		for _, a := range as {
			if a.IdempotencyKey != "" {
				dirtyKeys[a.IdempotencyKey] = true
			}
		}
	}
	before := make(map[string]*Step, len(ra.run.Steps))
	for i := range ra.run.Steps {
		before[ra.run.Steps[i].ID] = &ra.run.Steps[i]
	}
	for i := range r.Steps {
		s := &r.Steps[i]
		old, ok := before[s.ID]
		if ok && sameStep(*old, *s) {
			delete(before, s.ID)
			continue
		}
		dirtySteps[s.ID] = true
		addKeys(s.Attempts)
		if ok {
			addKeys(old.Attempts)
			delete(before, s.ID)
		}
	}
	for id, old := range before { // steps gone
		dirtySteps[id] = true
		addKeys(old.Attempts)
	}
	dirtyEffects := map[EffectRef]bool{}
	var oldEffects map[EffectRef]Effect
	if !sameSlice(ra.run.Effects, r.Effects) {
		oldEffects = make(map[EffectRef]Effect, len(ra.run.Effects))
		for _, e := range ra.run.Effects {
			oldEffects[e.Ref()] = e
		}
	}
	for _, e := range r.Effects {
		if oldEffects == nil {
			break
		}
		old, ok := oldEffects[e.Ref()]
		if !ok || !sameEffect(old, e) {
			dirtyEffects[e.Ref()] = true
			if e.IdempotencyKey != "" {
				dirtyKeys[e.IdempotencyKey] = true
			}
			if ok && old.IdempotencyKey != "" {
				dirtyKeys[old.IdempotencyKey] = true
			}
		}
		delete(oldEffects, e.Ref())
	}
	for ref, old := range oldEffects { // effects gone
		dirtyEffects[ref] = true
		if old.IdempotencyKey != "" {
			dirtyKeys[old.IdempotencyKey] = true
		}
	}
	if !sameSlice(ra.run.Peers, r.Peers) && !slices.EqualFunc(ra.run.Peers, r.Peers, sameAttempt) {
		addKeys(ra.run.Peers)
		addKeys(r.Peers)
	}

	// The step an effect belongs to depends on the effect, on the steps
	// sending its key and on the peers owning it, and on whether the step
	// it names exists: only those effects are matched again.
	// What ra holds is brought up to date in place from here on.
	effectStep, stepEffects := ra.effectStep, ra.stepEffects
	changedLists := map[string]bool{}
	for ref := range dirtyEffects {
		if old, had := effectStep[ref]; had {
			changedLists[old] = true // an effect changed or gone
			delete(effectStep, ref)
		}
	}
	for _, e := range r.Effects {
		ref := e.Ref()
		if !dirtyEffects[ref] && !dirtyKeys[e.IdempotencyKey] && !dirtySteps[e.StepID] {
			continue
		}
		old, had := effectStep[ref]
		step, ok := ix().step(e)
		switch {
		case ok && (!had || step != old):
			effectStep[ref] = step
			changedLists[step] = true
			if had {
				changedLists[old] = true
			}
		case !ok && had:
			delete(effectStep, ref)
			changedLists[old] = true
		case ok && dirtyEffects[ref]:
			effectStep[ref] = step
			changedLists[step] = true
		}
	}
	for id := range changedLists {
		for _, e := range stepEffects[id] {
			delete(ra.states, e.Ref())
		}
		delete(stepEffects, id)
	}
	if len(changedLists) > 0 {
		seen := map[EffectRef]bool{}
		for _, e := range r.Effects {
			step, ok := effectStep[e.Ref()]
			if !ok || !changedLists[step] || seen[e.Ref()] {
				continue
			}
			seen[e.Ref()] = true
			stepEffects[step] = append(stepEffects[step], e)
		}
		for id := range changedLists {
			es := stepEffects[id]
			sortEffects(es)
			dirtySteps[id] = true
			for _, e := range es {
				ra.states[e.Ref()] = listState(es)
			}
		}
	}
	unattributed := unattributedOf(r, effectStep)
	for _, e := range ra.unattributed {
		if _, mapped := effectStep[e.Ref()]; !mapped {
			delete(ra.states, e.Ref())
		}
	}
	for _, e := range unattributed {
		ra.states[e.Ref()] = MatchOrphan
	}
	if !sameSlice(ra.run.Effects, r.Effects) {
		ra.effects = distinctEffects(r.Effects)
	}

	// Findings: the step rules again for the steps whose attempts or
	// effects changed or whose keys did; the key rules for those keys.
	au := newAuditor(r, cfg, stepEffects)
	au.gaps = crash
	for _, s := range r.Steps {
		if !dirtySteps[s.ID] && slices.ContainsFunc(s.Attempts, func(a Attempt) bool { return dirtyKeys[a.IdempotencyKey] }) {
			dirtySteps[s.ID] = true
		}
	}
	for id := range dirtySteps {
		delete(ra.stepFindings, id) // changed or gone
	}
	for _, s := range r.Steps {
		if dirtySteps[s.ID] {
			if fs := au.stepFindings(s); len(fs) > 0 {
				ra.stepFindings[s.ID] = fs
			}
		}
	}
	if len(dirtyKeys) > 0 {
		for k := range dirtyKeys {
			delete(ra.keyFindings, k)
		}
		for k, fs := range au.keyFindings(dirtyKeys) {
			ra.keyFindings[k] = fs
		}
	}
	ra.run, ra.crash = r, crash
	return ra.result(r, unattributed)
}

// full audits the whole run and keeps what the next call needs.
func (ra *RunAuditor) full(r Run, cfg Config, ix effectIndex, crash []Gap) RunAnalysis {
	stepEffects := ix.stepEffects()
	effectStep := make(map[EffectRef]string, len(r.Effects))
	for step, es := range stepEffects {
		for _, e := range es {
			effectStep[e.Ref()] = step
		}
	}
	au := newAuditor(r, cfg, stepEffects)
	au.gaps = crash
	stepFindings := make(map[string][]Finding, len(r.Steps))
	for _, s := range r.Steps {
		if fs := au.stepFindings(s); len(fs) > 0 {
			stepFindings[s.ID] = fs
		}
	}
	unattributed := ix.unattributed()
	*ra = RunAuditor{cfg: cfg, run: r, ready: true, crash: crash, effectStep: effectStep, stepEffects: stepEffects,
		stepFindings: stepFindings, keyFindings: au.keyFindings(nil), states: effectStates(stepEffects, unattributed),
		effects: distinctEffects(r.Effects)}
	return ra.result(r, unattributed)
}

// result assembles the analysis from what ra holds for r.
func (ra *RunAuditor) result(r Run, unattributed []Effect) RunAnalysis {
	var fs []Finding
	for _, s := range r.Steps {
		fs = append(fs, ra.stepFindings[s.ID]...)
	}
	for _, kfs := range ra.keyFindings {
		fs = append(fs, kfs...)
	}
	for _, e := range unattributed {
		fs = append(fs, unattributedFinding(r.Execution.ID, e))
	}
	// Every finding has its own place in this order (one a step and rule,
	// a key and rule, or an effect), so it does not depend on the order
	// they were gathered in.
	SortFindings(fs)
	ra.unattributed = unattributed
	return RunAnalysis{
		Findings: fs,
		Verdict:  judge(r, fs, ra.stepEffects, unattributed),
		States:   ra.states,
		Counts:   r.countsWith(ra.effects),
	}
}

// listState is the state of each effect of one step's list (effectStates).
func listState(es []Effect) MatchState {
	if len(es) > 1 {
		return MatchDuplicate
	}
	return MatchMatched
}

// unattributedOf is effectIndex.unattributed given each effect's step.
func unattributedOf(r Run, effectStep map[EffectRef]string) []Effect {
	var out []Effect
	seen := map[EffectRef]bool{}
	for _, e := range r.Effects {
		if e.TraceID == "" || seen[e.Ref()] {
			continue
		}
		if _, ok := effectStep[e.Ref()]; !ok {
			seen[e.Ref()] = true
			out = append(out, e)
		}
	}
	sortEffects(out)
	return out
}

func crashGaps(gaps []Gap) []Gap {
	var out []Gap
	for _, g := range gaps {
		if g.Kind == GapCrash {
			out = append(out, g)
		}
	}
	return out
}

func sameStep(a, b Step) bool {
	return a.ExecutionID == b.ExecutionID && a.ID == b.ID && a.Tool == b.Tool && a.Effect == b.Effect && a.Provider == b.Provider &&
		(sameSlice(a.Attempts, b.Attempts) || slices.EqualFunc(a.Attempts, b.Attempts, sameAttempt))
}

func sameAttempt(a, b Attempt) bool {
	return a.ExecutionID == b.ExecutionID && a.StepID == b.StepID && a.Number == b.Number && a.Tool == b.Tool && a.Effect == b.Effect &&
		a.Provider == b.Provider && a.Outcome == b.Outcome && a.Deduplicated == b.Deduplicated && a.IdempotencyKey == b.IdempotencyKey &&
		a.Worker == b.Worker && a.StartedAt == b.StartedAt && a.EndedAt == b.EndedAt && bytes.Equal(a.Args, b.Args) &&
		bytes.Equal(a.Result, b.Result) && a.Error == b.Error && a.TraceID == b.TraceID && a.SpanID == b.SpanID &&
		slices.Equal(a.Conflicts, b.Conflicts)
}

func sameEffect(a, b Effect) bool {
	return a.Provider == b.Provider && a.ID == b.ID && a.IdempotencyKey == b.IdempotencyKey && a.ExecutionID == b.ExecutionID &&
		a.StepID == b.StepID && a.Target == b.Target && a.At == b.At && a.TraceID == b.TraceID && a.SpanID == b.SpanID &&
		slices.Equal(a.Conflicts, b.Conflicts)
}

// sameSlice reports whether a and b are one slice (see RunAuditor).
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
