package derive

import (
	"errors"
	"maps"
	"slices"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// The writer keeps the runs it analysed last (a bounded cache) and brings
// each up to date with the rows a commit changed, instead of reading the
// whole run again after every commit: a commit then costs the same however
// long its execution already is. What it stores is what a full recompute
// stores (TestIncrementalMatchesRebuild).
//
// The cache is only as good as the knowledge that nothing but this writer
// changed the database since its last commit. It is checked inside every
// write transaction, before anything is read from it: the event log's last
// sequence number must be the one this writer's last commit left (another
// writer on the same database, another instance's or an import's, appends
// events), and so must the store's derived generation, which every prune
// batch and every re-derivation (Reaudit, Rebuild) bumps in its own
// transaction, in any process. Anything else empties it.

// maxCachedRuns and maxCachedItems bound the cache, in runs and in their
// attempts, effects and peers together (some hundreds of bytes each, with
// what their audit keeps): runs of executions still being written to stay,
// the least recently used fall out.
const (
	maxCachedRuns  = 256
	maxCachedItems = 100_000
)

// maxPatchChanges is the most rows a commit may change for its runs to be
// patched: past it, reading the runs whole is no dearer, and the cache is
// emptied rather than checked entry by entry.
const maxPatchChanges = 256

// maxRememberedStates bounds what stateStored remembers. Its maps are the
// writer's largest: at 1 << 18 a build of 60,000 executions held 33 MB
// live and peaked at 203 MiB resident, at 1 << 16 10 MB and 120 MiB, as
// fast (oncebench reads, docs/performance.md). An effect forgotten only
// has its unchanged state written again.
const maxRememberedStates = 1 << 16

type runCache struct {
	runs map[string]*cachedRun
	tick uint64
	// What the database looked like after this writer's last commit.
	lastSeq    int64
	generation int64 // store's derived generation (Tx.BumpGeneration)
	valid      bool
	// written is the match state this writer last stored for an effect,
	// so that a commit rewrites only the states it changes, forgotten as
	// soon as an orphan recheck may have written it (stateStored); by
	// key and by step, the effects written with them.
	written       map[trace.EffectRef]trace.MatchState
	writtenByKey  map[string]map[trace.EffectRef]bool
	writtenByStep map[store.StepRef]map[trace.EffectRef]bool
	indexed       int // refs in writtenByKey and writtenByStep, stale ones too
	// entities holds the events of executions' own entities (entityEvents),
	// cachedEvents how many.
	entities     map[string][]trace.Event
	cachedEvents int
}

// cachedRun is a run as loadRuns reads it (before FoldHTTPCalls), with the
// findings its last analysis stored.
type cachedRun struct {
	raw     trace.Run
	keys    map[string]bool // store.RunKeys of its attempts
	traces  map[string]bool // store.RunTraces
	effects map[trace.EffectRef]bool
	// uses counts the attempts carrying each key and trace (the
	// execution's own id once more), so that a patch updates keys and
	// traces by the attempts it replaced.
	keyUses, traceUses map[string]int
	// peerSteps are the steps its peers belong to.
	peerSteps map[store.StepRef]bool
	// saved: this writer stored the run's analysis, so findings are what
	// the store holds and every effect's search terms are indexed.
	saved    bool
	findings []trace.Finding
	// patchedSaved: it was patched from a saved run, whose effects had
	// their search terms indexed: only those in added need them.
	patchedSaved bool
	added        map[trace.EffectRef]bool
	// auditor analysed the run last; it recomputes what changed.
	auditor *trace.RunAuditor
	used    uint64
	items   int // size
}

func newRunCache() *runCache {
	return &runCache{runs: map[string]*cachedRun{}, written: map[trace.EffectRef]trace.MatchState{},
		writtenByKey: map[string]map[trace.EffectRef]bool{}, writtenByStep: map[store.StepRef]map[trace.EffectRef]bool{},
		entities: map[string][]trace.Event{}}
}

func (c *runCache) clear() {
	clear(c.runs)
	clear(c.entities)
	c.cachedEvents = 0
	c.forgetStates()
	c.valid = false
}

// maxCachedEntities and maxCachedEvents bound the executions whose own
// events are kept, and those events (a kilobyte or two each, body and
// parse).
const (
	maxCachedEntities = 1024
	maxCachedEvents   = 20_000
)

// entityFold is an entity's events as a commit folded them.
type entityFold struct {
	entity string
	events []trace.Event
}

// entityEvents returns the stored events of an execution's entity, when
// the cache knows them. It runs after check, so they are all there are.
func (c *runCache) entityEvents(entity string) ([]trace.Event, bool) {
	if c == nil || !c.valid {
		return nil, false
	}
	events, ok := c.entities[entity]
	return events, ok
}

func (c *runCache) forgetStates() {
	clear(c.written)
	clear(c.writtenByKey)
	clear(c.writtenByStep)
	c.indexed = 0
}

// check empties the cache unless nothing but this writer changed the
// database since its last commit. It runs first in the transaction.
//
// others reports that someone else did (or that the cache knew nothing).
func (c *runCache) check(tx *store.Tx, before int64) (lastSeq int64, others bool, err error) {
	lastSeq, generation, err := tx.LastEventSeq(before)
	if err != nil {
		c.clear()
		return 0, true, err
	}
	others = !c.valid || lastSeq != c.lastSeq || generation != c.generation
	if others {
		c.clear()
	}
	c.lastSeq, c.generation = lastSeq, generation
	return lastSeq, others, nil
}

// committed records that the writer's transaction committed and what the
// log's last sequence number is now.
func (c *runCache) committed(lastSeq int64, pending map[string]*cachedRun, entities []entityFold) {
	c.lastSeq, c.valid = lastSeq, true
	for _, f := range entities {
		c.cachedEvents -= len(c.entities[f.entity])
		delete(c.entities, f.entity)
		if len(c.entities) >= maxCachedEntities || c.cachedEvents+len(f.events) > maxCachedEvents {
			clear(c.entities)
			c.cachedEvents = 0
		}
		if len(f.events) <= maxCachedEvents/4 {
			c.entities[f.entity] = f.events
			c.cachedEvents += len(f.events)
		}
	}
	for id, e := range pending {
		if e == nil {
			delete(c.runs, id)
			continue
		}
		c.tick++
		e.used = c.tick
		c.runs[id] = e
	}
	items := 0
	for _, e := range c.runs {
		items += e.size()
	}
	for len(c.runs) > maxCachedRuns || items > maxCachedItems {
		oldest, at := "", uint64(0)
		for id, e := range c.runs {
			if oldest == "" || e.used < at {
				oldest, at = id, e.used
			}
		}
		items -= c.runs[oldest].size()
		delete(c.runs, oldest)
	}
	if len(c.written)+c.indexed > maxRememberedStates {
		c.forgetStates()
	}
}

// changes is what one commit wrote that runs are made of.
type changes struct {
	steps   map[store.StepRef]bool // steps whose attempts were written or renumbered
	effects map[trace.EffectRef]bool
	spans   map[[2]string]bool // trace id, span id
	// Everything any event of a touched entity names: whatever a run held
	// through one of them may have changed.
	keys, traces, executions map[string]bool
	// tooMany: more rows changed than patching pays for.
	tooMany bool
}

func newChanges() *changes {
	return &changes{steps: map[store.StepRef]bool{}, effects: map[trace.EffectRef]bool{}, spans: map[[2]string]bool{},
		keys: map[string]bool{}, traces: map[string]bool{}, executions: map[string]bool{}}
}

func (ch *changes) noteEvent(ev trace.Event) {
	add := func(set map[string]bool, v string) {
		if v != "" {
			set[v] = true
		}
	}
	switch {
	case ev.Execution != nil:
		add(ch.executions, ev.Execution.ID)
	case ev.Attempt != nil:
		add(ch.executions, ev.Attempt.ExecutionID)
		add(ch.keys, ev.Attempt.IdempotencyKey)
		add(ch.traces, ev.Attempt.TraceID)
	case ev.Effect != nil:
		add(ch.executions, ev.Effect.ExecutionID)
		add(ch.keys, ev.Effect.IdempotencyKey)
		add(ch.traces, ev.Effect.TraceID)
	case ev.Span != nil:
		add(ch.executions, ev.Span.ExecutionID)
		add(ch.keys, ev.Span.IdempotencyKey)
		add(ch.traces, ev.Span.TraceID)
	}
}

func (ch *changes) count() int {
	return len(ch.steps) + len(ch.effects) + len(ch.spans)
}

// runSource gives materialise and saveAnalyses the runs of one commit: from
// the cache brought up to date, else read whole; what it gives is kept for
// the cache once the transaction commits.
type runSource struct {
	tx      *store.Tx
	fed     map[string]bool
	cache   *runCache // nil: read every run whole, keep nothing
	ch      *changes
	pending map[string]*cachedRun
	// stepAttempts caches the attempts of the changed steps for this commit.
	stepAttempts map[store.StepRef][]trace.Attempt
	// analysed are the executions this commit analyses: their cached
	// runs are patched, every other cached run the commit touched goes.
	analysed map[string]bool
}

func newRunSource(tx *store.Tx, fed map[string]bool, cache *runCache, ch *changes) *runSource {
	s := &runSource{tx: tx, fed: fed, cache: cache, ch: ch, pending: map[string]*cachedRun{},
		stepAttempts: map[store.StepRef][]trace.Attempt{}}
	if cache != nil && (ch == nil || ch.tooMany || ch.count() > maxPatchChanges) {
		clear(cache.runs) // the events it knows are still all there are
	}
	return s
}

// forget drops the cached runs the commit may have changed, other than
// those it analyses (which get patched): their next use reads them whole.
func (s *runSource) forget(analysed map[string]bool) {
	s.analysed = analysed
	if s.cache == nil || s.ch == nil {
		return
	}
	for id, e := range s.cache.runs {
		if analysed[id] {
			continue
		}
		if s.ch.executions[id] || intersects(e.keys, s.ch.keys) || intersects(e.traces, s.ch.traces) || s.touchesEffects(e) || s.touchesPeers(e) {
			delete(s.cache.runs, id)
		}
	}
}

func intersects(a, b map[string]bool) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	for k := range a {
		if b[k] {
			return true
		}
	}
	return false
}

func (s *runSource) touchesEffects(e *cachedRun) bool {
	return e.holdsAny(s.ch.effects)
}

func (s *runSource) touchesPeers(e *cachedRun) bool {
	for ref := range s.ch.steps {
		if e.peerSteps[ref] {
			return true
		}
	}
	return false
}

// run returns an execution's run for analysis, FedProviders set and HTTP
// calls folded; store.ErrNotFound when it does not exist.
func (s *runSource) run(id string) (trace.Run, *cachedRun, error) {
	if s.cache != nil {
		if e, ok := s.pending[id]; ok && e != nil {
			return s.analysable(e), e, nil
		}
		if e, ok := s.cache.runs[id]; ok {
			patched, err := s.patch(e)
			if err != nil {
				return trace.Run{}, nil, err
			}
			if patched == nil {
				s.pending[id] = nil
				return trace.Run{FedProviders: s.fed}, nil, store.ErrNotFound
			}
			s.pending[id] = patched
			return s.analysable(patched), patched, nil
		}
	}
	run, err := s.tx.LoadRun(id, s.fed)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) && s.cache != nil {
			s.pending[id] = nil
		}
		return run, nil, err
	}
	if s.cache == nil {
		return run, nil, nil
	}
	// LoadRun folded the HTTP calls into the attempts; the cache keeps
	// them as read, so read the attempts' own keys back from the spans'
	// absence: a run without spans is unchanged by the fold.
	if len(run.Spans) > 0 || slices.ContainsFunc(run.Effects, func(f trace.Effect) bool { return f.JoinedExecutionID != "" }) {
		// Kept out of the cache: patching needs the unfolded attempts, and
		// knows no effect a stray trace joined to the run.
		return run, nil, nil
	}
	e := newCachedRun(run)
	s.pending[id] = e
	return run, e, nil
}

func newCachedRun(raw trace.Run) *cachedRun {
	raw.FedProviders = nil
	e := &cachedRun{raw: raw, keys: map[string]bool{}, traces: map[string]bool{}, keyUses: map[string]int{},
		traceUses: map[string]int{}, effects: make(map[trace.EffectRef]bool, len(raw.Effects)), auditor: &trace.RunAuditor{}}
	e.use(raw.Execution.ID, "", 1)
	for _, s := range raw.Steps {
		for _, a := range s.Attempts {
			e.use(a.TraceID, a.IdempotencyKey, 1)
		}
	}
	for _, f := range raw.Effects {
		e.effects[f.Ref()] = true
	}
	e.notePeers()
	e.count()
	return e
}

// analysable is the cached run as the audit takes it.
func (s *runSource) analysable(e *cachedRun) trace.Run {
	run := e.raw
	run.FedProviders = s.fed
	return run
}

// patch brings a cached run up to date with the commit's changes: nil when
// its execution is gone. It loads the rows the commit changed that the run
// may hold, plans the run from them and the cached one, and keeps e's own
// sets up to date in place (the commit replaces e with what it returns, or
// the cache is emptied).
func (s *runSource) patch(e *cachedRun) (*cachedRun, error) {
	id := e.raw.Execution.ID
	x, err := s.tx.ExecutionRow(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	changed, err := s.changedAttempts(id)
	if err != nil {
		return nil, err
	}
	if err := s.checkSpans(e); err != nil {
		return nil, err
	}
	run := trace.Run{Execution: x, Steps: e.raw.Steps, Spans: e.raw.Spans}
	terms := e.replaceAttempts(changed)
	if len(changed) > 0 {
		run.Steps = store.ReplaceSteps(e.raw.Steps, changed)
		run.FillLostEngineAttempts() // as a run read whole is (store's assembleRun)
	}
	added, err := s.addedEffects(e, terms)
	if err != nil {
		return nil, err
	}
	var fresh map[trace.EffectRef]bool
	run.Effects, fresh = e.patchEffects(added, s.ch.effects, terms.shrunk)
	if !s.changesPeers(id, terms) {
		run.Peers = e.raw.Peers
	} else if err := s.patchPeers(&run, e, terms.newKeys); err != nil {
		return nil, err
	}
	patched := &cachedRun{raw: run, keys: e.keys, traces: e.traces, keyUses: e.keyUses, traceUses: e.traceUses, effects: e.effects,
		saved: e.saved, findings: e.findings, auditor: e.auditor, patchedSaved: e.saved, added: fresh}
	if patched.peerSteps = e.peerSteps; !sameSlice(run.Peers, e.raw.Peers) {
		patched.notePeers()
	}
	patched.count()
	return patched, nil
}

// changedAttempts are the attempts of the execution's steps that the
// commit wrote, by step.
func (s *runSource) changedAttempts(id string) (map[string][]trace.Attempt, error) {
	changed := map[string][]trace.Attempt{}
	for ref := range s.ch.steps {
		if ref.ExecutionID != id {
			continue
		}
		as, err := s.attemptsOf(ref)
		if err != nil {
			return nil, err
		}
		changed[ref.StepID] = as
	}
	return changed, nil
}

// checkSpans is errNeedsLoad when the run has spans, or the commit wrote
// one of its: HTTP calls fold into attempts, so it is read whole.
func (s *runSource) checkSpans(e *cachedRun) error {
	if len(e.raw.Spans) > 0 {
		return errNeedsLoad // never cached so
	}
	for ref := range s.ch.spans {
		sp, ok, err := s.tx.SpanRow(ref[0], ref[1])
		if err != nil {
			return err
		}
		if ok && sp.ExecutionID == e.raw.Execution.ID {
			return errNeedsLoad
		}
	}
	return nil
}

// termChanges is how replacing attempts changed the keys and traces a run
// holds its effects and peers by.
type termChanges struct {
	newKeys, newTraces []string
	shrunk             bool // it lost one
}

// replaceAttempts counts the keys and traces of the changed steps'
// attempts in place of those they had, and reports what the run gained
// and lost.
func (e *cachedRun) replaceAttempts(changed map[string][]trace.Attempt) termChanges {
	if len(changed) == 0 {
		return termChanges{}
	}
	var lost [][]trace.Attempt
	for _, st := range e.raw.Steps {
		if _, ok := changed[st.ID]; ok {
			lost = append(lost, st.Attempts)
		}
	}
	had := e.heldTerms(append(slices.Clone(lost), slices.Collect(maps.Values(changed))...))
	for _, as := range lost {
		for _, a := range as {
			e.use(a.TraceID, a.IdempotencyKey, -1)
		}
	}
	for _, as := range changed {
		for _, a := range as {
			e.use(a.TraceID, a.IdempotencyKey, 1)
		}
	}
	return e.gainedTerms(had)
}

// heldTerms are what the attempts carry (trace id, key), each with whether
// the run holds it.
func (e *cachedRun) heldTerms(attempts [][]trace.Attempt) map[[2]string]bool {
	had := map[[2]string]bool{}
	for _, as := range attempts {
		for _, a := range as {
			if a.IdempotencyKey != "" {
				had[[2]string{"", a.IdempotencyKey}] = e.keys[a.IdempotencyKey]
			}
			if a.TraceID != "" {
				had[[2]string{a.TraceID, ""}] = e.traces[a.TraceID]
			}
		}
	}
	return had
}

// gainedTerms compares what the run held before (had) with what it holds.
func (e *cachedRun) gainedTerms(had map[[2]string]bool) termChanges {
	var out termChanges
	for u, before := range had {
		traceID, key := u[0], u[1]
		has := key != "" && e.keys[key] || traceID != "" && e.traces[traceID]
		out.shrunk = out.shrunk || before && !has
		switch {
		case has && !before && key != "":
			out.newKeys = append(out.newKeys, key)
		case has && !before:
			out.newTraces = append(out.newTraces, traceID)
		}
	}
	return out
}

// member reports whether an effect belongs to the run: it names it, or
// carries a key or trace of its attempts.
func (e *cachedRun) member(f trace.Effect) bool {
	return f.ExecutionID == e.raw.Execution.ID || f.IdempotencyKey != "" && e.keys[f.IdempotencyKey] || e.traces[f.TraceID]
}

// addedEffects reads the effects the run gains: those the commit wrote
// that belong to it, and those of keys and traces new to it.
func (s *runSource) addedEffects(e *cachedRun, terms termChanges) (map[trace.EffectRef]trace.Effect, error) {
	added := map[trace.EffectRef]trace.Effect{}
	for ref := range s.ch.effects {
		f, ok, err := s.tx.EffectRow(ref)
		if err != nil {
			return nil, err
		}
		if ok && e.member(f) {
			added[ref] = f
		}
	}
	for _, read := range []struct {
		terms []string
		read  func(string) ([]trace.Effect, error)
	}{{terms.newKeys, s.tx.EffectsWithKey}, {terms.newTraces, s.tx.EffectsOfTrace}} {
		for _, term := range read.terms {
			fs, err := read.read(term)
			if err != nil {
				return nil, err
			}
			for _, f := range fs {
				added[f.Ref()] = f
			}
		}
	}
	return added, nil
}

// patchEffects plans the run's effects: the cached ones stay unless the
// commit wrote them (written) or the run lost the key or trace they joined
// it by; added join. The run's set of effects is brought up to date in
// place; fresh are those it did not have.
func (e *cachedRun) patchEffects(added map[trace.EffectRef]trace.Effect, written map[trace.EffectRef]bool,
	shrunk bool) (effects []trace.Effect, fresh map[trace.EffectRef]bool) {
	if len(added) == 0 && !shrunk && !e.holdsAny(written) {
		return e.raw.Effects, nil
	}
	effects = make([]trace.Effect, 0, len(e.raw.Effects)+len(added))
	for _, f := range e.raw.Effects {
		_, readAgain := added[f.Ref()]
		if readAgain || written[f.Ref()] || shrunk && !e.member(f) {
			if !readAgain {
				delete(e.effects, f.Ref())
			}
			continue
		}
		effects = append(effects, f)
	}
	for ref, f := range added {
		effects = append(effects, f)
		if !e.effects[ref] {
			if fresh == nil {
				fresh = map[trace.EffectRef]bool{}
			}
			fresh[ref] = true
			e.effects[ref] = true
		}
	}
	store.SortRunEffects(effects)
	return effects, fresh
}

// holdsAny reports whether the run holds one of refs.
func (e *cachedRun) holdsAny(refs map[trace.EffectRef]bool) bool {
	for ref := range refs {
		if e.effects[ref] {
			return true
		}
	}
	return false
}

// changesPeers reports whether the run's peers may have changed: the
// commit wrote another execution's steps, or the run's keys changed.
func (s *runSource) changesPeers(id string, terms termChanges) bool {
	if len(terms.newKeys) > 0 || terms.shrunk {
		return true
	}
	for ref := range s.ch.steps {
		if ref.ExecutionID != id {
			return true
		}
	}
	return false
}

// errNeedsLoad: the cached run cannot be patched; read it whole.
var errNeedsLoad = errors.New("derive: run must be read whole")

func (s *runSource) attemptsOf(ref store.StepRef) ([]trace.Attempt, error) {
	if as, ok := s.stepAttempts[ref]; ok {
		return as, nil
	}
	as, err := s.tx.StepAttempts(ref.ExecutionID, ref.StepID)
	if err != nil {
		return nil, err
	}
	s.stepAttempts[ref] = as
	return as, nil
}

// get is run with the fallback for a run that cannot be patched.
func (s *runSource) get(id string) (trace.Run, *cachedRun, error) {
	run, e, err := s.run(id)
	if errors.Is(err, errNeedsLoad) {
		delete(s.cache.runs, id)
		delete(s.pending, id)
		run, err = s.tx.LoadRun(id, s.fed)
		return run, nil, err
	}
	return run, e, err
}

func setOf(ss []string) map[string]bool {
	out := make(map[string]bool, len(ss))
	for _, s := range ss {
		out[s] = true
	}
	return out
}

// newEffects are the effects of run that the cached run it was patched
// from lacked or this commit changed: the ones whose search terms may be
// new. The earliest effect with a time stays too: SaveAnalysis orders an
// execution without a start by it.
func newEffects(run trace.Run, added map[trace.EffectRef]bool, changed map[trace.EffectRef]bool) []trace.Effect {
	var out []trace.Effect
	earliest := false
	for _, f := range run.Effects {
		first := !earliest && !f.At.IsZero()
		earliest = earliest || first
		if first || added[f.Ref()] || changed[f.Ref()] {
			out = append(out, f)
		}
	}
	return slices.Clip(out)
}

// stateStored reports whether the store holds st for f already: this
// writer stored it, and no orphan recheck (store.RecheckOrphans) may have
// written it since. A commit rechecks the effects it wrote, those carrying
// a key it wrote and those naming a step it wrote, and the effects
// identical to those (noteRecheck is told which); the recheck runs before
// the commit's analyses store states.
func (c *runCache) stateStored(f trace.Effect, st trace.MatchState) bool {
	w, ok := c.written[f.Ref()]
	return ok && w == st
}

// noteRecheck forgets the states the commit's orphan recheck may have
// written: those of the effects it judged (rechecked), which take in
// effects identical to the commit's, and of any effect indexed under a key
// or step the commit changed. An effect indexed under a key or step it no
// longer has is one its own change rechecks.
func (c *runCache) noteRecheck(ch *changes, rechecked []trace.EffectRef) {
	c.forgetWritten(rechecked)
	for ref := range ch.effects {
		delete(c.written, ref)
	}
	for k := range ch.keys {
		for ref := range c.writtenByKey[k] {
			delete(c.written, ref)
		}
		delete(c.writtenByKey, k)
	}
	for step := range ch.steps {
		for ref := range c.writtenByStep[step] {
			delete(c.written, ref)
		}
		delete(c.writtenByStep, step)
	}
}

// forgetWritten forgets the states of effects something other than an
// analysis wrote.
func (c *runCache) forgetWritten(refs []trace.EffectRef) {
	for _, ref := range refs {
		delete(c.written, ref)
	}
}

// noteStored records the states a commit's analysis stored.
func (c *runCache) noteStored(stored []trace.Effect, states map[trace.EffectRef]trace.MatchState) {
	for _, f := range stored {
		ref := f.Ref()
		c.written[ref] = states[ref]
		if f.IdempotencyKey != "" {
			c.indexed += addRef(c.writtenByKey, f.IdempotencyKey, ref)
		}
		c.indexed += addRef(c.writtenByStep, store.StepRef{ExecutionID: f.ExecutionID, StepID: f.StepID}, ref)
	}
}

// addRef adds ref to index[k] and returns how many refs it added.
func addRef[K comparable](index map[K]map[trace.EffectRef]bool, k K, ref trace.EffectRef) int {
	refs := index[k]
	if refs == nil {
		refs = map[trace.EffectRef]bool{}
		index[k] = refs
	}
	if refs[ref] {
		return 0
	}
	refs[ref] = true
	return 1
}

func (e *cachedRun) use(traceID, key string, delta int) {
	if key != "" {
		e.keyUses[key] += delta
		e.keys[key] = e.keyUses[key] > 0
		if !e.keys[key] {
			delete(e.keys, key)
			delete(e.keyUses, key)
		}
	}
	if traceID != "" {
		e.traceUses[traceID] += delta
		e.traces[traceID] = e.traceUses[traceID] > 0
		if !e.traces[traceID] {
			delete(e.traces, traceID)
			delete(e.traceUses, traceID)
		}
	}
}

func (e *cachedRun) notePeers() {
	e.peerSteps = make(map[store.StepRef]bool, len(e.raw.Peers))
	for _, p := range e.raw.Peers {
		e.peerSteps[store.StepRef{ExecutionID: p.ExecutionID, StepID: p.StepID}] = true
	}
}

// patchPeers gives run the peers e had, those of the steps this commit
// wrote read again, and those of keys new to the run read.
func (s *runSource) patchPeers(run *trace.Run, e *cachedRun, newKeys []string) error {
	id := run.Execution.ID
	type attemptRef struct {
		step   store.StepRef
		number int
	}
	peers := map[attemptRef]trace.Attempt{}
	for _, p := range e.raw.Peers {
		if ref := (store.StepRef{ExecutionID: p.ExecutionID, StepID: p.StepID}); !s.ch.steps[ref] {
			peers[attemptRef{ref, p.Number}] = p
		}
	}
	for ref := range s.ch.steps {
		if ref.ExecutionID == id {
			continue
		}
		as, err := s.attemptsOf(ref)
		if err != nil {
			return err
		}
		for _, a := range as {
			peers[attemptRef{ref, a.Number}] = a
		}
	}
	for _, k := range newKeys {
		as, err := s.tx.AttemptsWithKey(k, id)
		if err != nil {
			return err
		}
		for _, a := range as {
			peers[attemptRef{store.StepRef{ExecutionID: a.ExecutionID, StepID: a.StepID}, a.Number}] = a
		}
	}
	for _, p := range peers {
		if p.ExecutionID != id && e.keys[p.IdempotencyKey] {
			run.Peers = append(run.Peers, p)
		}
	}
	store.SortPeers(run.Peers)
	return nil
}

// entry is the cached run this commit gives for an execution, if any.
func (s *runSource) entry(id string) *cachedRun {
	if s == nil || s.cache == nil {
		return nil
	}
	return s.pending[id]
}

// sameSlice reports whether a and b are one slice: a run's part that a
// patch kept as it was.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// size is what the run holds, as maxCachedItems counts it.
func (e *cachedRun) size() int { return e.items }

func (e *cachedRun) count() {
	e.items = len(e.raw.Effects) + len(e.raw.Peers)
	for _, s := range e.raw.Steps {
		e.items += len(s.Attempts)
	}
}
