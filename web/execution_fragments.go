package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// The execution page's first answer is bounded (views/timeline_plan.go);
// these fragments bring the rest a page at a time. With the
// X-Oncetrace-Fragment header (the script) each answers the items to put
// in place of the "show more" link; without it, a page of its own, so the
// links work without the script.

// handleExecutionLanes is GET /executions/:id/lanes?offset=N&end=M (the
// lanes [N, M) in display order, a fragment's worth) or ?step=S (one
// step's lane), drawn at the zoom from and to.
func (s *Server) handleExecutionLanes(c echo.Context) error {
	var q lanesQuery
	if err := bindQuery(c, &q); err != nil {
		return err
	}
	zoom, err := timelineRange(c)
	if err != nil {
		return err
	}
	id, err := executionIDParam(c)
	if err != nil {
		return err
	}
	x, err := s.loadExecution(c.Request().Context(), id, false)
	if err != nil {
		return err
	}
	sel := views.LaneSelection{Offset: q.Offset, End: q.End, StepID: q.Step}
	if q.Step == "" && q.End == 0 {
		sel.End = len(x.Run.Steps)
	}
	v := x.Lanes(zoom, sel)
	if q.Step != "" && len(v.Timeline.Lanes) == 0 {
		return echo.NewHTTPError(http.StatusNotFound, "lanes: no step "+strconv.Quote(q.Step)+" in this execution")
	}
	if wantsFragment(c) {
		return render(c, http.StatusOK, views.LanesFragment(v.Timeline))
	}
	return render(c, http.StatusOK, views.LanesPage(v))
}

type lanesQuery struct {
	Offset int    `query:"offset"`
	End    int    `query:"end"`
	Step   string `query:"step"`
}

// handleExecutionFindings is GET /executions/:id/findings?rule=R&offset=N:
// the findings of rule R from the Nth, in the page's order.
func (s *Server) handleExecutionFindings(c echo.Context) error {
	var q findingsFragmentQuery
	if err := bindQuery(c, &q); err != nil {
		return err
	}
	if q.Rule == "" {
		return badQuery("rule: required, the rule whose findings to list")
	}
	id, err := executionIDParam(c)
	if err != nil {
		return err
	}
	x, err := s.loadExecution(c.Request().Context(), id, false)
	if err != nil {
		return err
	}
	v := x.FindingsFragment(trace.Rule(q.Rule), q.Offset)
	if wantsFragment(c) {
		return render(c, http.StatusOK, views.FindingItems(v.Findings, v.More))
	}
	return render(c, http.StatusOK, views.FindingsPage(v))
}

type findingsFragmentQuery struct {
	Rule   string `query:"rule"`
	Offset int    `query:"offset"`
}

// handleExecutionIncidents is GET /executions/:id/incidents?offset=N.
func (s *Server) handleExecutionIncidents(c echo.Context) error {
	var q struct {
		Offset int `query:"offset"`
	}
	if err := bindQuery(c, &q); err != nil {
		return err
	}
	id, err := executionIDParam(c)
	if err != nil {
		return err
	}
	x, err := s.loadExecution(c.Request().Context(), id, false)
	if err != nil {
		return err
	}
	v := x.IncidentsFragment(q.Offset)
	if wantsFragment(c) {
		return render(c, http.StatusOK, views.IncidentItems(v.Incidents, v.More))
	}
	return render(c, http.StatusOK, views.IncidentsPage(v))
}
