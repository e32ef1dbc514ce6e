package trace

import "slices"

// AttemptIndex is the one place an effect is matched to the attempts that
// could have caused it, for many attempts at once: the world audit, the
// writer's orphan recheck and a rebuild all ask it, so that they cannot
// disagree. Matching itself is EffectMatchesAttempt's.
type AttemptIndex struct {
	keys  map[string][]string // key -> the providers its attempts named, each once ("" for none)
	steps map[[2]string]bool  // (execution id, step id) of every attempt
}

// IndexAttempts indexes attempts, whose ExecutionID and StepID must be set.
func IndexAttempts(attempts []Attempt) AttemptIndex {
	idx := AttemptIndex{keys: map[string][]string{}, steps: map[[2]string]bool{}}
	for _, a := range attempts {
		if k := a.IdempotencyKey; k != "" && !slices.Contains(idx.keys[k], a.Provider) {
			idx.keys[k] = append(idx.keys[k], a.Provider)
		}
		idx.steps[[2]string{a.ExecutionID, a.StepID}] = true
	}
	return idx
}

// Claims reports whether e belongs to some execution: it carries a trace
// context (its trace's execution owns it, with or without a tool call
// seen), or an indexed attempt matches it (EffectMatchesAttempt). An
// effect nobody claims is an orphan (OrphanFinding).
func (idx AttemptIndex) Claims(e Effect) bool {
	// A stray trace's context claims nothing: its effect belongs to the
	// execution it joined, if any (InferAttempt).
	if e.TraceID != "" && (!e.StrayTrace || e.JoinedExecutionID != "") {
		return true
	}
	// sentKey's rule: the same key, at the same provider when both name one.
	if e.IdempotencyKey != "" && slices.ContainsFunc(idx.keys[e.IdempotencyKey], func(p string) bool { return sameProvider(p, e.Provider) }) {
		return true
	}
	return e.ExecutionID != "" && e.StepID != "" && idx.steps[[2]string{e.ExecutionID, e.StepID}]
}
