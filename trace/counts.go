package trace

// Counts are the numbers the executions list shows per row.
type Counts struct {
	Steps    int `json:"steps"`
	Attempts int `json:"attempts"`
	Retries  int `json:"retries"` // executed attempts beyond the first of each step (replays are not retries)
	Dedupes  int `json:"dedupes"` // attempts the receiving API answered from its key store
	Replays  int `json:"replays"` // attempts answered from the journal
	Effects  int `json:"effects"` // distinct effects of r.OwnEffects
}

// Counts tallies the run's steps, attempts, retries, dedupes, replays and
// effects.
func (r Run) Counts() Counts {
	return r.countsWith(len(r.OwnEffects()))
}

// countsWith is Counts given the number of distinct effects.
func (r Run) countsWith(effects int) Counts {
	c := Counts{Steps: len(r.Steps), Effects: effects}
	for _, s := range r.Steps {
		c.Attempts += len(s.Attempts)
		executed := 0
		for _, a := range s.Attempts {
			if !replayed(a) {
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
			if replayed(a) {
				c.Replays++
			}
		}
	}
	return c
}
