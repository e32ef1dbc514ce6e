package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

type effectQuery struct {
	Provider    string `query:"provider"`
	State       string `query:"state"`
	ExecutionID string `query:"execution_id"`
	Key         string `query:"idempotency_key"`
	Cursor      string `query:"cursor"`
	Limit       string `query:"limit"`
}

// effectListParams and findingListParams are the parameters the outbox
// (page and JSON) and the findings list take.
var (
	effectListParams  = queryParamNames(effectQuery{})
	findingListParams = queryParamNames(findingQuery{})
)

func (s *Server) effectFilter(c echo.Context) (store.EffectFilter, error) {
	if err := rejectUnknownParams(c, "the outbox", effectListParams); err != nil {
		return store.EffectFilter{}, err
	}
	var q effectQuery
	if err := bindQuery(c, &q); err != nil {
		return store.EffectFilter{}, err
	}
	f := store.EffectFilter{Provider: q.Provider, ExecutionID: q.ExecutionID, Key: q.Key, Cursor: q.Cursor}
	switch st := trace.MatchState(q.State); st {
	case "", trace.MatchMatched, trace.MatchOrphan, trace.MatchDuplicate:
		f.State = st
	default:
		return f, badQuery("state: must be matched, orphan or duplicate")
	}
	var err error
	f.Limit, err = parseLimit(q.Limit)
	return f, err
}

type effectListResponse struct {
	Effects []store.EffectRow `json:"effects"`
	Next    string            `json:"next"`
}

// handleEffectList is GET /api/v1/effects: the outbox, duplicates first.
func (s *Server) handleEffectList(c echo.Context) error {
	f, err := s.effectFilter(c)
	if err != nil {
		return err
	}
	rows, next, err := s.cfg.DB.Effects(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, effectListResponse{Effects: rows, Next: next})
}

type findingQuery struct {
	ExecutionID string `query:"execution_id"`
	Rule        string `query:"rule"`
	Severity    string `query:"severity"`
	Limit       string `query:"limit"`
	Cursor      string `query:"cursor"`
}

// findingListResponse is a page of findings: Critical counts the critical
// ones in it (they come first), Next is the cursor of the next page.
type findingListResponse struct {
	Findings []trace.Finding `json:"findings"`
	Critical int             `json:"critical"`
	Next     string          `json:"next,omitempty"`
}

// handleFindingList is GET /api/v1/findings: the audit across executions.
func (s *Server) handleFindingList(c echo.Context) error {
	if err := rejectUnknownParams(c, "the findings list", findingListParams); err != nil {
		return err
	}
	var q findingQuery
	if err := bindQuery(c, &q); err != nil {
		return err
	}
	f := store.FindingFilter{ExecutionID: q.ExecutionID, Rule: trace.Rule(q.Rule), Severity: trace.Severity(q.Severity), Cursor: q.Cursor}
	if _, known := trace.Severities[f.Rule]; q.Rule != "" && !known {
		return badQuery("rule: unknown rule " + q.Rule)
	}
	if q.Severity != "" && f.Severity != trace.SeverityCritical && f.Severity != trace.SeverityWarning {
		return badQuery("severity: must be critical or warning")
	}
	if q.Limit != "" {
		var err error
		if f.Limit, err = parseLimit(q.Limit); err != nil {
			return err
		}
	}
	findings, next, err := s.cfg.DB.FindingsPage(c.Request().Context(), f)
	if err != nil {
		return err // a bad cursor is a 400 (server.go)
	}
	return c.JSON(http.StatusOK, findingListResponse{Findings: findings, Critical: trace.CriticalCount(findings), Next: next})
}
