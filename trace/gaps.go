package trace

import (
	"slices"
	"time"
)

// Gaps returns the intervals between the run's first attempt start and its
// last attempt end where no attempt was running, longer than
// cfg.GapThreshold, sorted by start.
//
// An attempt without an end counts as the instant it started. A gap is a
// crash gap when the workers on both sides are known and differ, or when an
// attempt started since the previous gap never finished; otherwise it is
// idle (the run was waiting, e.g. on a human).
func Gaps(r Run, cfg Config) []Gap {
	cfg = cfg.withDefaults()

	type span struct {
		start, end time.Time
		worker     string
		finished   bool
	}
	var spans []span
	for _, s := range r.Steps {
		for _, a := range s.Attempts {
			if a.StartedAt.IsZero() {
				continue // without a start there is nothing to place on the axis
			}
			end := a.EndedAt
			if end.Before(a.StartedAt) {
				end = a.StartedAt // no end (zero) or an impossible one: a point
			}
			spans = append(spans, span{a.StartedAt, end, a.Worker, a.Finished()})
		}
	}
	if len(spans) == 0 {
		return nil
	}
	slices.SortStableFunc(spans, func(a, b span) int { return a.start.Compare(b.start) })

	var gaps []Gap
	covered := spans[0].end
	workerBefore := spans[0].worker
	unfinished := !spans[0].finished
	for _, sp := range spans[1:] {
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
	if c.KeyRetention <= 0 {
		c.KeyRetention = DefaultConfig.KeyRetention
	}
	return c
}
