package derive

import (
	"slices"

	"github.com/oncetrace/oncetrace/store"
)

// The attribute pass gives the commit's effects their executions. An
// effect naming no execution belongs to its trace's, else, until its
// attempts or spans arrive, to a placeholder named after the trace; a
// placeholder goes once the trace is known to be another execution's; and
// the effects of a stray trace join the execution whose attempt was in
// flight (store/stray.go).

// tracePlaceholders are the traces of effects naming no execution that no
// execution's attempts or spans claim (byTrace, as loaded): each is an
// execution of its own until they do.
func tracePlaceholders(unnamed map[string]bool, byTrace map[string][]string) []string {
	var out []string
	for _, t := range setList(unnamed) {
		if len(byTrace[t]) == 0 {
			out = append(out, t)
		}
	}
	return out
}

// strayCandidates completes what the fold noted for store.JoinStrayEffects:
// each trace once, and every step whose attempts changed.
func strayCandidates(noted store.StrayCandidates, steps map[store.StepRef]bool) store.StrayCandidates {
	c := noted
	c.Traces = setList(setOf(noted.Traces))
	c.EffectTraces = setList(setOf(noted.EffectTraces))
	c.Steps = nil
	for ref := range steps {
		c.Steps = append(c.Steps, ref)
	}
	return c
}

// attribute runs the attribute pass over what the fold pass stored, and
// returns the executions of the effects' traces.
func (d *derivation) attribute(p *foldPlan) (byTrace map[string][]string, err error) {
	// One query for the commit's traces, not one per effect. Asked after
	// this commit's spans are stored: a placeholder made before them would
	// be dropped just below.
	byTrace, err = d.tx.ExecutionsByTrace(setList(p.traces))
	if err != nil {
		return nil, err
	}
	for _, t := range tracePlaceholders(p.unnamedTraces, byTrace) {
		if err := d.ensure(t); err != nil {
			return nil, err
		}
		p.executions[t] = true
	}
	// An effect that arrived before any span of its trace made the trace id
	// its execution; once spans say the trace belongs to another
	// execution, that placeholder goes, so the result does not depend on
	// which arrived first. Likewise once a later report of an effect names
	// its execution, unless another effect of the trace still names none.
	for _, drop := range []struct {
		traces map[string]bool
		drop   func(string) (bool, error)
	}{{p.renamedTraces, d.tx.DropTracePlaceholder}, {p.namingEffects, d.tx.DropEffectPlaceholder}} {
		for _, t := range setList(drop.traces) {
			dropped, err := drop.drop(t)
			if err != nil {
				return nil, err
			}
			if dropped {
				delete(p.executions, t)
				p.ch.executions[t] = true
			}
		}
	}
	// A trace of nothing but lone HTTP spans is no execution: its effects
	// join the execution whose attempt was in flight, decided again
	// whenever a span, attempt or effect could change that.
	joins, err := d.tx.JoinStrayEffects(strayCandidates(p.stray, p.ch.steps))
	if err != nil {
		return nil, err
	}
	d.noteJoins(&p.reach, joins)
	return byTrace, nil
}

// readWhole notes executions a pass changed in a way the run cache's
// patching does not follow (effects joined, spans moved): changed ones are
// reached and read whole; dropped ones are reached no more.
func (d *derivation) readWhole(r *reach, changed, dropped []string) {
	for _, id := range changed {
		r.executions[id] = true
	}
	for _, id := range dropped {
		delete(r.executions, id)
	}
	for _, id := range slices.Concat(changed, dropped) {
		r.ch.executions[id] = true
		if d.cache != nil {
			delete(d.cache.runs, id)
		}
	}
}

// noteJoins notes what the stray joins changed.
func (d *derivation) noteJoins(r *reach, joins store.StrayJoins) {
	d.readWhole(r, joins.Executions, joins.Dropped)
	for _, ref := range joins.Effects {
		r.ch.effects[ref] = true
		r.effectRefs = append(r.effectRefs, ref)
	}
	for _, k := range joins.Keys {
		r.keys[k] = true
		r.ch.keys[k] = true
	}
}

// renumber ranks the attempts of the steps the fold pass left to it, each
// step once.
func (d *derivation) renumber(steps []store.StepRef) error {
	seen := map[store.StepRef]bool{}
	for _, ref := range steps {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		if err := d.tx.RenumberStep(ref.ExecutionID, ref.StepID); err != nil {
			return err
		}
	}
	return nil
}

// adopt gives the spans of the commit's traces that name no execution but
// their trace to the trace's one named execution (store.AdoptTraceSpans),
// before effects are attributed, so that the trace's effects find it.
func (d *derivation) adopt(p *foldPlan) error {
	traces := setOf(p.stray.Traces)
	for _, t := range p.stray.LoneTraces {
		traces[t] = true
	}
	adopted, err := d.tx.AdoptTraceSpans(setList(traces))
	if err != nil {
		return err
	}
	d.readWhole(&p.reach, adopted.Executions, adopted.Dropped)
	return nil
}
