package trace

import "testing"

func TestOutcome(t *testing.T) {
	// open is the attempt under judgement: started at 0 by w1, no end.
	open := try(1, 0, -1, "", worker("w1"))
	running := func(steps ...Step) Run {
		return Run{Execution: Execution{ID: "exec_1", Status: StatusRunning}, Steps: steps}
	}
	tests := []struct {
		name    string
		run     Run
		attempt Attempt
		want    Outcome
	}{
		{"a sent outcome is kept", run(step("s1", "t", EffectWrite, try(1, 0, 1, OutcomeTimeout))),
			try(1, 0, 1, OutcomeTimeout), OutcomeTimeout},
		{"execution running, nothing after it", running(step("s1", "t", EffectWrite, open)),
			open, OutcomeRunning},
		{"execution terminal", run(step("s1", "t", EffectWrite, open)),
			open, OutcomeLost},
		{"a later attempt of the same step", running(step("s1", "t", EffectWrite, open, try(2, 5, 6, OutcomeOK, worker("w1")))),
			open, OutcomeLost},
		{"a later attempt of another step by a new worker", running(
			step("s1", "t", EffectWrite, open),
			step("s2", "t", EffectRead, try(1, 60, -1, "", worker("w2")))),
			open, OutcomeLost},
		{"only an earlier attempt by another worker", running(
			step("s0", "t", EffectRead, try(1, -10, -5, OutcomeOK, worker("w0"))),
			step("s1", "t", EffectWrite, open)),
			open, OutcomeRunning},
		// A Temporal activity scheduled and not yet closed: its history
		// holds no start, so nothing can have started after it.
		{"no start recorded, another step went on", running(
			step("s0", "t", EffectRead, try(1, 0, 5, OutcomeOK)),
			step("s1", "t", EffectWrite, Attempt{Number: 1})),
			Attempt{Number: 1}, OutcomeRunning},
		{"no start recorded, execution terminal", run(step("s1", "t", EffectWrite, Attempt{Number: 1})),
			Attempt{Number: 1}, OutcomeLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.run.Outcome(tt.attempt); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
