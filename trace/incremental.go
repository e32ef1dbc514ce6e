package trace

import (
	"bytes"
	"maps"
	"slices"
	"time"
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
	// effectSlots hold the run's effects by ref (the last of a ref in
	// its list), so that the next run's are compared without a map of
	// them built again; pass marks those a comparison has seen.
	effectSlots map[EffectRef]*effectSlot
	pass        uint64
	gapSpans    gapSpans
	counts      Counts // but Effects: the sum of its steps' (stepCounts)
}

// stepCounts is what one step adds to its run's Counts.
func stepCounts(s Step) Counts {
	return Run{Steps: []Step{s}}.countsWith(0)
}

func (c Counts) plus(d Counts) Counts {
	return Counts{Steps: c.Steps + d.Steps, Attempts: c.Attempts + d.Attempts, Retries: c.Retries + d.Retries,
		Dedupes: c.Dedupes + d.Dedupes, Replays: c.Replays + d.Replays, Effects: c.Effects + d.Effects}
}

func (c Counts) minus(d Counts) Counts {
	return c.plus(Counts{Steps: -d.Steps, Attempts: -d.Attempts, Retries: -d.Retries, Dedupes: -d.Dedupes,
		Replays: -d.Replays, Effects: -d.Effects})
}

// gapSpans are a run's attempts with a start as Gaps places them on the
// axis, in its order, kept from one run to the next so that its crash gaps
// are found again without the attempts gathered and sorted again.
type gapSpans []gapSpan

type gapSpan struct {
	start, end time.Time
	worker     string
	finished   bool
}

func spanOf(a Attempt) gapSpan {
	end := a.EndedAt
	if end.Before(a.StartedAt) {
		end = a.StartedAt // as Gaps: no end (zero) or an impossible one is a point
	}
	return gapSpan{a.StartedAt, end, a.Worker, a.Finished()}
}

// newGapSpans places a run's attempts on the axis in start order, steps'
// order among equal starts; an attempt without a start has no place.
func newGapSpans(r Run) gapSpans {
	var out gapSpans
	for _, s := range r.Steps {
		for _, a := range s.Attempts {
			if !a.StartedAt.IsZero() {
				out = append(out, spanOf(a))
			}
		}
	}
	slices.SortStableFunc(out, func(a, b gapSpan) int { return a.start.Compare(b.start) })
	return out
}

// update takes the lost attempts out and puts the gained in where Gaps'
// stable sort puts them. It fails, leaving gs to be built again, when a
// start it moves is shared: among equal starts Gaps keeps step order,
// which positions alone do not tell.
func (gs *gapSpans) update(lost, gained []Attempt) bool {
	find := func(t time.Time) (lo, hi int) {
		lo, _ = slices.BinarySearchFunc(*gs, t, func(sp gapSpan, t time.Time) int { return sp.start.Compare(t) })
		for hi = lo; hi < len(*gs) && (*gs)[hi].start.Equal(t); hi++ {
		}
		return lo, hi
	}
	for _, a := range lost {
		if a.StartedAt.IsZero() {
			continue
		}
		lo, hi := find(a.StartedAt)
		if hi-lo != 1 || (*gs)[lo] != spanOf(a) {
			return false
		}
		*gs = slices.Delete(*gs, lo, hi)
	}
	for _, a := range gained {
		if a.StartedAt.IsZero() {
			continue
		}
		lo, hi := find(a.StartedAt)
		if hi != lo {
			return false
		}
		*gs = slices.Insert(*gs, lo, spanOf(a))
	}
	return true
}

// crashGaps is crashGaps(Gaps(r, cfg)) for the run gs holds the spans of.
func (gs gapSpans) crashGaps(cfg Config) []Gap { return crashGaps(gs.gaps(cfg)) }

type effectSlot struct {
	effect Effect
	pass   uint64
}

// diffEffects marks the effects of es that differ from the last run's, or
// that it lacked or had and es lacks, and their keys, and brings
// effectSlots up to date.
func (ra *RunAuditor) diffEffects(es []Effect, dirtyEffects map[EffectRef]bool, dirtyKeys map[string]bool) {
	ra.pass++
	dirty := func(ref EffectRef, key string) {
		dirtyEffects[ref] = true
		if key != "" {
			dirtyKeys[key] = true
		}
	}
	var added []Effect
	seen := 0
	for _, e := range es {
		ref := e.Ref()
		slot, ok := ra.effectSlots[ref]
		switch {
		case !ok:
			dirty(ref, e.IdempotencyKey)
			added = append(added, e)
		case slot.pass == ra.pass: // a ref twice in the list
			dirty(ref, e.IdempotencyKey)
			slot.effect = e
		default:
			seen++
			slot.pass = ra.pass
			if !sameEffect(slot.effect, e) {
				dirty(ref, e.IdempotencyKey)
				dirty(ref, slot.effect.IdempotencyKey)
				slot.effect = e
			}
		}
	}
	if seen < len(ra.effectSlots) {
		for ref, slot := range ra.effectSlots {
			if slot.pass != ra.pass { // effects gone
				dirty(ref, slot.effect.IdempotencyKey)
				delete(ra.effectSlots, ref)
			}
		}
	}
	for _, e := range added {
		if slot, ok := ra.effectSlots[e.Ref()]; ok {
			slot.effect = e
		} else {
			ra.effectSlots[e.Ref()] = &effectSlot{effect: e, pass: ra.pass}
		}
	}
}

func newEffectSlots(es []Effect) map[EffectRef]*effectSlot {
	slots := make(map[EffectRef]*effectSlot, len(es))
	for _, e := range es {
		if slot, ok := slots[e.Ref()]; ok {
			slot.effect = e
		} else {
			slots[e.Ref()] = &effectSlot{effect: e}
		}
	}
	return slots
}

// narrowEffectIndex is newEffectIndex(r) for the effects es alone, of a
// run without spans: it holds only the keys, steps and span ids they name.
func narrowEffectIndex(r Run, es []Effect) effectIndex {
	ix := effectIndex{run: r, spans: spanTree{attempts: map[string]Attempt{}}, keySenders: map[string][]keySender{},
		steps: map[string]bool{}, peers: peerIndex{}}
	if len(es) == 0 {
		return ix
	}
	keys, steps, spans := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, e := range es {
		keys[e.IdempotencyKey] = e.IdempotencyKey != ""
		steps[e.StepID] = true
		spans[e.SpanID] = e.SpanID != ""
	}
	for _, s := range r.Steps {
		if steps[s.ID] {
			ix.steps[s.ID] = true
		}
		for _, a := range s.Attempts {
			if a.SpanID != "" && spans[a.SpanID] {
				ix.spans.attempts[a.SpanID] = a
			}
			if k := a.IdempotencyKey; k != "" && keys[k] {
				ix.keySenders[k] = append(ix.keySenders[k], keySender{stepID: s.ID, provider: a.Provider})
			}
		}
	}
	for _, p := range r.Peers {
		if k := p.IdempotencyKey; k != "" && keys[k] {
			ix.peers[k] = append(ix.peers[k], p)
		}
	}
	return ix
}

// Analyse returns AnalyseRun(r, cfg), recomputing only what changed since
// the last run it analysed.
func (ra *RunAuditor) Analyse(r Run, cfg Config) RunAnalysis {
	if !ra.follows(r, cfg) {
		return ra.full(r, cfg)
	}
	d := diffSteps(ra.run.Steps, r.Steps)
	if !d.ordered || !ra.gapSpans.update(d.lost, d.gained) {
		ra.gapSpans = newGapSpans(r)
	}
	crash := ra.gapSpans.crashGaps(cfg)
	if !slices.Equal(ra.crash, crash) {
		return ra.full(r, cfg)
	}
	if !sameSlice(ra.run.Effects, r.Effects) {
		ra.diffEffects(r.Effects, d.dirtyEffects, d.dirtyKeys)
	}
	if !sameSlice(ra.run.Peers, r.Peers) && !slices.EqualFunc(ra.run.Peers, r.Peers, sameAttempt) {
		d.addKeys(ra.run.Peers)
		d.addKeys(r.Peers)
	}
	// What ra holds is brought up to date in place from here on.
	ra.relist(r, ra.rematch(r, d), d.dirtySteps)
	unattributed := ra.restate(r)
	ra.refind(r, cfg, crash, d)
	for _, s := range d.lostSteps {
		ra.counts = ra.counts.minus(stepCounts(s))
	}
	for _, s := range d.gainedSteps {
		ra.counts = ra.counts.plus(stepCounts(s))
	}
	ra.run, ra.crash = r, crash
	return ra.result(r, unattributed)
}

// follows reports whether r can be analysed from the last run: anything
// the auditor cannot bound makes it audit the whole run.
func (ra *RunAuditor) follows(r Run, cfg Config) bool {
	return ra.ready && ra.cfg == cfg && ra.run.Execution.ID == r.Execution.ID && len(r.Spans) == 0 && len(ra.run.Spans) == 0 &&
		maps.Equal(ra.run.FedProviders, r.FedProviders)
}

// runDiff is what differs between the run a RunAuditor analysed last and
// the next: steps, effects, peers, and the keys they carry.
type runDiff struct {
	dirtySteps, dirtyKeys map[string]bool
	dirtyEffects          map[EffectRef]bool
	// lost and gained are the attempts of the changed steps before and
	// now, lostSteps and gainedSteps those steps.
	lost, gained           []Attempt
	lostSteps, gainedSteps []Step
	ordered                bool // the other steps kept their order
}

func (d *runDiff) addKeys(as []Attempt) {
	for _, a := range as {
		if a.IdempotencyKey != "" {
			d.dirtyKeys[a.IdempotencyKey] = true
		}
	}
}

// lose notes a step as it was before a change.
func (d *runDiff) lose(old Step) {
	d.addKeys(old.Attempts)
	d.lost = append(d.lost, old.Attempts...)
	d.lostSteps = append(d.lostSteps, old)
}

// diffSteps compares the steps of the last run with the next. Steps keep
// their order from one run to the next but for the changed ones: they are
// compared by position while they line up, by id from the first that
// does not.
func diffSteps(oldSteps, steps []Step) *runDiff {
	d := &runDiff{dirtySteps: map[string]bool{}, dirtyKeys: map[string]bool{}, dirtyEffects: map[EffectRef]bool{}, ordered: true}
	m := stepMatcher{old: oldSteps}
	last := -1
	for i := range steps {
		s := &steps[i]
		at := m.find(s.ID)
		if at >= 0 && sameStep(oldSteps[at], *s) {
			d.ordered = d.ordered && at > last
			last = at
			continue
		}
		d.dirtySteps[s.ID] = true
		d.addKeys(s.Attempts)
		d.gained = append(d.gained, s.Attempts...)
		d.gainedSteps = append(d.gainedSteps, *s)
		if at >= 0 {
			d.lose(oldSteps[at])
		}
	}
	for _, k := range m.unmatched() {
		d.dirtySteps[oldSteps[k].ID] = true // gone
		d.lose(oldSteps[k])
	}
	return d
}

// stepMatcher finds the last run's steps by id: by position while they
// line up, by a map of the rest from the first that does not.
type stepMatcher struct {
	old    []Step
	j      int
	before map[string]int
}

// find returns the position of the old step of id, -1 when there is none.
func (m *stepMatcher) find(id string) int {
	if m.before == nil && m.j < len(m.old) && m.old[m.j].ID == id {
		m.j++
		return m.j - 1
	}
	if m.before == nil {
		m.before = make(map[string]int, len(m.old)-m.j)
		for k := m.j; k < len(m.old); k++ {
			m.before[m.old[k].ID] = k
		}
	}
	if k, ok := m.before[id]; ok {
		delete(m.before, id)
		return k
	}
	return -1
}

// unmatched are the positions of the old steps no find returned.
func (m *stepMatcher) unmatched() []int {
	var out []int
	if m.before == nil {
		for k := m.j; k < len(m.old); k++ {
			out = append(out, k)
		}
	}
	for _, k := range m.before {
		out = append(out, k)
	}
	return out
}

// rematch matches again the effects whose step may have changed, and
// returns the steps whose lists of effects changed. The step an effect
// belongs to depends on the effect, on the steps sending its key and on
// the peers owning it, and on whether the step it names exists.
func (ra *RunAuditor) rematch(r Run, d *runDiff) map[string]bool {
	effectStep := ra.effectStep
	changedLists := map[string]bool{}
	for ref := range d.dirtyEffects {
		if old, had := effectStep[ref]; had {
			changedLists[old] = true // an effect changed or gone
			delete(effectStep, ref)
		}
	}
	rematch := effectsToRematch(r, d)
	ix := narrowEffectIndex(r, rematch)
	for _, e := range rematch {
		ref := e.Ref()
		old, had := effectStep[ref]
		step, ok := ix.step(e)
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
		case ok && d.dirtyEffects[ref]:
			effectStep[ref] = step
			changedLists[step] = true
		}
	}
	return changedLists
}

// effectsToRematch are the effects of r that changed, or carry a key, name
// a step or hang from a span that did. An effect sent from a tool call's
// span (its trace context) belongs to the attempt of that span: one that
// came or went moves it. Without spans in the run (Analyse audits a run
// with spans whole), its span is the attempt's own.
func effectsToRematch(r Run, d *runDiff) []Effect {
	dirtySpans := map[string]bool{}
	for _, as := range [][]Attempt{d.lost, d.gained} {
		for _, a := range as {
			if a.SpanID != "" {
				dirtySpans[a.SpanID] = true
			}
		}
	}
	var rematch []Effect
	for _, e := range r.Effects {
		if d.dirtyEffects[e.Ref()] || d.dirtyKeys[e.IdempotencyKey] || d.dirtySteps[e.StepID] || e.SpanID != "" && dirtySpans[e.SpanID] {
			rematch = append(rematch, e)
		}
	}
	return rematch
}

// relist lists again the effects of the steps whose lists changed, and
// judges them: those steps' findings are found again (dirtySteps).
func (ra *RunAuditor) relist(r Run, changedLists, dirtySteps map[string]bool) {
	stepEffects := ra.stepEffects
	for id := range changedLists {
		for _, e := range stepEffects[id] {
			delete(ra.states, e.Ref())
		}
		delete(stepEffects, id)
	}
	if len(changedLists) == 0 {
		return
	}
	seen := map[EffectRef]bool{}
	for _, e := range r.Effects {
		step, ok := ra.effectStep[e.Ref()]
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

// restate judges the effects no step claims (orphans) and forgets the
// states of those that were and are no longer; it returns them.
func (ra *RunAuditor) restate(r Run) []Effect {
	unattributed := unattributedOf(r, ra.effectStep)
	for _, e := range ra.unattributed {
		if _, mapped := ra.effectStep[e.Ref()]; !mapped {
			delete(ra.states, e.Ref())
		}
	}
	for _, e := range unattributed {
		ra.states[e.Ref()] = MatchOrphan
	}
	return unattributed
}

// refind finds again the step rules' findings for the steps whose
// attempts or effects changed or whose keys did, and the key rules' for
// those keys. The key rules read only the steps that sent the keys: they
// are given those alone.
func (ra *RunAuditor) refind(r Run, cfg Config, crash []Gap, d *runDiff) {
	au := newAuditor(r, cfg, ra.stepEffects)
	au.gaps = crash
	var again, keySteps []Step
	for _, s := range r.Steps {
		sends := len(d.dirtyKeys) > 0 && slices.ContainsFunc(s.Attempts, func(a Attempt) bool { return d.dirtyKeys[a.IdempotencyKey] })
		if sends {
			keySteps = append(keySteps, s)
			d.dirtySteps[s.ID] = true
		}
		if d.dirtySteps[s.ID] {
			again = append(again, s)
		}
	}
	for id := range d.dirtySteps {
		delete(ra.stepFindings, id) // changed or gone
	}
	for _, s := range again {
		if fs := au.stepFindings(s); len(fs) > 0 {
			ra.stepFindings[s.ID] = fs
		}
	}
	if len(d.dirtyKeys) == 0 {
		return
	}
	for k := range d.dirtyKeys {
		delete(ra.keyFindings, k)
	}
	byKey := au
	byKey.run.Steps = keySteps
	for k, fs := range byKey.keyFindings(d.dirtyKeys) {
		ra.keyFindings[k] = fs
	}
}

// full audits the whole run and keeps what the next call needs.
func (ra *RunAuditor) full(r Run, cfg Config) RunAnalysis {
	ix := newEffectIndex(r)
	crash := crashGaps(Gaps(r, cfg.withDefaults()))
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
		effectSlots: newEffectSlots(r.Effects), gapSpans: newGapSpans(r), counts: r.countsWith(0)}
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
	fs = append(fs, unattributedFindings(r, unattributed)...)
	// Every finding has its own place in this order (one a step and rule,
	// a key and rule, or an effect), so it does not depend on the order
	// they were gathered in.
	// Identical effects are judged afresh each time: a group is as cheap
	// to find as the run's effects are to list.
	groups := identicalGroups(r, ra.effectStep)
	fs = append(fs, outboxFindings(r, groups)...)
	SortFindings(fs)
	ra.unattributed = unattributed
	return RunAnalysis{
		Findings: fs,
		Verdict:  judge(r, fs, ra.stepEffects, unattributed),
		States:   withOutboxDuplicates(ra.states, groups),
		Counts:   ra.counts.plus(Counts{Effects: ownEffectCount(r, len(ra.effectSlots))}),
	}
}

// ownEffectCount is len(r.OwnEffects()) given the number of distinct refs
// in r.Effects: without peers no effect is a peer's, and the list need not
// be built.
func ownEffectCount(r Run, distinct int) int {
	if len(r.Peers) == 0 {
		return distinct
	}
	return len(r.OwnEffects())
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
		if !fromRunTrace(r, e) || seen[e.Ref()] {
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
		a.RecognisedBy == b.RecognisedBy && slices.Equal(a.Conflicts, b.Conflicts)
}

func sameEffect(a, b Effect) bool {
	return a.Provider == b.Provider && a.ID == b.ID && a.IdempotencyKey == b.IdempotencyKey && a.ExecutionID == b.ExecutionID &&
		a.StepID == b.StepID && a.Target == b.Target && a.At == b.At && a.TraceID == b.TraceID && a.SpanID == b.SpanID &&
		a.Fingerprint == b.Fingerprint && a.Summary == b.Summary && a.JoinedExecutionID == b.JoinedExecutionID &&
		slices.Equal(a.Conflicts, b.Conflicts)
}

// sameSlice reports whether a and b are one slice (see RunAuditor).
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
