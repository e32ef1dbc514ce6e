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

func (s *Server) loadExecution(ctx context.Context, id string) (executionData, error) {
	var d executionData
	var err error
	if d.run, err = s.cfg.DB.Run(ctx, id); err != nil {
		return d, err
	}
	if d.findings, err = s.cfg.DB.Findings(ctx, store.FindingFilter{ExecutionID: id}); err != nil {
		return d, err
	}
	refs := make([]trace.EffectRef, len(d.run.Effects))
	for i, f := range d.run.Effects {
		refs[i] = f.Ref()
	}
	if d.states, err = s.cfg.DB.EffectStates(ctx, refs); err != nil {
		return d, err
	}
	d.gaps = trace.Gaps(d.run, s.cfg.Analysis)
	d.verdict = trace.Judge(d.run, d.findings)
	if d.verdict.State == trace.StateUnverified {
		from, to := runWindow(d.run)
		orphans, err := s.cfg.DB.OrphanEffectsBetween(ctx, from, to, maxNearbyOrphans+len(d.run.Effects))
		if err != nil {
			return d, err
		}
		// The run's own effects (one whose tool call never arrived is an
		// orphan too) are listed already.
		own := map[trace.EffectRef]bool{}
		for _, f := range d.run.Effects {
			own[f.Ref()] = true
		}
		for _, f := range orphans {
			if !own[f.Ref()] && len(d.nearbyOrphans) < maxNearbyOrphans {
				d.nearbyOrphans = append(d.nearbyOrphans, f)
			}
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
