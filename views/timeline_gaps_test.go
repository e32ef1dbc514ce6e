package views_test

import (
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// Idle gaps say what they are ("idle 58 s, w1", not "worker w1 → w1"),
// and a gap at the chart's left edge keeps both its lines inside the
// chart: each is moved inward by its own width.
func TestGapLabelsSayWhatAndStayInside(t *testing.T) {
	oneWorker := trace.Run{Execution: trace.Execution{ID: execID, Status: trace.StatusCompleted},
		Steps: []trace.Step{
			step("step-a", "plan", trace.EffectRead, "", try(1, 0, 2, trace.OutcomeOK, worker("pid-100"))),
			step("step-b", "act", trace.EffectRead, "", try(1, 60, 62, trace.OutcomeOK, worker("pid-100"))),
		}}
	gaps := []trace.Gap{{Start: at(2), End: at(60), Kind: trace.GapIdle, WorkerBefore: "pid-100", WorkerAfter: "pid-100"}}
	doc := renderFragment(t, views.TimelineBlock(views.NewTimeline(views.TimelineInput{Run: oneWorker, Gaps: gaps})))
	if got, want := text(one(t, doc, "gap-label")), "idle 58 s, pid-100"; got != want {
		t.Errorf("idle gap of one worker: got %q, want %q", got, want)
	}
	if n := len(byTestID(doc, "gap-workers")); n != 0 {
		t.Errorf("idle gap of one worker: got %d worker lines, want none (\"worker pid-100 → pid-100\" says nothing)", n)
	}

	// 10 ms of work, then the gap: it starts at the left edge.
	atEdge := trace.Run{Execution: trace.Execution{ID: execID, Status: trace.StatusCompleted},
		Steps: []trace.Step{
			step("step-a", "plan", trace.EffectRead, "", try(1, 0, 0.01, trace.OutcomeOK, worker("pid-100"))),
			step("step-b", "act", trace.EffectRead, "", try(1, 30, 40, trace.OutcomeOK, worker("pid-101"))),
		}}
	gaps = []trace.Gap{{Start: at(0.01), End: at(30), Kind: trace.GapIdle, WorkerBefore: "pid-100", WorkerAfter: "pid-101"}}
	tl := views.NewTimeline(views.TimelineInput{Run: atEdge, Gaps: gaps})
	if len(tl.Gaps) != 1 {
		t.Fatalf("got %d gaps, want 1", len(tl.Gaps))
	}
	g := tl.Gaps[0]
	if !strings.HasPrefix(g.Shown, "idle ") || g.ShownWorkers != "worker pid-100 → pid-101" {
		t.Fatalf("gap at the edge: got %q and %q, want both lines shown, the first saying idle", g.Shown, g.ShownWorkers)
	}
	if w := estimate(g.ShownWorkers, 11); g.Mid >= w/2 {
		t.Fatalf("the gap's middle (%.1f px) is not near the edge for a %.1f px line: the test proves nothing", g.Mid, w)
	}
	for _, l := range []struct {
		text string
		x    float64
	}{{g.Shown, g.LabelX}, {g.ShownWorkers, g.WorkersX}} {
		w := estimate(l.text, 11)
		if l.x-w/2 < -0.5 || l.x+w/2 > views.ChartWidth+0.5 {
			t.Errorf("%q: drawn from %.1f to %.1f px, want inside 0–%d", l.text, l.x-w/2, l.x+w/2, views.ChartWidth)
		}
	}
}
