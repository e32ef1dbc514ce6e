package views

import (
	"fmt"
	"net/url"

	"github.com/oncetrace/oncetrace/trace"
)

// CompareURL is the page comparing execution a with b.
func CompareURL(a, b string) string {
	return "/compare?" + url.Values{"a": {a}, "b": {b}}.Encode()
}

// CompareAPIURL is the compare page's JSON twin.
func CompareAPIURL(a, b string) string {
	return "/api/v1/compare?" + url.Values{"a": {a}, "b": {b}}.Encode()
}

// CompareForm is the compare page's form, as the user typed it.
type CompareForm struct{ A, B string }

// CompareInput is what the compare page is built from: both executions
// as their pages show them (NewExecution).
type CompareInput struct {
	A, B       Execution
	Comparison trace.Comparison
}

// CompareView is the compare page. With Error set it shows only the form
// and the message.
type CompareView struct {
	Form  CompareForm
	Error string

	A, B    ExecutionRow
	Facts   []CompareFact
	Summary string
	// Differing are the rows that differ, most telling first, linked to
	// their rows.
	Differing []Link
	Rows      []CompareRow
	SwapURL   string
	APIURL    string
}

// CompareFact is one header fact of both executions.
type CompareFact struct {
	Name    string
	A, B    string
	Differs bool
}

// CompareRow is one aligned step.
type CompareRow struct {
	Anchor      string // HTML id of the row
	Label       string // "step-1 (send_invoice_email)"
	Match       string // how the sides were paired, in words
	A, B        *CompareSide
	Differences []string
}

// Differs reports whether the row is highlighted.
func (r CompareRow) Differs() bool { return len(r.Differences) > 0 }

// CompareSide is one execution's side of a row.
type CompareSide struct {
	StepID string
	// SideEffecting steps say "no key" for an attempt without one; a read
	// needs none.
	SideEffecting bool
	Attempts      []CompareAttempt
	Effects       []CompareEffect
}

// CompareAttempt is an attempt as the compare page lists it.
type CompareAttempt struct {
	Number       int
	URL          string
	Outcome      trace.Outcome
	Key          string
	Deduplicated bool
	Duration     string
	Worker       string
}

// CompareEffect is an effect as the compare page lists it.
type CompareEffect struct {
	Provider, ID, Target string
	State                trace.MatchState
	URL                  string
}

// compareMatchWords say how a row's steps were paired.
var compareMatchWords = map[trace.StepMatch]string{
	trace.MatchByStepID:   "same step id",
	trace.MatchByToolArgs: "same tool and arguments",
	trace.MatchOnlyInA:    "only in a",
	trace.MatchOnlyInB:    "only in b",
}

// NewCompareView builds the compare page from both executions and their
// comparison (trace.Compare).
func NewCompareView(in CompareInput) CompareView {
	a, b := in.A.Run.Execution.ID, in.B.Run.Execution.ID
	v := CompareView{
		Form:    CompareForm{A: a, B: b},
		A:       in.A.Summary,
		B:       in.B.Summary,
		Summary: in.Comparison.Summary(),
		SwapURL: CompareURL(b, a),
		APIURL:  CompareAPIURL(a, b),
	}
	v.Facts = compareFacts(v.A, v.B)
	anchors := map[string]string{}
	for i, s := range in.Comparison.Steps {
		row := CompareRow{
			Anchor: domID("cmp", fmt.Sprint(i)),
			Label:  s.Label(),
			Match:  compareMatchWords[s.Match],
			A:      newCompareSide(a, s.A, in.A.States),
			B:      newCompareSide(b, s.B, in.B.States),
		}
		for _, d := range s.Differences {
			row.Differences = append(row.Differences, d.Text)
		}
		anchors[rowKey(s)] = row.Anchor
		v.Rows = append(v.Rows, row)
	}
	for _, s := range in.Comparison.Differing() {
		v.Differing = append(v.Differing, Link{Href: "#" + anchors[rowKey(s)], Text: s.Differences[0].Summary})
	}
	return v
}

// rowKey identifies a compared row by its sides' step ids.
func rowKey(s trace.ComparedStep) string {
	var a, b string
	if s.A != nil {
		a = "a:" + s.A.Step.ID
	}
	if s.B != nil {
		b = "b:" + s.B.Step.ID
	}
	return a + "\x00" + b
}

func compareFacts(a, b ExecutionRow) []CompareFact {
	facts := []CompareFact{
		{Name: "Name", A: a.Name, B: b.Name},
		{Name: "Status", A: string(a.Status), B: string(b.Status)},
		{Name: "Audit", A: AuditBadge(a.AuditState), B: AuditBadge(b.AuditState)},
		{Name: "Started", A: UTC(a.StartedAt), B: UTC(b.StartedAt)},
		{Name: "Duration", A: a.Duration(), B: b.Duration()},
		{Name: "Steps", A: fmt.Sprint(a.Steps), B: fmt.Sprint(b.Steps)},
		{Name: "Attempts", A: fmt.Sprint(a.Attempts), B: fmt.Sprint(b.Attempts)},
		{Name: "Retries", A: fmt.Sprint(a.Retries), B: fmt.Sprint(b.Retries)},
		{Name: "Dedupes", A: fmt.Sprint(a.Dedupes), B: fmt.Sprint(b.Dedupes)},
		{Name: "Replays", A: fmt.Sprint(a.Replays), B: fmt.Sprint(b.Replays)},
		{Name: "Effects", A: fmt.Sprint(a.Effects), B: fmt.Sprint(b.Effects)},
		{Name: "Findings", A: findingsFact(a), B: findingsFact(b)},
	}
	for i := range facts {
		f := &facts[i]
		// Two runs always start at different times and may well take
		// different times: those are facts to read, not differences.
		f.Differs = f.A != f.B && f.Name != "Started" && f.Name != "Duration"
	}
	return facts
}

func findingsFact(r ExecutionRow) string {
	if r.Findings == 0 {
		return "none"
	}
	return fmt.Sprintf("%d (%d critical)", r.Findings, r.CriticalFindings)
}

func newCompareSide(executionID string, s *trace.StepSide, states map[trace.EffectRef]trace.MatchState) *CompareSide {
	if s == nil {
		return nil
	}
	out := &CompareSide{StepID: s.Step.ID, SideEffecting: s.Step.Class().SideEffecting()}
	for i, a := range s.Step.Attempts {
		ca := CompareAttempt{Number: a.Number, URL: AttemptURL(executionID, s.Step.ID, a.Number), Outcome: s.Outcomes[i],
			Key: a.IdempotencyKey, Deduplicated: a.Deduplicated, Worker: a.Worker}
		if !a.StartedAt.IsZero() && !a.EndedAt.IsZero() {
			ca.Duration = Duration(a.EndedAt.Sub(a.StartedAt))
		}
		out.Attempts = append(out.Attempts, ca)
	}
	for _, e := range s.Effects {
		out.Effects = append(out.Effects, CompareEffect{Provider: e.Provider, ID: e.ID, Target: e.Target,
			State: states[e.Ref()], URL: EffectURL(executionID, e.Provider, e.ID)})
	}
	return out
}

// KeyComparisons are links comparing the first execution that sent a key
// with each other one that did: the key page's way into the compare page.
func KeyComparisons(attempts []KeyAttempt) []Link {
	var ids []string
	seen := map[string]bool{}
	for _, a := range attempts {
		if !seen[a.ExecutionID] {
			seen[a.ExecutionID] = true
			ids = append(ids, a.ExecutionID)
		}
	}
	var out []Link
	for _, id := range ids[min(1, len(ids)):] {
		out = append(out, Link{Href: CompareURL(ids[0], id), Text: ids[0] + " with " + id})
	}
	return out
}

func summaryClass(v CompareView) string {
	if len(v.Differing) > 0 {
		return "compare-summary differs"
	}
	return "compare-summary"
}

func factClass(f CompareFact) string {
	if f.Differs {
		return "differs"
	}
	return ""
}

func rowClass(r CompareRow) string {
	if r.Differs() {
		return "cmp-row differs"
	}
	return "cmp-row"
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
