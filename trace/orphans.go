package trace

import "slices"

// OrphanPlan is what an orphan recheck decided for the effects it judged:
// which to mark orphan and which back to matched, the findings to store
// for them, and which executions and effects the decision touches.
type OrphanPlan struct {
	// Orphans no attempt can have caused; Matched some attempt can have.
	// Effects a trace context claims are in neither: the analysis of the
	// execution owning them alone decides their state.
	Orphans, Matched []EffectRef
	// Findings are the orphan_effect findings of the orphans, in their
	// order, then the repeated_effect findings among them.
	Findings []Finding
	// Effects are the judged effects whose state the recheck may set, in
	// the candidates' order.
	Effects []EffectRef
	// Executions are those an attempt or a judged effect belongs to,
	// sorted: they must be re-counted and their runs analysed again.
	Executions []string
}

// PlanOrphanRecheck decides, for candidate effects and the attempts that
// could match them (by key or by step), which are orphans (AttemptIndex
// decides, as for the world audit) and which are matched. An effect its
// trace context claims (and a stray trace's effect that joined an
// execution) is left to the analysis of the execution that owns it, which
// alone can tell whether a tool call sent it.
func PlanOrphanRecheck(candidates []Effect, attempts []Attempt, cfg Config) OrphanPlan {
	var plan OrphanPlan
	claimed := IndexAttempts(attempts)
	touched := map[string]bool{}
	for _, a := range attempts {
		touched[a.ExecutionID] = true // sent a candidate's key, or ran the step it names
	}
	var orphans []Effect
	for _, f := range candidates {
		switch {
		case f.TraceID != "" && (!f.StrayTrace || f.JoinedExecutionID != ""):
			// Its trace's execution owns it: a state set here would stay
			// whether or not that execution's analysis runs in this commit.
		case claimed.Claims(f):
			plan.Matched = append(plan.Matched, f.Ref())
			plan.Effects = append(plan.Effects, f.Ref())
		default:
			plan.Orphans = append(plan.Orphans, f.Ref())
			plan.Effects = append(plan.Effects, f.Ref())
			plan.Findings = append(plan.Findings, OrphanFinding(f))
			orphans = append(orphans, f)
		}
		if f.ExecutionID != "" {
			touched[f.ExecutionID] = true
		}
	}
	plan.Findings = append(plan.Findings, RepeatedOrphans(orphans, cfg)...)
	plan.Executions = make([]string, 0, len(touched))
	for id := range touched {
		plan.Executions = append(plan.Executions, id)
	}
	slices.Sort(plan.Executions)
	return plan
}
