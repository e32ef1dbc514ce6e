package web

import (
	"context"
	"errors"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// loadExecution reads the execution in one store read (one snapshot, a
// constant number of queries) and builds from it the model every view of
// an execution shows (views.NewExecution). nearby asks for the orphan
// effects an unverified execution lists; the attempt and effect details
// do not show them.
func (s *Server) loadExecution(ctx context.Context, id string, nearby bool) (views.Execution, error) {
	var orphans func(trace.Run, []trace.Finding) store.OrphanWindow
	if nearby {
		// The verdict needs the run and its findings, so the store asks
		// once it has them.
		orphans = func(run trace.Run, findings []trace.Finding) store.OrphanWindow {
			from, to, limit := views.NearbyOrphanWindow(run, findings)
			return store.OrphanWindow{From: from, To: to, Limit: limit}
		}
	}
	r, err := s.cfg.DB.ReadExecution(ctx, id, orphans)
	if errors.Is(err, store.ErrNotFound) {
		return views.Execution{}, notFound("execution", id)
	}
	if err != nil {
		return views.Execution{}, err
	}
	return views.NewExecution(views.ExecutionInput{Run: r.Run, Findings: r.Findings, States: r.States, Orphans: r.Orphans,
		Analysis: s.cfg.Analysis}), nil
}
