package views_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// bigRun is a 300-step execution like the one issue 12 was found with:
// one to four attempts a step (750 attempts), an email every fifth step
// and two every 25th (72 effects), a 40 s crash gap after step 150 whose
// first attempt never ended, and an execution end 5 s after the last
// attempt.
func bigRun() trace.Run {
	run := trace.Run{Execution: trace.Execution{ID: execID, Name: "big", Status: trace.StatusCompleted, StartedAt: at(0)},
		FedProviders: map[string]bool{"mail-api": true}}
	sec := 0.0
	outcomes := []trace.Outcome{trace.OutcomeTimeout, trace.OutcomeError}
	for i := range 300 {
		id := fmt.Sprintf("step-%d", i+1)
		n := 1 + (i*7)%4
		w := "w1"
		if i >= 150 {
			w = "w2"
		}
		if i == 150 {
			sec += 40 // the crash
		}
		var tries []trace.Attempt
		for k := 1; k <= n; k++ {
			outcome := trace.OutcomeOK
			if k < n {
				outcome = outcomes[k%2]
			}
			tries = append(tries, try(k, sec, sec+0.03, outcome, worker(w)))
			sec += 0.035
		}
		if i == 149 {
			tries = append(tries, try(n+1, sec, -1, "", worker("w1"))) // lost in the crash
		}
		tool, class, provider := "fetch_page", trace.EffectRead, ""
		if i%5 == 0 {
			tool, class, provider = "send_email", trace.EffectWrite, "mail-api"
			run.Effects = append(run.Effects, mail(fmt.Sprintf("msg_%03d_a", i), "", id, sec-0.02))
			if i%25 == 0 {
				run.Effects = append(run.Effects, mail(fmt.Sprintf("msg_%03d_b", i), "", id, sec-0.01))
			}
		}
		run.Steps = append(run.Steps, step(id, tool, class, provider, tries...))
	}
	run.Execution.EndedAt = at(sec + 5)
	return run
}

func bigTimeline(run trace.Run, r views.TimeRange, marks views.IncidentMarks) views.Timeline {
	return selectedTimeline(run, r, marks, views.LaneSelection{})
}

func selectedTimeline(run trace.Run, r views.TimeRange, marks views.IncidentMarks, sel views.LaneSelection) views.Timeline {
	return views.NewTimeline(views.TimelineInput{Run: run, Gaps: trace.Gaps(run, trace.DefaultConfig), States: trace.EffectStates(run),
		Findings: trace.AuditRun(run, trace.DefaultConfig), Range: r, Marks: marks, Select: sel})
}

// allLanes is the timeline with every lane laid out, as the page's
// fragments bring them (100 a fragment) in display order.
func allLanes(run trace.Run, r views.TimeRange, marks views.IncidentMarks) views.Timeline {
	tl := bigTimeline(run, r, marks)
	tl.Lanes = nil
	for offset := 0; offset < len(run.Steps); offset += 100 {
		f := selectedTimeline(run, r, marks, views.LaneSelection{Fragment: true, Offset: offset, End: len(run.Steps)})
		tl.Lanes = append(tl.Lanes, f.Lanes...)
	}
	return tl
}

// labelBox is a label's estimated box in its row's SVG.
type labelBox struct {
	svg, text    string
	x0, x1, top  float64
	bottom, font float64
}

// box estimates a label's extent as the page draws it: a line of
// DejaVu Sans Mono is 0.93 em above the baseline and 0.24 em below.
func box(svg string, l views.PlacedLabel, font float64) labelBox {
	x0, x1 := l.Box()
	return labelBox{svg: svg, text: l.Text, x0: x0, x1: x1, top: l.Y - 0.93*font, bottom: l.Y + 0.24*font, font: font}
}

// timelineLabels is every text label the timeline draws, by the SVG it is
// in, with its estimated box.
func timelineLabels(tl views.Timeline) []labelBox {
	var out []labelBox
	for _, k := range tl.Ticks {
		w := float64(len([]rune(k.Label))) * 0.6 * 11
		l := views.PlacedLabel{Text: k.Label, X: k.X, Y: 12, Anchor: k.Anchor, Width: w}
		out = append(out, box("axis", l, 11))
	}
	for _, g := range tl.Gaps {
		if g.Shown != "" {
			out = append(out, box("axis", views.PlacedLabel{Text: g.Shown, X: g.LabelX, Y: 36, Anchor: "middle", Width: estimate(g.Shown, 11)}, 11))
		}
		if g.ShownWorkers != "" {
			out = append(out, box("axis", views.PlacedLabel{Text: g.ShownWorkers, X: g.WorkersX, Y: 52, Anchor: "middle", Width: estimate(g.ShownWorkers, 11)}, 11))
		}
	}
	for _, e := range tl.Effects {
		if e.Label.Text != "" {
			out = append(out, box("outbox", e.Label, 12))
		}
	}
	for _, m := range tl.Models {
		if m.Label.Text != "" {
			out = append(out, box("models", m.Label, 12))
		}
	}
	for _, l := range tl.Lanes {
		for _, b := range l.Bars {
			if b.Text.Text != "" {
				out = append(out, box(l.StepID, b.Text, 12))
			}
		}
	}
	return out
}

// estimate is the test's own width estimate, independent of the layout's:
// 0.6 em a character below U+2000, 1.1 em above.
func estimate(s string, font float64) float64 {
	w := 0.0
	for _, r := range s {
		if r < 0x2000 {
			w += 0.6 * font
		} else {
			w += 1.1 * font
		}
	}
	return w
}

// overlaps returns the pairs of labels of one SVG whose boxes overlap.
func overlaps(ls []labelBox) []string {
	var out []string
	bySVG := map[string][]labelBox{}
	for _, l := range ls {
		bySVG[l.svg] = append(bySVG[l.svg], l)
	}
	for svg, row := range bySVG {
		for i := range row {
			for j := i + 1; j < len(row); j++ {
				a, b := row[i], row[j]
				if a.x0 < b.x1 && b.x0 < a.x1 && a.top < b.bottom && b.top < a.bottom {
					out = append(out, fmt.Sprintf("%s: %q (%.1f–%.1f) and %q (%.1f–%.1f)", svg, a.text, a.x0, a.x1, b.text, b.x0, b.x1))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestTimelineBigLayout lays out the 300-step execution and checks what
// issue 12 found broken: no two labels overlap, ticks are unique and
// increasing, the axis runs to the execution's end, every label stays in
// the chart with a width no smaller than the test's own estimate.
func TestTimelineBigLayout(t *testing.T) {
	run := bigRun()
	tl := allLanes(run, views.TimeRange{}, views.IncidentMarks{})
	if n := len(tl.Lanes); n != 300 {
		t.Fatalf("lanes: got %d, want 300", n)
	}
	labels := timelineLabels(tl)
	if len(labels) < 300 {
		t.Errorf("labels: got %d, want most bars, effects and ticks labelled", len(labels))
	}
	for _, l := range labels {
		if l.x0 < 0 || l.x1 > views.ChartWidth {
			t.Errorf("%s label %q: got %.1f–%.1f px, want inside 0–%d", l.svg, l.text, l.x0, l.x1, views.ChartWidth)
		}
		if w := estimate(l.text, l.font); l.x1-l.x0 < w-0.01 {
			t.Errorf("%s label %q: laid out %.1f px wide, want at least the estimate %.1f", l.svg, l.text, l.x1-l.x0, w)
		}
	}
	if o := overlaps(labels); len(o) > 0 {
		t.Errorf("got %d overlapping labels, want none:\n%s", len(o), strings.Join(o[:min(len(o), 10)], "\n"))
	}

	seen := map[string]bool{}
	for i, k := range tl.Ticks {
		if seen[k.Label] {
			t.Errorf("tick %q: got it twice, want every tick label once", k.Label)
		}
		seen[k.Label] = true
		if i > 0 && k.X <= tl.Ticks[i-1].X {
			t.Errorf("ticks: got %q at %.1f after %q at %.1f, want increasing", k.Label, k.X, tl.Ticks[i-1].Label, tl.Ticks[i-1].X)
		}
		if !strings.HasSuffix(k.Title, " UTC") {
			t.Errorf("tick %q title: got %q, want a time that says its zone", k.Label, k.Title)
		}
	}
	end := run.Execution.EndedAt.Sub(run.Execution.StartedAt)
	last := tl.Ticks[len(tl.Ticks)-1]
	if want := "+" + views.Duration(end); last.Label != want || last.X != views.ChartWidth {
		t.Errorf("last tick: got %q at %.1f px, want %q at the chart's end %d px", last.Label, last.X, want, views.ChartWidth)
	}
	if len(tl.Ticks) < 4 {
		t.Errorf("ticks: got %d, want several", len(tl.Ticks))
	}
	if len(tl.Gaps) != 1 || tl.Gaps[0].Kind != trace.GapCrash || tl.Gaps[0].Shown == "" {
		t.Errorf("gaps: got %+v, want one labelled crash gap", tl.Gaps)
	}

	// Lanes with findings first and open; the rest in closed chunks.
	if !tl.Grouped || !tl.Groups[0].Flagged || !tl.Groups[0].Open {
		t.Fatalf("groups: got grouped %v, first %+v, want the flagged lanes first, open", tl.Grouped, tl.Groups[0])
	}
	for _, l := range tl.Lanes[tl.Groups[0].From:tl.Groups[0].To] { // in display order, as fragments bring them
		if l.Findings == 0 && !l.Duplicate {
			t.Errorf("flagged group: got %s with no finding", l.StepID)
		}
	}
	for _, g := range tl.Groups[1:] {
		if g.Open || g.To-g.From > 50 {
			t.Errorf("group %s: got open %v with %d lanes, want closed with at most 50", g.ID, g.Open, g.To-g.From)
		}
	}
}

// TestTimelineZoom checks that a range draws only what lies in it: bars
// crossing an edge clipped and saying so, ticks inside the range, the
// overview marking it, and ids of what is left out still on the page.
func TestTimelineZoom(t *testing.T) {
	run := bigRun()
	r := views.TimeRange{From: 2 * time.Second, To: 4500 * time.Millisecond}
	tl := allLanes(run, r, views.IncidentMarks{})
	from, to := r.From.Milliseconds(), r.To.Milliseconds()
	bars, clipped := 0, 0
	for _, l := range tl.Lanes {
		for _, b := range l.Bars {
			bars++
			if b.End < from || b.Start > to {
				t.Errorf("%s attempt %d: got %d–%d ms drawn, want only what meets %d–%d ms", l.StepID, b.Number, b.Start, b.End, from, to)
			}
			if b.Start < from || b.End > to {
				clipped++
				if !strings.Contains(b.Title, "the range shown") {
					t.Errorf("%s attempt %d crosses an edge: got title %q, want it to say so", l.StepID, b.Number, b.Title)
				}
			}
			if b.X < 0 || b.X+b.W > views.ChartWidth {
				t.Errorf("%s attempt %d: got %.1f–%.1f px, want inside the chart", l.StepID, b.Number, b.X, b.X+b.W)
			}
		}
	}
	if bars < 30 || bars > 100 {
		t.Errorf("bars in 2.5 s of 35 ms attempts: got %d, want about 71", bars)
	}
	if clipped == 0 {
		t.Errorf("clipped bars: got none, want the ones crossing 2 s or 4.5 s")
	}
	for _, e := range tl.Effects {
		if e.At < from || e.At > to {
			t.Errorf("effect %s at %d ms: drawn, want only effects in %d–%d ms", e.ID, e.At, from, to)
		}
	}
	if len(tl.Effects) == 0 || len(tl.EffectAnchors) == 0 {
		t.Errorf("effects: got %d drawn, %d anchors kept, want some of each", len(tl.Effects), len(tl.EffectAnchors))
	}
	for _, k := range tl.Ticks {
		var sec float64
		if _, err := fmt.Sscanf(k.Label, "+%g s", &sec); err != nil || sec < r.From.Seconds()-0.001 || sec > r.To.Seconds()+0.001 {
			t.Errorf("tick %q: want an offset in %v–%v", k.Label, r.From, r.To)
		}
	}
	if !tl.Zoom.Zoomed || tl.Zoom.From != "2.000" || tl.Zoom.To != "4.500" || tl.Zoom.Hidden == 0 {
		t.Errorf("zoom: got %+v, want zoomed 2.000–4.500 with hidden items counted", tl.Zoom)
	}
	if o := overlaps(timelineLabels(tl)); len(o) > 0 {
		t.Errorf("zoomed: got overlapping labels:\n%s", strings.Join(o, "\n"))
	}
	whole := bigTimeline(run, views.TimeRange{}, views.IncidentMarks{})
	if tl.Overview.RangeW >= whole.Overview.RangeW || tl.Overview.RangeX <= 0 {
		t.Errorf("overview range: got x %.1f w %.1f, want a part of the whole (w %.1f)", tl.Overview.RangeX, tl.Overview.RangeW, whole.Overview.RangeW)
	}

	// Every attempt's id is still in the lanes, drawn or kept as an
	// anchor, whether on the first answer or in a fragment.
	doc := renderFragment(t, views.LanesFragment(tl))
	ids := map[string]bool{}
	for d := range doc.Descendants() {
		if d.Type == html.ElementNode && attr(d, "id") != "" {
			ids[attr(d, "id")] = true
		}
	}
	for _, s := range run.Steps {
		for _, a := range s.Attempts {
			if id := views.AttemptAnchor(s.ID, a.Number); !ids[id] {
				t.Fatalf("zoomed page: got no element with id %s (%s attempt %d), want every attempt's id", id, s.ID, a.Number)
			}
		}
	}
}

// TestTimelineAxisFixes checks the axis bugs of issue 12: a tick label
// repeated after a crash gap, an axis that stops before the execution's
// end, and idle gaps drawn as crash gaps.
func TestTimelineAxisFixes(t *testing.T) {
	// 6 s of work, a 53 s crash, 5 ms of work: the ticks after the gap all
	// read +59.0x s and must not repeat.
	run := twoStretches(53 * time.Second)
	run.Steps[1].Attempts[0].EndedAt = run.Steps[1].Attempts[0].StartedAt.Add(5 * time.Millisecond)
	run.Execution.StartedAt, run.Execution.EndedAt = at(0), at(120)
	tl := views.NewTimeline(views.TimelineInput{Run: run, Gaps: trace.Gaps(run, trace.DefaultConfig)})
	var labels []string
	for _, k := range tl.Ticks {
		labels = append(labels, k.Label)
	}
	if got := slices.Compact(slices.Clone(labels)); len(got) != len(labels) || len(labels) != len(slices.Sorted(slices.Values(labels))) {
		t.Errorf("ticks: got %q, want no label twice", labels)
	}
	uniq := map[string]bool{}
	for _, l := range labels {
		if uniq[l] {
			t.Errorf("ticks: got %q twice in %q", l, labels)
		}
		uniq[l] = true
	}
	if last := labels[len(labels)-1]; last != "+2 min 0 s" {
		t.Errorf("last tick: got %q, want +2 min 0 s, the execution's end", last)
	}

	// An idle gap: grey hatching, its own class.
	idle := trace.Run{Execution: trace.Execution{ID: execID, Status: trace.StatusCompleted},
		Steps: []trace.Step{
			step("step-a", "plan", trace.EffectRead, "", try(1, 0, 2, trace.OutcomeOK, worker("w1"))),
			step("step-b", "act", trace.EffectRead, "", try(1, 62, 64, trace.OutcomeOK, worker("w1"))),
		}}
	gaps := []trace.Gap{{Start: at(2), End: at(62), Kind: trace.GapIdle, WorkerBefore: "w1", WorkerAfter: "w1"}}
	doc := renderFragment(t, views.TimelineBlock(views.NewTimeline(views.TimelineInput{Run: idle, Gaps: gaps})))
	gap := one(t, doc, "gap")
	if c := attr(gap, "class"); !strings.Contains(c, "gap-idle") {
		t.Errorf("idle gap class: got %q, want gap-idle", c)
	}
	for d := range gap.Descendants() {
		if d.Type == html.ElementNode && d.Data == "rect" && attr(d, "fill") != "url(#hatch-idle)" {
			t.Errorf("idle gap fill: got %q, want url(#hatch-idle), the grey hatching", attr(d, "fill"))
		}
	}
}

// TestTimelineIncidentMarks checks that the culprit attempt is outlined
// and labelled "caused duplicate", not a plain green bar, and that each
// duplicated effect says whether it is the original or the extra.
func TestTimelineIncidentMarks(t *testing.T) {
	run := fixtureRun()
	marks := views.IncidentMarks{
		Culprits: map[views.AttemptRef]string{{StepID: "step-4", Number: 2}: "caused duplicate"},
		EffectLabels: map[trace.EffectRef]string{
			{Provider: "mail-api", ID: "msg_a"}: "1 of 2 · original",
			{Provider: "mail-api", ID: "msg_b"}: "2 of 2 · extra",
		},
	}
	tl := views.NewTimeline(views.TimelineInput{Run: run, Gaps: trace.Gaps(run, trace.DefaultConfig), States: trace.EffectStates(run), Marks: marks})
	doc := renderFragment(t, views.TimelineBlock(tl))
	culprit := one(t, doc, "culprit")
	link := ancestor(culprit, "attempt")
	if link == nil || attr(link, "href") != views.AttemptURL(execID, "step-4", 2) {
		t.Fatalf("culprit outline: got it outside step-4 attempt 2's link, want inside")
	}
	if got := text(one(t, link, "culprit-label")); got != "⚠ caused duplicate" {
		t.Errorf("culprit label: got %q, want ⚠ caused duplicate", got)
	}
	if got := text(link); !strings.Contains(got, "caused duplicate — attempt 2: ok") {
		t.Errorf("culprit title: got %q, want it to start with caused duplicate", got)
	}
	if n := len(byTestID(doc, "culprit")); n != 1 {
		t.Errorf("culprits: got %d, want 1", n)
	}
	labels := map[string]string{}
	for _, e := range byTestID(one(t, doc, "outbox-lane"), "effect") {
		labels[attr(e, "id")] = text(e)
	}
	for id, want := range map[string]string{"msg_a": "1 of 2 · original", "msg_b": "2 of 2 · extra"} {
		got := labels[views.EffectAnchor("mail-api", id)]
		if strings.Count(got, want) != 2 { // in the title and the visible label
			t.Errorf("effect %s: got %q, want %q in its title and its label", id, got, want)
		}
	}
	// The effects are marked in step-4's lane, linked to the outbox.
	var marksIn []string
	for _, m := range byTestID(doc, "lane-effect") {
		marksIn = append(marksIn, laneOf(m)+" "+attr(m, "href"))
	}
	want := []string{"step-4 #" + views.EffectAnchor("mail-api", "msg_a"), "step-4 #" + views.EffectAnchor("mail-api", "msg_b"), "step-5 #" + views.EffectAnchor("mail-api", "msg_c")}
	if !slices.Equal(marksIn, want) {
		t.Errorf("lane effect marks: got %q, want %q", marksIn, want)
	}
}
