package trace

import (
	"maps"
	"slices"
	"sort"
	"time"
)

// Runs builds one Run per execution, in the order of w.Executions followed
// by executions known only from their steps (those get a zero Execution
// with just the id and status running).
//
// Each run's steps are sorted by their first attempt's start, then id, and
// their attempts by number; every attempt gets its step's ExecutionID and
// StepID, so EffectMatchesAttempt and Peers can rely on them. A run's
// Effects are those naming it or carrying a key one of its attempts sent to
// the effect's provider (sentKey). An effect that names another execution
// which sent its key is owned by that execution alone, yet it stays in the
// Effects of every run that sent the key, as the store loads it: those runs
// show it on their key page and judge suppressed_as_repeat by it, and
// StepEffects never gives it to their steps (ownedByPeer). Peers are the
// attempts of other executions sharing such a key, whatever their provider,
// as the store loads them too; FedProviders holds every provider with an
// effect anywhere in the world. Steps repeated in w.Steps are merged.
func (w World) Runs() []Run {
	runs, _ := w.runs()
	return runs
}

// runs is Runs, with the stray traces (StrayTraces): their spans make no
// run, and each of their effects joins the one run InferAttempt finds for
// it, if any (JoinedExecutionID and Inferred set on the run's copy).
//
// The runs are built in steps, each adding one kind of record: the order
// of the steps is what Runs' order and ownership rules rest on.
func (w World) runs() ([]Run, map[string]bool) {
	b := newRunBuilder(w.Effects)
	b.addExecutions(w.Executions)
	b.addSteps(w.Steps)
	b.indexKeys()
	b.dropStray(w.Spans)
	b.addSpans(w.Spans)
	b.indexTraces()
	b.addTraceExecutions(w.Effects)
	for _, e := range w.Effects {
		b.addEffect(e)
	}
	b.addPeers()
	for i := range b.runs {
		b.runs[i].FillLostEngineAttempts()
		b.runs[i].FoldHTTPCalls() // as the store's loadRun does, after keys decided who owns what
	}
	return b.runs, b.stray
}

// runSender is a run that sent an idempotency key, and the provider its
// attempt named ("" for none).
type runSender struct {
	run      int
	provider string
}

// runBuilder holds the runs being built and the indexes the steps of
// World.runs share.
type runBuilder struct {
	runs      []Run
	index     map[string]int         // execution id -> position in runs
	fed       map[string]bool        // every provider with an effect anywhere
	keyRuns   map[string][]int       // key -> runs whose attempts sent it, each once
	senders   map[string][]runSender // key -> each (run, provider) that sent it, once
	traceRuns map[string][]int       // trace id -> runs with a span or attempt of it, or named after it
	stray     map[string]bool        // the stray traces
}

func newRunBuilder(effects []Effect) *runBuilder {
	b := &runBuilder{index: map[string]int{}, fed: map[string]bool{}, keyRuns: map[string][]int{},
		senders: map[string][]runSender{}, traceRuns: map[string][]int{}}
	for _, e := range effects {
		if e.Provider != "" {
			b.fed[e.Provider] = true
		}
	}
	return b
}

// newRun appends a run for an execution known only from its records.
func (b *runBuilder) newRun(id string) int {
	i := len(b.runs)
	b.index[id] = i
	b.runs = append(b.runs, Run{Execution: Execution{ID: id, Status: StatusRunning}, FedProviders: maps.Clone(b.fed)})
	return i
}

// runOf is the position of id's run, made when there is none.
func (b *runBuilder) runOf(id string) int {
	if i, ok := b.index[id]; ok {
		return i
	}
	return b.newRun(id)
}

func (b *runBuilder) addExecutions(executions []Execution) {
	for _, e := range executions {
		if _, dup := b.index[e.ID]; dup {
			continue
		}
		b.index[e.ID] = len(b.runs)
		b.runs = append(b.runs, Run{Execution: e})
	}
}

// addSteps puts each step in its execution's run, merging repeats.
func (b *runBuilder) addSteps(steps []Step) {
	for _, s := range steps {
		execID := s.ExecutionID
		if execID == "" && len(s.Attempts) > 0 {
			execID = s.Attempts[0].ExecutionID
		}
		i := b.runOf(execID)
		b.runs[i].Steps = addStep(b.runs[i].Steps, s, execID)
	}
}

// indexKeys sorts every run's steps, gives it the fed providers, and
// indexes who sent each idempotency key.
func (b *runBuilder) indexKeys() {
	for i := range b.runs {
		sortSteps(b.runs[i].Steps)
		b.runs[i].FedProviders = maps.Clone(b.fed)
		for _, s := range b.runs[i].Steps {
			for _, a := range s.Attempts {
				b.indexKey(i, a)
			}
		}
	}
}

func (b *runBuilder) indexKey(i int, a Attempt) {
	k := a.IdempotencyKey
	if k == "" {
		return
	}
	if !slices.Contains(b.keyRuns[k], i) {
		b.keyRuns[k] = append(b.keyRuns[k], i)
	}
	if sd := (runSender{i, a.Provider}); !slices.Contains(b.senders[k], sd) {
		b.senders[k] = append(b.senders[k], sd)
	}
}

// dropStray finds the stray traces and drops their placeholders: an
// execution row made for a stray trace before its spans said it is none
// is no run.
func (b *runBuilder) dropStray(spans []Span) {
	tracedBy := map[string]bool{}
	for _, r := range b.runs {
		for _, s := range r.Steps {
			for _, a := range s.Attempts {
				tracedBy[a.TraceID] = true
			}
		}
	}
	b.stray = StrayTraces(spans, func(t string) bool { return tracedBy[t] }, func(t string) bool {
		i, ok := b.index[t]
		return ok && !b.runs[i].Execution.Placeholder()
	})
	if len(b.stray) == 0 {
		return
	}
	kept := b.runs[:0]
	for _, r := range b.runs {
		if !b.stray[r.Execution.ID] || len(r.Steps) > 0 {
			kept = append(kept, r)
		}
	}
	b.runs = kept
	clear(b.index)
	for i, r := range b.runs {
		b.index[r.Execution.ID] = i
	}
}

// addSpans gives each span, but a stray trace's, to the execution it names.
func (b *runBuilder) addSpans(spans []Span) {
	for _, sp := range spans {
		if b.stray[sp.TraceID] {
			continue
		}
		i := b.runOf(sp.ExecutionID)
		b.runs[i].Spans = append(b.runs[i].Spans, sp)
	}
}

func (b *runBuilder) addTrace(traceID string, i int) {
	if traceID != "" && !slices.Contains(b.traceRuns[traceID], i) {
		b.traceRuns[traceID] = append(b.traceRuns[traceID], i)
	}
}

// indexTraces indexes, for every trace, the runs with a span or attempt
// of it or named after it: an effect with a trace context belongs to each
// of them.
func (b *runBuilder) indexTraces() {
	for i := range b.runs {
		b.addTrace(b.runs[i].Execution.ID, i)
		for _, s := range b.runs[i].Steps {
			for _, a := range s.Attempts {
				b.addTrace(a.TraceID, i)
			}
		}
		for _, sp := range b.runs[i].Spans {
			b.addTrace(sp.TraceID, i)
		}
	}
}

// addTraceExecutions makes an effect's trace id its execution when it
// names none and no execution's spans came from its trace, as the store
// does until its spans arrive.
func (b *runBuilder) addTraceExecutions(effects []Effect) {
	for _, e := range effects {
		if e.ExecutionID == "" && e.TraceID != "" && len(b.traceRuns[e.TraceID]) == 0 && !b.stray[e.TraceID] {
			b.addTrace(e.TraceID, b.newRun(e.TraceID))
		}
	}
}

// addEffect gives e to its owners; a stray trace's effect first joins the
// one run InferAttempt finds for it, if any.
func (b *runBuilder) addEffect(e Effect) {
	if b.stray[e.TraceID] {
		e = b.joinStray(e)
	}
	for _, i := range b.owners(e) {
		if b.runs[i].Execution.ID != e.JoinedExecutionID {
			b.runs[i].Effects = append(b.runs[i].Effects, e)
		}
	}
}

// joinStray adds a stray trace's effect to the one run it can be inferred
// to, and returns it marked as joined there (or as joined nowhere).
func (b *runBuilder) joinStray(e Effect) Effect {
	e.JoinedExecutionID, e.Inferred, e.StrayTrace = "", "", true
	var join []int
	for i := range b.runs {
		if _, reason, ok := InferAttempt(e, b.runs[i]); ok {
			join = append(join, i)
			e.Inferred = reason
		}
	}
	if len(join) != 1 {
		e.Inferred = ""
		return e
	}
	e.JoinedExecutionID = b.runs[join[0]].Execution.ID
	b.runs[join[0]].Effects = append(b.runs[join[0]].Effects, e)
	return e
}

// owners are the runs e belongs to, each once: the run it names, the runs
// of its trace, then the runs that sent its key to its provider.
func (b *runBuilder) owners(e Effect) []int {
	var owners []int
	if i, ok := b.index[e.ExecutionID]; ok && e.ExecutionID != "" {
		owners = append(owners, i)
	}
	for _, i := range b.traceRuns[e.TraceID] {
		if !slices.Contains(owners, i) {
			owners = append(owners, i)
		}
	}
	if e.IdempotencyKey == "" {
		return owners
	}
	for _, sd := range b.senders[e.IdempotencyKey] {
		if sameProvider(sd.provider, e.Provider) && !slices.Contains(owners, sd.run) {
			owners = append(owners, sd.run)
		}
	}
	return owners
}

// addPeers gives every run the attempts of other runs that sent one of
// its keys.
func (b *runBuilder) addPeers() {
	for i := range b.runs {
		for _, s := range b.runs[i].Steps {
			for _, a := range s.Attempts {
				for _, j := range b.keyRuns[a.IdempotencyKey] {
					if j != i {
						b.runs[j].Peers = append(b.runs[j].Peers, a)
					}
				}
			}
		}
	}
}

// Audit applies every rule to every execution of the world, adds an
// orphan_effect warning for each effect that matches no attempt of any
// execution, and sorts the lot with SortFindings.
func Audit(w World, cfg Config) []Finding {
	runs, stray := w.runs()
	var fs []Finding
	for _, r := range runs {
		fs = append(fs, AuditRun(r, cfg)...)
	}
	matched := IndexAttempts(runAttempts(runs))
	joined := joinedEffects(runs)
	seen := map[EffectRef]bool{}
	var orphans []Effect
	for _, e := range w.Effects {
		if seen[e.Ref()] {
			continue
		}
		seen[e.Ref()] = true
		e.JoinedExecutionID, e.StrayTrace = joined[e.Ref()], stray[e.TraceID]
		if !matched.Claims(e) {
			fs = append(fs, OrphanFinding(e))
			orphans = append(orphans, e)
		}
	}
	fs = append(fs, RepeatedOrphans(orphans, cfg)...)
	SortFindings(fs)
	return fs
}

// EffectStates says, for every effect of the world, whether it is its
// step's only effect, one of several, or an orphan. An effect counts as a
// duplicate when any execution it belongs to sees it as one.
func (w World) EffectStates() map[EffectRef]MatchState {
	runs, stray := w.runs()
	fromRuns := map[EffectRef]MatchState{}
	for _, r := range runs {
		for ref, state := range EffectStates(r) {
			fromRuns[ref] = WorseState(fromRuns[ref], state)
		}
	}
	matched := IndexAttempts(runAttempts(runs))
	joined := joinedEffects(runs)
	states := map[EffectRef]MatchState{}
	for _, e := range w.Effects {
		e.JoinedExecutionID, e.StrayTrace = joined[e.Ref()], stray[e.TraceID]
		// Orphans are decided exactly as Audit decides them, so the outbox
		// and the findings never disagree.
		switch {
		case !matched.Claims(e):
			states[e.Ref()] = MatchOrphan
		case fromRuns[e.Ref()] != "":
			states[e.Ref()] = fromRuns[e.Ref()]
		default:
			states[e.Ref()] = MatchMatched
		}
	}
	return states
}

// joinedEffects maps each effect that joined a run (JoinedExecutionID) to
// that run.
func joinedEffects(runs []Run) map[EffectRef]string {
	out := map[EffectRef]string{}
	for _, r := range runs {
		for _, e := range r.Effects {
			if e.JoinedExecutionID != "" {
				out[e.Ref()] = e.JoinedExecutionID
			}
		}
	}
	return out
}

// runAttempts are the attempts of runs, stamped with their execution and
// step (addStep does that).
func runAttempts(runs []Run) []Attempt {
	var out []Attempt
	for _, r := range runs {
		for _, s := range r.Steps {
			out = append(out, s.Attempts...)
		}
	}
	return out
}

// addStep adds a copy of s to steps, merging it into a step with the same
// id, and stamps its attempts with their execution and step.
func addStep(steps []Step, s Step, execID string) []Step {
	attempts := make([]Attempt, len(s.Attempts))
	for i, a := range s.Attempts {
		a.ExecutionID, a.StepID = execID, s.ID
		attempts[i] = a
	}
	s.ExecutionID = execID
	for i := range steps {
		if steps[i].ID == s.ID {
			steps[i].Attempts = append(steps[i].Attempts, attempts...)
			steps[i].Tool = firstNonEmpty(steps[i].Tool, s.Tool)
			steps[i].Effect = firstNonEmpty(steps[i].Effect, s.Effect)
			steps[i].Provider = firstNonEmpty(steps[i].Provider, s.Provider)
			return steps
		}
	}
	s.Attempts = attempts
	return append(steps, s)
}

func firstNonEmpty[T ~string](a, b T) T {
	if a != "" {
		return a
	}
	return b
}

// sortSteps puts steps in the order they first ran (steps that started
// together, or at no known time, in natural id order) and their attempts in
// number order, the order the timeline and the audit read them.
func sortSteps(steps []Step) {
	firstStart := func(s Step) time.Time {
		var first time.Time
		for _, a := range s.Attempts {
			if !a.StartedAt.IsZero() && (first.IsZero() || a.StartedAt.Before(first)) {
				first = a.StartedAt
			}
		}
		return first
	}
	for _, s := range steps {
		sort.SliceStable(s.Attempts, func(i, j int) bool { return s.Attempts[i].Number < s.Attempts[j].Number })
	}
	sort.SliceStable(steps, func(i, j int) bool {
		a, b := firstStart(steps[i]), firstStart(steps[j])
		if !a.Equal(b) {
			return a.Before(b)
		}
		return CompareNatural(steps[i].ID, steps[j].ID) < 0
	})
}
