package trace

// Counts are the numbers the executions list shows per row.
type Counts struct {
	Steps    int `json:"steps"`
	Attempts int `json:"attempts"`
	Retries  int `json:"retries"` // executed attempts beyond the first of each step (replays are not retries)
	Dedupes  int `json:"dedupes"` // attempts the receiving API answered from its key store
	Replays  int `json:"replays"` // attempts answered from the journal
	Effects  int `json:"effects"` // distinct effects in r.Effects
}

// Counts tallies the run's steps, attempts, retries, dedupes, replays and
// effects.
func (r Run) Counts() Counts {
	c := Counts{Steps: len(r.Steps)}
	for _, s := range r.Steps {
		c.Attempts += len(s.Attempts)
		executed := 0
		for _, a := range s.Attempts {
			if r.Outcome(a) != OutcomeReplayed {
				executed++
			}
		}
		// A replay answered from the journal is not a retry: the tool
		// was not called again.
		c.Retries += max(0, executed-1)
		for _, a := range s.Attempts {
			if a.Deduplicated {
				c.Dedupes++
			}
			if r.Outcome(a) == OutcomeReplayed {
				c.Replays++
			}
		}
	}
	effects := map[EffectRef]bool{}
	for _, e := range r.Effects {
		effects[e.Ref()] = true
	}
	c.Effects = len(effects)
	return c
}
