package trace

import (
	"cmp"
	"slices"
	"time"
)

// IncidentKind says which story an incident tells.
type IncidentKind string

const (
	// IncidentDuplicate: one step caused more than one effect.
	IncidentDuplicate IncidentKind = "duplicate"
	// IncidentRepeated: a critical rule fired for a step that caused at
	// most one effect (re-executed after a crash, unsafe retried, unstable
	// key): it acted again, and the outbox shows no second effect of it.
	IncidentRepeated IncidentKind = "repeated"
	// IncidentSuppressed: the provider took the step's request for a
	// repeat of another execution's (suppressed_as_repeat).
	IncidentSuppressed IncidentKind = "suppressed"
	// IncidentKey: a finding about a key rather than a step's effects
	// (key_collision), or a critical rule the incident does not tell.
	IncidentKey IncidentKind = "key"
	// IncidentHeld is not critical: a step ran again, and the provider's
	// key store or the agent's journal kept it to one effect. Told only
	// for a run without critical findings.
	IncidentHeld IncidentKind = "held"
)

// Incident is what one step's critical findings mean in facts: the step,
// its effects in time order with the attempt that caused each, and the
// crash gap it ran across. Views put it into words.
type Incident struct {
	Kind IncidentKind
	// Findings are the critical findings told by the incident, in
	// SortFindings order; empty for a held one.
	Findings []Finding
	Step     Step
	// Effects are the step's effects (StepEffects) by time: the first is
	// the original, the others are extra. For a suppressed step, the
	// effects that answered it, which belong to another execution.
	Effects []CausedEffect
	// Gap is the crash gap between the step's first attempt and a later
	// one, if there is one.
	Gap *Gap
}

// CausedEffect is an effect and the attempt of its step that caused it.
type CausedEffect struct {
	Effect
	// Attempt is the number of the attempt that caused it; 0 when no
	// single attempt is shown to.
	Attempt int
}

// Culprits are the attempts that caused an extra effect, in order, each
// once.
func (in Incident) Culprits() []int {
	var out []int
	if in.Kind != IncidentDuplicate {
		return nil
	}
	for _, ce := range in.Effects[1:] {
		if ce.Attempt != 0 && !slices.Contains(out, ce.Attempt) {
			out = append(out, ce.Attempt)
		}
	}
	return out
}

// Rules are the rules of the incident's findings.
func (in Incident) Rules() []Rule {
	var out []Rule
	for _, f := range in.Findings {
		if !slices.Contains(out, f.Rule) {
			out = append(out, f.Rule)
		}
	}
	return out
}

// Incidents tells the run's critical findings as incidents: one per step
// with critical step findings (a duplicate and the crash that caused it
// are one incident), one per key_collision. A run without critical
// findings gets its held incidents instead. gaps are the run's (Gaps).
// They come worst first, then in natural step order (SortIncidents),
// whatever the order of findings.
func Incidents(r Run, findings []Finding, gaps []Gap) []Incident {
	return IncidentsPlaced(r, findings, gaps, r.StepEffects())
}

// IncidentsPlaced is Incidents with r's effects placed by step already
// (r.PlaceEffects().ByStep, or r.StepEffects()).
func IncidentsPlaced(r Run, findings []Finding, gaps []Gap, stepEffects map[string][]Effect) []Incident {
	out := incidents(r, findings, gaps, stepEffects)
	SortIncidents(out)
	return out
}

// SortIncidents orders incidents worst first: more effects duplicated,
// then an effect that never went out, then a repeat whose second effect is
// unverified, then a key's finding, and last a held repeat kept to one
// effect. Incidents alike in that are in natural step order
// (CompareNatural: step-2, step-14, step-123), then by their first finding.
func SortIncidents(is []Incident) {
	slices.SortStableFunc(is, func(a, b Incident) int {
		return cmp.Or(
			cmp.Compare(a.Kind.rank(), b.Kind.rank()),
			cmp.Compare(b.duplicates(), a.duplicates()),
			CompareNatural(a.Step.ID, b.Step.ID),
			compareFirstFindings(a.Findings, b.Findings),
		)
	})
}

// rank orders incident kinds worst first (SortIncidents).
func (k IncidentKind) rank() int {
	switch k {
	case IncidentDuplicate:
		return 0
	case IncidentSuppressed:
		return 1
	case IncidentRepeated:
		return 2
	case IncidentKey:
		return 3
	case IncidentHeld:
		return 5
	}
	return 4
}

// duplicates is how many effects a duplicate incident's step caused; 0
// for any other kind.
func (in Incident) duplicates() int {
	if in.Kind != IncidentDuplicate {
		return 0
	}
	return len(in.Effects)
}

func compareFirstFindings(a, b []Finding) int {
	if len(a) == 0 || len(b) == 0 {
		return cmp.Compare(len(a), len(b))
	}
	return CompareFindingPlaces(a[0], b[0])
}

func incidents(r Run, findings []Finding, gaps []Gap, effects map[string][]Effect) []Incident {
	// Sorted here so that an incident's findings, and its first rule, do
	// not depend on the order the caller read them in.
	findings = slices.Clone(findings)
	SortFindings(findings)
	tree := newSpanTree(r)
	steps := map[string]Step{}
	for _, s := range r.Steps {
		steps[s.ID] = s
	}
	var out []Incident
	byStep := map[string]int{} // step id -> index in out
	for _, f := range findings {
		if f.Severity != SeverityCritical || (f.ExecutionID != "" && f.ExecutionID != r.Execution.ID) {
			continue
		}
		s, known := steps[f.StepID]
		if f.Rule == RuleKeyCollision || !known {
			out = append(out, Incident{Kind: IncidentKey, Findings: []Finding{f}, Step: s})
			continue
		}
		if i, ok := byStep[s.ID]; ok {
			out[i].Findings = append(out[i].Findings, f)
			continue
		}
		byStep[s.ID] = len(out)
		out = append(out, Incident{Findings: []Finding{f}, Step: s})
	}
	for i := range out {
		in := &out[i]
		if in.Kind == IncidentKey {
			continue
		}
		in.Effects = causedEffects(r, tree, in.Step, effects[in.Step.ID])
		switch {
		case len(in.Effects) > 1:
			in.Kind = IncidentDuplicate
		case in.Findings[0].Rule == RuleSuppressedAsRepeat:
			in.Kind = IncidentSuppressed
			in.Effects = suppressingEffects(r, in.Findings[0])
		default:
			in.Kind = IncidentRepeated
		}
		in.Gap = crashGapAcross(in.Step, gaps)
	}
	if len(out) > 0 {
		return out
	}
	return heldIncidents(r, tree, effects, gaps)
}

// heldIncidents are the steps that ran again, a repeat the provider
// answered from its key store (deduplicated) or the agent from its journal
// (replayed), and caused exactly one effect.
func heldIncidents(r Run, tree spanTree, effects map[string][]Effect, gaps []Gap) []Incident {
	var out []Incident
	for _, s := range r.Steps {
		es := effects[s.ID]
		if len(s.Attempts) < 2 || len(es) != 1 {
			continue
		}
		repeat := slices.ContainsFunc(s.Attempts[1:], func(a Attempt) bool {
			return a.Deduplicated || replayed(a)
		})
		if !repeat {
			continue
		}
		out = append(out, Incident{Kind: IncidentHeld, Step: s, Effects: causedEffects(r, tree, s, es), Gap: crashGapAcross(s, gaps)})
	}
	return out
}

func causedEffects(r Run, tree spanTree, s Step, es []Effect) []CausedEffect {
	out := make([]CausedEffect, len(es))
	for i, e := range es {
		n, _ := r.effectCause(tree, s, e)
		out[i] = CausedEffect{Effect: e, Attempt: n}
	}
	return out
}

// suppressingEffects are the effects a suppressed_as_repeat finding names,
// as the run holds them, by time.
func suppressingEffects(r Run, f Finding) []CausedEffect {
	var out []CausedEffect
	for _, e := range r.Effects {
		if slices.Contains(f.Effects, e.Ref()) && !slices.ContainsFunc(out, func(x CausedEffect) bool { return x.Ref() == e.Ref() }) {
			out = append(out, CausedEffect{Effect: e})
		}
	}
	slices.SortStableFunc(out, func(a, b CausedEffect) int { return a.At.Compare(b.At) })
	return out
}

// crashGapAcross is the first crash gap with an attempt of s before it and
// one after it.
func crashGapAcross(s Step, gaps []Gap) *Gap {
	for _, g := range gaps {
		if g.Kind != GapCrash {
			continue
		}
		before := slices.ContainsFunc(s.Attempts, func(a Attempt) bool { return !a.StartedAt.IsZero() && !a.StartedAt.After(g.Start) })
		after := slices.ContainsFunc(s.Attempts, func(a Attempt) bool { return !a.StartedAt.Before(g.End) })
		if before && after {
			return &g
		}
	}
	return nil
}

// EffectCause is the number of the attempt of s that caused e. The
// effect's trace context names it when the request's span belongs to an
// attempt of s. Otherwise, among the attempts EffectMatchesAttempt
// accepts that called the tool and were not answered from a key store
// (neither replayed nor deduplicated), it is the one in flight when e
// happened: an attempt runs from its start to its end, or, if it never
// ended, to the next attempt's start. When none was in flight, it is the
// last one started before e; when e has no time, the only candidate. It
// fails when nothing singles one out.
func (r Run) EffectCause(s Step, e Effect) (int, bool) {
	return r.effectCause(newSpanTree(r), s, e)
}

// effectCause is EffectCause with the run's span tree built once.
func (r Run) effectCause(tree spanTree, s Step, e Effect) (int, bool) {
	if e.SpanID != "" {
		if a, ok := tree.toolAttempt(e.SpanID); ok && a.StepID == s.ID {
			return a.Number, true
		}
	}
	var candidates []Attempt
	for _, a := range s.Attempts {
		a.ExecutionID, a.StepID = cmp.Or(a.ExecutionID, r.Execution.ID), cmp.Or(a.StepID, s.ID)
		if a.Deduplicated || replayed(a) || !EffectMatchesAttempt(e, a) {
			continue
		}
		candidates = append(candidates, a)
	}
	if len(candidates) == 0 {
		return 0, false
	}
	if e.At.IsZero() {
		if len(candidates) == 1 {
			return candidates[0].Number, true
		}
		return 0, false
	}
	var inFlight []int
	last, lastStart := 0, time.Time{}
	for _, a := range candidates {
		if a.StartedAt.IsZero() || a.StartedAt.After(e.At) {
			continue
		}
		if a.StartedAt.After(lastStart) || last == 0 {
			last, lastStart = a.Number, a.StartedAt
		}
		if end := attemptEnd(s, a); end.IsZero() || !e.At.After(end) {
			inFlight = append(inFlight, a.Number)
		}
	}
	switch {
	case len(inFlight) == 1:
		return inFlight[0], true
	case len(inFlight) > 1:
		return 0, false
	}
	return last, last != 0
}

// attemptEnd is when a ended or, if it never did, when the step's next
// attempt started; zero when neither is known.
func attemptEnd(s Step, a Attempt) time.Time {
	if !a.EndedAt.IsZero() {
		return a.EndedAt
	}
	var next time.Time
	for _, b := range s.Attempts {
		if b.StartedAt.After(a.StartedAt) && (next.IsZero() || b.StartedAt.Before(next)) {
			next = b.StartedAt
		}
	}
	return next
}
