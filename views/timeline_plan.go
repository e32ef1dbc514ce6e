package views

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// The execution page's first answer costs the same whatever the
// execution's size: it lays out at most firstPageLanes lanes, the first
// findings of each rule and the first incidents, and counts the rest,
// which fragments (LanesURL, FindingsURL, IncidentsURL) bring a page at a
// time, through plain links a script may follow in place.
const (
	firstPageLanes       = 15 // a screenful
	lanesPerFragment     = 100
	maxLaneGroups        = 20  // collapsed groups of lanes without findings
	maxEffectMarks       = 200 // effects in the range drawn each; more are clustered
	maxLaneAnchors       = 50  // ids kept for a lane's attempts not drawn as a bar of their own
	effectClusterPx      = 8.0 // a cluster is a target a finger can hit
	findingsPerFragment  = 100
	incidentsPerFragment = 25
)

// LaneSelection chooses the lanes a timeline lays out. The zero value is
// the page's first answer; Fragment asks for the lanes [Offset, End) in
// display order (at most lanesPerFragment of them), or StepID's alone.
type LaneSelection struct {
	Fragment    bool
	Offset, End int
	StepID      string
}

// MoreLink fetches what an answer left out: a plain link that works
// without the script, which follows it in place.
type MoreLink struct {
	Href string
	Text string
}

// EffectCluster is the effects of the outbox lane a few px apart, drawn as
// one mark that zooms to them.
type EffectCluster struct {
	X, W              float64
	Count, Duplicates int
	Href, Title       string
	from, to          time.Time
}

// OverviewTrouble is a slice of the overview whose steps have findings.
type OverviewTrouble struct {
	X, W        float64
	Findings    int
	Href, Title string
}

// lanePlan is the lanes' display order and groups, decided from the
// steps alone, before any lane is laid out.
type lanePlan struct {
	steps   []trace.Step
	execID  string
	zoom    url.Values
	order   []int // step indexes, in display order
	groups  []LaneGroup
	grouped bool
}

// planLanes orders the lanes for display and groups them: a few lanes
// show as they are; many are grouped, lanes with findings, a duplicate or
// an incident's culprit first (in the natural order of their step ids),
// expanded; the rest in collapsed chunks in the run's order, at most
// maxLaneGroups of them.
func planLanes(steps []trace.Step, lc laneContext, marks IncidentMarks) lanePlan {
	p := lanePlan{steps: steps, execID: lc.run.Execution.ID, zoom: zoomQuery(lc.win)}
	if len(steps) <= groupAbove {
		for i := range steps {
			p.order = append(p.order, i)
		}
		p.groups = []LaneGroup{{ID: "lanes-all", Open: true, From: 0, To: len(steps)}}
		return p
	}
	p.grouped = true
	culprit := map[string]bool{}
	for ref := range marks.Culprits {
		culprit[ref.StepID] = true
	}
	flagged := func(s trace.Step) bool {
		return lc.findings[s.ID] > 0 || len(lc.stepEffects[s.ID]) > 1 || culprit[s.ID]
	}
	var rest []int
	for i, s := range steps {
		if flagged(s) {
			p.order = append(p.order, i)
		} else {
			rest = append(rest, i)
		}
	}
	slices.SortStableFunc(p.order, func(a, b int) int { return trace.CompareNatural(steps[a].ID, steps[b].ID) })
	if n := len(p.order); n > 0 {
		findings := 0
		for _, i := range p.order {
			findings += lc.findings[steps[i].ID]
		}
		p.groups = append(p.groups, LaneGroup{ID: "lanes-flagged", Open: true, From: 0, To: n, Flagged: true,
			Summary: fmt.Sprintf("Steps with findings · %s · %s", plural(n, "lane", "lanes"), plural(findings, "finding", "findings"))})
	}
	size := max(groupSize, (len(rest)+maxLaneGroups-1)/maxLaneGroups)
	for c := 0; c < len(rest); c += size {
		chunk := rest[c:min(c+size, len(rest))]
		from := len(p.order)
		attempts := 0
		tools := map[string]int{}
		for _, i := range chunk {
			p.order = append(p.order, i)
			attempts += len(steps[i].Attempts)
			tools[steps[i].ToolName()]++
		}
		first, last := steps[chunk[0]].ID, steps[chunk[len(chunk)-1]].ID
		p.groups = append(p.groups, LaneGroup{ID: "lanes-" + strconv.Itoa(c/size+1), From: from, To: len(p.order),
			Open:    len(p.groups) == 0,
			Summary: fmt.Sprintf("%s … %s · %s · %s · %s", first, last, plural(len(chunk), "lane", "lanes"), plural(attempts, "attempt", "attempts"), topTools(tools))})
	}
	return p
}

// choose is the display indexes of the lanes sel lays out.
func (p lanePlan) choose(sel LaneSelection) []int {
	var out []int
	switch {
	case sel.StepID != "":
		for i, si := range p.order {
			if p.stepID(si) == sel.StepID {
				out = append(out, i)
			}
		}
	case sel.Fragment:
		end := min(sel.End, len(p.order), sel.Offset+lanesPerFragment)
		for i := max(sel.Offset, 0); i < end; i++ {
			out = append(out, i)
		}
	case !p.grouped:
		for i := range p.order {
			out = append(out, i)
		}
	default:
		g := p.groups[0]
		for i := g.From; i < min(g.To, g.From+firstPageLanes); i++ {
			out = append(out, i)
		}
	}
	return out
}

func (p lanePlan) stepID(stepIndex int) string { return p.steps[stepIndex].ID }

// layout puts the laid-out lanes in their groups, with a link to the
// rest of each group; for a fragment, it is the link to the lanes after
// it.
func (p lanePlan) layout(lanes []Lane, laid []int, sel LaneSelection) ([]LaneGroup, *MoreLink) {
	if sel.Fragment || sel.StepID != "" {
		if sel.StepID != "" || len(laid) == 0 {
			return nil, nil
		}
		next := laid[len(laid)-1] + 1
		if end := min(sel.End, len(p.order)); next < end {
			return nil, p.more(next, end)
		}
		return nil, nil
	}
	groups := slices.Clone(p.groups)
	k := 0
	for gi := range groups {
		g := &groups[gi]
		start := k
		for k < len(laid) && laid[k] < g.To {
			k++
		}
		g.Lanes = lanes[start:k]
		if shown := g.From + len(g.Lanes); shown < g.To {
			g.More = p.more(shown, g.To)
		}
	}
	return groups, nil
}

func (p lanePlan) more(offset, end int) *MoreLink {
	q := cloneValues(p.zoom)
	q.Set("offset", strconv.Itoa(offset))
	q.Set("end", strconv.Itoa(end))
	n := min(end-offset, lanesPerFragment)
	text := "show " + plural(n, "more lane", "more lanes")
	if end-offset > n {
		text += fmt.Sprintf(" (of %d)", end-offset)
	}
	return &MoreLink{Href: executionURL(p.execID, "/lanes", q), Text: text}
}

// zoomQuery is the zoom's from and to, for links that must draw lanes at
// the same scale as the page.
func zoomQuery(w timelineWindow) url.Values {
	q := url.Values{}
	if w.zoomed() {
		q.Set("from", seconds(w.w0.Sub(w.tmin)))
		q.Set("to", seconds(w.w1.Sub(w.tmin)))
	}
	return q
}

// LaneURL is the fragment of the timeline with one step's lane: a page of
// its own without the script.
func LaneURL(executionID, stepID string) string {
	return executionURL(executionID, "/lanes", url.Values{"step": {stepID}})
}

// hiddenAttempts counts the attempts outside the range drawn, of every
// lane, laid out or not.
func (lc laneContext) hiddenAttempts() int {
	shown := lc.shown
	if !lc.win.zoomed() {
		shown = lc.shownUnzoomed
	}
	n := 0
	for _, s := range lc.run.Steps {
		for _, a := range s.Attempts {
			if !shown(a) {
				n++
			}
		}
	}
	return n
}

// shown reports whether a's bar is in the range drawn.
func (lc laneContext) shown(a trace.Attempt) bool {
	end := endOr(a, lc.win.tmax)
	if lc.run.Outcome(a) == trace.OutcomeLost {
		end = a.StartedAt
	}
	return !a.StartedAt.IsZero() && lc.win.shows(a.StartedAt, end)
}

// shown without a zoom is every attempt with a start: the outcome, which
// costs a look-up, decides nothing then.
func (lc laneContext) shownUnzoomed(a trace.Attempt) bool { return !a.StartedAt.IsZero() }

// shownAttempts counts the attempts that reach into the range drawn: a
// zoom into a few of many shows their labels again.
func shownAttempts(run trace.Run, win timelineWindow) int {
	n := 0
	for _, s := range run.Steps {
		for _, a := range s.Attempts {
			if !a.StartedAt.IsZero() && win.shows(a.StartedAt, endOr(a, win.tmax)) {
				n++
			}
		}
	}
	return n
}

func countShown(effects []trace.Effect, win timelineWindow) int {
	n := 0
	for _, f := range effects {
		if !f.At.IsZero() && win.shows(f.At, f.At) {
			n++
		}
	}
	return n
}

// addToCluster counts m in the cluster of its position.
func (o *outbox) addToCluster(m EffectMark, at time.Time) {
	if o.buckets == nil {
		o.buckets = map[int]*EffectCluster{}
	}
	i := int(m.X / effectClusterPx)
	c, ok := o.buckets[i]
	if !ok {
		c = &EffectCluster{X: float64(i) * effectClusterPx, W: effectClusterPx, from: at, to: at}
		o.buckets[i] = c
	}
	c.Count++
	if m.State == trace.MatchDuplicate {
		c.Duplicates++
	}
	c.from, c.to = minTime(c.from, at), maxTime(c.to, at)
}

// clusters are the outbox lane's clusters by position, each linking to a
// zoom on its effects.
func (o *outbox) clusters() []EffectCluster {
	var out []EffectCluster
	for _, c := range o.buckets {
		from := max(c.from.Sub(o.win.tmin)-time.Millisecond, 0)
		to := c.to.Sub(o.win.tmin) + time.Millisecond
		q := url.Values{"from": {seconds(from)}, "to": {seconds(to)}}
		c.Href = executionURL(o.in.Run.Execution.ID, "", q) + "#timeline"
		c.Title = fmt.Sprintf("%s, %s, +%s s to +%s s: zoom in to see each", plural(c.Count, "effect", "effects"),
			plural(c.Duplicates, "duplicate", "duplicates"), seconds(from), seconds(to))
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b EffectCluster) int { return cmpFloat(a.X, b.X) })
	return out
}

// newTrouble marks where the findings are across the whole execution: a
// finding sits at its step's first attempt, or at its first effect.
func newTrouble(run trace.Run, findings []trace.Finding, sc scale, tmin time.Time) []OverviewTrouble {
	if len(findings) == 0 {
		return nil
	}
	firstAt := map[string]time.Time{}
	for _, s := range run.Steps {
		for _, a := range s.Attempts {
			if t, ok := firstAt[s.ID]; !a.StartedAt.IsZero() && (!ok || a.StartedAt.Before(t)) {
				firstAt[s.ID] = a.StartedAt
			}
		}
	}
	effectAt := map[trace.EffectRef]time.Time{}
	for _, f := range run.Effects {
		effectAt[f.Ref()] = f.At
	}
	sliceW := float64(ChartWidth) / overviewSlices
	counts := make([]int, overviewSlices)
	for _, f := range findings {
		at := firstAt[f.StepID]
		if at.IsZero() && len(f.Effects) > 0 {
			at = effectAt[f.Effects[0]]
		}
		if at.IsZero() {
			continue
		}
		counts[min(max(int(sc.px(at)/sliceW), 0), overviewSlices-1)]++
	}
	var out []OverviewTrouble
	for i, n := range counts {
		if n == 0 {
			continue
		}
		x0, x1 := float64(i)*sliceW, float64(i+1)*sliceW
		from, to := sc.at(x0), sc.at(x1)
		q := url.Values{"from": {seconds(max(from.Sub(tmin), 0))}, "to": {seconds(to.Sub(tmin) + time.Millisecond)}}
		out = append(out, OverviewTrouble{X: x0, W: sliceW, Findings: n, Href: executionURL(run.Execution.ID, "", q) + "#timeline",
			Title: fmt.Sprintf("%s from +%s s: zoom in", plural(n, "finding", "findings"), seconds(from.Sub(tmin)))})
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// at is the moment at x px in the chart, the inverse of px.
func (s scale) at(xpx float64) time.Time {
	x := xpx * 100 / ChartWidth
	for _, p := range s.pieces {
		if x > p.x1 {
			continue
		}
		if x <= p.x0 || p.x1 <= p.x0 {
			return p.t0
		}
		return p.t0.Add(time.Duration(float64(p.t1.Sub(p.t0)) * (x - p.x0) / (p.x1 - p.x0)))
	}
	if len(s.pieces) == 0 {
		return s.tmin
	}
	return s.pieces[len(s.pieces)-1].t1
}

func clusterClass(c EffectCluster) string {
	if c.Duplicates > 0 {
		return "effect state-duplicate"
	}
	return "effect state-matched"
}

// LanesView is a fragment of the timeline's lanes as a page of its own.
type LanesView struct {
	ExecutionID string
	Caption     string // "21–120 of 2000", "of step-14"
	Timeline    Timeline
}
