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
func (w World) runs() ([]Run, map[string]bool) {
	var runs []Run
	index := map[string]int{} // execution id -> position in runs
	for _, e := range w.Executions {
		if _, dup := index[e.ID]; dup {
			continue
		}
		index[e.ID] = len(runs)
		runs = append(runs, Run{Execution: e})
	}
	for _, s := range w.Steps {
		execID := s.ExecutionID
		if execID == "" && len(s.Attempts) > 0 {
			execID = s.Attempts[0].ExecutionID
		}
		i, ok := index[execID]
		if !ok {
			i = len(runs)
			index[execID] = i
			runs = append(runs, Run{Execution: Execution{ID: execID, Status: StatusRunning}})
		}
		runs[i].Steps = addStep(runs[i].Steps, s, execID)
	}

	fed := map[string]bool{}
	for _, e := range w.Effects {
		if e.Provider != "" {
			fed[e.Provider] = true
		}
	}
	keyRuns := map[string][]int{} // key -> runs whose attempts sent it, each once
	type sender struct {
		run      int
		provider string // as the attempt named it, "" for none
	}
	senders := map[string][]sender{} // key -> each (run, provider) that sent it, once
	for i := range runs {
		sortSteps(runs[i].Steps)
		runs[i].FedProviders = maps.Clone(fed)
		for _, s := range runs[i].Steps {
			for _, a := range s.Attempts {
				k := a.IdempotencyKey
				if k == "" {
					continue
				}
				if !slices.Contains(keyRuns[k], i) {
					keyRuns[k] = append(keyRuns[k], i)
				}
				if sd := (sender{i, a.Provider}); !slices.Contains(senders[k], sd) {
					senders[k] = append(senders[k], sd)
				}
			}
		}
	}

	tracedBy := map[string]bool{}
	for _, r := range runs {
		for _, s := range r.Steps {
			for _, a := range s.Attempts {
				tracedBy[a.TraceID] = true
			}
		}
	}
	stray := StrayTraces(w.Spans, func(t string) bool { return tracedBy[t] }, func(t string) bool {
		i, ok := index[t]
		return ok && !runs[i].Execution.Placeholder()
	})
	if len(stray) > 0 {
		// A stray trace's placeholder (an execution row made for it before
		// its spans said it is none) is no run.
		kept := runs[:0]
		for _, r := range runs {
			if !stray[r.Execution.ID] || len(r.Steps) > 0 {
				kept = append(kept, r)
			}
		}
		runs = kept
		clear(index)
		for i, r := range runs {
			index[r.Execution.ID] = i
		}
	}

	// Spans belong to the execution they name; an effect with a trace
	// context to every execution with a span or attempt of its trace, and
	// to the execution its trace names by default (the store creates it
	// when the effect names none).
	for _, sp := range w.Spans {
		if stray[sp.TraceID] {
			continue
		}
		i, ok := index[sp.ExecutionID]
		if !ok {
			i = len(runs)
			index[sp.ExecutionID] = i
			runs = append(runs, Run{Execution: Execution{ID: sp.ExecutionID, Status: StatusRunning}, FedProviders: maps.Clone(fed)})
		}
		runs[i].Spans = append(runs[i].Spans, sp)
	}
	traceRuns := map[string][]int{} // trace id -> runs with a span or attempt of it, or named after it
	addTrace := func(traceID string, i int) {
		if traceID != "" && !slices.Contains(traceRuns[traceID], i) {
			traceRuns[traceID] = append(traceRuns[traceID], i)
		}
	}
	for i := range runs {
		addTrace(runs[i].Execution.ID, i)
		for _, s := range runs[i].Steps {
			for _, a := range s.Attempts {
				addTrace(a.TraceID, i)
			}
		}
		for _, sp := range runs[i].Spans {
			addTrace(sp.TraceID, i)
		}
	}
	// An effect whose trace no execution's spans came from makes the trace
	// id its execution, as the store does until its spans arrive.
	for _, e := range w.Effects {
		if e.ExecutionID == "" && e.TraceID != "" && len(traceRuns[e.TraceID]) == 0 && !stray[e.TraceID] {
			index[e.TraceID] = len(runs)
			runs = append(runs, Run{Execution: Execution{ID: e.TraceID, Status: StatusRunning}, FedProviders: maps.Clone(fed)})
			addTrace(e.TraceID, index[e.TraceID])
		}
	}

	for _, e := range w.Effects {
		if stray[e.TraceID] {
			e.JoinedExecutionID, e.Inferred, e.StrayTrace = "", "", true
			var join []int
			for i := range runs {
				if _, reason, ok := InferAttempt(e, runs[i]); ok {
					join = append(join, i)
					e.Inferred = reason
				}
			}
			if len(join) == 1 {
				e.JoinedExecutionID = runs[join[0]].Execution.ID
				runs[join[0]].Effects = append(runs[join[0]].Effects, e)
			} else {
				e.Inferred = ""
			}
		}
		var owners []int // the run it names, the runs of its trace, then the runs that sent its key to its provider
		if i, ok := index[e.ExecutionID]; ok && e.ExecutionID != "" {
			owners = append(owners, i)
		}
		for _, i := range traceRuns[e.TraceID] {
			if !slices.Contains(owners, i) {
				owners = append(owners, i)
			}
		}
		if e.IdempotencyKey != "" {
			for _, sd := range senders[e.IdempotencyKey] {
				if sameProvider(sd.provider, e.Provider) && !slices.Contains(owners, sd.run) {
					owners = append(owners, sd.run)
				}
			}
		}
		for _, i := range owners {
			if runs[i].Execution.ID != e.JoinedExecutionID {
				runs[i].Effects = append(runs[i].Effects, e)
			}
		}
	}

	for i := range runs {
		for _, s := range runs[i].Steps {
			for _, a := range s.Attempts {
				for _, j := range keyRuns[a.IdempotencyKey] {
					if j != i {
						runs[j].Peers = append(runs[j].Peers, a)
					}
				}
			}
		}
	}
	for i := range runs {
		runs[i].FoldHTTPCalls() // as the store's loadRun does, after keys decided who owns what
	}
	return runs, stray
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

// sortSteps puts steps in the order they first ran and their attempts in
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
		return steps[i].ID < steps[j].ID
	})
}
