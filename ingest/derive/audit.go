package derive

import (
	"errors"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// The audit pass judges again every execution whose findings a commit can
// change, and stores what they derive: findings, effect states, counts,
// audit state and the rows of changed steps.

// audit runs the audit pass over what the commit reached; byTrace are the
// executions of its effects' traces, fed the providers known to have
// effects now.
func (d *derivation) audit(out *analysis, r *reach, byTrace map[string][]string, fed map[string]bool, cfg trace.Config) error {
	keyList := setList(r.keys)
	rechecked, err := d.tx.RecheckOrphans(r.effectRefs, keyList, r.steps, cfg.RepeatWindow)
	if err != nil {
		return err
	}
	keyExecutions, err := d.tx.ExecutionsWithKeys(keyList)
	if err != nil {
		return err
	}
	providerExecutions, err := d.tx.ExecutionsWritingTo(out.newlyFed)
	if err != nil {
		return err
	}
	for _, list := range [][]string{rechecked.Executions, keyExecutions, providerExecutions} {
		for _, id := range list {
			r.executions[id] = true
		}
	}
	for _, ids := range byTrace {
		for _, id := range ids {
			r.executions[id] = true
		}
	}
	if d.cache != nil {
		d.cache.noteRecheck(r.ch, rechecked.Effects) // before the recheck's states can be overwritten below
	}
	src := newRunSource(d.tx, fed, d.cache, r.ch)
	src.forget(r.executions)
	runs, err := loadRuns(src, setList(r.executions))
	if err != nil {
		return err
	}
	out.executions, out.newCritical, err = saveAnalyses(d.tx, runs, fed, cfg, r.changedSteps, src)
	out.runs = src.pending
	return err
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
	analyses := analyseRuns(runs, cfg, src)
	states, err := ownerEffectStates(tx, runs, analyses, fed, src)
	if err != nil {
		return nil, nil, err
	}
	settled, err := tx.SettleStates(unjudgedEffects(runs, states))
	if err != nil {
		return nil, nil, err
	}
	cache := src.writerCache()
	if cache != nil {
		cache.forgetWritten(settled)
	}
	for i, run := range runs {
		entry := src.entry(run.Execution.ID)
		plan := planSave(run, analyses[i], states, entry, cache, changedSteps[run.Execution.ID], src.changedEffects())
		if plan.Before, err = findingsBefore(tx, entry, run.Execution.ID); err != nil {
			return nil, nil, err
		}
		if err := tx.SaveAnalysis(plan.Analysis); err != nil {
			return nil, nil, err
		}
		if entry != nil {
			entry.saved, entry.findings = true, plan.Findings
		}
		if cache != nil {
			cache.noteStored(plan.stored, plan.States)
		}
		executions = append(executions, run.Execution.ID)
		critical = append(critical, newCritical(plan.Before, plan.Findings)...)
	}
	return executions, critical, nil
}

// analyseRuns audits each run with one auditor, trace.RunAuditor: the one
// of its cached run, which recomputes what changed, else a new one, which
// audits the whole run.
func analyseRuns(runs []trace.Run, cfg trace.Config, src *runSource) []trace.RunAnalysis {
	analyses := make([]trace.RunAnalysis, len(runs))
	for i, run := range runs {
		auditor := new(trace.RunAuditor)
		if entry := src.entry(run.Execution.ID); entry != nil {
			auditor = entry.auditor
		}
		analyses[i] = auditor.Analyse(run, cfg)
	}
	return analyses
}

// unjudgedEffects are the effects of the runs that none of their owners
// gives a state: they fall back to the orphan recheck's, whatever an
// earlier analysis said.
func unjudgedEffects(runs []trace.Run, states map[trace.EffectRef]trace.MatchState) []trace.EffectRef {
	var unjudged []trace.EffectRef
	for _, run := range runs {
		for _, f := range run.Effects {
			if _, ok := states[f.Ref()]; !ok {
				unjudged = append(unjudged, f.Ref())
			}
		}
	}
	return unjudged
}

// savePlan is what one run's analysis stores (Before is read apart).
type savePlan struct {
	store.Analysis
	stored []trace.Effect // the effects whose states it writes
}

// planSave plans storing a run's analysis: the states of its effects that
// the writer's cache does not know stored already, and, for a run patched
// from one saved, only the effects whose search terms may be new
// (changedEffects: those the commit wrote).
func planSave(run trace.Run, an trace.RunAnalysis, states map[trace.EffectRef]trace.MatchState, entry *cachedRun,
	cache *runCache, steps map[string]bool, changedEffects map[trace.EffectRef]bool) savePlan {
	runStates := map[trace.EffectRef]trace.MatchState{}
	var stored []trace.Effect
	for _, f := range run.Effects {
		st, ok := states[f.Ref()]
		if !ok {
			continue
		}
		if entry != nil && cache.stateStored(f, st) {
			continue // stored already, and nothing since changed it
		}
		runStates[f.Ref()] = st
		stored = append(stored, f)
	}
	saved := run
	if entry != nil && entry.patchedSaved {
		saved.Effects = newEffects(run, entry.added, changedEffects)
	}
	return savePlan{Analysis: store.Analysis{Run: saved, Findings: an.Findings, States: runStates, Counts: an.Counts,
		Steps: steps, State: an.Verdict.State}, stored: stored}
}

// findingsBefore are the run's findings as stored: those the writer saved
// last, when it did.
func findingsBefore(tx *store.Tx, entry *cachedRun, id string) ([]trace.Finding, error) {
	if entry != nil && entry.saved {
		return entry.findings, nil
	}
	return tx.RunFindings(id)
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

// writerCache is the writer's cache behind s, if any.
func (s *runSource) writerCache() *runCache {
	if s == nil {
		return nil
	}
	return s.cache
}

// changedEffects are the effects the commit behind s wrote.
func (s *runSource) changedEffects() map[trace.EffectRef]bool {
	if s == nil || s.ch == nil {
		return nil
	}
	return s.ch.effects
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
	q := effectOwners(runs, func(id string) map[string]bool {
		if entry := src.entry(id); entry != nil {
			return entry.keys
		}
		return nil
	})
	byKey, err := tx.ExecutionsWithKeys(setList(q.keys))
	if err != nil {
		return nil, err
	}
	byTrace, err := tx.ExecutionsOfTraces(setList(q.traces))
	if err != nil {
		return nil, err
	}
	for _, id := range append(byKey, byTrace...) {
		q.owners[id] = true
	}
	owners := runsOf(tx, fed, src)
	if q.soleOwner(len(runs)) {
		return analyses[0].States, nil
	}
	states := map[trace.EffectRef]trace.MatchState{}
	for _, an := range analyses {
		mergeStates(states, an.States)
	}
	for _, id := range setList(q.owners) {
		if q.loaded[id] {
			continue
		}
		run, err := owners.Run(id)
		if errors.Is(err, store.ErrNotFound) {
			continue // a trace's placeholder, dropped in this commit
		}
		if err != nil {
			return nil, err
		}
		mergeStates(states, trace.EffectStates(run))
	}
	return states, nil
}

// ownerQuery is what judging the runs' effects needs to know of their
// owners: the executions already loaded, the owners known, and the keys
// and traces whose executions own them too.
type ownerQuery struct {
	loaded, owners, keys, traces map[string]bool
}

// effectOwners plans the owners' query for the runs' effects. ownKeys
// gives the keys a run's own attempts sent, when known: such a key was
// sent by the run and by its peers, which the run holds, so only other
// keys are looked up.
func effectOwners(runs []trace.Run, ownKeys func(id string) map[string]bool) ownerQuery {
	q := ownerQuery{loaded: map[string]bool{}, owners: map[string]bool{}, keys: map[string]bool{}, traces: map[string]bool{}}
	for _, run := range runs {
		q.loaded[run.Execution.ID] = true
		own := ownKeys(run.Execution.ID)
		var peersOf map[string][]string
		for _, f := range run.Effects {
			q.noteEffect(f)
			switch k := f.IdempotencyKey; {
			case k == "":
			case own[k]:
				if peersOf == nil {
					peersOf = peersByKey(run.Peers)
				}
				for _, id := range peersOf[k] {
					q.owners[id] = true
				}
			default:
				q.keys[k] = true
			}
		}
	}
	return q
}

// noteEffect notes the executions an effect names and the trace it joins
// its owners by.
func (q *ownerQuery) noteEffect(f trace.Effect) {
	if f.ExecutionID != "" {
		q.owners[f.ExecutionID] = true
	}
	if f.JoinedExecutionID != "" {
		q.owners[f.JoinedExecutionID] = true
	}
	if f.TraceID != "" && !f.StrayTrace {
		q.traces[f.TraceID] = true
	}
}

// soleOwner reports whether the one run of runs is its effects' only
// owner: its own analysis judges them.
func (q *ownerQuery) soleOwner(runs int) bool {
	if runs != 1 || len(q.owners) > 1 {
		return false
	}
	return len(q.owners) == 0 || q.loaded[setList(q.owners)[0]]
}

func peersByKey(peers []trace.Attempt) map[string][]string {
	out := map[string][]string{}
	for _, p := range peers {
		out[p.IdempotencyKey] = append(out[p.IdempotencyKey], p.ExecutionID)
	}
	return out
}

func mergeStates(states, runStates map[trace.EffectRef]trace.MatchState) {
	for ref, st := range runStates {
		states[ref] = trace.WorseState(states[ref], st)
	}
}
