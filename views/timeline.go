package views

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// The timeline is laid out in pixels on a chart of a fixed width, so the
// server knows where every label goes whatever the window's width: the
// page scrolls sideways when the window is narrower. Each row is an HTML
// cell with the lane's name, pinned left, and the lane's own small SVG;
// the axis, the outbox lane and the model calls' lane are rows of a header
// that sticks to the top of the timeline's scroll box. Text is set in a
// monospace font, so a label's width is known from its characters
// (textWidth), and a label that does not fit where it belongs is
// abbreviated or dropped, never drawn over another; its full text stays in
// the hover title and the detail.
const (
	// ChartWidth is the time area's width in px: with the lane names
	// (11rem) it fits beside the detail panel (20rem) on a 1280 px
	// laptop, and alone (the detail a bottom sheet) down to about 900 px;
	// a narrower window scrolls the timeline sideways.
	ChartWidth = 680
	axisH      = 48 // ticks, the axis line, gap labels, workers
	laneH      = 55 // effect marks, the bar, two rows of labels
	outboxH    = 46 // effect marks, two rows of labels
	modelH     = 55
	overviewH  = 28
	// Rows inside a lane: effect marks on top, then the bar, then labels.
	barY, barH   = 9, 16
	minBarW      = 4   // px, so a 1 ms attempt is still visible and clickable
	minMarkW     = 1.5 // px, an HTTP call's mark inside its attempt's bar
	maxGapShare  = 36.0
	gapW         = 7.0  // % of the chart one gap takes at most
	compactAbove = 1500 // attempts above which bars lose their text and arrows
	// Lanes are grouped when there are more than groupAbove, in chunks of
	// groupSize; lanes with findings come first, expanded.
	groupAbove, groupSize = 20, 50
	overviewSlices        = 120
)

// Font sizes and the width estimate: in a monospace font a character is
// 0.6 em wide; icons and symbols that may come from a fallback font are
// counted as 1.1 em, and every label keeps labelPad px from the next.
const (
	labelFont = 12.0
	tickFont  = 11.0
	labelPad  = 6.0
)

// Label rows: baselines in a lane's SVG. A 12 px line of DejaVu Sans Mono
// is 14 px tall, so rows 16 px apart never touch.
var (
	laneRows   = []float64{37, 52}
	outboxRows = []float64{27, 42}
)

// Timeline is the execution's timeline, laid out.
type Timeline struct {
	Empty bool
	// Start is the moment offsets are counted from: the execution's start,
	// or its first event.
	Start      time.Time
	Ticks      []Tick
	Gaps       []GapMark
	Grid       string // the tick lines as one SVG path, drawn in every row
	Lanes      []Lane // in display order: lanes with findings first when grouped
	Groups     []LaneGroup
	Grouped    bool
	TotalLanes int
	// More, on a fragment of lanes, fetches the lanes after it.
	More    *MoreLink
	Effects []EffectMark
	// EffectClusters replace Effects when the range holds more than
	// maxEffectMarks effects: one mark for the effects a few px apart.
	EffectClusters []EffectCluster
	// EffectAnchors are the ids of effects outside the zoomed range, so a
	// finding's link still finds the outbox lane.
	EffectAnchors []string
	// Models are the model calls' bars, by start. Model calls are not
	// steps: they count in no step, attempt or retry.
	Models       []ModelMark
	ModelSummary string // "12 calls · 3120 in / 480 out"
	// Events are a workflow engine's signals, timers and markers
	// (trace.Run.EngineEvents), drawn in a lane of their own.
	Events       []ModelMark
	EventSummary string // "3 events"
	Compact      bool
	// Silence, while a running execution has shown no activity for longer
	// than the gap threshold, says so: "no process seen for 12 s".
	Silence  string
	Overview Overview
	Zoom     ZoomView
}

// LaneGroup is a collapsible run of lanes, [From, To) in display order.
// Lanes are those laid out on this answer, the first of the group; More
// fetches the rest.
type LaneGroup struct {
	ID       string
	Summary  string
	Open     bool
	From, To int
	Flagged  bool // the lanes with findings
	Lanes    []Lane
	More     *MoreLink
}

// Tick is a label on the time axis.
type Tick struct {
	X      float64
	Label  string
	Title  string
	Anchor string
}

// GapMark is a gap drawn as a break in the axis.
type GapMark struct {
	X, W, Mid float64
	Kind      trace.GapKind
	Label     string // "53 s — no process running", "idle 12 s, pid-100"; always in the title
	Short     string // the label shortened to what it is and its length: "53 s", "idle 12 s"
	Workers   string // "w1 → w2", or "w1" when one worker was idle
	Seconds   float64
	// Shown and ShownWorkers are what fits under the axis ("" when
	// nothing does); LabelX and LabelAnchor place the first, WorkersX the
	// second, each kept inside the chart by its own width.
	Shown, ShownWorkers string
	LabelX              float64
	LabelAnchor         string
	WorkersX            float64
	Title               string
}

// ModelMark is one model call in the model calls' lane.
type ModelMark struct {
	X, W  float64
	Label PlacedLabel // Text "" when it fits nowhere
	Error bool
	Title string
}

// laneStepName is the step's name without the tool the lane already shows:
// "#2" for "send_invoice_email #2", "" for a derived step alone of its tool.
func laneStepName(name, tool string) string {
	if tool != "" && strings.HasPrefix(name, tool) {
		return strings.TrimSpace(strings.TrimPrefix(name, tool))
	}
	return name
}

// PlacedLabel is a label's text and where it sits; Text is "" for a label
// that had no room.
type PlacedLabel struct {
	Text   string
	X, Y   float64
	Anchor string
	Width  float64 // estimated, px
}

// Box is a label's estimated extent.
func (l PlacedLabel) Box() (x0, x1 float64) {
	switch l.Anchor {
	case "end":
		return l.X - l.Width, l.X
	case "middle":
		return l.X - l.Width/2, l.X + l.Width/2
	}
	return l.X, l.X + l.Width
}

// Lane is one step.
type Lane struct {
	ID     string // the row's HTML id
	StepID string
	// StepName is what the lane calls its step: the id sent, or, for an id
	// derived from a span, "#2" after the tool's name (trace.StepNames).
	StepName    string
	Tool        string
	Effect      trace.EffectClass
	ClassTitle  string // the class explained, for the hover
	Bars        []Bar
	Arrows      []Arrow
	Marks       []LaneEffect
	EffectCount int
	CountLabel  string // "2 emails for step-4"
	Duplicate   bool
	Findings    int
	// Anchors are the ids of attempts outside the zoomed range, so a
	// finding's link still finds the lane.
	Anchors        []string
	Culprit        bool
	droppedAnchors bool
}

// Bar is one attempt.
type Bar struct {
	X, W         float64
	Start, End   int64 // ms from the timeline's start, for tests and scripts
	Number       int
	Outcome      trace.Outcome
	Label        string // icon and outcome word, never colour alone
	Ghost        bool   // a replay: answered from the journal, tool not called
	Deduplicated bool
	Culprit      string // "caused duplicate", when the attempt caused an extra effect
	// Text is where the label sits (Text.Text "" when nowhere); its parts
	// are what fits: the outcome, the dedupe badge, the culprit's label.
	Text         PlacedLabel
	ShownOutcome string
	ShowDedupe   bool
	ShowCulprit  bool
	ShowText     bool
	Anchor       string
	Href         string
	Title        string
	// Calls are the HTTP client calls the attempt made, as thin marks
	// inside its bar.
	Calls []CallMark
}

// CallMark is an HTTP call inside its attempt's bar.
type CallMark struct{ X, W float64 }

// Arrow joins an attempt to its retry.
type Arrow struct{ X1, X2 float64 }

// LaneEffect marks, in the lane of the step that caused it, when an effect
// happened; it links to the effect in the outbox lane.
type LaneEffect struct {
	X     float64
	Href  string
	State trace.MatchState
	Title string
}

// EffectMark is one effect in the outbox lane.
type EffectMark struct {
	X        float64
	At       int64 // ms from the timeline's start
	Anchor   string
	Href     string
	Provider string
	ID       string
	State    trace.MatchState
	StepID   string
	LaneID   string // the causing step's row, "" when none
	Mark     string // "2 of 2 · extra"
	Label    PlacedLabel
	Title    string
	Linked   bool
}

// Overview is the whole execution condensed above the chart: how many
// attempts ran in each slice of time, effects, gaps, and the zoomed range.
type Overview struct {
	Slices  []OverviewSlice
	Effects []OverviewEffect
	Gaps    []GapMark
	// RangeX and RangeW highlight the zoomed range; Zoomed is false when
	// the whole execution is shown.
	RangeX, RangeW float64
	// Pieces maps x to time for the script that turns a drag into a range:
	// "x0 x1 ms0 ms1" for each stretch and gap, comma-separated.
	Pieces string
	// Trouble marks the slices of time whose steps have findings, each a
	// link that zooms to it.
	Trouble []OverviewTrouble
}

// OverviewSlice is one slice of the overview with its attempt density.
type OverviewSlice struct{ X, W, H float64 }

// OverviewEffect is one effect in the overview.
type OverviewEffect struct {
	X         float64
	Duplicate bool
}

// ZoomView is the zoom form's state and the range shown.
type ZoomView struct {
	Zoomed   bool
	From, To string // seconds, as the form shows them
	Total    string // the whole execution's length in seconds
	Hidden   int    // attempts and effects outside the range
	// Reset is the whole execution's timeline: the page's own path,
	// whatever characters its id holds.
	Reset string
}

// TimeRange is a zoom: offsets from the timeline's start. To 0 means to
// the end; the zero TimeRange is the whole execution.
type TimeRange struct{ From, To time.Duration }

// IsZero reports whether the range is the whole execution.
func (r TimeRange) IsZero() bool { return r == TimeRange{} }

// TimelineInput is what the timeline is drawn from.
type TimelineInput struct {
	Run    trace.Run
	Gaps   []trace.Gap
	States map[trace.EffectRef]trace.MatchState
	// Findings put their steps' lanes first, expanded.
	Findings []trace.Finding
	// Marks are the incident's culprits and effect labels.
	Marks IncidentMarks
	// Select chooses the lanes laid out: the zero value, the page's first
	// answer; a fragment, the lanes it asks for.
	Select LaneSelection
	// Range zooms the timeline; only what lies in it is drawn.
	Range TimeRange
	// Now, for a live page, is the current time: a running execution's
	// axis runs to it, running bars grow to it, and a silence longer than
	// SilenceAfter is drawn as a gap that is still open.
	Now          time.Time
	SilenceAfter time.Duration
	// Index is Run's and Findings' lookups by step, when the caller keeps
	// them (Execution does); nil, NewTimeline builds them.
	Index *RunIndex
}

// RunIndex is what drawing a run looks up by step and by span: built once
// for a model of an execution rather than at every drawing of it. It is
// only read once built, so models that share it may be drawn at once.
type RunIndex struct {
	StepEffects map[string][]trace.Effect
	StepNames   map[string]string
	HTTPCalls   map[string][]trace.Span // by attempt span
	Findings    map[string]int          // by step
}

// NewRunIndex indexes run and its findings.
func NewRunIndex(run trace.Run, findings []trace.Finding) *RunIndex {
	return newRunIndex(run, findings, run.StepEffects())
}

// newRunIndex is NewRunIndex with the run's effects placed by step.
func newRunIndex(run trace.Run, findings []trace.Finding, stepEffects map[string][]trace.Effect) *RunIndex {
	ix := &RunIndex{StepEffects: stepEffects, StepNames: trace.StepNames(run.Steps), HTTPCalls: run.HTTPCalls(),
		Findings: map[string]int{}}
	for _, f := range findings {
		if f.StepID != "" {
			ix.Findings[f.StepID]++
		}
	}
	return ix
}

// silenceGap is a gap still open at the right edge of a running execution.
const silenceGap trace.GapKind = "silence"

// NewTimeline lays out an execution in small steps: the moments it covers,
// the window drawn, the header rows, the lanes, the outbox lane.
func NewTimeline(in TimelineInput) Timeline {
	run := in.Run
	ext := newRunExtent(run)
	if ext.empty() {
		return Timeline{Empty: true}
	}
	tmax, gaps, silence := liveEdge(in, ext.tmax)
	win := newTimelineWindow(ext.tmin, tmax, in.Range, gaps)

	tl := Timeline{Start: win.tmin, Compact: shownAttempts(run, win) > compactAbove, TotalLanes: len(run.Steps), Silence: silence}
	tl.Ticks = win.sc.ticks(win.tmin)
	tl.Gaps = placeGapLabels(win.sc.gapMarks)
	tl.Grid = gridPath(tl.Ticks)
	tl.Overview = newOverview(run, in.States, win.whole, win.tmin, win.w0, win.w1)
	tl.Zoom = win.zoomView()
	tl.Zoom.Reset = ExecutionURL(run.Execution.ID) + "#timeline"
	if len(ext.models) > 0 {
		tl.Models = newModelMarks(win.shownModels(ext.models), win.sc, win.tmax, win.w0, win.w1)
		tl.ModelSummary = modelSummary(ext.models)
	}
	if len(ext.events) > 0 {
		tl.Events = newEventMarks(win.shownModels(ext.events), win.sc, win.tmax, win.w0, win.w1)
		tl.EventSummary = plural(len(ext.events), "event", "events")
	}

	lc := newLaneContext(in, win, tl.Compact)
	plan := planLanes(run.Steps, lc, in.Marks)
	tl.Grouped, tl.Zoom.Hidden = plan.grouped, lc.hiddenAttempts()
	laid := plan.choose(in.Select)
	lanes := make([]Lane, 0, len(laid))
	for _, i := range laid {
		lanes = append(lanes, lc.lane(run.Steps[plan.order[i]]))
	}
	outbox := newOutbox(in, win, lc.stepEffects, lanes)
	outbox.clustered = countShown(ext.own, win) > maxEffectMarks
	for _, f := range sortedByTime(ext.own) {
		outbox.add(f)
	}
	tl.Effects, tl.EffectAnchors, tl.EffectClusters = outbox.marks, outbox.anchors, outbox.clusters()
	tl.Zoom.Hidden += outbox.hidden
	placeEffectLabels(tl.Effects)
	tl.Overview.Trouble = newTrouble(run, in.Findings, win.whole, win.tmin)

	tl.Lanes = lanes
	tl.Groups, tl.More = plan.layout(lanes, laid, in.Select)
	return tl
}

// runExtent is the first and last moment of everything a run holds, and
// what there is to draw.
type runExtent struct {
	tmin, tmax time.Time
	attempts   int
	own        []trace.Effect // a peer's effect under a shared key is on the key page only
	models     []trace.Span
	events     []trace.Span // a workflow engine's (trace.Run.EngineEvents)
}

func newRunExtent(run trace.Run) runExtent {
	ext := runExtent{own: run.OwnEffects(), models: run.ModelCalls(), events: run.EngineEvents()}
	times := []time.Time{run.Execution.StartedAt, run.Execution.EndedAt}
	for _, s := range run.Steps {
		for _, a := range s.Attempts {
			ext.attempts++
			times = append(times, a.StartedAt, a.EndedAt)
		}
	}
	for _, f := range ext.own {
		times = append(times, f.At)
	}
	for _, m := range ext.models {
		times = append(times, m.StartedAt, m.EndedAt)
	}
	for _, e := range ext.events {
		times = append(times, e.StartedAt, e.EndedAt)
	}
	ext.tmin, ext.tmax = span(times)
	return ext
}

// empty reports whether there is nothing to draw: no moment, or neither
// attempts, effects nor model calls.
func (e runExtent) empty() bool {
	return e.tmin.IsZero() || (e.attempts == 0 && len(e.own) == 0 && len(e.models) == 0)
}

// liveEdge moves a running execution's right edge to now, and draws a
// silence longer than in.SilenceAfter as a gap still open.
func liveEdge(in TimelineInput, tmax time.Time) (edge time.Time, gaps []trace.Gap, silence string) {
	gaps = in.Gaps
	live := !in.Now.IsZero() && in.Run.Execution.Status == trace.StatusRunning
	if !live || !in.Now.After(tmax) {
		return tmax, gaps, ""
	}
	if quiet := in.Now.Sub(tmax); in.SilenceAfter > 0 && quiet > in.SilenceAfter {
		silence = "no process seen for " + Duration(quiet.Truncate(time.Second))
		gaps = append(append([]trace.Gap(nil), gaps...), trace.Gap{Start: tmax, End: in.Now, Kind: silenceGap})
	}
	return in.Now, gaps, silence
}

// timelineWindow is the whole execution, [tmin, tmax], and the range
// drawn, [w0, w1], with a scale for each.
type timelineWindow struct {
	tmin, tmax time.Time
	w0, w1     time.Time
	whole, sc  scale
}

func newTimelineWindow(tmin, tmax time.Time, rng TimeRange, gaps []trace.Gap) timelineWindow {
	if !tmax.After(tmin) {
		tmax = tmin.Add(time.Millisecond)
	}
	w := timelineWindow{tmin: tmin, tmax: tmax, w0: tmin, w1: tmax}
	if !rng.IsZero() {
		w.w0 = minTime(tmin.Add(rng.From), tmax.Add(-time.Millisecond))
		if rng.To > 0 {
			w.w1 = minTime(tmin.Add(rng.To), tmax)
		}
		if !w.w1.After(w.w0) {
			w.w1 = w.w0.Add(time.Millisecond)
		}
	}
	w.whole = newScale(tmin, tmax, gaps)
	w.sc = w.whole
	if w.zoomed() {
		w.sc = newScale(w.w0, w.w1, clipGaps(gaps, w.w0, w.w1))
	}
	return w
}

func (w timelineWindow) zoomed() bool { return w.w0 != w.tmin || w.w1 != w.tmax }

// shows reports whether [t0, t1] reaches into the range drawn.
func (w timelineWindow) shows(t0, t1 time.Time) bool { return !t0.After(w.w1) && !t1.Before(w.w0) }

// ms is t's offset from the timeline's start.
func (w timelineWindow) ms(t time.Time) int64 { return t.Sub(w.tmin).Milliseconds() }

func (w timelineWindow) zoomView() ZoomView {
	return ZoomView{Zoomed: w.zoomed(), From: seconds(w.w0.Sub(w.tmin)), To: seconds(w.w1.Sub(w.tmin)), Total: seconds(w.tmax.Sub(w.tmin))}
}

// shownModels are the model calls that reach into the range drawn.
func (w timelineWindow) shownModels(models []trace.Span) []trace.Span {
	var shown []trace.Span
	for _, m := range models {
		if w.shows(m.StartedAt, endOrSpan(m, w.tmax)) {
			shown = append(shown, m)
		}
	}
	return shown
}

// laneContext is what every lane is drawn from: the run, the window, and
// the run's indexes by step and span.
type laneContext struct {
	run         trace.Run
	win         timelineWindow
	compact     bool
	culprits    map[AttemptRef]string
	httpCalls   map[string][]trace.Span // by attempt span; nil when compact
	findings    map[string]int          // by step; only read
	stepEffects map[string][]trace.Effect
	stepNames   map[string]string
}

func newLaneContext(in TimelineInput, win timelineWindow, compact bool) laneContext {
	ix := in.Index
	if ix == nil {
		ix = NewRunIndex(in.Run, in.Findings)
	}
	lc := laneContext{run: in.Run, win: win, compact: compact, culprits: in.Marks.Culprits,
		findings: ix.Findings, stepEffects: ix.StepEffects, stepNames: ix.StepNames}
	if !compact {
		lc.httpCalls = ix.HTTPCalls
	}
	return lc
}

// lane draws one step's lane.
func (lc laneContext) lane(s trace.Step) (lane Lane) {
	lane = Lane{ID: domID("lane", s.ID), StepID: s.ID, StepName: laneStepName(lc.stepNames[s.ID], s.ToolName()), Tool: s.ToolName(), Effect: s.Class(),
		ClassTitle: s.ToolName() + ": " + ClassLabel(s.Class()), Findings: lc.findings[s.ID]}
	var prev *trace.Attempt
	for j, a := range s.Attempts {
		lc.attempt(&lane, a, prev)
		prev = &s.Attempts[j]
	}
	if lc.compact {
		lane.Bars = clusterBars(lane.Bars, &lane.Anchors)
	}
	if len(lane.Anchors) > maxLaneAnchors {
		// A lane of thousands of attempts keeps no id for each: links
		// to them lead to the attempt's own page instead (linkTargets).
		lane.Anchors, lane.droppedAnchors = nil, true
	}
	if es := lc.stepEffects[s.ID]; len(es) > 0 {
		lane.EffectCount = len(es)
		lane.Duplicate = len(es) > 1
		lane.CountLabel = fmt.Sprintf("%s for %s", plural(len(es), effectNoun(es[0].Provider, false), effectNoun(es[0].Provider, true)), lc.stepNames[s.ID])
	}
	placeBarLabels(lane.Bars)
	return lane
}

// attempt adds a's bar, and the arrow from the attempt before it, to the
// lane; an attempt outside the range keeps only its anchor, and attempt
// reports false.
func (lc laneContext) attempt(lane *Lane, a trace.Attempt, prev *trace.Attempt) (shown bool) {
	win := lc.win
	outcome := lc.run.Outcome(a)
	end := endOr(a, win.tmax)
	if outcome == trace.OutcomeLost {
		end = a.StartedAt
	}
	if a.StartedAt.IsZero() || !win.shows(a.StartedAt, end) {
		lane.Anchors = append(lane.Anchors, AttemptAnchor(a.StepID, a.Number))
		return false
	}
	b := newBar(lc.run, win.sc, a, outcome, end, !lc.compact, lc.httpCalls[a.SpanID], win.w0, win.w1)
	b.Start, b.End = win.ms(a.StartedAt), win.ms(end)
	if label, ok := lc.culprits[AttemptRef{StepID: lane.StepID, Number: a.Number}]; ok {
		b.Culprit = label
		lane.Culprit = true
		b.Title = label + " — " + b.Title
	}
	if prev != nil && !lc.compact && win.shows(prev.StartedAt, endOr(*prev, prev.StartedAt)) {
		// From where the previous attempt ended, or, if it never did,
		// from where it started.
		lane.Arrows = append(lane.Arrows, Arrow{X1: win.sc.px(endOr(*prev, prev.StartedAt)), X2: b.X})
	}
	lane.Bars = append(lane.Bars, b)
	return true
}

// sortedByTime is a copy of effects in the order they happened.
func sortedByTime(effects []trace.Effect) []trace.Effect {
	out := slices.Clone(effects)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// outbox collects the outbox lane's marks and marks each effect in the
// lane of the step that caused it.
type outbox struct {
	in        TimelineInput
	win       timelineWindow
	stepOf    map[trace.EffectRef]string
	lanes     []Lane
	laneIndex map[string]int
	marks     []EffectMark
	anchors   []string // effects outside the range
	hidden    int      // effects outside the range
	// clustered: too many effects in the range to draw each, so they are
	// drawn as clusters by position (addToCluster).
	clustered bool
	buckets   map[int]*EffectCluster
}

func newOutbox(in TimelineInput, win timelineWindow, stepEffects map[string][]trace.Effect, lanes []Lane) *outbox {
	o := &outbox{in: in, win: win, stepOf: map[trace.EffectRef]string{}, lanes: lanes, laneIndex: map[string]int{}}
	for stepID, es := range stepEffects {
		for _, e := range es {
			o.stepOf[e.Ref()] = stepID
		}
	}
	for i, l := range lanes {
		o.laneIndex[l.StepID] = i
	}
	return o
}

// add draws f in the outbox lane, or keeps its anchor when it lies
// outside the range.
func (o *outbox) add(f trace.Effect) {
	at := f.At
	if at.IsZero() {
		at = o.win.tmax
	}
	if !o.win.shows(at, at) {
		o.hidden++
		if !o.clustered {
			o.anchors = append(o.anchors, EffectAnchor(f.Provider, f.ID))
		}
		return
	}
	if o.clustered {
		// Only its position, its state and, when its step's lane is laid
		// out, its mark there.
		m := EffectMark{X: o.win.sc.px(at), State: o.in.States[f.Ref()]}
		if m.State == "" {
			m.State = trace.MatchOrphan
		}
		if stepID, ok := o.stepOf[f.Ref()]; ok {
			if _, laid := o.laneIndex[stepID]; laid {
				m.StepID, m.Href = stepID, EffectURL(o.in.Run.Execution.ID, f.Provider, f.ID)
				o.linkLane(&m, f)
			}
		}
		o.addToCluster(m, at)
		return
	}
	anchor := EffectAnchor(f.Provider, f.ID)
	m := EffectMark{X: o.win.sc.px(at), At: o.win.ms(at), Provider: f.Provider, ID: f.ID, State: o.in.States[f.Ref()],
		Anchor: anchor, Href: EffectURL(o.in.Run.Execution.ID, f.Provider, f.ID), Mark: o.in.Marks.EffectLabels[f.Ref()]}
	if m.State == "" {
		m.State = trace.MatchOrphan
	}
	m.Title = effectMarkTitle(f, m)
	if stepID, ok := o.stepOf[f.Ref()]; ok {
		m.StepID = stepID
		m.Title += " · caused by " + stepID
		o.linkLane(&m, f)
	}
	o.marks = append(o.marks, m)
}

func effectMarkTitle(f trace.Effect, m EffectMark) string {
	title := fmt.Sprintf("%s %s (%s) at %s", f.Provider, f.ID, m.State, UTC(f.At))
	if f.Summary != "" {
		title += " · " + f.Summary
	}
	if m.Mark != "" {
		title += " · " + m.Mark
	}
	return title
}

// linkLane marks the effect in its causing step's lane, when that lane is
// drawn.
func (o *outbox) linkLane(m *EffectMark, f trace.Effect) {
	li, ok := o.laneIndex[m.StepID]
	if !ok {
		return
	}
	m.Linked, m.LaneID = true, o.lanes[li].ID
	href := "#" + m.Anchor
	if o.clustered {
		href = m.Href // the outbox lane draws clusters, with no mark of this effect's own
	}
	o.lanes[li].Marks = append(o.lanes[li].Marks, LaneEffect{X: m.X, Href: href, State: m.State,
		Title: f.Provider + " " + f.ID + " (" + string(m.State) + "), in the outbox lane"})
}

func newBar(run trace.Run, sc scale, a trace.Attempt, outcome trace.Outcome, end time.Time, showText bool, calls []trace.Span, w0, w1 time.Time) Bar {
	x0, x1 := sc.px(a.StartedAt), sc.px(end)
	w := max(x1-x0, minBarW)
	if x0+w > ChartWidth {
		x0 = ChartWidth - w
	}
	b := Bar{
		X: x0, W: w, Number: a.Number, Outcome: outcome,
		Label: OutcomeLabel(outcome), Ghost: outcome == trace.OutcomeReplayed, Deduplicated: a.Deduplicated,
		ShowText: showText, Anchor: AttemptAnchor(a.StepID, a.Number), Href: AttemptURL(run.Execution.ID, a.StepID, a.Number),
	}
	if b.Ghost {
		b.Label += " — from journal, tool not called"
	}
	parts := []string{fmt.Sprintf("attempt %d: %s", a.Number, outcome)}
	if a.Deduplicated {
		parts = append(parts, "deduplicated by the receiving API")
	}
	if !a.StartedAt.IsZero() && !a.EndedAt.IsZero() {
		parts = append(parts, Duration(a.EndedAt.Sub(a.StartedAt)))
	}
	if a.Worker != "" {
		parts = append(parts, "worker "+a.Worker)
	}
	if len(calls) > 0 {
		parts = append(parts, plural(len(calls), "HTTP call", "HTTP calls"))
	}
	if a.StartedAt.Before(w0) {
		parts = append(parts, "starts before the range shown")
	}
	if end.After(w1) {
		parts = append(parts, "ends after the range shown")
	}
	b.Title = strings.Join(parts, ", ")
	for _, c := range calls {
		if c.StartedAt.IsZero() {
			continue
		}
		cx0, cx1 := sc.px(c.StartedAt), sc.px(endOrSpan(c, end))
		// Inside the bar, whatever the clocks of two processes say.
		cx0 = min(max(cx0, x0), x0+w-minMarkW)
		cw := min(max(cx1-cx0, minMarkW), x0+w-cx0)
		b.Calls = append(b.Calls, CallMark{X: cx0, W: cw})
	}
	return b
}

// clusterBars, in a huge execution, draws attempts of a lane that overlap
// at this scale as one bar: it links to the last of them and its title
// counts their outcomes; the others keep their ids as anchors, so that a
// link to one still finds the lane. Zooming in shows each again.
func clusterBars(bars []Bar, anchors *[]string) []Bar {
	if len(bars) < 2 {
		return bars
	}
	out := bars[:0:0]
	flush := func(group []Bar) {
		if len(group) == 1 {
			out = append(out, group[0])
			return
		}
		last := group[len(group)-1]
		x0, x1 := group[0].X, group[0].X+group[0].W
		counts := map[trace.Outcome]int{}
		var order []trace.Outcome
		for _, b := range group {
			x0, x1 = min(x0, b.X), max(x1, b.X+b.W)
			if counts[b.Outcome] == 0 {
				order = append(order, b.Outcome)
			}
			counts[b.Outcome]++
			if b.Anchor != last.Anchor {
				*anchors = append(*anchors, b.Anchor)
			}
			if b.Culprit != "" {
				last.Culprit = b.Culprit
			}
		}
		var parts []string
		for _, o := range order {
			parts = append(parts, fmt.Sprintf("%d %s", counts[o], o))
		}
		last.X, last.W = x0, x1-x0
		last.Title = fmt.Sprintf("attempts %d–%d, drawn as one at this scale (zoom in to see each): %s; this links to attempt %d",
			group[0].Number, last.Number, strings.Join(parts, ", "), last.Number)
		if last.Culprit != "" {
			last.Title = last.Culprit + " — " + last.Title
		}
		out = append(out, last)
	}
	group := []Bar{bars[0]}
	end := bars[0].X + bars[0].W
	for _, b := range bars[1:] {
		if b.X <= end+1 {
			group = append(group, b)
			end = max(end, b.X+b.W)
			continue
		}
		flush(group)
		group, end = []Bar{b}, b.X+b.W
	}
	flush(group)
	return out
}

// barText is what a bar's label says in full: the outcome, then its
// badges.
func barText(b Bar) string {
	s := b.Label
	if b.Deduplicated {
		s += " ≡ deduplicated"
	}
	if b.Culprit != "" {
		s += " ⚠ " + b.Culprit
	}
	return s
}

// placeBarLabels puts each bar's label under it, in one of the lane's two
// label rows: the culprits' first, then in time order; the full text where
// it fits, else the outcome alone, else nothing (the title keeps it).
func placeBarLabels(bars []Bar) {
	if len(bars) == 0 || !bars[0].ShowText {
		return
	}
	p := newPlacer(ChartWidth, laneRows)
	order := make([]int, len(bars))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return bars[order[i]].Culprit != "" && bars[order[j]].Culprit == "" })
	for _, i := range order {
		b := &bars[i]
		full := barText(*b)
		candidates := []string{full}
		if b.Culprit != "" {
			candidates = append(candidates, "⚠ "+b.Culprit)
		} else if short := OutcomeLabel(b.Outcome); short != full {
			candidates = append(candidates, short)
		}
		l, ok := p.place(candidates, b.X, b.X+b.W, labelFont)
		if !ok {
			continue
		}
		b.Text = l
		switch {
		case l.Text == full:
			b.ShownOutcome, b.ShowDedupe, b.ShowCulprit = b.Label, b.Deduplicated, b.Culprit != ""
		case b.Culprit != "":
			b.ShowCulprit = true
		default:
			b.ShownOutcome = l.Text
		}
	}
}

// placeEffectLabels puts each effect's label in one of the outbox lane's
// rows: duplicates first, with their place ("2 of 2 · extra") if there
// is room.
func placeEffectLabels(es []EffectMark) {
	p := newPlacer(ChartWidth, outboxRows)
	order := make([]int, len(es))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		return es[order[i]].State == trace.MatchDuplicate && es[order[j]].State != trace.MatchDuplicate
	})
	for _, i := range order {
		m := &es[i]
		base := effectIcon(m.State) + " " + Visible(m.ID)
		var candidates []string
		if m.Mark != "" {
			candidates = append(candidates, base+" · "+m.Mark, "◆ "+m.Mark)
		}
		candidates = append(candidates, base)
		if m.State == trace.MatchDuplicate {
			candidates = append(candidates, "◆ duplicate")
		}
		candidates = append(candidates, "◆")
		if l, ok := p.place(candidates, m.X-6, m.X+6, labelFont); ok {
			m.Label = l
		}
	}
}

// placer keeps the extents of the labels placed in each row, so that no
// new label overlaps one of them.
type placer struct {
	width float64
	rows  []float64
	taken [][][2]float64
}

func newPlacer(width float64, rows []float64) *placer {
	return &placer{width: width, rows: rows, taken: make([][][2]float64, len(rows))}
}

// place tries each candidate text, longest first, in each row, starting at
// x0 (rightwards) or ending at x1 (leftwards).
func (p *placer) place(candidates []string, x0, x1, font float64) (PlacedLabel, bool) {
	for _, text := range candidates {
		w := textWidth(text, font)
		for r, y := range p.rows {
			for _, l := range []PlacedLabel{
				{Text: text, X: max(x0, 0), Y: y, Anchor: "start", Width: w},
				{Text: text, X: min(x1, p.width), Y: y, Anchor: "end", Width: w},
			} {
				if p.free(r, l) {
					p.take(r, l)
					return l, true
				}
			}
		}
	}
	return PlacedLabel{}, false
}

func (p *placer) free(row int, l PlacedLabel) bool {
	a, b := l.Box()
	if a < 0 || b > p.width {
		return false
	}
	for _, t := range p.taken[row] {
		if a < t[1]+labelPad && t[0] < b+labelPad {
			return false
		}
	}
	return true
}

func (p *placer) take(row int, l PlacedLabel) {
	a, b := l.Box()
	p.taken[row] = append(p.taken[row], [2]float64{a, b})
}

// textWidth estimates how wide text is in px at a font size in the
// timeline's monospace font: 0.6 em a character, 1.1 em for a symbol that
// may come from a wider fallback font.
func textWidth(s string, font float64) float64 {
	w := 0.0
	for _, r := range s {
		if r < 0x2000 {
			w += 0.6
		} else {
			w += 1.1
		}
	}
	return w * font
}

// topTools names the commonest tools of a group: "fetch_page ×30, send_email ×20".
func topTools(counts map[string]int) string {
	type tc struct {
		tool string
		n    int
	}
	var all []tc
	for t, n := range counts {
		all = append(all, tc{t, n})
	}
	slices.SortFunc(all, func(a, b tc) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.tool, b.tool)
	})
	var parts []string
	for i, t := range all {
		if i == 3 {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("%s ×%d", Visible(t.tool), t.n))
	}
	return strings.Join(parts, ", ")
}

func endOrSpan(s trace.Span, fallback time.Time) time.Time {
	if s.EndedAt.IsZero() {
		return fallback
	}
	return s.EndedAt
}

// newModelMarks lays out the model calls' bars; labels go under them in
// two rows where they fit, else only in the hover title, so fifty calls
// stay legible.
func newModelMarks(calls []trace.Span, sc scale, tmax, w0, w1 time.Time) []ModelMark {
	out := make([]ModelMark, 0, len(calls))
	p := newPlacer(ChartWidth, laneRows)
	for _, c := range calls {
		x0 := sc.px(c.StartedAt)
		w := max(sc.px(endOrSpan(c, tmax))-x0, minBarW)
		if x0+w > ChartWidth {
			x0 = ChartWidth - w
		}
		m := ModelMark{X: x0, W: w, Error: c.Error != "", Title: modelTitle(c)}
		if c.StartedAt.Before(w0) || endOrSpan(c, tmax).After(w1) {
			m.Title += " (clipped to the range shown)"
		}
		if l, ok := p.place([]string{ModelLabel(c), modelShortLabel(c)}, x0, x0+w, labelFont); ok {
			m.Label = l
		}
		out = append(out, m)
	}
	return out
}

// markLaneView is what markLane draws: a lane of bars that are not
// attempts, in the timeline's head.
type markLaneView struct {
	Class, TestID, Name, Summary string
	MarkTestID, LabelTestID      string
	Marks                        []ModelMark
}

// modelLane is the model calls' lane: one bar each, with the model and
// its tokens where there is room and always in the hover title.
func (t Timeline) modelLane() markLaneView {
	return markLaneView{Class: "tl-row model-lane", TestID: "model-lane", Name: "model calls", Summary: t.ModelSummary,
		MarkTestID: "model-call", LabelTestID: "model-label", Marks: t.Models}
}

// eventsLane is a workflow engine's signals, timers and markers: what its
// history tells of the run beside its activities.
func (t Timeline) eventsLane() markLaneView {
	return markLaneView{Class: "tl-row model-lane events-lane", TestID: "events-lane", Name: "workflow events", Summary: t.EventSummary,
		MarkTestID: "workflow-event", LabelTestID: "event-label", Marks: t.Events}
}

// newEventMarks lays out a workflow engine's events as the model calls
// are: a bar each (a signal or a marker is an instant: the narrowest bar),
// its name under it where it fits and always in its title.
func newEventMarks(events []trace.Span, sc scale, tmax, w0, w1 time.Time) []ModelMark {
	out := make([]ModelMark, 0, len(events))
	p := newPlacer(ChartWidth, laneRows)
	for _, e := range events {
		x0 := sc.px(e.StartedAt)
		w := max(sc.px(endOrSpan(e, e.StartedAt))-x0, minBarW)
		if x0+w > ChartWidth {
			x0 = ChartWidth - w
		}
		m := ModelMark{X: x0, W: w, Title: e.Name + " at " + UTC(e.StartedAt)}
		if !e.EndedAt.IsZero() && e.EndedAt.After(e.StartedAt) {
			m.Title += ", until " + UTC(e.EndedAt)
		}
		if e.StartedAt.Before(w0) || endOrSpan(e, e.StartedAt).After(w1) {
			m.Title += " (clipped to the range shown)"
		}
		if l, ok := p.place([]string{e.Name}, x0, x0+w, labelFont); ok {
			m.Label = l
		}
		out = append(out, m)
	}
	return out
}

// modelShortLabel is the model's name alone, marked when the call failed.
func modelShortLabel(c trace.Span) string {
	if c.Error != "" {
		return "✗ " + modelName(c)
	}
	return modelName(c)
}

// modelSummary is the model lane's second line: how many calls and tokens.
func modelSummary(calls []trace.Span) string {
	var in, out int64
	for _, c := range calls {
		in += c.InputTokens
		out += c.OutputTokens
	}
	return fmt.Sprintf("%s · %d in / %d out", plural(len(calls), "call", "calls"), in, out)
}

// tickOffset prints an offset precisely enough to tell apart ticks a
// stretch of span apart: after a 53 s gap, a second of work reads
// +53.21 s, +53.46 s, not +53.2 s five times.
func tickOffset(d, span time.Duration) string {
	if d < 10*time.Second || span >= 10*time.Second || d >= time.Hour {
		if d < 10*time.Second && d >= time.Second && span < 100*time.Millisecond {
			return trimZero(fmt.Sprintf("%.3f", d.Seconds())) + " s"
		}
		return Duration(d)
	}
	digits := 2
	if span < time.Second {
		digits = 3
	}
	secs := func(d time.Duration) string { return trimZero(fmt.Sprintf("%.*f", digits, d.Seconds())) + " s" }
	if d < time.Minute {
		return secs(d)
	}
	m := d / time.Minute
	return fmt.Sprintf("%d min %s", m, secs(d-m*time.Minute))
}

// OutcomeLabel is an outcome with its icon, so it never relies on colour.
func OutcomeLabel(o trace.Outcome) string {
	icon := map[trace.Outcome]string{
		trace.OutcomeOK: "✓", trace.OutcomeError: "✗", trace.OutcomeTimeout: "◔",
		trace.OutcomeReplayed: "↺", trace.OutcomeRunning: "…", trace.OutcomeLost: "?",
	}[o]
	return strings.TrimSpace(icon + " " + string(o))
}

func endOr(a trace.Attempt, fallback time.Time) time.Time {
	if a.EndedAt.IsZero() {
		return fallback
	}
	return a.EndedAt
}

// effectNoun names what a provider delivers, for "2 emails for step-4".
func effectNoun(provider string, many bool) string {
	p := strings.ToLower(provider)
	noun := "effect"
	switch {
	case strings.Contains(p, "mail"):
		noun = "email"
	case strings.Contains(p, "sms"):
		noun = "message"
	case strings.Contains(p, "pay"), strings.Contains(p, "charge"), strings.Contains(p, "stripe"):
		noun = "charge"
	}
	if many {
		return noun + "s"
	}
	return noun
}

func span(ts []time.Time) (lo, hi time.Time) {
	for _, t := range ts {
		if t.IsZero() {
			continue
		}
		if lo.IsZero() || t.Before(lo) {
			lo = t
		}
		if hi.IsZero() || t.After(hi) {
			hi = t
		}
	}
	return lo, hi
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// seconds is an offset as the zoom form and URL write it: "12.345".
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

// clipGaps keeps the parts of gaps inside [w0, w1].
func clipGaps(gaps []trace.Gap, w0, w1 time.Time) []trace.Gap {
	var out []trace.Gap
	for _, g := range gaps {
		if g.End.Before(w0) || g.Start.After(w1) {
			continue
		}
		if g.Start.Before(w0) {
			g.Start = w0
		}
		if g.End.After(w1) {
			g.End = w1
		}
		if g.End.After(g.Start) {
			out = append(out, g)
		}
	}
	return out
}

// scale maps time to a position in the chart (0–100) on a broken axis:
// every gap takes a fixed width whatever its length, and the stretches of
// work share the rest in proportion to their length. Two seconds of work
// and fifty of waiting are both legible.
type scale struct {
	pieces   []piece
	tmin     time.Time
	gapMarks []GapMark
}

type piece struct {
	t0, t1 time.Time
	x0, x1 float64
	gap    bool
}

func newScale(tmin, tmax time.Time, gaps []trace.Gap) scale {
	var inside []trace.Gap
	for _, g := range gaps {
		if !g.Start.Before(tmin) && !g.End.After(tmax) && g.End.After(g.Start) {
			inside = append(inside, g)
		}
	}
	sort.Slice(inside, func(i, j int) bool { return inside[i].Start.Before(inside[j].Start) })
	each := gapW
	if n := float64(len(inside)); n*each > maxGapShare {
		each = maxGapShare / n
	}
	// The stretches between gaps.
	type stretch struct{ t0, t1 time.Time }
	var work []stretch
	cur := tmin
	for _, g := range inside {
		work = append(work, stretch{cur, g.Start})
		cur = g.End
	}
	work = append(work, stretch{cur, tmax})
	var total time.Duration
	for _, w := range work {
		total += w.t1.Sub(w.t0)
	}
	room := 100 - each*float64(len(inside))
	s := scale{tmin: tmin}
	x := 0.0
	for i, w := range work {
		// In proportion to length; when no stretch has any length (one
		// instant, then an open silence), the first takes the room.
		share := room * float64(w.t1.Sub(w.t0)) / float64(max(total, 1))
		if total == 0 && i == 0 {
			share = room
		}
		s.pieces = append(s.pieces, piece{t0: w.t0, t1: w.t1, x0: x, x1: x + share})
		x += share
		if i < len(inside) {
			g := inside[i]
			s.pieces = append(s.pieces, piece{t0: g.Start, t1: g.End, x0: x, x1: x + each, gap: true})
			s.gapMarks = append(s.gapMarks, newGapMark(g, x, each))
			x += each
		}
	}
	return s
}

func newGapMark(g trace.Gap, x, w float64) GapMark {
	x, w = x*ChartWidth/100, w*ChartWidth/100
	m := GapMark{X: x, W: w, Mid: x + w/2, Kind: g.Kind, Seconds: g.Seconds()}
	length := Duration(g.End.Sub(g.Start))
	switch {
	case g.WorkerBefore != "" && g.WorkerBefore == g.WorkerAfter:
		m.Workers = g.WorkerBefore
	case g.WorkerBefore != "" || g.WorkerAfter != "":
		m.Workers = orDash(g.WorkerBefore) + " → " + orDash(g.WorkerAfter)
	}
	switch g.Kind {
	case trace.GapCrash:
		m.Label, m.Short = length+" — no process running", length
	case silenceGap:
		m.Label, m.Short = "no process seen for "+length, length
	default:
		// Says what it is first ("idle 12 s"); one worker idle is named on
		// the same line rather than as "worker w1 → w1".
		m.Label, m.Short = "idle "+length, "idle "+length
		if g.WorkerBefore != "" && g.WorkerBefore == g.WorkerAfter {
			m.Label += ", " + m.Workers
			m.Workers = ""
		}
	}
	m.Title = m.Label + ", " + UTC(g.Start) + " – " + UTC(g.End)
	if m.Workers != "" {
		m.Title += ", worker " + m.Workers
	}
	return m
}

// placeGapLabels puts each gap's label under the axis, centred on the gap
// and kept inside the chart, in full, as its length alone, or not at all.
func placeGapLabels(gaps []GapMark) []GapMark {
	labels := newPlacer(ChartWidth, []float64{0})
	workers := newPlacer(ChartWidth, []float64{0})
	for i := range gaps {
		g := &gaps[i]
		g.LabelX, g.LabelAnchor = g.Mid, "middle"
		// tryAt places text centred on the gap, moved inward by its own
		// width where the gap is near an edge, so that it is never clipped.
		tryAt := func(p *placer, text string) (float64, bool) {
			w := textWidth(text, tickFont)
			l := PlacedLabel{Text: text, X: min(max(g.Mid, w/2), ChartWidth-w/2), Anchor: "middle", Width: w}
			if p.free(0, l) {
				p.take(0, l)
				return l.X, true
			}
			return 0, false
		}
		for _, text := range []string{g.Label, g.Short} {
			if x, ok := tryAt(labels, text); ok {
				g.Shown, g.LabelX = text, x
				break
			}
		}
		if g.Shown != "" && g.Workers != "" {
			if x, ok := tryAt(workers, "worker "+g.Workers); ok {
				g.ShownWorkers, g.WorkersX = "worker "+g.Workers, x
			}
		}
	}
	return gaps
}

func orDash(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// px is the position of t in the chart, in px.
func (s scale) px(t time.Time) float64 { return s.x(t) * ChartWidth / 100 }

// x is the chart position of t, 0–100.
func (s scale) x(t time.Time) float64 {
	if t.IsZero() || len(s.pieces) == 0 {
		return 0
	}
	for _, p := range s.pieces {
		if t.After(p.t1) {
			continue
		}
		if !t.After(p.t0) || !p.t1.After(p.t0) {
			return p.x0
		}
		return p.x0 + (p.x1-p.x0)*float64(t.Sub(p.t0))/float64(p.t1.Sub(p.t0))
	}
	return s.pieces[len(s.pieces)-1].x1
}

// ticks labels the end of the axis, the start of every stretch of work and
// a few points inside wide ones, as offsets from origin; a tick is dropped
// when its label would touch another or repeat one.
func (s scale) ticks(origin time.Time) []Tick {
	type candidate struct {
		t       time.Time
		stretch time.Duration
	}
	var cands []candidate
	for _, p := range s.pieces {
		if p.gap {
			continue
		}
		stretch := p.t1.Sub(p.t0)
		cands = append(cands, candidate{p.t0, stretch})
		if n := int((p.x1 - p.x0) / 12); n > 1 {
			for k := 1; k < n; k++ {
				cands = append(cands, candidate{p.t0.Add(stretch * time.Duration(k) / time.Duration(n)), stretch})
			}
		}
	}
	if len(s.pieces) == 0 {
		return nil
	}
	last := s.pieces[len(s.pieces)-1]
	end := candidate{last.t1, last.t1.Sub(last.t0)}
	p := newPlacer(ChartWidth, []float64{0})
	seen := map[string]bool{}
	mk := func(c candidate, anchor string) (Tick, bool) {
		label := "+" + tickOffset(c.t.Sub(origin), c.stretch)
		x := s.px(c.t)
		l := PlacedLabel{Text: label, X: x, Anchor: anchor, Width: textWidth(label, tickFont)}
		if seen[label] || !p.free(0, l) {
			return Tick{}, false
		}
		p.take(0, l)
		seen[label] = true
		return Tick{X: x, Label: label, Title: UTC(c.t), Anchor: anchor}, true
	}
	var out []Tick
	endTick, endOK := mk(end, "end")
	for i, c := range cands {
		anchor := "middle"
		if i == 0 {
			anchor = "start"
		}
		if k, ok := mk(c, anchor); ok {
			out = append(out, k)
		}
	}
	if endOK {
		out = append(out, endTick)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].X < out[j].X })
	return out
}

// gridPath is the tick lines as one path, so each row draws them with one
// element.
func gridPath(ticks []Tick) string {
	var b strings.Builder
	for _, k := range ticks {
		fmt.Fprintf(&b, "M%s 0V%d", f1(k.X), laneH)
	}
	return b.String()
}

// newOverview condenses the whole execution into slices of attempt
// density, effects and gaps, with the range shown highlighted.
func newOverview(run trace.Run, states map[trace.EffectRef]trace.MatchState, sc scale, tmin, w0, w1 time.Time) Overview {
	var o Overview
	counts := make([]int, overviewSlices)
	sliceW := float64(ChartWidth) / overviewSlices
	for _, s := range run.Steps {
		for _, a := range s.Attempts {
			if a.StartedAt.IsZero() {
				continue
			}
			i0 := int(sc.px(a.StartedAt) / sliceW)
			i1 := int(sc.px(endOr(a, a.StartedAt)) / sliceW)
			for i := max(i0, 0); i <= min(i1, overviewSlices-1); i++ {
				counts[i]++
			}
		}
	}
	top := slices.Max(counts)
	for i, n := range counts {
		if n == 0 {
			continue
		}
		h := max(2, float64(n)/float64(max(top, 1))*(overviewH-10))
		o.Slices = append(o.Slices, OverviewSlice{X: float64(i) * sliceW, W: sliceW - 1, H: h})
	}
	// One mark per slice and kind, so the overview costs the same
	// whatever the number of effects.
	seen := map[OverviewEffect]bool{}
	own := run.OwnEffects()
	for _, f := range own {
		if f.At.IsZero() {
			continue
		}
		i := min(max(int(sc.px(f.At)/sliceW), 0), overviewSlices-1)
		e := OverviewEffect{X: (float64(i) + 0.5) * sliceW, Duplicate: states[f.Ref()] == trace.MatchDuplicate}
		if len(own) <= overviewSlices {
			e.X = sc.px(f.At) // few: each where it happened
		}
		if !seen[e] {
			seen[e] = true
			o.Effects = append(o.Effects, e)
		}
	}
	o.Gaps = sc.gapMarks
	o.RangeX = sc.px(w0)
	o.RangeW = max(sc.px(w1)-o.RangeX, 2)
	var parts []string
	for _, p := range sc.pieces {
		parts = append(parts, fmt.Sprintf("%s %s %d %d", f1(p.x0*ChartWidth/100), f1(p.x1*ChartWidth/100),
			p.t0.Sub(tmin).Milliseconds(), p.t1.Sub(tmin).Milliseconds()))
	}
	o.Pieces = strings.Join(parts, ",")
	return o
}

// f1 prints a position in px with one decimal.
func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// gapPattern names the hatching of a gap's kind: crash gaps pink, idle
// and silent ones grey.
func gapPattern(k trace.GapKind) string {
	switch k {
	case trace.GapCrash:
		return "crash"
	case silenceGap:
		return "silence"
	}
	return "idle"
}

// gapBreak is the axis's break mark at a gap: two slanted strokes.
func gapBreak(g GapMark) string {
	return fmt.Sprintf("M%s 23l3-7M%s 23l3-7", f1(g.Mid-3), f1(g.Mid+1))
}

// diamond is an effect's mark in its step's lane, above the bar.
func diamond(x float64) string {
	return fmt.Sprintf("M%s 0l4 4l-4 4l-4-4z", f1(x))
}

func ovEffectClass(e OverviewEffect) string {
	if e.Duplicate {
		return "ov-effect duplicate"
	}
	return "ov-effect"
}

func laneRowClass(l Lane) string {
	c := "tl-row lane"
	if l.Culprit {
		c += " has-culprit"
	}
	if l.Findings > 0 || l.Duplicate {
		c += " has-findings"
	}
	return c
}

// culpritText is the culprit's label, after the outcome when that shows.
func culpritText(b Bar) string {
	if b.ShownOutcome != "" {
		return " ⚠ " + b.Culprit
	}
	return "⚠ " + b.Culprit
}
