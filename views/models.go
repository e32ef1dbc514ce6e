package views

import (
	"fmt"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// ExecutionRow is one execution in a list, with its counts.
type ExecutionRow struct {
	trace.Execution
	trace.Counts
	Findings         int
	CriticalFindings int
	// AuditState is what the audit may claim; "" for a row not analysed
	// since the states were introduced, which shows no badge.
	AuditState trace.AuditState
}

// Duration is the execution's length, or "" while unknown.
func (r ExecutionRow) Duration() string {
	if r.StartedAt.IsZero() || r.EndedAt.IsZero() {
		return ""
	}
	return Duration(r.EndedAt.Sub(r.StartedAt))
}

// ListFilter is the executions page's form, as the user typed it.
type ListFilter struct {
	Status, Audit, Name, HasFindings, Q, From, To string
	Sort                                          string // "" (newest first) or "severity"
}

// Active reports whether any filter or order is set.
func (f ListFilter) Active() bool { return f != ListFilter{} }

// ExecutionsView is the executions page.
type ExecutionsView struct {
	Rows    []ExecutionRow
	Filter  ListFilter
	NextURL string // "" on the last page
	Paged   bool   // this is not the first page
	BaseURL string // where the server is reached, for the curl line
	// FilterError names query parameters the list does not take; the page
	// shows it instead of a list.
	FilterError string
}

// FindingView is a finding with links to what it names.
type FindingView struct {
	trace.Finding
	Links []Link
}

// Link is an anchor's target and text.
type Link struct{ Href, Text string }

// NewFindingView links a finding's attempts and effects to their places on
// the execution page.
func NewFindingView(f trace.Finding) FindingView {
	v := FindingView{Finding: f}
	for _, n := range f.Attempts {
		v.Links = append(v.Links, Link{Href: "#" + AttemptAnchor(f.StepID, n), Text: fmt.Sprintf("attempt %d", n)})
	}
	for _, e := range f.Effects {
		v.Links = append(v.Links, Link{Href: "#" + EffectAnchor(e.Provider, e.ID), Text: e.Provider + " " + e.ID})
	}
	if f.IdempotencyKey != "" {
		v.Links = append(v.Links, Link{Href: KeyURL(f.IdempotencyKey), Text: "key " + f.IdempotencyKey})
	}
	return v
}

// ExecutionView is the execution page.
type ExecutionView struct {
	Execution ExecutionRow
	Audit     AuditView
	Findings  []FindingView
	// FindingGroups are the findings the page shows, by rule, the rest of
	// each group behind a link (ExecutionFindings).
	FindingGroups []FindingGroup
	// Incidents tell the critical findings in sentences (NewIncidents);
	// IncidentsShown are the first of them, the rest behind a link.
	Incidents      []Incident
	IncidentsShown IncidentsView
	Timeline       Timeline
	Gaps           []trace.Gap
	// LiveURL, while the execution runs, is the WebSocket that pushes the
	// page's fragments again as they change.
	LiveURL string
	// View is ViewTimeline or ViewSteps; Steps is the step table, built
	// only for ViewSteps.
	View  string
	Steps StepTable
	// Selected is the attempt or effect the URL selects, shown in the
	// detail panel (views/selection.go).
	Selected Selection
}

// AttemptView is one attempt's detail.
type AttemptView struct {
	ExecutionID string
	Step        trace.Step
	Attempt     trace.Attempt
	Outcome     trace.Outcome
	Effects     []trace.Effect // effects of its step
	// HTTPCalls are the HTTP client spans the attempt made (HTTPCalls).
	HTTPCalls []trace.Span
	// Culprit is CulpritLabel when the attempt caused an extra effect;
	// EffectLabels place its step's duplicated effects (IncidentMarks).
	Culprit      string
	EffectLabels map[trace.EffectRef]string
}

// Duration is the attempt's length, or "".
func (v AttemptView) Duration() string {
	if v.Attempt.StartedAt.IsZero() || v.Attempt.EndedAt.IsZero() {
		return ""
	}
	return Duration(v.Attempt.EndedAt.Sub(v.Attempt.StartedAt))
}

// EffectView is one effect's detail.
type EffectView struct {
	ExecutionID string
	Effect      trace.Effect
	State       trace.MatchState
	StepID      string // the step it belongs to, if any
	Siblings    int    // effects of that step, itself included
	// Place is its place among its step's duplicated effects, "2 of 2 ·
	// extra", and CausedBy the attempt that caused it when one is shown
	// to (IncidentMarks); "" and 0 otherwise.
	Place      string
	CausedBy   int
	MessageURL string // the message kept for it (the SMTP sink), or ""
}

// OutboxRow is one effect on the outbox page.
type OutboxRow struct {
	trace.Effect
	State      trace.MatchState
	MessageURL string // the message kept for it (the SMTP sink), or ""
}

// OutboxView is the outbox page.
type OutboxView struct {
	Rows               []OutboxRow
	Q, Provider, State string
	NextURL            string
	// ScanLimit, when not 0, is how many effects a page of this search
	// reads at most for what no index holds: "More" may find more.
	ScanLimit int
}

// KeyAttempt is an attempt that carried a key, with where it belongs.
type KeyAttempt struct {
	trace.Attempt
	Outcome trace.Outcome
}

// KeyView is the page of one idempotency key.
type KeyView struct {
	Key        string
	Attempts   []KeyAttempt
	Effects    []OutboxRow
	Findings   []FindingView
	ArgsVaries bool // the key was sent with different arguments
	StepsVary  bool // the key was sent by different steps
}

// ErrorView is an error page.
type ErrorView struct {
	Status  int
	Message string
}

// LiveFilterView is the live page's form.
type LiveFilterView struct {
	ExecutionID, Name, Provider string
	FindingsOnly                bool
}

// LiveView is the live page.
type LiveView struct {
	Filter    LiveFilterView
	Rows      []LiveRowView // newest first
	SocketURL string        // resumes after the newest row
	Cap       int           // rows kept on the page
}

// LiveRowView is one row of the live tail.
type LiveRowView struct {
	Seq          int64
	At           time.Time
	ExecutionID  string
	What         string // "attempt 2 of step-4", "effect", "execution completed"
	Detail       string
	Outcome      trace.Outcome
	Deduplicated bool
	Key          string
	Finding      *trace.Finding
}

// NewLiveRow describes an event for the live tail.
func NewLiveRow(seq int64, ev trace.Event) LiveRowView {
	r := LiveRowView{Seq: seq, ExecutionID: ev.ExecutionID(), At: ev.When()}
	switch ev.Type {
	case trace.EventExecution:
		x := ev.Execution
		r.What = "execution"
		if x.Status != "" {
			r.What += " " + string(x.Status)
		}
		r.Detail = x.Name
		r.Key = x.IdempotencyKey
	case trace.EventAttempt:
		a := ev.Attempt
		r.What = fmt.Sprintf("%s attempt %d", a.StepID, a.Number)
		if a.Number == 0 {
			// Numbered by start time once stored; the event names its span.
			r.What = fmt.Sprintf("%s attempt (span %s)", a.StepID, a.SpanID)
		}
		r.Detail = a.Tool
		if a.Provider != "" {
			r.Detail += " → " + a.Provider
		}
		r.Outcome = a.Outcome
		if a.Outcome == "" {
			r.Outcome = trace.OutcomeRunning
		}
		r.Deduplicated = a.Deduplicated
		r.Key = a.IdempotencyKey
	case trace.EventSpan:
		sp := ev.Span
		r.What = string(sp.Role) + " span"
		if sp.Role == trace.RoleModel {
			r.What = "model call"
		}
		r.Detail = sp.Name
		if sp.Model != "" {
			r.Detail += " · " + sp.Model
		}
		r.Key = sp.IdempotencyKey
	case trace.EventEffect:
		f := ev.Effect
		r.What = "effect " + f.Provider
		r.Detail = f.ID
		if f.Target != "" {
			r.Detail += " to " + f.Target
		}
		r.Key = f.IdempotencyKey
	}
	return r
}
