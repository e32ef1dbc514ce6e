package web

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

type executionListResponse struct {
	Executions []store.ExecutionSummary `json:"executions"`
	Next       string                   `json:"next"`
}

// executionQuery is what GET /api/v1/executions and the list page accept.
type executionQuery struct {
	Status      string `query:"status"`
	Audit       string `query:"audit"`
	Name        string `query:"name"`
	HasFindings string `query:"has_findings"`
	Q           string `query:"q"`
	From        string `query:"from"`
	To          string `query:"to"`
	Sort        string `query:"sort"`
	Cursor      string `query:"cursor"`
	Limit       string `query:"limit"`
}

// executionListParams are the parameters the executions list takes, in
// the order docs/api.md lists them: any other is a mistake (a misspelt
// filter would otherwise list everything as if it matched).
var executionListParams = queryParamNames(executionQuery{})

// queryParamNames returns the query tags of a request type's fields.
func queryParamNames(v any) []string {
	var names []string
	t := reflect.TypeOf(v)
	for i := range t.NumField() {
		if name := t.Field(i).Tag.Get("query"); name != "" {
			names = append(names, name)
		}
	}
	return names
}

// unknownParams returns, sorted, the request's query parameters that are
// not among known.
func unknownParams(c echo.Context, known []string) []string {
	var unknown []string
	for name := range c.QueryParams() {
		if !slices.Contains(known, name) {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	return unknown
}

// unknownFilterMessage names the unknown parameters and the ones the list
// takes: a misspelt filter is refused rather than quietly ignored, which
// would show an unfiltered list as if it were the answer.
func unknownFilterMessage(list string, unknown, known []string) string {
	quoted := make([]string, len(unknown))
	for i, name := range unknown {
		quoted[i] = strconv.Quote(name)
	}
	what := "unknown filter "
	if len(unknown) > 1 {
		what = "unknown filters "
	}
	return what + strings.Join(quoted, ", ") + "; " + list + " takes " + strings.Join(known, ", ")
}

// rejectUnknownParams is a 400 naming any query parameter a list does not
// take, or nil.
func rejectUnknownParams(c echo.Context, list string, known []string) error {
	if unknown := unknownParams(c, known); len(unknown) > 0 {
		return badQuery(unknownFilterMessage(list, unknown, known))
	}
	return nil
}

func (q executionQuery) filter() (store.ExecutionFilter, error) {
	f := store.ExecutionFilter{Name: q.Name, Q: q.Q, Cursor: q.Cursor}
	if q.Status != "" {
		st := trace.Status(q.Status)
		if !containsStatus(st) {
			return f, badQuery("status: must be running, completed, failed or cancelled")
		}
		f.Status = st
	}
	if q.Audit != "" {
		st := trace.AuditState(q.Audit)
		if !slices.Contains(trace.AuditStates, st) {
			return f, badQuery("audit: must be critical, unverified or clean")
		}
		f.AuditState = st
	}
	if q.HasFindings != "" {
		b, err := strconv.ParseBool(q.HasFindings)
		if err != nil {
			return f, badQuery("has_findings: must be true or false")
		}
		f.HasFindings = &b
	}
	var err error
	if f.From, err = parseQueryTime("from", q.From); err != nil {
		return f, err
	}
	if f.To, err = parseQueryTime("to", q.To); err != nil {
		return f, err
	}
	switch q.Sort {
	case "", "newest":
	case "severity":
		f.BySeverity = true
	default:
		return f, badQuery("sort: must be newest or severity")
	}
	if f.Limit, err = parseLimit(q.Limit); err != nil {
		return f, err
	}
	return f, nil
}

func containsStatus(st trace.Status) bool {
	for _, s := range trace.Statuses {
		if s == st {
			return true
		}
	}
	return false
}

func parseQueryTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return t, badQuery(name + ": must be an RFC 3339 time such as 2026-06-30T14:00:00Z")
	}
	return t, nil
}

func parseLimit(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > store.MaxPageSize {
		return 0, badQuery("limit: must be an integer from 1 to " + strconv.Itoa(store.MaxPageSize))
	}
	return n, nil
}

func badQuery(msg string) error { return echo.NewHTTPError(http.StatusBadRequest, msg) }

// bindQuery binds the query string into a request type; a value of the
// wrong type is a 400 naming it.
func bindQuery(c echo.Context, q any) error {
	if err := (&echo.DefaultBinder{}).BindQueryParams(c, q); err != nil {
		return badQuery("query: " + err.Error())
	}
	return nil
}

// handleExecutionList is GET /api/v1/executions.
func (s *Server) handleExecutionList(c echo.Context) error {
	if err := rejectUnknownParams(c, "the executions list", executionListParams); err != nil {
		return err
	}
	var q executionQuery
	if err := bindQuery(c, &q); err != nil {
		return err
	}
	f, err := q.filter()
	if err != nil {
		return err
	}
	list, next, err := s.cfg.DB.ListExecutions(c.Request().Context(), f)
	if err != nil {
		return err
	}
	if list == nil {
		list = []store.ExecutionSummary{}
	}
	return c.JSON(http.StatusOK, executionListResponse{Executions: list, Next: next})
}

// The execution's JSON twin: attempts carry their derived outcome.
type executionDetail struct {
	Execution executionHeader `json:"execution"`
	// Audit is what the audit may claim: critical, unverified or clean.
	Audit      trace.Verdict   `json:"audit"`
	Steps      []stepJSON      `json:"steps"`
	ModelCalls []trace.Span    `json:"model_calls"`
	Effects    []effectJSON    `json:"effects"`
	Gaps       []trace.Gap     `json:"gaps"`
	Findings   []trace.Finding `json:"findings"`
	// Incidents tell the critical findings in sentences, as the page
	// does (views.NewIncidents); a run without any tells the repeats its
	// keys and journal held.
	Incidents []views.Incident `json:"incidents"`
	// NearbyOrphans, for an unverified execution, are orphan effects
	// within its time window.
	NearbyOrphans []trace.Effect `json:"nearby_orphan_effects,omitempty"`
}

type executionHeader struct {
	trace.Execution
	trace.Counts
	DurationMS       *int64 `json:"duration_ms,omitempty"`
	Findings         int    `json:"findings"`
	CriticalFindings int    `json:"critical_findings"`
}

type stepJSON struct {
	StepID   string        `json:"step_id"`
	Tool     string        `json:"tool"`
	Effect   string        `json:"effect"`
	Provider string        `json:"provider,omitempty"`
	Attempts []attemptJSON `json:"attempts"`
}

type attemptJSON struct {
	Attempt        int              `json:"attempt"`
	SpanID         string           `json:"span_id,omitempty"`
	Outcome        trace.Outcome    `json:"outcome"`
	Deduplicated   bool             `json:"deduplicated"`
	IdempotencyKey string           `json:"idempotency_key"`
	Worker         string           `json:"worker"`
	StartedAt      time.Time        `json:"started_at,omitzero"`
	EndedAt        time.Time        `json:"ended_at,omitzero"`
	DurationMS     *int64           `json:"duration_ms,omitempty"`
	Tool           string           `json:"tool,omitempty"`
	Args           json.RawMessage  `json:"args,omitempty"`
	Result         json.RawMessage  `json:"result,omitempty"`
	Error          string           `json:"error,omitempty"`
	RecognisedBy   string           `json:"recognised_by,omitempty"`
	Conflicts      []trace.Conflict `json:"conflicts,omitempty"`
}

type effectJSON struct {
	trace.Effect
	State trace.MatchState `json:"state"`
}

// newExecutionHeader is the JSON of an execution's header: the counts the
// page shows, from the same model (views.NewExecution).
func newExecutionHeader(r views.ExecutionRow) executionHeader {
	return executionHeader{Execution: r.Execution, Counts: r.Counts, DurationMS: durationMS(r.StartedAt, r.EndedAt),
		Findings: r.Findings, CriticalFindings: r.CriticalFindings}
}

func durationMS(start, end time.Time) *int64 {
	if start.IsZero() || end.IsZero() {
		return nil
	}
	ms := end.Sub(start).Milliseconds()
	return &ms
}

// handleExecutionShow is GET /api/v1/executions/:id, and GET
// /api/v1/execution?execution_id= for any id.
func (s *Server) handleExecutionShow(c echo.Context) error {
	id, err := executionIDParam(c)
	if err != nil {
		return err
	}
	x, err := s.loadExecution(c.Request().Context(), id, true)
	if err != nil {
		return err
	}
	run := x.Run
	out := executionDetail{
		Execution:     newExecutionHeader(x.Summary),
		Audit:         x.Verdict,
		Steps:         []stepJSON{},
		ModelCalls:    run.ModelCalls(),
		Effects:       []effectJSON{},
		Gaps:          x.Gaps,
		Findings:      x.Findings,
		Incidents:     x.Incidents,
		NearbyOrphans: x.NearbyOrphans,
	}
	if out.Incidents == nil {
		out.Incidents = []views.Incident{}
	}
	if out.ModelCalls == nil {
		out.ModelCalls = []trace.Span{}
	}
	if out.Gaps == nil {
		out.Gaps = []trace.Gap{}
	}
	for _, st := range run.Steps {
		sj := stepJSON{StepID: st.ID, Tool: st.ToolName(), Effect: string(st.Class()), Provider: st.ProviderName(), Attempts: []attemptJSON{}}
		for _, a := range st.Attempts {
			sj.Attempts = append(sj.Attempts, attemptJSON{
				Attempt: a.Number, SpanID: a.SpanID, Outcome: run.Outcome(a), Deduplicated: a.Deduplicated, IdempotencyKey: a.IdempotencyKey,
				Worker: a.Worker, StartedAt: a.StartedAt, EndedAt: a.EndedAt, DurationMS: durationMS(a.StartedAt, a.EndedAt),
				Tool: a.Tool, Args: a.Args, Result: a.Result, Error: a.Error, RecognisedBy: a.RecognisedBy, Conflicts: a.Conflicts,
			})
		}
		out.Steps = append(out.Steps, sj)
	}
	for _, f := range run.OwnEffects() { // a peer's effect under a shared key is on the key page only
		out.Effects = append(out.Effects, effectJSON{Effect: f, State: x.States[f.Ref()]})
	}
	return c.JSON(http.StatusOK, out)
}
