package web

import (
	"context"
	"time"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// executionData is what both the execution page and its JSON twin show.
type executionData struct {
	run      trace.Run
	findings []trace.Finding
	states   map[trace.EffectRef]trace.MatchState
	gaps     []trace.Gap
	verdict  trace.Verdict
	// nearbyOrphans are orphan effects within the execution's time window,
	// listed when it is unverified: they may be what it caused.
	nearbyOrphans []trace.Effect
}

// maxNearbyOrphans bounds the orphan effects an unverified execution lists.
const maxNearbyOrphans = 20

// loadExecution reads the execution in one store read (one snapshot, a
// constant number of queries), then derives what the page shows from it.
func (s *Server) loadExecution(ctx context.Context, id string) (executionData, error) {
	var d executionData
	// Orphans are listed beside an unverified execution only; the verdict
	// needs the run and its findings, so the store asks once it has them.
	r, err := s.cfg.DB.ReadExecution(ctx, id, func(run trace.Run, findings []trace.Finding) store.OrphanWindow {
		if trace.Judge(run, findings).State != trace.StateUnverified {
			return store.OrphanWindow{}
		}
		from, to := runWindow(run)
		return store.OrphanWindow{From: from, To: to, Limit: maxNearbyOrphans + len(run.Effects)}
	})
	if err != nil {
		return d, err
	}
	d.run, d.findings, d.states = r.Run, r.Findings, r.States
	d.gaps = trace.Gaps(d.run, s.cfg.Analysis)
	d.verdict = trace.Judge(d.run, d.findings)
	// The run's own effects (one whose tool call never arrived is an
	// orphan too) are listed already.
	own := map[trace.EffectRef]bool{}
	for _, f := range d.run.Effects {
		own[f.Ref()] = true
	}
	for _, f := range r.Orphans {
		if !own[f.Ref()] && len(d.nearbyOrphans) < maxNearbyOrphans {
			d.nearbyOrphans = append(d.nearbyOrphans, f)
		}
	}
	return d, nil
}

// runWindow is the execution's start to its end, or to its last known time
// while it has none.
func runWindow(r trace.Run) (from, to time.Time) {
	from, to = r.Execution.StartedAt, r.Execution.EndedAt
	widen := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if from.IsZero() || t.Before(from) {
			from = t
		}
		if to.IsZero() || t.After(to) {
			to = t
		}
	}
	for _, s := range r.Steps {
		for _, a := range s.Attempts {
			widen(a.StartedAt)
			widen(a.EndedAt)
		}
	}
	return from, to
}
