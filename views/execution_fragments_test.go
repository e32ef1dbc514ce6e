package views_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
	"github.com/oncetrace/oncetrace/views/htmlcheck"
)

// duplicatedSteps is n write steps, each with two emails (a
// duplicate_effect finding and an incident each).
func duplicatedSteps(n int) trace.Run {
	run := trace.Run{Execution: trace.Execution{ID: execID, Status: trace.StatusCompleted, StartedAt: at(0)}, FedProviders: map[string]bool{"mail-api": true}}
	for i := range n {
		s := float64(i) * 0.1
		id := fmt.Sprintf("step-%d", i+1)
		run.Steps = append(run.Steps, step(id, "send_email", trace.EffectWrite, "mail-api", try(1, s, s+0.05, trace.OutcomeOK)))
		for j := range 2 {
			run.Effects = append(run.Effects, trace.Effect{Provider: "mail-api", ID: fmt.Sprintf("m%d_%d", i, j), ExecutionID: execID, StepID: id, At: at(s + 0.06 + 0.01*float64(j))})
		}
	}
	return run
}

// TestExecutionFragments checks the page's bounded first answer and the
// fragments that bring the rest: findings 100 and incidents 25 at a time,
// in the page's order, each with the link to the next until none is left.
func TestExecutionFragments(t *testing.T) {
	run := duplicatedSteps(260)
	x := execution(run)
	if len(x.Findings) != 260 {
		t.Fatalf("findings: got %d, want 260 duplicate_effect", len(x.Findings))
	}
	v := x.Page(views.TimeRange{}, at(0).AddDate(1, 0, 0))
	if g := v.FindingGroups[0]; len(g.Shown) != 10 || g.Count() != 260 || g.More == nil || !strings.Contains(g.More.Text, "(of 250)") {
		t.Fatalf("first answer's group: got %d shown of %d, more %+v, want 10 of 260 and a link to 100 of the other 250", len(g.Shown), g.Count(), g.More)
	}
	if len(v.IncidentsShown.Shown) != 3 || v.IncidentsShown.More == nil {
		t.Fatalf("first answer's incidents: got %d and more %+v, want 3 and a link", len(v.IncidentsShown.Shown), v.IncidentsShown.More)
	}

	var steps []string
	for offset, pages := 10, 0; ; pages++ {
		f := x.FindingsFragment(trace.RuleDuplicateEffect, offset)
		for _, fv := range f.Findings {
			steps = append(steps, fv.StepID)
		}
		if f.More == nil {
			break
		}
		if pages > 5 || len(f.Findings) != 100 {
			t.Fatalf("findings fragment from %d: got %d, want 100 and a link", offset, len(f.Findings))
		}
		offset += len(f.Findings)
	}
	if len(steps) != 250 || steps[0] != "step-11" || steps[len(steps)-1] != "step-260" {
		t.Errorf("findings after the first ten: got %d from %s to %s, want 250 from step-11 to step-260, in natural order", len(steps), steps[0], steps[len(steps)-1])
	}
	doc := renderChecked(t, views.FindingItems(x.FindingsFragment(trace.RuleDuplicateEffect, 10).Findings, nil), htmlcheck.Fragment)
	for d := range doc.Descendants() {
		if h := attr(d, "href"); d.Data == "a" && strings.HasPrefix(h, "#") {
			t.Fatalf("a fragment's finding links to %q, want a page: the lane may not be on the page", h)
		}
	}

	incidents := 3
	for offset := 3; ; {
		f := x.IncidentsFragment(offset)
		incidents += len(f.Incidents)
		if f.More == nil {
			break
		}
		offset += len(f.Incidents)
	}
	if incidents != len(x.Incidents) || incidents != 260 {
		t.Errorf("incidents through the fragments: got %d, want all %d", incidents, len(x.Incidents))
	}

	lanes := x.Lanes(views.TimeRange{}, views.LaneSelection{StepID: "step-200"})
	if len(lanes.Timeline.Lanes) != 1 || lanes.Timeline.Lanes[0].StepID != "step-200" {
		t.Errorf("lane of step-200: got %d lanes, want it alone", len(lanes.Timeline.Lanes))
	}
	if n := len(v.Timeline.Overview.Trouble); n == 0 || n > 120 {
		t.Errorf("overview trouble: got %d slices, want some, at most 120", n)
	}
	if n := len(v.Timeline.EffectClusters); n == 0 || len(v.Timeline.Effects) != 0 {
		t.Errorf("outbox lane of 520 effects: got %d clusters and %d marks, want clusters only", n, len(v.Timeline.Effects))
	}
}
