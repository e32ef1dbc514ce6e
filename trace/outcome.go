package trace

// Outcome is the attempt's outcome as sent or, when it has none, derived:
// lost when the execution moved on without it, running otherwise.
//
// An attempt is lost when the execution is terminal or any attempt of the
// run started after it: a run that went on cannot still be waiting for it,
// and a new worker picking up the run always shows as a later start. An
// attempt whose start nobody recorded (a Temporal activity scheduled but
// not yet closed: its history holds no start) cannot have been overtaken:
// it runs until the execution ends.
func (r Run) Outcome(a Attempt) Outcome {
	if a.Finished() {
		return a.Outcome
	}
	if r.Execution.Status.Terminal() {
		return OutcomeLost
	}
	if a.StartedAt.IsZero() {
		return OutcomeRunning
	}
	for _, s := range r.Steps {
		for _, b := range s.Attempts {
			if b.StartedAt.After(a.StartedAt) {
				return OutcomeLost
			}
		}
	}
	return OutcomeRunning
}

// replayed reports whether the attempt was answered from the journal. It is
// r.Outcome(a) == OutcomeReplayed without the walk over the run's attempts
// (a derived outcome is lost or running, never replayed), which loops
// over attempts must not pay for each.
func replayed(a Attempt) bool { return a.Outcome == OutcomeReplayed }
