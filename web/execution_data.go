package web

import (
	"context"
	"errors"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// loadExecution returns the model every view of an execution shows
// (views.NewExecution), built from one store read (one snapshot, a
// constant number of queries), or kept from an earlier read of the same
// database state (execution_cache.go). nearby asks for the orphan effects
// an unverified execution lists; the attempt and effect details do not
// show them.
func (s *Server) loadExecution(ctx context.Context, id string, nearby bool) (views.Execution, error) {
	key := executionKey{id: id, nearby: nearby}
	var token store.ChangeToken
	saw := s.executions.known(key)
	if saw {
		var err error
		if token, err = s.cfg.DB.ChangeToken(ctx); err != nil {
			return views.Execution{}, err
		}
		if x, ok := s.executions.get(key, token); ok {
			s.metrics.models.WithLabelValues("kept").Inc()
			return x, nil
		}
	}
	s.metrics.models.WithLabelValues("read").Inc()
	return s.executions.build(ctx, key, token, saw, true, func() (views.Execution, store.ChangeToken, error) {
		return s.readExecution(ctx, id, nearby)
	})
}

// readExecution reads the execution in one store read and builds its model.
func (s *Server) readExecution(ctx context.Context, id string, nearby bool) (views.Execution, store.ChangeToken, error) {
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
		return views.Execution{}, r.Token, notFound("execution", id)
	}
	if err != nil {
		return views.Execution{}, r.Token, err
	}
	return views.NewExecution(views.ExecutionInput{Run: r.Run, Findings: r.Findings, States: r.States, Orphans: r.Orphans,
		Analysis: s.cfg.Analysis}), r.Token, nil
}
