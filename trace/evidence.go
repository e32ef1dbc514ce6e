package trace

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Evidence from the outbox (docs/audit.md, "Evidence"): what the providers
// did, plus which run did it, proves a duplicate without any tool span
// recognised. Two or more effects of one execution at one provider with one
// fingerprint asked for the same thing more than once; each is a real effect
// (a provider's deduplicated answer records none), so the provider did not
// deduplicate them.

// RuleRepeatedEffect: identical effects that are not a proven duplicate:
// claimed by two different recognised steps of one run (two intents that
// asked for the same thing), or, with no run id at all, close in time.
const RuleRepeatedEffect Rule = "repeated_effect"

func init() { Severities[RuleRepeatedEffect] = SeverityWarning }

// OwnEffects are the effects of r.Effects that belong to this execution:
// all but those a peer execution owns (an effect naming another execution
// that sent its key). Those stay in r.Effects for the key page and
// suppressed_as_repeat, but are never this execution's effects: not in its
// outbox lane, its effects list or its count. Each ref once, in r's order.
func (r Run) OwnEffects() []Effect {
	peers := peersByKey(r.Peers)
	out := make([]Effect, 0, len(r.Effects))
	seen := make(map[EffectRef]bool, len(r.Effects))
	for _, e := range r.Effects {
		if seen[e.Ref()] || peers.owns(r.Execution.ID, e) {
			continue
		}
		seen[e.Ref()] = true
		out = append(out, e)
	}
	return out
}

// identicalEffects is one group of a run's own effects at one provider
// with one fingerprint, two or more of them.
type identicalEffects struct {
	provider, fingerprint string
	effects               []Effect // sorted as the outbox happened
	steps                 []string // the distinct steps they belong to, sorted
	// intents are the steps of steps whose attempts carried arguments: a
	// step known only from a span without them (ADK exports a failed tool
	// call so) says nothing of what it asked, so it is no second intent.
	intents   []string
	unclaimed int // how many belong to no step
}

// identicalGroups finds the run's groups of identical effects, given the
// step each effect belongs to (absent: none), in provider and fingerprint
// order.
func identicalGroups(r Run, stepOf map[EffectRef]string) []identicalEffects {
	var withArgs map[string]bool // steps whose attempts carried arguments, when first asked
	hasArgs := func(step string) bool {
		if withArgs == nil {
			withArgs = map[string]bool{}
			for _, s := range r.Steps {
				withArgs[s.ID] = slices.ContainsFunc(s.Attempts, func(a Attempt) bool { return len(a.Args) > 0 })
			}
		}
		return withArgs[step]
	}
	type groupKey struct{ provider, fingerprint string }
	var byKey map[groupKey][]Effect
	for _, e := range r.OwnEffects() {
		if e.Fingerprint == "" {
			continue
		}
		if byKey == nil {
			byKey = map[groupKey][]Effect{}
		}
		k := groupKey{e.Provider, e.Fingerprint}
		byKey[k] = append(byKey[k], e)
	}
	var out []identicalEffects
	for _, k := range slices.SortedFunc(maps.Keys(byKey), func(a, b groupKey) int {
		return cmp.Or(cmp.Compare(a.provider, b.provider), cmp.Compare(a.fingerprint, b.fingerprint))
	}) {
		es := byKey[k]
		if len(es) < 2 {
			continue
		}
		sortEffects(es)
		g := identicalEffects{provider: k.provider, fingerprint: k.fingerprint, effects: es}
		for _, e := range es {
			step, ok := stepOf[e.Ref()]
			switch {
			case !ok:
				g.unclaimed++
			case !slices.Contains(g.steps, step):
				g.steps = append(g.steps, step)
			}
		}
		slices.Sort(g.steps)
		for _, step := range g.steps {
			if hasArgs(step) {
				g.intents = append(g.intents, step)
			}
		}
		out = append(out, g)
	}
	return out
}

// proven reports whether the group is a duplicate the outbox proves: no
// two different intents (steps with arguments) claim its effects, and not
// all of them sit in one step (that step's own duplicate_effect says so
// already).
func (g identicalEffects) proven() bool {
	return len(g.intents) <= 1 && (g.unclaimed > 0 || len(g.steps) > 1)
}

// outboxFindings are the findings identical effects give: a critical
// duplicate_effect for a proven group, a repeated_effect warning for a
// group two recognised steps claim.
func outboxFindings(r Run, groups []identicalEffects) []Finding {
	var fs []Finding
	for _, g := range groups {
		summary := g.effects[0].Summary
		what := fmt.Sprintf("%d identical %s", len(g.effects), effectNoun(g.fingerprint))
		if summary != "" {
			what += " (" + summary + ")"
		}
		switch {
		case g.proven():
			f := Finding{Rule: RuleDuplicateEffect, Severity: Severities[RuleDuplicateEffect], ExecutionID: r.Execution.ID,
				Effects: refs(g.effects), IdempotencyKey: g.effects[0].IdempotencyKey}
			why := "no tool call of a known dialect tied them to a step"
			switch {
			case len(g.intents) == 1:
				f.StepID = g.intents[0]
				why = fmt.Sprintf("%d of them belong to step %s, the others to no tool call whose arguments oncetrace saw", len(g.effects)-g.unclaimed, g.intents[0])
			case len(g.steps) > 0:
				f.StepID = g.steps[0]
				why = "no tool call whose arguments oncetrace saw tied them to one step"
			}
			f.Message = fmt.Sprintf("%s at %s in this run, not deduplicated by the provider: %s — %s; the outbox proves it (same fingerprint)",
				what, g.provider, effectList(g.effects), why)
			fs = append(fs, f)
		case len(g.intents) >= 2:
			fs = append(fs, Finding{Rule: RuleRepeatedEffect, Severity: Severities[RuleRepeatedEffect], ExecutionID: r.Execution.ID,
				StepID: g.intents[0], Effects: refs(g.effects), IdempotencyKey: g.effects[0].IdempotencyKey,
				Message: fmt.Sprintf("%s at %s in this run were caused by different steps (%s): %s — maybe one intent sent twice, maybe two intents that asked for the same thing",
					what, g.provider, joinAnd(g.intents), effectList(g.effects))})
		}
	}
	return fs
}

// effectNoun names what a fingerprint's kind of effect is called.
func effectNoun(fingerprint string) string {
	switch kind, _, _ := strings.Cut(fingerprint, ":"); kind {
	case "mail":
		return "emails"
	case "http":
		return "requests"
	}
	return "effects"
}

// withOutboxDuplicates marks the effects of proven groups duplicates in
// states, copying states first when it changes anything.
func withOutboxDuplicates(states map[EffectRef]MatchState, groups []identicalEffects) map[EffectRef]MatchState {
	copied := false
	for _, g := range groups {
		if !g.proven() {
			continue
		}
		for _, e := range g.effects {
			if states[e.Ref()] == MatchDuplicate {
				continue
			}
			if !copied {
				states, copied = maps.Clone(states), true
				if states == nil {
					states = map[EffectRef]MatchState{}
				}
			}
			states[e.Ref()] = MatchDuplicate
		}
	}
	return states
}

// stepOfEffects inverts a step -> effects map.
func stepOfEffects(stepEffects map[string][]Effect) map[EffectRef]string {
	out := map[EffectRef]string{}
	for step, es := range stepEffects {
		for _, e := range es {
			out[e.Ref()] = step
		}
	}
	return out
}

// RepeatedOrphans are the repeated_effect warnings of outbox-only effects:
// orphans (no run id ties them to any execution) at one provider with one
// fingerprint within cfg.RepeatWindow of an earlier one. Without a run id
// two identical emails may be two intents, so this is a warning, on each
// effect that repeats an earlier one; findings come in orphans' order.
// orphans must hold every orphan identical to each one judged.
func RepeatedOrphans(orphans []Effect, cfg Config) []Finding {
	window := cfg.withDefaults().RepeatWindow
	type groupKey struct{ provider, fingerprint string }
	groups := map[groupKey][]Effect{}
	for _, e := range orphans {
		if e.Fingerprint != "" && !e.At.IsZero() {
			k := groupKey{e.Provider, e.Fingerprint}
			if !slices.ContainsFunc(groups[k], func(x Effect) bool { return x.Ref() == e.Ref() }) {
				groups[k] = append(groups[k], e)
			}
		}
	}
	var fs []Finding
	seen := map[EffectRef]bool{}
	for _, e := range orphans {
		if e.Fingerprint == "" || e.At.IsZero() || seen[e.Ref()] {
			continue
		}
		seen[e.Ref()] = true
		var earlier []Effect
		for _, x := range groups[groupKey{e.Provider, e.Fingerprint}] {
			before := x.At.Before(e.At) || x.At.Equal(e.At) && x.ID < e.ID
			if x.Ref() != e.Ref() && before && e.At.Sub(x.At) <= window {
				earlier = append(earlier, x)
			}
		}
		if len(earlier) == 0 {
			continue
		}
		sortEffects(earlier)
		what := "the same " + strings.TrimSuffix(effectNoun(e.Fingerprint), "s")
		if e.Summary != "" {
			what += " (" + e.Summary + ")"
		}
		first := earlier[len(earlier)-1]
		fs = append(fs, Finding{Rule: RuleRepeatedEffect, Severity: Severities[RuleRepeatedEffect],
			Effects: append([]EffectRef{e.Ref()}, refs(earlier)...), IdempotencyKey: e.IdempotencyKey,
			Message: fmt.Sprintf("%s %s asked for %s as %s did %s earlier, and no run id ties them to an execution: maybe one intent sent twice, maybe two intents (identical effects within %s)",
				e.Provider, e.ID, what, effectList(earlier), humanDuration(e.At.Sub(first.At)), humanDuration(window))})
	}
	return fs
}
