package derive

import (
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// The number pass folds the attempts of the touched steps that have none
// stored yet, and numbers those identified by their span as RenumberStep
// would once they were stored: they are then stored together in a few
// statements, rather than each under a placeholder that RenumberStep moves.
// Attempts of other steps are left to the fold pass.

// newAttemptSteps is what the number pass loads for: the steps of the
// commit's attempts, each with its attempts' entities.
func newAttemptSteps(touched map[string][]trace.Event) map[store.StepRef][]string {
	bySteps := map[store.StepRef][]string{}
	for entity, fresh := range touched {
		if fresh[0].Type != trace.EventAttempt {
			continue
		}
		// An attempt's entity names its step, so every event of it does.
		ref := store.StepRef{ExecutionID: fresh[0].Attempt.ExecutionID, StepID: fresh[0].Attempt.StepID}
		bySteps[ref] = append(bySteps[ref], entity)
	}
	return bySteps
}

// planNumbers numbers the attempts of the steps that have none stored
// (stored says which do), by entity. A step with an attempt that neither
// sends a number nor is told apart by its span is left out: PutAttempt
// gives it a placeholder.
func planNumbers(bySteps map[store.StepRef][]string, all map[string][]trace.Event, stored map[store.StepRef]bool) map[string]store.NumberedAttempt {
	out := map[string]store.NumberedAttempt{}
	for ref, entities := range bySteps {
		if stored[ref] {
			continue
		}
		folded, ok := foldNewStep(entities, all)
		if !ok {
			continue
		}
		var sent []int
		var bySpan []trace.Attempt
		for _, a := range folded {
			if a.Number != 0 {
				sent = append(sent, a.Number)
			} else {
				bySpan = append(bySpan, a)
			}
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
	return out
}

// foldNewStep folds the attempts of a step, in the order of entities; not
// ok when one without a number is not told apart from the others by its
// span.
func foldNewStep(entities []string, all map[string][]trace.Event) ([]trace.Attempt, bool) {
	folded := make([]trace.Attempt, len(entities))
	spans := map[string]bool{}
	for i, entity := range entities {
		a := trace.FoldAttempt(all[entity])
		folded[i] = a
		if a.Number != 0 {
			continue
		}
		span := a.TraceID + "/" + a.SpanID
		if a.SpanID == "" || spans[span] {
			return nil, false
		}
		spans[span] = true
	}
	return folded, true
}

// number runs the number pass: the attempts it numbered, by entity, are
// stored (and their executions created) before the fold pass, as
// attempts' entities sort first: an effect folded then finds them by
// their trace.
func (d *derivation) number(entities []string, touched, all map[string][]trace.Event) (map[string]store.NumberedAttempt, error) {
	bySteps := newAttemptSteps(touched)
	if len(bySteps) == 0 {
		return nil, nil
	}
	refs := make([]store.StepRef, 0, len(bySteps))
	for ref := range bySteps {
		refs = append(refs, ref)
	}
	stored, err := d.tx.StepsWithAttempts(refs)
	if err != nil {
		return nil, err
	}
	numbered := planNumbers(bySteps, all, stored)
	newAttempts := make([]store.NumberedAttempt, 0, len(numbered))
	for _, entity := range entities {
		if n, ok := numbered[entity]; ok {
			if err := d.ensure(n.Attempt.ExecutionID); err != nil {
				return nil, err
			}
			newAttempts = append(newAttempts, n)
		}
	}
	return numbered, d.tx.PutNumberedAttempts(newAttempts)
}
