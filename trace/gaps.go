package trace

// Gaps returns the intervals between the run's first attempt start and its
// last attempt end where no attempt was running, longer than
// cfg.GapThreshold, sorted by start.
//
// An attempt without an end counts as the instant it started. A gap is a
// crash gap when the workers on both sides are known and differ, or when an
// attempt started since the previous gap never finished; otherwise it is
// idle (the run was waiting, e.g. on a human).
func Gaps(r Run, cfg Config) []Gap { return newGapSpans(r).gaps(cfg) }

// gaps walks spans, sorted by start, along the axis: the one walk behind
// Gaps and the run auditor's crash gaps.
func (gs gapSpans) gaps(cfg Config) []Gap {
	if len(gs) == 0 {
		return nil
	}
	cfg = cfg.withDefaults()
	var gaps []Gap
	covered := gs[0].end
	workerBefore := gs[0].worker
	unfinished := !gs[0].finished
	for _, sp := range gs[1:] {
		if sp.start.Sub(covered) > cfg.GapThreshold {
			kind := GapIdle
			if unfinished || (workerBefore != "" && sp.worker != "" && workerBefore != sp.worker) {
				kind = GapCrash
			}
			gaps = append(gaps, Gap{Start: covered, End: sp.start, Kind: kind, WorkerBefore: workerBefore, WorkerAfter: sp.worker})
			// An unfinished attempt explains the first gap after it, not every later one.
			unfinished = false
		}
		if !sp.end.Before(covered) {
			covered = sp.end
			workerBefore = sp.worker
		}
		if !sp.finished {
			unfinished = true
		}
	}
	return gaps
}

// withDefaults fills the thresholds left zero with DefaultConfig's.
func (c Config) withDefaults() Config {
	if c.GapThreshold <= 0 {
		c.GapThreshold = DefaultConfig.GapThreshold
	}
	if c.RepeatWindow <= 0 {
		c.RepeatWindow = DefaultConfig.RepeatWindow
	}
	if c.KeyRetention <= 0 {
		c.KeyRetention = DefaultConfig.KeyRetention
	}
	return c
}
