package web

import (
	"context"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// executionData is what both the execution page and its JSON twin show.
type executionData struct {
	run      trace.Run
	findings []trace.Finding
	states   map[trace.EffectRef]trace.MatchState
	gaps     []trace.Gap
}

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
	return d, nil
}
