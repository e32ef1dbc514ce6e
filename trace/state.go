package trace

import (
	"cmp"
	"slices"
)

// AuditState is what an execution's audit may claim (docs/audit.md: three
// states, never blurred).
type AuditState string

const (
	// StateCritical: a critical finding.
	StateCritical AuditState = "critical"
	// StateUnverified: no critical finding, but nothing proves that some
	// side-effecting step happened once: it has no effect known, or an
	// effect of the run's trace belongs to no step.
	StateUnverified AuditState = "unverified"
	// StateClean: effects are known for every side-effecting step and none
	// is duplicated.
	StateClean AuditState = "clean"
)

// AuditStates lists the states, worst first.
var AuditStates = []AuditState{StateCritical, StateUnverified, StateClean}

// Verdict is an execution's audit state and, when unverified, why.
type Verdict struct {
	State AuditState `json:"state"`
	// Unverified are the side-effecting steps with no effect known.
	Unverified []string `json:"unverified_steps,omitempty"`
	// Unattributed are effects of the run's trace that belong to no step.
	Unattributed []EffectRef `json:"unattributed_effects,omitempty"`
}

// Judge decides the run's audit state from its findings (AuditRun's).
func Judge(r Run, findings []Finding) Verdict {
	ix := newEffectIndex(r)
	return judge(r, findings, ix.stepEffects(), ix.unattributed())
}

// JudgePlaced is Judge with r's effects placed already (r.PlaceEffects()).
func JudgePlaced(r Run, findings []Finding, placed PlacedEffects) Verdict {
	return judge(r, findings, placed.ByStep, placed.Unattributed)
}

func judge(r Run, findings []Finding, effects map[string][]Effect, unattributed []Effect) Verdict {
	var v Verdict
	for _, s := range r.Steps {
		if s.Class().SideEffecting() && len(effects[s.ID]) == 0 {
			v.Unverified = append(v.Unverified, s.ID)
		}
	}
	for _, e := range unattributed {
		v.Unattributed = append(v.Unattributed, e.Ref())
	}
	switch {
	case CriticalCount(findings) > 0:
		v.State = StateCritical
	case len(v.Unverified) > 0 || len(v.Unattributed) > 0:
		v.State = StateUnverified
	default:
		v.State = StateClean
	}
	return v
}

// NumberSpanAttempts numbers the attempts of one step that are identified
// by their span: by start time, then trace and span id, each taking the
// lowest number no attempt of the step was sent with. The numbers depend
// only on the set of attempts, never on arrival order. It returns the
// number of each "trace id/span id".
func NumberSpanAttempts(sent []int, bySpan []Attempt) map[string]int {
	taken := map[int]bool{}
	for _, n := range sent {
		taken[n] = true
	}
	ordered := slices.Clone(bySpan)
	slices.SortFunc(ordered, func(a, b Attempt) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), cmp.Compare(a.TraceID, b.TraceID), cmp.Compare(a.SpanID, b.SpanID))
	})
	out := make(map[string]int, len(ordered))
	next := 1
	for _, a := range ordered {
		for taken[next] {
			next++
		}
		out[a.TraceID+"/"+a.SpanID] = next
		taken[next] = true
	}
	return out
}
