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
	Status, Name, HasFindings, Q, From, To string
}

// Active reports whether any filter is set.
func (f ListFilter) Active() bool { return f != ListFilter{} }

// ExecutionsView is the executions page.
type ExecutionsView struct {
	Rows    []ExecutionRow
	Filter  ListFilter
	NextURL string // "" on the last page
	Paged   bool   // this is not the first page
	BaseURL string // where the server is reached, for the curl line
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
	Execution  ExecutionRow
	Findings   []FindingView
	Timeline   Timeline
	ShowAllURL string
	Gaps       []trace.Gap
}

// Clean reports whether the execution has no critical finding.
func (v ExecutionView) Clean() bool { return v.Execution.CriticalFindings == 0 }

// AttemptView is one attempt's detail.
type AttemptView struct {
	ExecutionID string
	Step        trace.Step
	Attempt     trace.Attempt
	Outcome     trace.Outcome
	Effects     []trace.Effect // effects of its step
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
}

// OutboxRow is one effect on the outbox page.
type OutboxRow struct {
	trace.Effect
	State trace.MatchState
}

// OutboxView is the outbox page.
type OutboxView struct {
	Rows            []OutboxRow
	Provider, State string
	NextURL         string
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

// TimeOrDash is a time for a table cell.
func TimeOrDash(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return UTC(t)
}
