package views

import (
	"fmt"
	"net/url"

	"github.com/oncetrace/oncetrace/trace"
)

// A selected attempt or effect lives in the execution page's URL, so a
// link shares what the reader sees: ?step=S&n=N (an attempt) or
// ?provider=P&effect=E (an effect), the names of the detail permalinks'
// parameters, and the anchor of its bar or mark, which scrolls to it. The
// server renders the page with that detail in the panel; the script keeps
// the URL in step as the reader selects (static/js/oncetrace.js).

// SelectAttemptURL is the execution page with an attempt selected.
func SelectAttemptURL(executionID, stepID string, n int) string {
	return executionURL(executionID, "", url.Values{"step": {stepID}, "n": {fmt.Sprint(n)}}) + "#" + AttemptAnchor(stepID, n)
}

// SelectEffectURL is the execution page with an effect selected.
func SelectEffectURL(executionID, provider, id string) string {
	return executionURL(executionID, "", url.Values{"provider": {provider}, "effect": {id}}) + "#" + EffectAnchor(provider, id)
}

// Selection is the attempt or effect the page opens with in its detail
// panel; the zero Selection is none.
type Selection struct {
	// Anchor is the HTML id of the selected bar or mark.
	Anchor  string
	Attempt *AttemptView
	Effect  *EffectView
}

// SelectAttempt is the selection of an attempt, false if the execution
// has no such attempt.
func (x Execution) SelectAttempt(stepID string, n int) (Selection, bool) {
	v, ok := x.Attempt(stepID, n)
	if !ok {
		return Selection{}, false
	}
	return Selection{Anchor: AttemptAnchor(stepID, n), Attempt: &v}, true
}

// SelectEffect is the selection of one of the execution's effects;
// messageURL is its message's page, if one was kept.
func (x Execution) SelectEffect(ref trace.EffectRef, messageURL string) (Selection, bool) {
	v, ok := x.Effect(ref)
	if !ok {
		return Selection{}, false
	}
	v.MessageURL = messageURL
	return Selection{Anchor: EffectAnchor(ref.Provider, ref.ID), Effect: &v}, true
}

// incidentLink is the page with the incident's attempt selected: the first
// that caused an extra effect, else the step's last (the repeat); a
// finding about a key, which names no step, links the page.
func incidentLink(executionID string, in trace.Incident) string {
	if cs := in.Culprits(); len(cs) > 0 {
		return SelectAttemptURL(executionID, in.Step.ID, cs[0])
	}
	if n := len(in.Step.Attempts); n > 0 {
		return SelectAttemptURL(executionID, in.Step.ID, in.Step.Attempts[n-1].Number)
	}
	return ExecutionURL(executionID)
}
