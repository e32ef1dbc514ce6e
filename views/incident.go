package views

import "github.com/oncetrace/oncetrace/trace"

// AttemptRef names one attempt of a step.
type AttemptRef struct {
	StepID string
	Number int
}

// IncidentMarks are what the timeline marks from the critical findings: the
// attempts that caused an extra effect, and each duplicated effect's place
// among its step's effects.
type IncidentMarks struct {
	// Culprits are the attempts that caused an extra effect, with their
	// label ("caused duplicate").
	Culprits map[AttemptRef]string
	// EffectLabels place each duplicated effect: "1 of 2 · original",
	// "2 of 2 · extra".
	EffectLabels map[trace.EffectRef]string
}
