package views_test

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
	"github.com/oncetrace/oncetrace/views/htmlcheck"
)

// naturalRun has steps step-123, step-14 and step-2, run in that order,
// each retried without a key and sending two emails.
func naturalRun() trace.Run {
	run := trace.Run{Execution: trace.Execution{ID: execID, Status: trace.StatusCompleted, StartedAt: at(0), EndedAt: at(40)},
		FedProviders: map[string]bool{"mail-api": true}}
	for i, id := range []string{"step-123", "step-14", "step-2"} {
		s := float64(i * 10)
		run.Steps = append(run.Steps, step(id, "send_invoice_email", trace.EffectWrite, "mail-api",
			try(1, s, s+1, trace.OutcomeTimeout), try(2, s+1.1, s+1.3, trace.OutcomeOK)))
		run.Effects = append(run.Effects, mail(id+"-a", "", id, s+0.5), mail(id+"-b", "", id, s+1.2))
	}
	return run
}

// TestIncidentsAndFindingsInNaturalOrder: the store hands findings over
// with ids compared as text (step-123, step-14, step-2); the incidents,
// the findings panel and the JSON model list step-2, step-14, step-123.
func TestIncidentsAndFindingsInNaturalOrder(t *testing.T) {
	run := naturalRun()
	findings := trace.AuditRun(run, trace.DefaultConfig)
	// The store's order: severity, execution, step as text.
	slices.SortStableFunc(findings, func(a, b trace.Finding) int {
		return cmp.Or(cmp.Compare(a.Severity, b.Severity), strings.Compare(a.StepID, b.StepID), cmp.Compare(a.Rule, b.Rule))
	})
	x := views.NewExecution(views.ExecutionInput{Run: run, Findings: findings, States: trace.EffectStates(run), Analysis: trace.DefaultConfig})
	v := x.Page(views.TimeRange{}, at(0))
	want := []string{"step-2", "step-14", "step-123"}

	doc := renderChecked(t, views.ExecutionHeader(v), htmlcheck.Fragment)
	var got []string
	for _, in := range byTestID(doc, "incident") {
		got = append(got, attr(in, "data-step"))
	}
	if !slices.Equal(got, want) {
		t.Errorf("incidents: got %v, want %v", got, want)
	}

	panel := renderChecked(t, views.FindingsPanel(v.Findings), htmlcheck.Fragment)
	got = got[:0]
	for _, g := range byTestID(panel, "finding-group") {
		if attr(g, "data-rule") != string(trace.RuleDuplicateEffect) {
			continue
		}
		for _, li := range byTestID(g, "finding") {
			// A finding's first link is its step's first attempt.
			for n := range li.Descendants() {
				if n.Data == "a" {
					got = append(got, attr(n, "href"))
					break
				}
			}
		}
	}
	var wantLinks []string
	for _, id := range want {
		wantLinks = append(wantLinks, "#"+views.AttemptAnchor(id, 1))
	}
	if !slices.Equal(got, wantLinks) {
		t.Errorf("findings panel's duplicate_effect links: got %v, want %v", got, wantLinks)
	}

	var dup []string
	for _, f := range x.Findings {
		if f.Rule == trace.RuleDuplicateEffect {
			dup = append(dup, f.StepID)
		}
	}
	if !slices.Equal(dup, want) {
		t.Errorf("model's duplicate_effect findings: got %v, want %v", dup, want)
	}
}
