package web

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// handleExecutionListPage is GET /: the executions, newest first.
func (s *Server) handleExecutionListPage(c echo.Context) error {
	var q executionQuery
	if err := bindQuery(c, &q); err != nil {
		return err
	}
	form := views.ListFilter{Status: q.Status, Audit: q.Audit, Name: q.Name, HasFindings: q.HasFindings, Q: q.Q, From: q.From, To: q.To, Sort: q.Sort}
	if unknown := unknownParams(c, executionListParams); len(unknown) > 0 {
		// The form again, with what was wrong, rather than an error page:
		// a link from an old bookmark or another tool is fixed here.
		v := views.ExecutionsView{Filter: form, FilterError: unknownFilterMessage("the executions list", unknown, executionListParams), BaseURL: "http://" + c.Request().Host}
		return render(c, http.StatusBadRequest, views.ExecutionsPage(v))
	}
	// The form's datetime-local inputs carry no zone: they are read as UTC,
	// the zone every time on the page is shown in without JavaScript.
	q.From, q.To = formTime(q.From), formTime(q.To)
	f, err := q.filter()
	if err != nil {
		return err
	}
	list, next, err := s.cfg.DB.ListExecutions(c.Request().Context(), f)
	if err != nil {
		return err
	}
	v := views.ExecutionsView{Filter: form, Paged: q.Cursor != "", BaseURL: "http://" + c.Request().Host}
	for _, r := range list {
		v.Rows = append(v.Rows, executionRow(r))
	}
	if next != "" {
		params := c.QueryParams()
		params.Set("cursor", next)
		v.NextURL = "/?" + params.Encode()
	}
	return render(c, http.StatusOK, views.ExecutionsPage(v))
}

func formTime(v string) string {
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC().Format(time.RFC3339)
		}
	}
	return v
}

func executionRow(r store.ExecutionSummary) views.ExecutionRow {
	return views.ExecutionRow{Execution: r.Execution, Counts: r.Counts, Findings: r.Findings, CriticalFindings: r.CriticalFindings, AuditState: r.AuditState}
}

// handleExecutionShowPage is GET /executions/:id (or
// /execution?execution_id=): findings, then the timeline with the outbox
// lane.
func (s *Server) handleExecutionShowPage(c echo.Context) error {
	id, err := executionIDParam(c)
	if err != nil {
		return err
	}
	var q executionPageQuery
	if err := bindQuery(c, &q); err != nil {
		return err
	}
	if err := q.validate(); err != nil {
		return err
	}
	zoom, err := timelineRange(c)
	if err != nil {
		return err
	}
	x, err := s.loadExecution(c.Request().Context(), id, true)
	if err != nil {
		return err
	}
	v := x.Page(zoom, s.cfg.Now())
	if q.View == views.ViewSteps {
		v.ShowSteps(x.StepTable(q.Sort, q.Dir))
	}
	if v.Selected, err = s.pageSelection(c.Request().Context(), x, q); err != nil {
		return err
	}
	return render(c, http.StatusOK, views.ExecutionPage(v))
}

// executionPageQuery chooses the execution page's view, how the step
// table is sorted, and the attempt (step, n) or effect (provider, effect)
// selected in the detail panel (views.SelectAttemptURL).
type executionPageQuery struct {
	View     string `query:"view"`
	Sort     string `query:"sort"`
	Dir      string `query:"dir"`
	Step     string `query:"step"`
	N        string `query:"n"`
	Provider string `query:"provider"`
	Effect   string `query:"effect"`
}

// pageSelection is the attempt or effect the page's URL selects, none
// when it names neither; one it names that the execution lacks is a 404
// naming it, as its permalink would be.
func (s *Server) pageSelection(ctx context.Context, x views.Execution, q executionPageQuery) (views.Selection, error) {
	switch {
	case q.N != "":
		n, err := strconv.Atoi(q.N)
		if err != nil || n < 1 {
			return views.Selection{}, badQuery("n: must be an attempt number ≥ 1")
		}
		if sel, ok := x.SelectAttempt(q.Step, n); ok {
			return sel, nil
		}
		return views.Selection{}, echo.NewHTTPError(http.StatusNotFound, "attempt: no attempt "+q.N+" of step "+strconv.Quote(q.Step)+" in this execution")
	case q.Provider != "" || q.Effect != "":
		ref := trace.EffectRef{Provider: q.Provider, ID: q.Effect}
		messages, err := s.messageURLs(ctx, []trace.EffectRef{ref})
		if err != nil {
			return views.Selection{}, err
		}
		if sel, ok := x.SelectEffect(ref, messages[ref]); ok {
			return sel, nil
		}
		return views.Selection{}, echo.NewHTTPError(http.StatusNotFound, "effect: "+ref.Provider+" "+ref.ID+" is not an effect of this execution")
	case q.Step != "":
		return views.Selection{}, badQuery("step: needs n, the attempt number")
	}
	return views.Selection{}, nil
}

// validate rejects a value the page does not know, naming the parameter
// and the values it takes, rather than quietly showing the default.
func (q executionPageQuery) validate() error {
	for _, p := range []struct {
		name, value string
		allowed     []string
	}{{"view", q.View, views.ExecutionViews}, {"sort", q.Sort, views.StepSorts}, {"dir", q.Dir, views.SortDirs}} {
		if p.value != "" && !slices.Contains(p.allowed, p.value) {
			return badQuery(p.name + ": must be one of " + strings.Join(p.allowed, ", ") + "; got " + strconv.Quote(p.value))
		}
	}
	return nil
}

// handleAttemptPage is GET /executions/:id/attempt?step=S&n=N (or
// /execution/attempt?execution_id=X&step=S&n=N), an attempt's permalink;
// the execution page's script fetches its fragment.
func (s *Server) handleAttemptPage(c echo.Context) error {
	n, err := strconv.Atoi(c.QueryParam("n"))
	if err != nil || n < 1 {
		return badQuery("n: must be an attempt number ≥ 1")
	}
	id, err := executionIDParam(c)
	if err != nil {
		return err
	}
	// The run and its findings from one snapshot, so the incident marks
	// agree with the attempt shown.
	x, err := s.loadExecution(c.Request().Context(), id, false)
	if err != nil {
		return err
	}
	stepID := c.QueryParam("step")
	if v, ok := x.Attempt(stepID, n); ok {
		if wantsFragment(c) {
			return render(c, http.StatusOK, views.AttemptDetail(v))
		}
		return render(c, http.StatusOK, views.AttemptDetailPage(v))
	}
	return echo.NewHTTPError(http.StatusNotFound, "attempt: no attempt "+strconv.Itoa(n)+" of step "+strconv.Quote(stepID)+" in this execution")
}

// handleEffectPage is GET /executions/:id/effect?provider=P&id=E (or
// /execution/effect?execution_id=X&provider=P&id=E).
func (s *Server) handleEffectPage(c echo.Context) error {
	id, err := executionIDParam(c)
	if err != nil {
		return err
	}
	x, err := s.loadExecution(c.Request().Context(), id, false)
	if err != nil {
		return err
	}
	ref := trace.EffectRef{Provider: c.QueryParam("provider"), ID: c.QueryParam("id")}
	if v, ok := x.Effect(ref); ok {
		messages, err := s.messageURLs(c.Request().Context(), []trace.EffectRef{ref})
		if err != nil {
			return err
		}
		v.MessageURL = messages[ref]
		if wantsFragment(c) {
			return render(c, http.StatusOK, views.EffectDetail(v))
		}
		return render(c, http.StatusOK, views.EffectDetailPage(v))
	}
	return echo.NewHTTPError(http.StatusNotFound, "effect: "+ref.Provider+" "+ref.ID+" is not an effect of this execution")
}

// handleOutboxPage is GET /outbox: effects, duplicates first.
func (s *Server) handleOutboxPage(c echo.Context) error {
	f, err := s.effectFilter(c)
	if err != nil {
		return err
	}
	rows, next, err := s.cfg.DB.Effects(c.Request().Context(), f)
	if err != nil {
		return err
	}
	refs := make([]trace.EffectRef, len(rows))
	for i, r := range rows {
		refs[i] = r.Ref()
	}
	messages, err := s.messageURLs(c.Request().Context(), refs)
	if err != nil {
		return err
	}
	v := views.OutboxView{Q: c.QueryParam("q"), Provider: f.Provider, State: string(f.State)}
	if f.Search.Scans() {
		v.ScanLimit = store.MaxEffectScan
	}
	for _, r := range rows {
		v.Rows = append(v.Rows, views.OutboxRow{Effect: r.Effect, State: r.State, MessageURL: messages[r.Ref()]})
	}
	if next != "" {
		params := c.QueryParams()
		params.Set("cursor", next)
		v.NextURL = "/outbox?" + params.Encode()
	}
	return render(c, http.StatusOK, views.OutboxPage(v))
}
