package web

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// compareSelection is the two executions a compare request names: a and b,
// or exactly two id values (what the list's checkboxes send). Ids travel
// in the query only, so any printable id works.
type compareSelection struct {
	a, b string
	// byCheckbox: the ids came from the list, in its order (newest
	// first); the older run becomes a, so "b" reads as "today".
	byCheckbox bool
}

func compareIDs(c echo.Context) (compareSelection, error) {
	q := c.QueryParams()
	a, b, ids := q.Get("a"), q.Get("b"), q["id"]
	switch {
	case len(ids) > 0 && (a != "" || b != ""):
		return compareSelection{a: a, b: b}, badQuery("id: give either a and b, or two id values, not both")
	case len(ids) > 0 && len(ids) != 2:
		return compareSelection{}, badQuery("id: select exactly two executions to compare (got " + strconv.Itoa(len(ids)) + ")")
	case len(ids) == 2:
		a, b = ids[0], ids[1]
	}
	sel := compareSelection{a: a, b: b, byCheckbox: len(ids) == 2}
	switch {
	case a == "":
		return sel, badQuery("a: required: the id of the first execution")
	case b == "":
		return sel, badQuery("b: required: the id of the second execution")
	case a == b:
		return sel, badQuery("b: must name another execution than a (both are " + strconv.Quote(a) + ")")
	}
	return sel, nil
}

// comparison is what the compare page and its JSON twin show.
type comparison struct {
	a, b  views.Execution
	steps trace.Comparison
}

// loadComparison loads both executions the way the execution page does
// (loadExecution: a constant number of reads each) and aligns them.
func (s *Server) loadComparison(c echo.Context, sel compareSelection) (comparison, error) {
	var cmp comparison
	var err error
	ctx := c.Request().Context()
	if cmp.a, err = s.loadExecution(ctx, sel.a, true); err != nil {
		return cmp, compareNotFound("a", sel.a, err)
	}
	if cmp.b, err = s.loadExecution(ctx, sel.b, true); err != nil {
		return cmp, compareNotFound("b", sel.b, err)
	}
	if sel.byCheckbox && cmp.b.Run.Execution.StartedAt.Before(cmp.a.Run.Execution.StartedAt) {
		cmp.a, cmp.b = cmp.b, cmp.a
	}
	cmp.steps = trace.Compare(cmp.a.Run, cmp.b.Run)
	return cmp, nil
}

// compareNotFound names the parameter whose execution does not exist.
func compareNotFound(param, id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, param+": no execution "+strconv.Quote(id))
	}
	return err
}

// handleComparePage is GET /compare?a=&b= (or ?id=&id=). A bad selection
// shows its message above the form again, with the 400 or 404.
func (s *Server) handleComparePage(c echo.Context) error {
	sel, err := compareIDs(c)
	var cmp comparison
	if err == nil {
		cmp, err = s.loadComparison(c, sel)
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg, _ := he.Message.(string)
		return render(c, he.Code, views.ComparePage(views.CompareView{Form: views.CompareForm{A: sel.a, B: sel.b}, Error: msg}))
	}
	if err != nil {
		return err
	}
	v := views.NewCompareView(views.CompareInput{A: cmp.a, B: cmp.b, Comparison: cmp.steps})
	return render(c, http.StatusOK, views.ComparePage(v))
}

// The compare page's JSON twin.
type compareResponse struct {
	A compareHeader `json:"a"`
	B compareHeader `json:"b"`
	// Summary is the page's sentence; DifferingSteps counts the rows in
	// Steps that differ.
	Summary        string           `json:"summary"`
	DifferingSteps int              `json:"differing_steps"`
	Steps          []compareStepRow `json:"steps"`
}

type compareHeader struct {
	executionHeader
	Audit trace.Verdict `json:"audit"`
}

type compareStepRow struct {
	Match       trace.StepMatch    `json:"match"`
	A           *compareStepSide   `json:"a"` // null when only b ran the step
	B           *compareStepSide   `json:"b"`
	Differences []trace.Difference `json:"differences"`
}

type compareStepSide struct {
	stepJSON
	Effects []effectJSON `json:"effects"`
}

// handleCompare is GET /api/v1/compare?a=&b= (or ?id=&id=).
func (s *Server) handleCompare(c echo.Context) error {
	sel, err := compareIDs(c)
	if err != nil {
		return err
	}
	cmp, err := s.loadComparison(c, sel)
	if err != nil {
		return err
	}
	out := compareResponse{
		A:              compareHeaderOf(cmp.a),
		B:              compareHeaderOf(cmp.b),
		Summary:        cmp.steps.Summary(),
		DifferingSteps: len(cmp.steps.Differing()),
		Steps:          []compareStepRow{},
	}
	for _, st := range cmp.steps.Steps {
		row := compareStepRow{Match: st.Match, A: compareSideJSON(st.A, cmp.a.States), B: compareSideJSON(st.B, cmp.b.States),
			Differences: st.Differences}
		if row.Differences == nil {
			row.Differences = []trace.Difference{}
		}
		out.Steps = append(out.Steps, row)
	}
	return c.JSON(http.StatusOK, out)
}

func compareHeaderOf(x views.Execution) compareHeader {
	return compareHeader{executionHeader: newExecutionHeader(x.Summary), Audit: x.Verdict}
}

func compareSideJSON(s *trace.StepSide, states map[trace.EffectRef]trace.MatchState) *compareStepSide {
	if s == nil {
		return nil
	}
	st := s.Step
	out := &compareStepSide{
		stepJSON: stepJSON{StepID: st.ID, Tool: st.ToolName(), Effect: string(st.Class()), Provider: st.ProviderName(), Attempts: []attemptJSON{}},
		Effects:  []effectJSON{},
	}
	for i, a := range st.Attempts {
		out.Attempts = append(out.Attempts, attemptJSON{
			Attempt: a.Number, SpanID: a.SpanID, Outcome: s.Outcomes[i], Deduplicated: a.Deduplicated, IdempotencyKey: a.IdempotencyKey,
			Worker: a.Worker, StartedAt: a.StartedAt, EndedAt: a.EndedAt, DurationMS: durationMS(a.StartedAt, a.EndedAt),
			Tool: a.Tool, Args: a.Args, Result: a.Result, Error: a.Error, Conflicts: a.Conflicts,
		})
	}
	for _, e := range s.Effects {
		out.Effects = append(out.Effects, effectJSON{Effect: e, State: states[e.Ref()]})
	}
	return out
}
