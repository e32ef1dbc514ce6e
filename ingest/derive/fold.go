package derive

import (
	"fmt"
	"sort"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// The fold pass refolds every touched entity from all of its stored events,
// so the result never depends on arrival order.

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

// reach is what a commit's rows can change: the executions to re-audit,
// and what leads the audit to others.
type reach struct {
	executions map[string]bool
	keys       map[string]bool
	effectRefs []trace.EffectRef // effects written or joined
	steps      []store.StepRef   // steps whose attempts were written
	// changedSteps: execution -> steps whose attempts changed, whose rows
	// are written again.
	changedSteps map[string]map[string]bool
	ch           *changes // what the run cache must patch
}

// foldPlan is what the fold pass writes and notes, entity by entity.
type foldPlan struct {
	rows []foldedRow // in the order of entities
	// providers are those of the commit's effects not known to have
	// effects, in the order first met: whether their outbox held one
	// before is asked, so that their runs are audited again.
	providers []string
	reach
	traces        map[string]bool // traces an effect of this commit came from
	renamedTraces map[string]bool // traces whose spans or attempts name an execution other than the trace id
	namingEffects map[string]bool // traces of effects that name their execution
	unnamedTraces map[string]bool // traces of effects that name none
	// stray is what may make a trace stray or not, or move a stray effect
	// (store/stray.go); the attribute pass completes it.
	stray store.StrayCandidates
	// cached are the executions' own entities, for the run cache.
	cached []entityFold
}

// foldedRow is one entity refolded: the executions to create first, in
// order, then at most one row to store. An attempt the number pass stored
// has no row.
type foldedRow struct {
	ensure    []string
	execution *trace.Execution
	attempt   *trace.Attempt
	span      *trace.Span
	effect    *trace.Effect
}

// planFold refolds the entities, in their order, from all of their events;
// numbered are the attempts the number pass stored, known the providers
// known to have effects; withCache keeps the executions' events.
func planFold(entities []string, all map[string][]trace.Event, numbered map[string]store.NumberedAttempt,
	known map[string]bool, withCache bool) *foldPlan {
	p := &foldPlan{
		reach: reach{executions: map[string]bool{}, keys: map[string]bool{}, changedSteps: map[string]map[string]bool{},
			ch: newChanges()},
		traces: map[string]bool{}, renamedTraces: map[string]bool{}, namingEffects: map[string]bool{}, unnamedTraces: map[string]bool{},
	}
	checked := map[string]bool{}
	for _, entity := range entities {
		events := all[entity]
		var row foldedRow
		// A refold may change an attempt's key or what an effect names, and
		// whatever the entity named before must be re-audited as well;
		// every value it ever had came from one of its events. Every
		// execution an event names exists, whichever value the fold keeps.
		for _, ev := range events {
			row.ensure = append(row.ensure, p.noteEvent(ev)...)
		}
		switch events[0].Type {
		case trace.EventExecution:
			if withCache {
				p.cached = append(p.cached, entityFold{entity, events})
			}
			row.execution = p.foldExecution(events)
		case trace.EventAttempt:
			if n, ok := numbered[entity]; ok {
				p.noteAttempt(n.Attempt) // stored by the number pass
				break
			}
			row.attempt = p.foldAttempt(events, &row)
		case trace.EventSpan:
			row.span = p.foldSpan(events, &row)
		case trace.EventEffect:
			row.effect = p.foldEffect(events, &row)
			if f := row.effect; !known[f.Provider] && !checked[f.Provider] {
				checked[f.Provider] = true
				p.providers = append(p.providers, f.Provider)
			}
		}
		p.rows = append(p.rows, row)
	}
	return p
}

// noteEvent notes what any event of a touched entity names, and returns
// the execution it makes exist.
func (p *foldPlan) noteEvent(ev trace.Event) (ensure []string) {
	p.ch.noteEvent(ev)
	switch ev.Type {
	case trace.EventAttempt:
		p.noteKey(ev.Attempt.IdempotencyKey)
		if !ev.Attempt.StartedAt.IsZero() {
			p.stray.Starts = append(p.stray.Starts, ev.Attempt.StartedAt)
		}
	case trace.EventEffect:
		p.noteKey(ev.Effect.IdempotencyKey)
		if x := ev.Effect.ExecutionID; x != "" {
			p.executions[x] = true
			return []string{x}
		}
	}
	return nil
}

func (p *foldPlan) noteKey(k string) {
	if k != "" {
		p.keys[k] = true
	}
}

func (p *foldPlan) foldExecution(events []trace.Event) *trace.Execution {
	x := trace.FoldExecution(events)
	p.executions[x.ID] = true
	// An execution named after a trace makes the trace no stray one.
	p.stray.Traces = append(p.stray.Traces, x.ID)
	return &x
}

func (p *foldPlan) foldAttempt(events []trace.Event, row *foldedRow) *trace.Attempt {
	a := trace.FoldAttempt(events)
	row.ensure = append(row.ensure, a.ExecutionID)
	p.noteAttempt(a)
	return &a
}

// noteAttempt notes what a stored attempt changed.
func (p *foldPlan) noteAttempt(a trace.Attempt) {
	if a.TraceID != "" {
		p.stray.Traces = append(p.stray.Traces, a.TraceID)
	}
	ref := store.StepRef{ExecutionID: a.ExecutionID, StepID: a.StepID}
	p.ch.steps[ref] = true
	if a.TraceID != "" && a.TraceID != a.ExecutionID {
		p.renamedTraces[a.TraceID] = true
	}
	p.executions[a.ExecutionID] = true
	p.steps = append(p.steps, ref)
	if p.changedSteps[a.ExecutionID] == nil {
		p.changedSteps[a.ExecutionID] = map[string]bool{}
	}
	p.changedSteps[a.ExecutionID][a.StepID] = true
	p.noteKey(a.IdempotencyKey)
}

func (p *foldPlan) foldSpan(events []trace.Event, row *foldedRow) *trace.Span {
	sp := trace.FoldSpan(events)
	row.ensure = append(row.ensure, sp.ExecutionID)
	p.ch.spans[[2]string{sp.TraceID, sp.SpanID}] = true
	if sp.Role == trace.RoleHTTP && sp.ParentSpanID == "" {
		p.stray.LoneTraces = append(p.stray.LoneTraces, sp.TraceID)
	} else {
		p.stray.Traces = append(p.stray.Traces, sp.TraceID)
	}
	if sp.TraceID != sp.ExecutionID {
		p.renamedTraces[sp.TraceID] = true
	}
	p.executions[sp.ExecutionID] = true
	return &sp
}

func (p *foldPlan) foldEffect(events []trace.Event, row *foldedRow) *trace.Effect {
	f := trace.FoldEffect(events)
	if f.ExecutionID != "" {
		row.ensure = append(row.ensure, f.ExecutionID)
		p.executions[f.ExecutionID] = true
	}
	if f.TraceID != "" {
		p.traces[f.TraceID] = true
		p.stray.EffectTraces = append(p.stray.EffectTraces, f.TraceID)
		if f.ExecutionID != "" {
			p.namingEffects[f.TraceID] = true
		} else {
			p.unnamedTraces[f.TraceID] = true
		}
	}
	p.ch.effects[f.Ref()] = true
	p.effectRefs = append(p.effectRefs, f.Ref())
	p.noteKey(f.IdempotencyKey)
	return &f
}

// foldApplied is what storing a fold plan learnt.
type foldApplied struct {
	renumber []store.StepRef // steps with an attempt identified by its span, or one moved
	newlyFed []string        // providers whose outbox got its first effect
}

// applyFold stores the plan's rows, in order.
func (d *derivation) applyFold(p *foldPlan) (foldApplied, error) {
	var out foldApplied
	for _, provider := range p.providers {
		fed, err := d.tx.HasEffects(provider)
		if err != nil {
			return out, err
		}
		if !fed {
			out.newlyFed = append(out.newlyFed, provider)
		}
	}
	for _, row := range p.rows {
		for _, id := range row.ensure {
			if err := d.ensure(id); err != nil {
				return out, err
			}
		}
		if err := d.putRow(row, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (d *derivation) putRow(row foldedRow, out *foldApplied) error {
	switch {
	case row.execution != nil:
		return d.tx.PutExecution(*row.execution)
	case row.attempt != nil:
		return d.putAttempt(*row.attempt, out)
	case row.span != nil:
		return d.tx.PutSpan(*row.span)
	case row.effect != nil:
		return d.tx.PutEffect(*row.effect)
	}
	return nil
}

// putAttempt stores an attempt the number pass did not.
func (d *derivation) putAttempt(a trace.Attempt, out *foldApplied) error {
	step := store.StepRef{ExecutionID: a.ExecutionID, StepID: a.StepID}
	if a.Number > 0 {
		// A number sent takes precedence over one derived: a
		// span-identified attempt holding it moves.
		moved, err := d.tx.VacateNumber(a.ExecutionID, a.StepID, a.Number)
		if err != nil {
			return err
		}
		if moved {
			out.renumber = append(out.renumber, step)
		}
	}
	if err := d.tx.PutAttempt(a); err != nil {
		return err
	}
	if a.Number == 0 {
		out.renumber = append(out.renumber, step)
	}
	return nil
}
