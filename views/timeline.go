package views

import (
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oncetrace/oncetrace/trace"
)

// The timeline is one SVG: a label column on the left, then the chart.
// Horizontal positions are percentages of the SVG's width (attributes, not
// style, so a strict Content-Security-Policy holds); vertical ones pixels.
const (
	chartX0 = 24.0 // where the chart starts, % of the width
	chartW  = 74.0 // the chart's width, %
	axisH   = 66   // px above the first lane: ticks, axis, gap labels
	laneH   = 46
	outboxH = 64
	modelH  = 46
	// The outbox lane comes first, under the axis, so a second email is
	// in view however many steps follow; the model calls' lane, when there
	// are any, follows it, and the steps' lanes start below them.
	lanesY       = axisH + outboxH
	minBarW      = 0.45 // %, so a 1 ms attempt is still visible and clickable
	minMarkW     = 0.15 // %, an HTTP call's mark inside its attempt's bar
	maxGapShare  = 36.0 // % of the chart all gaps together may take
	gapW         = 7.0  // % of the chart one gap takes at most
	compactAbove = 1500 // attempts above which bars lose their text and arrows
	// DefaultMaxLanes is how many step lanes show before "show all".
	DefaultMaxLanes = 200
)

// Timeline is the execution's timeline, laid out.
type Timeline struct {
	Empty       bool
	Height      int
	OutboxY     int
	Ticks       []Tick
	Gaps        []GapMark
	Lanes       []Lane
	HiddenLanes int // steps not drawn until "show all"
	TotalLanes  int
	Effects     []EffectMark
	// ModelY is the top of the model calls' lane; Models are its bars, by
	// start. Model calls are not steps: they count in no step, attempt or
	// retry.
	ModelY       int
	Models       []ModelMark
	ModelSummary string // "12 calls · 3120 in / 480 out"
	Compact      bool
	// Silence, while a running execution has shown no activity for longer
	// than the gap threshold, says so: "no process seen for 12 s".
	Silence string
}

// Tick is a label on the time axis.
type Tick struct {
	X     string
	Label string
	Title string
}

// GapMark is a gap drawn as a break in the axis.
type GapMark struct {
	X, W, Mid string
	// LabelX and LabelAnchor keep the label inside the chart near its edges.
	LabelX, LabelAnchor string
	Kind                trace.GapKind
	Label               string // "53 s — no process running"
	Workers             string // "w1 → w2"
	Seconds             float64
}

// ModelMark is one model call in the model calls' lane.
type ModelMark struct {
	X, W       string
	TextX      string
	TextAnchor string
	Inside     bool   // the label sits inside the bar
	Label      string // "gpt-4o · 120 in / 18 out"; "" when it fits nowhere
	Error      bool
	Title      string
}

// Lane is one step.
type Lane struct {
	Y           int // top of the lane; everything inside is drawn relative to it
	StepID      string
	Tool        string
	Effect      trace.EffectClass
	ClassTitle  string // the class explained, for the hover
	Bars        []Bar
	Arrows      []Arrow
	EffectCount int
	CountLabel  string // "2 emails for step-4"
	Duplicate   bool
}

// Bar is one attempt.
type Bar struct {
	X, W         string
	TextX        string
	TextAnchor   string
	Inside       bool // the label fits inside the bar
	Number       int
	Outcome      trace.Outcome
	Label        string // icon and outcome word, never colour alone
	Ghost        bool   // a replay: answered from the journal, tool not called
	Deduplicated bool
	ShowText     bool
	Anchor       string
	Href         string
	Title        string
	// Calls are the HTTP client calls the attempt made, as thin marks
	// inside its bar.
	Calls []CallMark
}

// CallMark is an HTTP call inside its attempt's bar.
type CallMark struct{ X, W string }

// Arrow joins an attempt to its retry.
type Arrow struct{ X1, X2 string }

// EffectMark is one effect in the outbox lane, joined to its cause.
type EffectMark struct {
	X, LabelX    string
	LabelY       int
	Anchor       string
	Href         string
	Provider, ID string
	State        trace.MatchState
	StepID       string
	Linked       bool
	LinkY        int // bottom of the causing attempt's bar
	Title        string
	LabelAnchor  string
}

// TimelineInput is what the timeline is drawn from.
type TimelineInput struct {
	Run      trace.Run
	Gaps     []trace.Gap
	States   map[trace.EffectRef]trace.MatchState
	MaxLanes int  // 0: DefaultMaxLanes
	ShowAll  bool // draw every lane
	// Now, for a live page, is the current time: a running execution's
	// axis runs to it, running bars grow to it, and a silence longer than
	// SilenceAfter is drawn as a gap that is still open.
	Now          time.Time
	SilenceAfter time.Duration
}

// silenceGap is a gap still open at the right edge of a running execution.
const silenceGap trace.GapKind = "silence"

// NewTimeline lays out an execution.
func NewTimeline(in TimelineInput) Timeline {
	run := in.Run
	var times []time.Time
	attempts := 0
	for _, s := range run.Steps {
		for _, a := range s.Attempts {
			attempts++
			times = append(times, a.StartedAt, a.EndedAt)
		}
	}
	for _, f := range run.Effects {
		times = append(times, f.At)
	}
	models := run.ModelCalls()
	for _, m := range models {
		times = append(times, m.StartedAt, m.EndedAt)
	}
	tmin, tmax := span(times)
	if tmin.IsZero() {
		return Timeline{Empty: true}
	}
	gaps := in.Gaps
	var silence string
	if live := !in.Now.IsZero() && run.Execution.Status == trace.StatusRunning; live && in.Now.After(tmax) {
		if quiet := in.Now.Sub(tmax); in.SilenceAfter > 0 && quiet > in.SilenceAfter {
			silence = "no process seen for " + Duration(quiet.Truncate(time.Second))
			gaps = append(append([]trace.Gap(nil), gaps...), trace.Gap{Start: tmax, End: in.Now, Kind: silenceGap})
		}
		tmax = in.Now
	}
	sc := newScale(tmin, tmax, gaps)
	tl := Timeline{Compact: attempts > compactAbove, TotalLanes: len(run.Steps), Silence: silence}
	tl.Ticks = sc.ticks()
	for _, g := range sc.gapMarks {
		tl.Gaps = append(tl.Gaps, g)
	}

	steps := run.Steps
	max := in.MaxLanes
	if max <= 0 {
		max = DefaultMaxLanes
	}
	if !in.ShowAll && len(steps) > max {
		tl.HiddenLanes = len(steps) - max
		steps = steps[:max]
	}
	tl.OutboxY = axisH
	stepsY := lanesY
	if len(models) > 0 {
		tl.ModelY = lanesY
		stepsY += modelH
		tl.Models = newModelMarks(models, sc, tmax)
		tl.ModelSummary = modelSummary(models)
	}
	var httpCalls map[string][]trace.Span
	if !tl.Compact {
		httpCalls = run.HTTPCalls()
	}
	stepEffects := run.StepEffects()
	laneOf := map[string]int{}
	for i, s := range steps {
		y := stepsY + i*laneH
		lane := Lane{Y: y, StepID: s.ID, Tool: s.ToolName(), Effect: s.Class(), ClassTitle: s.ToolName() + ": " + ClassLabel(s.Class())}
		showText := !tl.Compact && len(s.Attempts) <= 6
		for j, a := range s.Attempts {
			lane.Bars = append(lane.Bars, newBar(run, sc, a, tmax, showText, httpCalls[a.SpanID]))
			if j > 0 && !tl.Compact {
				// From where the previous attempt ended, or, if it never
				// did, from where it started.
				prev := s.Attempts[j-1]
				lane.Arrows = append(lane.Arrows, Arrow{X1: pct(sc.pos(endOr(prev, prev.StartedAt))), X2: pct(sc.pos(a.StartedAt))})
			}
		}
		if es := stepEffects[s.ID]; len(es) > 0 {
			lane.EffectCount = len(es)
			lane.Duplicate = len(es) > 1
			lane.CountLabel = fmt.Sprintf("%s for %s", plural(len(es), effectNoun(es[0].Provider, false), effectNoun(es[0].Provider, true)), s.ID)
		}
		laneOf[s.ID] = i
		tl.Lanes = append(tl.Lanes, lane)
	}
	tl.Height = stepsY + len(steps)*laneH + 8

	// Each effect is joined to the step it belongs to (trace's matching).
	stepOf := map[trace.EffectRef]string{}
	for stepID, es := range stepEffects {
		for _, e := range es {
			stepOf[e.Ref()] = stepID
		}
	}
	effects := append([]trace.Effect(nil), run.Effects...)
	sort.SliceStable(effects, func(i, j int) bool { return effects[i].At.Before(effects[j].At) })
	for i, f := range effects {
		at := f.At
		if at.IsZero() {
			at = tmax
		}
		x := sc.pos(at)
		m := EffectMark{X: pct(x), Provider: f.Provider, ID: f.ID, State: in.States[f.Ref()],
			Anchor: EffectAnchor(f.Provider, f.ID), Href: EffectURL(run.Execution.ID, f.Provider, f.ID),
			LabelY: tl.OutboxY + 34 + (i%2)*16, LabelX: pct(x), LabelAnchor: "middle"}
		if m.State == "" {
			m.State = trace.MatchOrphan
		}
		if x > 88 {
			m.LabelAnchor = "end"
		} else if x < chartX0+6 {
			m.LabelAnchor = "start"
		}
		if stepID, ok := stepOf[f.Ref()]; ok {
			m.StepID = stepID
			if li, drawn := laneOf[stepID]; drawn {
				m.Linked = true
				m.LinkY = stepsY + li*laneH + 6
			}
		}
		m.Title = fmt.Sprintf("%s %s (%s) at %s", f.Provider, f.ID, m.State, UTC(f.At))
		tl.Effects = append(tl.Effects, m)
	}
	return tl
}

func newBar(run trace.Run, sc scale, a trace.Attempt, tmax time.Time, showText bool, calls []trace.Span) Bar {
	outcome := run.Outcome(a)
	end := endOr(a, tmax)
	if outcome == trace.OutcomeLost {
		end = a.StartedAt
	}
	x0, x1 := sc.pos(a.StartedAt), sc.pos(end)
	w := x1 - x0
	if w < minBarW {
		w = minBarW
	}
	b := Bar{
		X: pct(x0), W: pct(w), Number: a.Number, Outcome: outcome,
		Label: OutcomeLabel(outcome), Ghost: outcome == trace.OutcomeReplayed, Deduplicated: a.Deduplicated,
		ShowText: showText, Anchor: AttemptAnchor(a.StepID, a.Number), Href: AttemptURL(run.Execution.ID, a.StepID, a.Number),
	}
	if b.Ghost {
		b.Label += " — from journal, tool not called"
	}
	// Text goes right of the bar, or left of it near the right edge.
	switch {
	case w >= 9:
		b.TextX, b.TextAnchor, b.Inside = pct(x0+0.5), "start", true
	case x0 < 80:
		b.TextX, b.TextAnchor = pct(x0), "start" // below the bar, from its start
	default:
		b.TextX, b.TextAnchor = pct(x0+w), "end"
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
	b.Title = strings.Join(parts, ", ")
	for _, c := range calls {
		if c.StartedAt.IsZero() {
			continue
		}
		cx0, cx1 := sc.pos(c.StartedAt), sc.pos(endOrSpan(c, end))
		// Inside the bar, whatever the clocks of two processes say.
		cx0 = min(max(cx0, x0), x0+w-minMarkW)
		cw := min(max(cx1-cx0, minMarkW), x0+w-cx0)
		b.Calls = append(b.Calls, CallMark{X: pct(cx0), W: pct(cw)})
	}
	return b
}

func endOrSpan(s trace.Span, fallback time.Time) time.Time {
	if s.EndedAt.IsZero() {
		return fallback
	}
	return s.EndedAt
}

// newModelMarks lays out the model calls' bars. A label sits inside a bar
// wide enough for it; else below the bar, from its start up to where the
// next call starts, or ending at its end down to where the previous call
// ended; else only in the hover title. Labels below never run into each
// other, so fifty calls stay legible.
func newModelMarks(calls []trace.Span, sc scale, tmax time.Time) []ModelMark {
	out := make([]ModelMark, 0, len(calls))
	x0s, x1s := make([]float64, len(calls)), make([]float64, len(calls))
	for i, c := range calls {
		x0s[i] = sc.pos(c.StartedAt)
		x1s[i] = x0s[i] + max(sc.pos(endOrSpan(c, tmax))-x0s[i], minBarW)
	}
	belowEnd := 0.0 // where the last label below a bar ends
	for i, c := range calls {
		x0, x1 := x0s[i], x1s[i]
		m := ModelMark{X: pct(x0), W: pct(x1 - x0), Error: c.Error != "", Title: modelTitle(c)}
		labels := []string{ModelLabel(c), modelShortLabel(c)}
		// Below the bar, rightwards up to the next call, or leftwards
		// down to the previous one.
		right := chartX0 + chartW - x0
		if i+1 < len(calls) {
			right = x0s[i+1] - x0
		}
		left := x1 - chartX0
		if i > 0 {
			left = x1 - max(x1s[i-1], belowEnd)
		}
	place:
		for _, l := range labels {
			switch {
			case labelFits(x1-x0, l):
				m.Label, m.Inside, m.TextX, m.TextAnchor = l, true, pct(x0+0.5), "start"
				break place
			case x0 >= belowEnd && labelFits(right, l):
				m.Label, m.TextX, m.TextAnchor = l, pct(x0), "start"
				belowEnd = x0 + labelWidth(l)
				break place
			case labelFits(left, l):
				m.Label, m.TextX, m.TextAnchor = l, pct(x1), "end"
				belowEnd = x1
				break place
			}
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

// labelFits reports whether a label fits in w percent of the timeline's
// width.
func labelFits(w float64, label string) bool { return w >= labelWidth(label) }

// labelWidth is about how wide a label of 12 px text is, in percent of a
// timeline about 850 px wide: 0.8% a character, and a margin.
func labelWidth(label string) float64 { return 0.8*float64(utf8.RuneCountInString(label)) + 1 }

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
	x, w = chartX0+x*chartW/100, w*chartW/100
	m := GapMark{X: pct(x), W: pct(w), Mid: pct(x + w/2), Kind: g.Kind, Seconds: g.Seconds(), LabelX: pct(x + w/2), LabelAnchor: "middle"}
	switch {
	case x+w/2 > 86:
		m.LabelX, m.LabelAnchor = pct(x+w), "end"
	case x+w/2 < chartX0+8:
		m.LabelX, m.LabelAnchor = pct(x), "start"
	}
	length := Duration(g.End.Sub(g.Start))
	switch g.Kind {
	case trace.GapCrash:
		m.Label = length + " — no process running"
	case silenceGap:
		m.Label = "no process seen for " + length
	default:
		m.Label = length + " idle"
	}
	if g.WorkerBefore != "" || g.WorkerAfter != "" {
		m.Workers = orDash(g.WorkerBefore) + " → " + orDash(g.WorkerAfter)
	}
	return m
}

func orDash(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// pos is the position of t as a percentage of the whole SVG's width.
func (s scale) pos(t time.Time) float64 { return chartX0 + s.x(t)*chartW/100 }

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

// ticks labels the start of every stretch of work, a few points inside wide
// ones, and the end, as offsets from the execution's first moment.
func (s scale) ticks() []Tick {
	var out []Tick
	var stretch time.Duration // length of the stretch being labelled: ticks need its precision
	add := func(t time.Time) {
		x := s.pos(t)
		if len(out) > 0 {
			if last := out[len(out)-1]; last.X == pct(x) {
				return
			}
		}
		out = append(out, Tick{X: pct(x), Label: "+" + tickOffset(t.Sub(s.tmin), stretch), Title: UTC(t)})
	}
	for _, p := range s.pieces {
		if p.gap {
			continue
		}
		stretch = p.t1.Sub(p.t0)
		add(p.t0)
		if n := int((p.x1 - p.x0) / 18); n > 1 {
			for k := 1; k < n; k++ {
				add(p.t0.Add(p.t1.Sub(p.t0) * time.Duration(k) / time.Duration(n)))
			}
		}
	}
	if len(s.pieces) > 0 {
		last := s.pieces[len(s.pieces)-1]
		if last.t1.After(last.t0) {
			add(last.t1)
		}
	}
	return out
}
