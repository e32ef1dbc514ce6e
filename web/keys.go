package web

import (
	"context"
	"net/http"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// keyJSON is everything that carried one idempotency key.
type keyJSON struct {
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

// loadKey reads what carried key in one store read (one snapshot, every
// run in one batch) and builds the key page's model from it
// (views.NewKeyView); the read is returned too, for the JSON twin's
// effects and findings as stored.
func (s *Server) loadKey(ctx context.Context, key string) (views.KeyView, store.KeyRead, error) {
	r, err := s.cfg.DB.ReadKey(ctx, key)
	if err != nil {
		return views.KeyView{}, r, err
	}
	if len(r.Attempts) == 0 && len(r.Effects) == 0 && len(r.Findings) == 0 {
		// Nothing carried it: a 404, not an empty page that reads as
		// "this key was used and nothing happened".
		return views.KeyView{}, r, notFoundError{msg: "idempotency_key: nothing carried the key " + strconv.Quote(key)}
	}
	// Every finding is in hand: listed in natural order (step-2 before
	// step-14), where the store's SQL order compares ids as text.
	slices.SortStableFunc(r.Findings, trace.CompareFindingPlaces)
	effects := make([]views.OutboxRow, len(r.Effects))
	for i, e := range r.Effects {
		effects[i] = views.OutboxRow{Effect: e.Effect, State: e.State}
	}
	return views.NewKeyView(views.KeyInput{Key: key, Attempts: r.Attempts, Runs: r.Runs, Effects: effects, Findings: r.Findings}), r, nil
}

// handleKeyShow is GET /api/v1/keys/:key, and GET
// /api/v1/key?idempotency_key= for any key.
func (s *Server) handleKeyShow(c echo.Context) error {
	key, err := keyParam(c)
	if err != nil {
		return err
	}
	v, r, err := s.loadKey(c.Request().Context(), key)
	if err != nil {
		return err
	}
	out := keyJSON{Key: v.Key, Attempts: []keyAttemptJSON{}, Effects: r.Effects, Findings: r.Findings,
		ArgsVaries: v.ArgsVaries, StepsVary: v.StepsVary}
	for _, a := range v.Attempts {
		out.Attempts = append(out.Attempts, keyAttemptJSON{ExecutionID: a.ExecutionID, StepID: a.StepID, attemptJSON: attemptJSON{
			Attempt: a.Number, Outcome: a.Outcome, Deduplicated: a.Deduplicated, IdempotencyKey: a.IdempotencyKey,
			Worker: a.Worker, StartedAt: a.StartedAt, EndedAt: a.EndedAt, DurationMS: durationMS(a.StartedAt, a.EndedAt),
			Tool: a.Tool, Args: a.Args, Result: a.Result, Error: a.Error,
		}})
	}
	return c.JSON(http.StatusOK, out)
}

// handleKeyPage is GET /keys/:key (or /key?idempotency_key=): the
// key-centric view.
func (s *Server) handleKeyPage(c echo.Context) error {
	key, err := keyParam(c)
	if err != nil {
		return err
	}
	v, _, err := s.loadKey(c.Request().Context(), key)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.KeyPage(v))
}
