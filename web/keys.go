package web

import (
	"bytes"
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// keyData is everything that carried one idempotency key.
type keyData struct {
	Key        string            `json:"idempotency_key"`
	Attempts   []keyAttemptJSON  `json:"attempts"`
	Effects    []store.EffectRow `json:"effects"`
	Findings   []trace.Finding   `json:"findings"`
	ArgsVaries bool              `json:"args_vary"`
	StepsVary  bool              `json:"steps_vary"`
}

type keyAttemptJSON struct {
	ExecutionID string `json:"execution_id"`
	StepID      string `json:"step_id"`
	attemptJSON
}

func (s *Server) loadKey(ctx context.Context, key string) (keyData, error) {
	d := keyData{Key: key, Attempts: []keyAttemptJSON{}}
	attempts, err := s.cfg.DB.AttemptsWithKey(ctx, key)
	if err != nil {
		return d, err
	}
	runs := map[string]trace.Run{} // derived outcomes need the whole run
	for _, a := range attempts {
		run, ok := runs[a.ExecutionID]
		if !ok {
			if run, err = s.cfg.DB.Run(ctx, a.ExecutionID); err != nil {
				return d, err
			}
			runs[a.ExecutionID] = run
		}
		d.Attempts = append(d.Attempts, keyAttemptJSON{ExecutionID: a.ExecutionID, StepID: a.StepID, attemptJSON: attemptJSON{
			Attempt: a.Number, Outcome: run.Outcome(a), Deduplicated: a.Deduplicated, IdempotencyKey: a.IdempotencyKey,
			Worker: a.Worker, StartedAt: a.StartedAt, EndedAt: a.EndedAt, DurationMS: durationMS(a.StartedAt, a.EndedAt),
			Tool: a.Tool, Args: a.Args, Result: a.Result, Error: a.Error,
		}})
		first := attempts[0]
		if a.StepID != first.StepID {
			d.StepsVary = true
		}
		if len(a.Args) > 0 && len(first.Args) > 0 && !bytes.Equal(a.Args, first.Args) {
			d.ArgsVaries = true
		}
	}
	if d.Effects, _, err = s.cfg.DB.Effects(ctx, store.EffectFilter{Key: key, Limit: store.MaxPageSize}); err != nil {
		return d, err
	}
	if d.Findings, err = s.cfg.DB.Findings(ctx, store.FindingFilter{Key: key}); err != nil {
		return d, err
	}
	return d, nil
}

// handleKeyShow is GET /api/v1/keys/:key, and GET
// /api/v1/key?idempotency_key= for any key.
func (s *Server) handleKeyShow(c echo.Context) error {
	key, err := keyParam(c)
	if err != nil {
		return err
	}
	d, err := s.loadKey(c.Request().Context(), key)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// handleKeyPage is GET /keys/:key (or /key?idempotency_key=): the
// key-centric view.
func (s *Server) handleKeyPage(c echo.Context) error {
	key, err := keyParam(c)
	if err != nil {
		return err
	}
	d, err := s.loadKey(c.Request().Context(), key)
	if err != nil {
		return err
	}
	v := views.KeyView{Key: d.Key, ArgsVaries: d.ArgsVaries, StepsVary: d.StepsVary}
	for _, a := range d.Attempts {
		v.Attempts = append(v.Attempts, views.KeyAttempt{Outcome: a.Outcome, Attempt: trace.Attempt{
			ExecutionID: a.ExecutionID, StepID: a.StepID, Number: a.Attempt, Deduplicated: a.Deduplicated,
			IdempotencyKey: a.IdempotencyKey, Worker: a.Worker, StartedAt: a.StartedAt, EndedAt: a.EndedAt, Args: a.Args,
		}})
	}
	for _, r := range d.Effects {
		v.Effects = append(v.Effects, views.OutboxRow{Effect: r.Effect, State: r.State})
	}
	for _, f := range d.Findings {
		v.Findings = append(v.Findings, views.NewFindingViewAway(f))
	}
	return render(c, http.StatusOK, views.KeyPage(v))
}
