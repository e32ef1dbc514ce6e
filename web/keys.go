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
	r, err := s.cfg.DB.ReadKey(ctx, key) // one snapshot, every run in one batch
	if err != nil {
		return d, err
	}
	for _, a := range r.Attempts {
		run := r.Runs[a.ExecutionID] // derived outcomes need the whole run
		d.Attempts = append(d.Attempts, keyAttemptJSON{ExecutionID: a.ExecutionID, StepID: a.StepID, attemptJSON: attemptJSON{
			Attempt: a.Number, Outcome: run.Outcome(a), Deduplicated: a.Deduplicated, IdempotencyKey: a.IdempotencyKey,
			Worker: a.Worker, StartedAt: a.StartedAt, EndedAt: a.EndedAt, DurationMS: durationMS(a.StartedAt, a.EndedAt),
			Tool: a.Tool, Args: a.Args, Result: a.Result, Error: a.Error,
		}})
		first := r.Attempts[0]
		if a.StepID != first.StepID {
			d.StepsVary = true
		}
		if len(a.Args) > 0 && len(first.Args) > 0 && !bytes.Equal(a.Args, first.Args) {
			d.ArgsVaries = true
		}
	}
	d.Effects, d.Findings = r.Effects, r.Findings
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
