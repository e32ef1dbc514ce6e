package trace

import (
	"slices"
	"sort"
)

// Ref identifies the effect.
func (e Effect) Ref() EffectRef { return EffectRef{Provider: e.Provider, ID: e.ID} }

// EffectMatchesAttempt reports whether the effect could have been caused by
// the attempt: it arrived at the attempt's provider with the key the
// attempt sent (sentKey), or it names the attempt's execution and step. The
// attempt's ExecutionID and StepID must be set (World.Runs sets them).
func EffectMatchesAttempt(e Effect, a Attempt) bool {
	if sentKey(a, e.IdempotencyKey, e.Provider) {
		return true
	}
	return e.ExecutionID != "" && e.StepID != "" && e.ExecutionID == a.ExecutionID && e.StepID == a.StepID
}

// sentKey reports whether attempt a sent key k to provider p: the keys are
// equal and, when both sides name a provider, so are the providers. A
// receiving API keeps its own keys, so the same key at another provider is
// another request.
func sentKey(a Attempt, k, p string) bool {
	return k != "" && a.IdempotencyKey == k && sameProvider(a.Provider, p)
}

// sameProvider reports whether two provider names can be the same API: an
// empty name matches any.
func sameProvider(a, b string) bool {
	return a == "" || b == "" || a == b
}

// ownedByPeer reports whether e belongs to another execution than r's: it
// names an execution whose attempts, among r.Peers, sent its key (sentKey).
// Such an effect is that execution's alone; r may have sent the same key,
// but it sees the effect only on its key page, never as its steps' effect.
func ownedByPeer(r Run, e Effect) bool {
	return peersByKey(r.Peers).owns(r.Execution.ID, e)
}

// peerIndex holds a run's peers by the key they sent, so that judging each
// effect looks at the peers of its key, not at all of them.
type peerIndex map[string][]Attempt

func peersByKey(peers []Attempt) peerIndex {
	ix := peerIndex{}
	for _, p := range peers {
		if p.IdempotencyKey != "" {
			ix[p.IdempotencyKey] = append(ix[p.IdempotencyKey], p)
		}
	}
	return ix
}

// owns is ownedByPeer for the run of execution id.
func (ix peerIndex) owns(id string, e Effect) bool {
	if e.ExecutionID == "" || e.ExecutionID == id || e.IdempotencyKey == "" {
		return false
	}
	for _, p := range ix[e.IdempotencyKey] {
		if p.ExecutionID == e.ExecutionID && sentKey(p, e.IdempotencyKey, e.Provider) {
			return true
		}
	}
	return false
}

// keySender is one attempt's key, as keySenders needs it.
type keySender struct{ stepID, provider string }

// keySenders are the ids of the steps whose attempts sent e's key to e's
// provider, in step order; senders are the attempts carrying the key, in
// step order.
func keySenders(senders []keySender, e Effect) []string {
	var out []string
	for _, a := range senders {
		if sameProvider(a.provider, e.Provider) && !slices.Contains(out, a.stepID) {
			out = append(out, a.stepID)
		}
	}
	return out
}

// StepEffects maps each step id to the effects of r.Effects that belong to
// it, deduplicated by (provider, id) and sorted by time, then provider and
// id. Steps without effects are absent.
//
// An effect with a trace context belongs to the tool attempt whose span is
// its span or that span's nearest tool-call ancestor: that is the request
// the receiving API saw. Otherwise it belongs to the step whose attempts
// sent its key; an effect without a key, or whose key no attempt of the
// run sent, belongs to the step it names when it names this execution. The
// key wins over the names because it is what the receiving API saw; the
// names are only the caller's claim.
func (r Run) StepEffects() map[string][]Effect {
	return newEffectIndex(r).stepEffects()
}

// PlacedEffects are where a run's effects belong: ByStep as StepEffects
// gives them, Unattributed as UnattributedEffects does. Placing them is
// most of the cost of judging a run and of telling its incidents; a
// caller that needs both places them once (Run.PlaceEffects) and hands
// the result to each (JudgePlaced, IncidentsPlaced).
type PlacedEffects struct {
	ByStep       map[string][]Effect
	Unattributed []Effect
}

// PlaceEffects places r's effects.
func (r Run) PlaceEffects() PlacedEffects {
	ix := newEffectIndex(r)
	return PlacedEffects{ByStep: ix.stepEffects(), Unattributed: ix.unattributed()}
}

func (ix effectIndex) stepEffects() map[string][]Effect {
	r := ix.run
	out := map[string][]Effect{}
	type stepEffect struct {
		step string
		ref  EffectRef
	}
	seen := make(map[stepEffect]bool, len(r.Effects))
	for _, e := range r.Effects {
		stepID, ok := ix.step(e)
		if !ok {
			continue
		}
		if seen[stepEffect{stepID, e.Ref()}] {
			continue
		}
		seen[stepEffect{stepID, e.Ref()}] = true
		out[stepID] = append(out[stepID], e)
	}
	for _, es := range out {
		sortEffects(es)
	}
	return out
}

// UnattributedEffects are the effects of r.Effects that came from this
// execution's trace but belong to no step: the span that made the request
// is known, but no tool-call span above it arrived (an SDK that never
// exports a failed tool call's span). They are in the run's outbox, never
// silently dropped.
func (r Run) UnattributedEffects() []Effect {
	return newEffectIndex(r).unattributed()
}

func (ix effectIndex) unattributed() []Effect {
	r := ix.run
	var out []Effect
	seen := map[EffectRef]bool{}
	for _, e := range r.Effects {
		if !fromRunTrace(r, e) || seen[e.Ref()] {
			continue
		}
		if _, ok := ix.step(e); !ok {
			seen[e.Ref()] = true
			out = append(out, e)
		}
	}
	sortEffects(out)
	return out
}

// fromRunTrace reports whether e came from a trace of r: it carries a
// trace context that is not a stray trace's, or it joined r from one.
func fromRunTrace(r Run, e Effect) bool {
	return e.TraceID != "" && (!e.StrayTrace || e.JoinedExecutionID == r.Execution.ID)
}

// effectIndex finds the step an effect of one run belongs to.
type effectIndex struct {
	run   Run
	spans spanTree
	// keySenders holds, by key, the attempts that sent it, in step order.
	keySenders map[string][]keySender
	steps      map[string]bool
	peers      peerIndex
}

func newEffectIndex(r Run) effectIndex {
	ix := effectIndex{run: r, spans: newSpanTree(r), keySenders: map[string][]keySender{}, steps: map[string]bool{},
		peers: peersByKey(r.Peers)}
	for _, s := range r.Steps {
		ix.steps[s.ID] = true
		for _, a := range s.Attempts {
			if k := a.IdempotencyKey; k != "" {
				ix.keySenders[k] = append(ix.keySenders[k], keySender{stepID: s.ID, provider: a.Provider})
			}
		}
	}
	return ix
}

// step is the id of the step e belongs to, if any.
func (ix effectIndex) step(e Effect) (string, bool) {
	if e.JoinedExecutionID != "" && e.JoinedExecutionID == ix.run.Execution.ID {
		if a, _, ok := InferAttempt(e, ix.run); ok {
			return a.StepID, true
		}
	}
	if e.SpanID != "" {
		if a, ok := ix.spans.toolAttempt(e.SpanID); ok {
			return a.StepID, true
		}
	}
	return ix.keyedOrNamedStep(e)
}

// keyedOrNamedStep is the step whose attempts sent e's key to e's provider,
// else the step e names when it names this execution. An effect naming
// another execution that sent the same key belongs to that execution only
// (ownedByPeer), so it is no step's here.
func (ix effectIndex) keyedOrNamedStep(e Effect) (string, bool) {
	namesRun := e.ExecutionID != "" && e.ExecutionID == ix.run.Execution.ID
	if senders := ix.keySenders[e.IdempotencyKey]; e.IdempotencyKey != "" && len(senders) > 0 {
		if ix.peers.owns(ix.run.Execution.ID, e) {
			return "", false
		}
		if ids := keySenders(senders, e); len(ids) > 0 {
			// When steps collide on a key, the step the effect names is the better guess.
			if namesRun && slices.Contains(ids, e.StepID) {
				return e.StepID, true
			}
			return ids[0], true
		}
	}
	if namesRun && ix.steps[e.StepID] {
		return e.StepID, true
	}
	return "", false
}

// EffectStates says, for every effect of r.Effects that belongs to a step,
// whether it is that step's only effect (matched) or one of several
// (duplicate). Effects that belong to no step are absent: only the whole
// world can tell whether they are orphans.
func EffectStates(r Run) map[EffectRef]MatchState {
	ix := newEffectIndex(r)
	stepEffects := ix.stepEffects()
	return withOutboxDuplicates(effectStates(stepEffects, ix.unattributed()), identicalGroups(r, stepOfEffects(stepEffects)))
}

func effectStates(stepEffects map[string][]Effect, unattributed []Effect) map[EffectRef]MatchState {
	states := map[EffectRef]MatchState{}
	for _, es := range stepEffects {
		state := MatchMatched
		if len(es) > 1 {
			state = MatchDuplicate
		}
		for _, e := range es {
			states[e.Ref()] = state
		}
	}
	// An effect of the run's trace whose tool call never arrived matches
	// no attempt: the outbox says so, as the audit's orphan_effect does.
	for _, e := range unattributed {
		states[e.Ref()] = MatchOrphan
	}
	return states
}

// WorseState is the state an effect shown by several executions gets: a
// duplicate anywhere is a duplicate, matched anywhere beats orphan, so the
// result does not depend on which execution is judged last.
func WorseState(a, b MatchState) MatchState {
	if matchPrecedence[b] > matchPrecedence[a] {
		return b
	}
	return a
}

// sortEffects orders effects as the outbox happened: by time, then by
// provider and id so that equal times still sort the same way every time.
func sortEffects(es []Effect) {
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if !a.At.Equal(b.At) {
			return a.At.Before(b.At)
		}
		if a.Provider != b.Provider {
			return a.Provider < b.Provider
		}
		return a.ID < b.ID
	})
}
