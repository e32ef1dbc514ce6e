package views

import (
	"net/url"
	"slices"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// ExecutionInput is one read of an execution (what store.ReadExecution
// returns) and the analysis settings its gaps are found with.
type ExecutionInput struct {
	Run      trace.Run
	Findings []trace.Finding
	States   map[trace.EffectRef]trace.MatchState
	// Orphans are orphan effects near the execution, read when it is
	// unverified (NearbyOrphanWindow); the run's own among them are
	// dropped, as they are listed already.
	Orphans  []trace.Effect
	Analysis trace.Config
}

// Execution is an execution as every view of it shows it: the page, its
// JSON twin, the live push, the attempt and effect details and the compare
// page are all built from one, so what is derived from the read (gaps,
// verdict, incidents, counts) is derived once and cannot differ between
// them.
type Execution struct {
	Run       trace.Run
	Findings  []trace.Finding
	States    map[trace.EffectRef]trace.MatchState
	Gaps      []trace.Gap
	Verdict   trace.Verdict
	Incidents []Incident
	// NearbyOrphans, for an unverified execution, are at most
	// MaxNearbyOrphans orphan effects within its time window.
	NearbyOrphans []trace.Effect
	// Summary is the execution's header: its counts, findings and audit
	// state, as the executions list shows them.
	Summary ExecutionRow

	silenceAfter time.Duration
	// index and findingViews are built once with the model, as it may be
	// drawn many times (the web keeps models while the store is
	// unchanged); both are only read after.
	index        *RunIndex
	findingViews []FindingView
}

// MaxNearbyOrphans bounds the orphan effects an unverified execution lists.
const MaxNearbyOrphans = 20

// NewExecution derives what the views of an execution show from one read
// of it. It reads nothing: the page, the JSON twin, the live push and the
// tests give it the same input and get the same model.
func NewExecution(in ExecutionInput) Execution {
	// The store lists findings by their ids as text; every list of them
	// here, the JSON's too, is in natural order (step-2 before step-14).
	findings := slices.Clone(in.Findings)
	slices.SortStableFunc(findings, trace.CompareFindingPlaces)
	x := Execution{Run: in.Run, Findings: findings, States: in.States, silenceAfter: in.Analysis.GapThreshold}
	x.Gaps = trace.Gaps(in.Run, in.Analysis)
	// Placing the effects is the costly part of judging, of telling the
	// incidents and of drawing the lanes: done once for the three.
	placed := in.Run.PlaceEffects()
	x.Verdict = trace.JudgePlaced(in.Run, in.Findings, placed)
	x.Incidents = newIncidents(in.Run, in.Findings, x.Gaps, placed.ByStep)
	// The counts are trace's, from the run read: the list's stored counts
	// are the same function's result cached at commit (and rebuilt when
	// the derivation changes), so the two agree without a second source.
	x.Summary = ExecutionRow{Execution: in.Run.Execution, Counts: in.Run.Counts(), Findings: len(in.Findings),
		CriticalFindings: trace.CriticalCount(in.Findings), AuditState: x.Verdict.State}
	x.index = newRunIndex(in.Run, findings, placed.ByStep)
	for _, f := range findings {
		x.findingViews = append(x.findingViews, NewFindingView(f))
	}
	if x.Verdict.State == trace.StateUnverified {
		own := map[trace.EffectRef]bool{}
		for _, f := range in.Run.Effects {
			own[f.Ref()] = true
		}
		for _, f := range in.Orphans {
			if !own[f.Ref()] && len(x.NearbyOrphans) < MaxNearbyOrphans {
				x.NearbyOrphans = append(x.NearbyOrphans, f)
			}
		}
	}
	return x
}

// NearbyOrphanWindow is the time window whose orphan effects an execution
// lists, and how many to read (some may be its own): none unless it is
// unverified, as they may be what it caused.
func NearbyOrphanWindow(run trace.Run, findings []trace.Finding) (from, to time.Time, limit int) {
	// A critical finding makes the run critical whatever its effects
	// (trace.Judge), so they need no placing.
	if trace.CriticalCount(findings) > 0 || trace.Judge(run, findings).State != trace.StateUnverified {
		return time.Time{}, time.Time{}, 0
	}
	from, to = runWindow(run)
	return from, to, MaxNearbyOrphans + len(run.Effects)
}

// runWindow is the execution's start to its end, or to its last known time
// while it has none.
func runWindow(r trace.Run) (from, to time.Time) {
	from, to = r.Execution.StartedAt, r.Execution.EndedAt
	widen := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if from.IsZero() || t.Before(from) {
			from = t
		}
		if to.IsZero() || t.After(to) {
			to = t
		}
	}
	for _, s := range r.Steps {
		for _, a := range s.Attempts {
			widen(a.StartedAt)
			widen(a.EndedAt)
		}
	}
	return from, to
}

// Page is the execution page's model with its timeline view; zoom is the
// timeline's range (the zero range: all of it). now is set for a live
// re-render: running bars grow to it and a silence shows.
func (x Execution) Page(zoom TimeRange, now time.Time) ExecutionView {
	marks := NewIncidentMarks(x.Incidents)
	v := ExecutionView{
		Execution: x.Summary,
		Incidents: x.Incidents,
		Timeline: NewTimeline(TimelineInput{Run: x.Run, Gaps: x.Gaps, States: x.States, Findings: x.Findings, Range: zoom,
			Now: now, SilenceAfter: x.silenceAfter, Marks: marks, Index: x.index}),
		Gaps: x.Gaps,
		View: ViewTimeline,
	}
	v.Audit = NewAuditView(AuditInput{Run: x.Run, Verdict: x.Verdict, Findings: x.Findings, NearbyOrphans: x.NearbyOrphans})
	if x.Run.Execution.Status == trace.StatusRunning {
		v.LiveURL = LiveExecutionURL(x.Run.Execution.ID)
	}
	// A copy: what follows rewrites the views it shows.
	v.Findings = slices.Clone(x.findingViews)
	// The first answer is bounded (timeline_plan.go): what it shows links
	// to the timeline's ids it holds, and to the pages of the others.
	id := x.Run.Execution.ID
	v.FindingGroups = boundFindings(id, GroupFindings(v.Findings))
	v.IncidentsShown = firstIncidentsView(id, x.Incidents)
	if rendered := renderedIDs(v.Timeline); rendered != nil {
		t := newLinkTargets(x.Run, rendered)
		for i := range v.FindingGroups {
			for j, f := range v.FindingGroups[i].Shown {
				v.FindingGroups[i].Shown[j] = t.finding(f)
			}
		}
		shown := make([]Incident, len(v.IncidentsShown.Shown))
		for i, in := range v.IncidentsShown.Shown {
			shown[i] = t.incident(in)
		}
		v.IncidentsShown.Shown = shown
		v.Audit.Unverified, v.Audit.Unattributed = t.links(v.Audit.Unverified), t.links(v.Audit.Unattributed)
	}
	return v
}

// stepEffects are the run's effects by step, from the model's index when
// it has one (a model not built by NewExecution has none).
func (x Execution) stepEffects() map[string][]trace.Effect {
	if x.index == nil {
		return x.Run.StepEffects()
	}
	return x.index.StepEffects
}

// StepTable is the execution's step table, sorted by sort and dir.
func (x Execution) StepTable(sort, dir string) StepTable {
	return NewStepTable(StepTableInput{Run: x.Run, Findings: x.Findings, Sort: sort, Dir: dir})
}

// Attempt is the detail of attempt n of step stepID; false when the
// execution has no such attempt.
func (x Execution) Attempt(stepID string, n int) (AttemptView, bool) {
	for _, st := range x.Run.Steps {
		if st.ID != stepID {
			continue
		}
		for _, a := range st.Attempts {
			if a.Number == n {
				marks := NewIncidentMarks(x.Incidents)
				return AttemptView{ExecutionID: x.Run.Execution.ID, Step: st, Attempt: a, Outcome: x.Run.Outcome(a),
					Effects: x.stepEffects()[st.ID], HTTPCalls: HTTPCalls(x.Run, a),
					Culprit: marks.Culprit(st.ID, a.Number), EffectLabels: marks.EffectLabels}, true
			}
		}
	}
	return AttemptView{}, false
}

// Effect is the detail of the execution's effect ref, without the message
// kept for it (the caller looks that up); false when it is not one of
// the execution's effects.
func (x Execution) Effect(ref trace.EffectRef) (EffectView, bool) {
	for _, f := range x.Run.OwnEffects() {
		if f.Ref() != ref {
			continue
		}
		v := EffectView{ExecutionID: x.Run.Execution.ID, Effect: f, State: x.States[ref]}
		v.Place, v.CausedBy = EffectPlace(x.Incidents, ref)
		for stepID, es := range x.stepEffects() {
			for _, e := range es {
				if e.Ref() == ref {
					v.StepID, v.Siblings = stepID, len(es)
				}
			}
		}
		return v, true
	}
	return EffectView{}, false
}

// LiveExecutionURL is the WebSocket that pushes a running execution's
// page fragments as they change.
func LiveExecutionURL(id string) string {
	return "/api/v1/live?" + url.Values{"view": {"execution"}, "execution_id": {id}}.Encode()
}
