package views

import (
	"bytes"

	"github.com/oncetrace/oncetrace/trace"
)

// KeyInput is one read of what carried an idempotency key (what
// store.ReadKey returns).
type KeyInput struct {
	Key      string
	Attempts []trace.Attempt
	// Runs are the attempts' executions, whole: an attempt's outcome is
	// derived from its run, as on the execution page.
	Runs     map[string]trace.Run
	Effects  []OutboxRow
	Findings []trace.Finding
}

// NewKeyView builds the key page's model; its JSON twin is written from
// the same model, so the two cannot tell different outcomes.
func NewKeyView(in KeyInput) KeyView {
	v := KeyView{Key: in.Key, Effects: in.Effects}
	for _, a := range in.Attempts {
		v.Attempts = append(v.Attempts, KeyAttempt{Attempt: a, Outcome: in.Runs[a.ExecutionID].Outcome(a)})
		first := in.Attempts[0]
		if a.StepID != first.StepID {
			v.StepsVary = true
		}
		if len(a.Args) > 0 && len(first.Args) > 0 && !bytes.Equal(a.Args, first.Args) {
			v.ArgsVaries = true
		}
	}
	for _, f := range in.Findings {
		v.Findings = append(v.Findings, NewFindingViewAway(f))
	}
	return v
}
