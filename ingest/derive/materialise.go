package derive

import (
	"errors"
	"fmt"
	"sort"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// analysis is what materialise concluded.
type analysis struct {
	executions  []string
	newCritical []trace.Finding
	newlyFed    []string              // providers whose outbox got its first effect
	fed         []string              // every provider this commit stored an effect of
	runs        map[string]*cachedRun // for the writer's cache, once committed
	entities    []entityFold          // likewise
}

// entityEvents returns every event of each touched entity: those of this
// commit, parsed already (touched, every one of them stored), and the older
// ones, read back from the log in one query, or, for an execution the cache
// knows, from the cache (an
// execution's own events grow with its traces, and would be parsed again
// at every commit).
func entityEvents(tx *store.Tx, touched map[string][]trace.Event, cache *runCache) (map[string][]trace.Event, error) {
	all := make(map[string][]trace.Event, len(touched))
	var unknown []string
	for entity, fresh := range touched {
		if older, ok := cache.entityEvents(entity); ok {
			events := make([]trace.Event, 0, len(older)+len(fresh))
			all[entity] = append(append(events, older...), fresh...)
			continue
		}
		unknown = append(unknown, entity)
	}
	sort.Strings(unknown)
	// Most entities have no events but this commit's: counting the events
	// of each, from the index, finds those that have others to read.
	counts, err := tx.EntityEventCounts(unknown)
	if err != nil {
		return nil, err
	}
	var older []string
	for _, entity := range unknown {
		if counts[entity] > len(touched[entity]) {
			older = append(older, entity)
		} else {
			all[entity] = touched[entity]
		}
	}
	stored, err := tx.EntitiesEvents(older)
	if err != nil {
		return nil, err
	}
	for _, entity := range older {
		fresh := touched[entity]
		isFresh := make(map[string]bool, len(fresh))
		for _, ev := range fresh {
			isFresh[ev.ID] = true
		}
		events := make([]trace.Event, 0, len(stored[entity]))
		for _, b := range stored[entity] {
			if isFresh[b.ID] {
				continue
			}
			ev, err := ingest.ParseStored(b.Body)
			if err != nil {
				return nil, fmt.Errorf("ingest: stored event of %q no longer parses: %w", entity, err)
			}
			events = append(events, ev)
		}
		all[entity] = append(events, fresh...)
	}
	return all, nil
}

// numberNewSteps folds the attempts of the touched steps that have none
// stored yet, and numbers those identified by their span as RenumberStep
// would once they were stored: they are then stored together in a few
// statements, rather than each under a placeholder that RenumberStep
// moves. Attempts of other steps are not in the map.
func numberNewSteps(tx *store.Tx, touched, all map[string][]trace.Event) (map[string]store.NumberedAttempt, error) {
	bySteps := map[store.StepRef][]string{} // step -> its attempts' entities
	for entity, fresh := range touched {
		if fresh[0].Type != trace.EventAttempt {
			continue
		}
		// An attempt's entity names its step, so every event of it does.
		ref := store.StepRef{ExecutionID: fresh[0].Attempt.ExecutionID, StepID: fresh[0].Attempt.StepID}
		bySteps[ref] = append(bySteps[ref], entity)
	}
	if len(bySteps) == 0 {
		return nil, nil
	}
	refs := make([]store.StepRef, 0, len(bySteps))
	for ref := range bySteps {
		refs = append(refs, ref)
	}
	stored, err := tx.StepsWithAttempts(refs)
	if err != nil {
		return nil, err
	}
	out := map[string]store.NumberedAttempt{}
steps:
	for ref, entities := range bySteps {
		if stored[ref] {
			continue
		}
		folded := make([]trace.Attempt, len(entities))
		var sent []int
		var bySpan []trace.Attempt
		spans := map[string]bool{}
		for i, entity := range entities {
			a := trace.FoldAttempt(all[entity])
			folded[i] = a
			if a.Number != 0 {
				sent = append(sent, a.Number)
				continue
			}
			span := a.TraceID + "/" + a.SpanID
			if a.SpanID == "" || spans[span] {
				continue steps // not told apart by its span: left to PutAttempt
			}
			spans[span] = true
			bySpan = append(bySpan, a)
		}
		numbers := trace.NumberSpanAttempts(sent, bySpan)
		for i, entity := range entities {
			a := folded[i]
			derived := a.Number == 0
			if derived {
				a.Number = numbers[a.TraceID+"/"+a.SpanID]
			}
			out[entity] = store.NumberedAttempt{Attempt: a, Derived: derived}
		}
	}
	return out, nil
}

// materialise refolds and re-audits; fed is the writer's set of providers
// known to have effects (it only grows, so it is kept across commits).
func materialise(tx *store.Tx, touched map[string][]trace.Event, known map[string]bool, cfg trace.Config, cache *runCache) (analysis, error) {
	var out analysis
	ch := newChanges()
	executions := map[string]bool{}
	keys := map[string]bool{}
	var effectRefs []trace.EffectRef
	var steps []store.StepRef
	checkedProviders := map[string]bool{}
	changedSteps := map[string]map[string]bool{} // execution -> steps whose attempts changed
	var renumber []store.StepRef                 // steps with an attempt identified by its span
	traces := map[string]bool{}                  // traces an effect of this commit came from
	renamedTraces := map[string]bool{}           // traces whose spans name an execution other than the trace id
	namingEffects := map[string]bool{}           // traces of effects that name their execution
	unnamedTraces := map[string]bool{}           // traces of effects that name none
	var stray store.StrayCandidates              // what may make a trace stray or not, or move a stray effect (store/stray.go)
	ensured := map[string]bool{}
	// ensure creates an execution an attempt or effect names, once a commit.
	ensure := func(id string) error {
		if ensured[id] {
			return nil
		}
		ensured[id] = true
		return tx.EnsureExecution(id)
	}

	// noteAttempt records what a stored attempt changed.
	noteAttempt := func(a trace.Attempt) {
		if a.TraceID != "" {
			stray.Traces = append(stray.Traces, a.TraceID)
		}
		ref := store.StepRef{ExecutionID: a.ExecutionID, StepID: a.StepID}
		ch.steps[ref] = true
		if a.TraceID != "" && a.TraceID != a.ExecutionID {
			renamedTraces[a.TraceID] = true
		}
		executions[a.ExecutionID] = true
		steps = append(steps, ref)
		if changedSteps[a.ExecutionID] == nil {
			changedSteps[a.ExecutionID] = map[string]bool{}
		}
		changedSteps[a.ExecutionID][a.StepID] = true
		if a.IdempotencyKey != "" {
			keys[a.IdempotencyKey] = true
		}
	}

	entities := make([]string, 0, len(touched))
	for e := range touched {
		entities = append(entities, e)
	}
	sort.Strings(entities) // a fixed order keeps lock and write patterns stable
	all, err := entityEvents(tx, touched, cache)
	if err != nil {
		return out, err
	}
	numbered, err := numberNewSteps(tx, touched, all)
	if err != nil {
		return out, err
	}
	// Stored together before the other entities, as attempts' entities
	// sort first: an effect folded below finds them by their trace.
	newAttempts := make([]store.NumberedAttempt, 0, len(numbered))
	for _, entity := range entities {
		if n, ok := numbered[entity]; ok {
			if err := ensure(n.Attempt.ExecutionID); err != nil {
				return out, err
			}
			newAttempts = append(newAttempts, n)
		}
	}
	if err := tx.PutNumberedAttempts(newAttempts); err != nil {
		return out, err
	}
	for _, entity := range entities {
		events := all[entity]
		// A refold may change an attempt's key or what an effect names, and
		// whatever the entity named before must be re-audited as well;
		// every value it ever had came from one of its events. Every
		// execution an event names exists, whichever value the fold keeps.
		for _, ev := range events {
			ch.noteEvent(ev)
			switch ev.Type {
			case trace.EventAttempt:
				if k := ev.Attempt.IdempotencyKey; k != "" {
					keys[k] = true
				}
				if !ev.Attempt.StartedAt.IsZero() {
					stray.Starts = append(stray.Starts, ev.Attempt.StartedAt)
				}
			case trace.EventEffect:
				if k := ev.Effect.IdempotencyKey; k != "" {
					keys[k] = true
				}
				if x := ev.Effect.ExecutionID; x != "" {
					if err := ensure(x); err != nil {
						return out, err
					}
					executions[x] = true
				}
			}
		}
		switch touched[entity][0].Type {
		case trace.EventExecution:
			if cache != nil {
				out.entities = append(out.entities, entityFold{entity, events})
			}
			x := trace.FoldExecution(events)
			if err := tx.PutExecution(x); err != nil {
				return out, err
			}
			executions[x.ID] = true
			// An execution named after a trace makes the trace no stray one.
			stray.Traces = append(stray.Traces, x.ID)
		case trace.EventAttempt:
			if n, ok := numbered[entity]; ok {
				noteAttempt(n.Attempt) // stored above
				continue
			}
			a := trace.FoldAttempt(events)
			if err := ensure(a.ExecutionID); err != nil {
				return out, err
			}
			if a.Number > 0 {
				// A number sent takes precedence over one derived: a
				// span-identified attempt holding it moves.
				moved, err := tx.VacateNumber(a.ExecutionID, a.StepID, a.Number)
				if err != nil {
					return out, err
				}
				if moved {
					renumber = append(renumber, store.StepRef{ExecutionID: a.ExecutionID, StepID: a.StepID})
				}
			}
			if err := tx.PutAttempt(a); err != nil {
				return out, err
			}
			if a.Number == 0 {
				renumber = append(renumber, store.StepRef{ExecutionID: a.ExecutionID, StepID: a.StepID})
			}
			noteAttempt(a)
		case trace.EventSpan:
			sp := trace.FoldSpan(events)
			if err := ensure(sp.ExecutionID); err != nil {
				return out, err
			}
			if err := tx.PutSpan(sp); err != nil {
				return out, err
			}
			ch.spans[[2]string{sp.TraceID, sp.SpanID}] = true
			if sp.Role == trace.RoleHTTP && sp.ParentSpanID == "" {
				stray.LoneTraces = append(stray.LoneTraces, sp.TraceID)
			} else {
				stray.Traces = append(stray.Traces, sp.TraceID)
			}
			if sp.TraceID != sp.ExecutionID {
				renamedTraces[sp.TraceID] = true
			}
			executions[sp.ExecutionID] = true
		case trace.EventEffect:
			f := trace.FoldEffect(events)
			if !known[f.Provider] && !checkedProviders[f.Provider] {
				checkedProviders[f.Provider] = true
				out.fed = append(out.fed, f.Provider)
				fed, err := tx.HasEffects(f.Provider)
				if err != nil {
					return out, err
				}
				if !fed {
					out.newlyFed = append(out.newlyFed, f.Provider)
				}
			}
			if f.ExecutionID != "" {
				if err := ensure(f.ExecutionID); err != nil {
					return out, err
				}
				executions[f.ExecutionID] = true
			}
			if f.TraceID != "" {
				traces[f.TraceID] = true
				if f.ExecutionID != "" {
					namingEffects[f.TraceID] = true
				}
				stray.EffectTraces = append(stray.EffectTraces, f.TraceID)
				if f.ExecutionID == "" {
					unnamedTraces[f.TraceID] = true
				}
			}
			if err := tx.PutEffect(f); err != nil {
				return out, err
			}
			ch.effects[f.Ref()] = true
			effectRefs = append(effectRefs, trace.EffectRef{Provider: f.Provider, ID: f.ID})
			if f.IdempotencyKey != "" {
				keys[f.IdempotencyKey] = true
			}
		}
	}

	// One query for the commit's traces, not one per effect: the
	// executions their attempts and spans belong to. An effect naming no
	// execution belongs to its trace's, else, until its attempts or spans
	// arrive, to the trace id itself. Asked after this commit's spans are
	// stored: a placeholder made before them would be dropped just below.
	byTrace, err := tx.ExecutionsByTrace(setList(traces))
	if err != nil {
		return out, err
	}
	for _, t := range setList(unnamedTraces) {
		if len(byTrace[t]) > 0 {
			continue
		}
		if err := ensure(t); err != nil {
			return out, err
		}
		executions[t] = true
	}

	// An effect that arrived before any span of its trace made the trace id
	// its execution; once spans say the trace belongs to another
	// execution, that placeholder goes, so the result does not depend on
	// which arrived first.
	for _, t := range setList(renamedTraces) {
		dropped, err := tx.DropTracePlaceholder(t)
		if err != nil {
			return out, err
		}
		if dropped {
			delete(executions, t)
			ch.executions[t] = true
		}
	}
	// Likewise once a later report of an effect names its execution: the
	// placeholder its trace made goes, unless another effect of the trace
	// still names none.
	for _, t := range setList(namingEffects) {
		dropped, err := tx.DropEffectPlaceholder(t)
		if err != nil {
			return out, err
		}
		if dropped {
			delete(executions, t)
			ch.executions[t] = true
		}
	}

	// A trace of nothing but lone HTTP spans is no execution: its effects
	// join the execution whose attempt was in flight (store/stray.go),
	// decided again whenever a span, attempt or effect could change that.
	stray.Traces = setList(setOf(stray.Traces))
	stray.EffectTraces = setList(setOf(stray.EffectTraces))
	for ref := range ch.steps {
		stray.Steps = append(stray.Steps, ref)
	}
	joins, err := tx.JoinStrayEffects(stray)
	if err != nil {
		return out, err
	}
	for _, id := range joins.Executions {
		executions[id] = true
		ch.executions[id] = true
		if cache != nil {
			delete(cache.runs, id) // read whole: its effects changed in a way patching does not follow
		}
	}
	for _, id := range joins.Dropped {
		delete(executions, id)
		ch.executions[id] = true
	}
	for _, ref := range joins.Effects {
		ch.effects[ref] = true
		effectRefs = append(effectRefs, ref)
	}
	for _, k := range joins.Keys {
		keys[k] = true
		ch.keys[k] = true
	}

	seenSteps := map[store.StepRef]bool{}
	for _, ref := range renumber {
		if seenSteps[ref] {
			continue
		}
		seenSteps[ref] = true
		if err := tx.RenumberStep(ref.ExecutionID, ref.StepID); err != nil {
			return out, err
		}
	}

	keyList := setList(keys)
	var traceExecutions []string
	for _, ids := range byTrace {
		traceExecutions = append(traceExecutions, ids...)
	}
	rechecked, err := tx.RecheckOrphans(effectRefs, keyList, steps, cfg.RepeatWindow)
	if err != nil {
		return out, err
	}
	keyExecutions, err := tx.ExecutionsWithKeys(keyList)
	if err != nil {
		return out, err
	}
	providerExecutions, err := tx.ExecutionsWritingTo(out.newlyFed)
	if err != nil {
		return out, err
	}
	for _, list := range [][]string{rechecked.Executions, keyExecutions, providerExecutions, traceExecutions} {
		for _, id := range list {
			executions[id] = true
		}
	}
	fed := make(map[string]bool, len(known)+len(checkedProviders))
	for p := range known {
		fed[p] = true
	}
	for p := range checkedProviders {
		fed[p] = true // checked because this commit stores an effect of it
	}
	if cache != nil {
		cache.noteRecheck(ch, rechecked.Effects) // before the recheck's states can be overwritten below
	}
	src := newRunSource(tx, fed, cache, ch)
	src.forget(executions)
	runs := make([]trace.Run, 0, len(executions))
	for _, id := range setList(executions) {
		run, _, err := src.get(id)
		if errors.Is(err, store.ErrNotFound) {
			continue // a trace's placeholder, dropped in this commit
		}
		if err != nil {
			return out, err
		}
		runs = append(runs, run)
	}
	out.executions, out.newCritical, err = saveAnalyses(tx, runs, fed, cfg, changedSteps, src)
	if err != nil {
		return out, err
	}
	out.runs = src.pending
	return out, nil
}

// saveAnalyses audits the runs and stores what they derive (findings,
// effect states, counts, audit state, and the rows of changedSteps), as one
// commit of the writer or a re-audit after a prune does. It returns the
// executions it saved and the critical findings new in them.
//
// src, when set, gives the runs of a writer's commit (runcache.go): the
// findings and effect states the writer stored last are not read or
// written again, and only effects new to a run are indexed.
func saveAnalyses(tx *store.Tx, runs []trace.Run, fed map[string]bool, cfg trace.Config,
	changedSteps map[string]map[string]bool, src *runSource) (executions []string, critical []trace.Finding, err error) {
	if src == nil {
		// Not the writer's commit: writers' caches no longer know what is
		// stored.
		if err := tx.BumpGeneration(); err != nil {
			return nil, nil, err
		}
	}
	analyses := make([]trace.RunAnalysis, len(runs))
	for i, run := range runs {
		if entry := src.entry(run.Execution.ID); entry != nil {
			analyses[i] = entry.auditor.Analyse(run, cfg)
		} else {
			analyses[i] = trace.AnalyseRun(run, cfg)
		}
	}
	states, err := ownerEffectStates(tx, runs, analyses, fed, src)
	if err != nil {
		return nil, nil, err
	}
	// An effect of these runs that none of its owners gives a state falls
	// back to the orphan recheck's, whatever an earlier analysis said.
	var unjudged []trace.EffectRef
	for _, run := range runs {
		for _, f := range run.Effects {
			if _, ok := states[f.Ref()]; !ok {
				unjudged = append(unjudged, f.Ref())
			}
		}
	}
	settled, err := tx.SettleStates(unjudged)
	if err != nil {
		return nil, nil, err
	}
	if src != nil && src.cache != nil {
		src.cache.forgetWritten(settled)
	}
	for i, run := range runs {
		id := run.Execution.ID
		an := analyses[i]
		entry := src.entry(id)
		runStates := map[trace.EffectRef]trace.MatchState{}
		var stored []trace.Effect
		for _, f := range run.Effects {
			st, ok := states[f.Ref()]
			if !ok {
				continue
			}
			if entry != nil && src.cache.stateStored(f, st) {
				continue // stored already, and nothing since changed it
			}
			runStates[f.Ref()] = st
			stored = append(stored, f)
		}
		var before []trace.Finding
		if entry != nil && entry.saved {
			before = entry.findings
		} else if before, err = tx.RunFindings(id); err != nil {
			return nil, nil, err
		}
		findings := an.Findings
		saved := run
		if entry != nil && entry.patchedSaved {
			saved.Effects = newEffects(run, entry.added, src.ch.effects)
		}
		err = tx.SaveAnalysis(store.Analysis{Run: saved, Findings: findings, Before: before, States: runStates,
			Counts: an.Counts, Steps: changedSteps[id], State: an.Verdict.State})
		if err != nil {
			return nil, nil, err
		}
		if entry != nil {
			entry.saved, entry.findings = true, findings
		}
		if src != nil && src.cache != nil {
			src.cache.noteStored(stored, runStates)
		}
		executions = append(executions, run.Execution.ID)
		critical = append(critical, newCritical(before, findings)...)
	}
	return executions, critical, nil
}

// newCritical returns the critical findings of after that before lacked.
func newCritical(before, after []trace.Finding) []trace.Finding {
	seen := map[string]bool{}
	for _, f := range before {
		seen[findingIdentity(f)] = true
	}
	var out []trace.Finding
	for _, f := range after {
		if f.Severity == trace.SeverityCritical && !seen[findingIdentity(f)] {
			out = append(out, f)
		}
	}
	return out
}

func findingIdentity(f trace.Finding) string {
	return string(f.Rule) + "\x00" + f.ExecutionID + "\x00" + f.StepID + "\x00" + f.IdempotencyKey
}

// ownerEffectStates judges each effect of the runs as World.EffectStates
// does: a duplicate when any execution it belongs to (the one it names, and
// every one that sent its key) sees it as one. Judged by the last run
// analysed alone, an effect two executions share would depend on which of
// them a commit happened to touch.
//
// analyses are the runs' own (trace.AnalyseRun).
func ownerEffectStates(tx *store.Tx, runs []trace.Run, analyses []trace.RunAnalysis, fed map[string]bool,
	src *runSource) (map[trace.EffectRef]trace.MatchState, error) {
	states := map[trace.EffectRef]trace.MatchState{}
	mergeStates := func(runStates map[trace.EffectRef]trace.MatchState) {
		for ref, st := range runStates {
			states[ref] = trace.WorseState(states[ref], st)
		}
	}
	merge := func(run trace.Run) { mergeStates(trace.EffectStates(run)) }
	loaded := map[string]bool{}
	owners := map[string]bool{}
	keys := map[string]bool{}
	traces := map[string]bool{}
	for _, run := range runs {
		loaded[run.Execution.ID] = true
		// A key the run's own attempts sent was sent by the run and by its
		// peers, which the run holds: only other keys are looked up.
		var own map[string]bool
		var peersOf map[string][]string
		if entry := src.entry(run.Execution.ID); entry != nil {
			own = entry.keys
		}
		for _, f := range run.Effects {
			if f.ExecutionID != "" {
				owners[f.ExecutionID] = true
			}
			if f.JoinedExecutionID != "" {
				owners[f.JoinedExecutionID] = true
			}
			if f.TraceID != "" && !f.StrayTrace {
				traces[f.TraceID] = true
			}
			switch k := f.IdempotencyKey; {
			case k == "":
			case own[k]:
				if peersOf == nil {
					peersOf = map[string][]string{}
					for _, p := range run.Peers {
						peersOf[p.IdempotencyKey] = append(peersOf[p.IdempotencyKey], p.ExecutionID)
					}
				}
				for _, id := range peersOf[k] {
					owners[id] = true
				}
			default:
				keys[k] = true
			}
		}
	}
	byKey, err := tx.ExecutionsWithKeys(setList(keys))
	if err != nil {
		return nil, err
	}
	byTrace, err := tx.ExecutionsOfTraces(setList(traces))
	if err != nil {
		return nil, err
	}
	for _, id := range append(byKey, byTrace...) {
		owners[id] = true
	}
	if len(runs) == 1 && len(owners) <= 1 && (len(owners) == 0 || loaded[setList(owners)[0]]) {
		return analyses[0].States, nil // the run is its effects' only owner
	}
	for _, an := range analyses {
		mergeStates(an.States)
	}
	for _, id := range setList(owners) {
		if loaded[id] {
			continue
		}
		var run trace.Run
		var err error
		if src != nil {
			run, _, err = src.get(id)
		} else {
			run, err = tx.LoadRun(id, fed)
		}
		if errors.Is(err, store.ErrNotFound) {
			continue // a trace's placeholder, dropped in this commit
		}
		if err != nil {
			return nil, err
		}
		merge(run)
	}
	return states, nil
}

func setList(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
