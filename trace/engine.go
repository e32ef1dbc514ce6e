package trace

import (
	"cmp"
	"slices"
	"time"
)

// EngineTemporal marks the attempts of a Temporal activity (RecognisedBy),
// from its workflow's history or its interceptor's RunActivity spans.
const EngineTemporal = "temporal"

// A workflow engine's history and its interceptor's spans tell of one
// activity's attempts differently. The history numbers them but records
// only the last one whole (its start, its worker, its end): the one before
// it only by its failure, the earlier ones only by count. A RunActivity
// span is an attempt with its start, end and worker, but no number, and
// the span of an attempt whose worker was killed is never exported at all:
// only the HTTP calls it made may be. So the two are merged where a run is
// put together from what is stored, the same whichever came first:
//
//   - MergeEngineAttempts, for one step: a span's attempt whose start is a
//     history attempt's start is that attempt; the others fill, in order of
//     start, the history's attempts known by no start, lowest number
//     first; any left over follow the history's last number.
//   - FillLostEngineAttempts, for the run: an HTTP call whose parent span
//     never arrived, in the trace of the run's one engine step, made before
//     that step's first started attempt, is an attempt whose span is that
//     missing parent: it fills the step's earliest attempt known by no
//     start, or, when no history gave one, is an attempt of its own, before
//     the others. It has the call's start, no end and no outcome (its
//     worker never reported one; the history's failure stays its error),
//     so it is lost, and a long wait after it is a crash gap.
//
// A merged attempt keeps the history's number, outcome, error, arguments
// and result, and takes the span's start, end, worker, trace and span ids
// where the history has none: the history is Temporal's own word on how an
// attempt ended, the span the worker's on when and where it ran.

// MergeEngineAttempts merges a step's attempts from an engine's history
// (recognised by it, no span) with those from its spans (recognised by it,
// a span id), as the comment above says. Attempts holds the step's
// attempts by number; the result does too, and is attempts itself when
// there is nothing to merge.
func MergeEngineAttempts(attempts []Attempt) []Attempt {
	var history, spans []int
	for i, a := range attempts {
		switch {
		case a.RecognisedBy != EngineTemporal:
			return attempts // a step that is not only the engine's is left as it is
		case a.SpanID == "":
			history = append(history, i)
		default:
			spans = append(spans, i)
		}
	}
	if len(history) == 0 || len(spans) == 0 {
		return attempts
	}
	slices.SortStableFunc(spans, func(i, j int) int {
		return cmp.Or(attempts[i].StartedAt.Compare(attempts[j].StartedAt), cmp.Compare(attempts[i].SpanID, attempts[j].SpanID))
	})
	merged := make([]Attempt, 0, len(attempts))
	for _, i := range history {
		merged = append(merged, attempts[i])
	}
	filled := make([]bool, len(merged))
	var left []Attempt
	for _, i := range spans {
		s := attempts[i]
		at := slices.IndexFunc(merged, func(h Attempt) bool { return !h.StartedAt.IsZero() && h.StartedAt.Equal(s.StartedAt) })
		if at >= 0 && !filled[at] {
			merged[at], filled[at] = fillFromSpan(merged[at], s), true
			continue
		}
		left = append(left, s)
	}
	for _, s := range left {
		at := -1
		for k, h := range merged {
			if !filled[k] && h.StartedAt.IsZero() {
				at = k
				break
			}
		}
		if at < 0 {
			s.Number = merged[len(merged)-1].Number + 1
			merged, filled = append(merged, s), append(filled, true)
			continue
		}
		merged[at], filled[at] = fillFromSpan(merged[at], s), true
	}
	slices.SortFunc(merged, func(a, b Attempt) int { return cmp.Compare(a.Number, b.Number) })
	return merged
}

// fillFromSpan is the history's attempt h with what the span's attempt s
// knows and h does not.
func fillFromSpan(h, s Attempt) Attempt {
	if h.StartedAt.IsZero() {
		h.StartedAt = s.StartedAt
	}
	if h.EndedAt.IsZero() {
		h.EndedAt = s.EndedAt
	}
	if h.Effect == "" || h.Effect == EffectUnknown {
		h.Effect = cmp.Or(s.Effect, h.Effect) // a class beats unknown, as the fold has it
	}
	h.Worker = cmp.Or(h.Worker, s.Worker)
	h.TraceID, h.SpanID = cmp.Or(h.TraceID, s.TraceID), s.SpanID
	if h.Outcome == "" {
		h.Outcome, h.Error = s.Outcome, cmp.Or(h.Error, s.Error)
	}
	if len(h.Args) == 0 {
		h.Args = s.Args
	}
	if len(h.Result) == 0 {
		h.Result = s.Result
	}
	h.IdempotencyKey = cmp.Or(h.IdempotencyKey, s.IdempotencyKey)
	h.Conflicts = append(slices.Clip(h.Conflicts), s.Conflicts...)
	return h
}

// FillLostEngineAttempts gives the run's one engine step the attempts only
// the HTTP calls of a killed worker tell of, as the comment above says.
// It changes the step's attempts only (a new slice), never what they were
// read from.
func (r *Run) FillLostEngineAttempts() {
	if len(r.Spans) == 0 {
		return
	}
	step := soleEngineStep(r.Steps)
	if step < 0 {
		return
	}
	attempts := r.Steps[step].Attempts
	traceID, first := "", Attempt{}
	known := map[string]bool{}
	fromHistory := false
	for _, a := range attempts {
		traceID = cmp.Or(traceID, a.TraceID)
		fromHistory = fromHistory || a.SpanID == ""
		if a.SpanID != "" {
			known[a.SpanID] = true
		}
		if !a.StartedAt.IsZero() && (first.StartedAt.IsZero() || a.StartedAt.Before(first.StartedAt)) {
			first = a
		}
	}
	if traceID == "" || first.StartedAt.IsZero() {
		return
	}
	lost := lostEngineCalls(r.Spans, traceID, known, first.StartedAt)
	if len(lost) == 0 {
		return
	}
	out := slices.Clone(attempts)
	var extra []Attempt
	for _, call := range lost {
		at := slices.IndexFunc(out, func(a Attempt) bool { return a.StartedAt.IsZero() && a.SpanID == "" })
		if at < 0 {
			if fromHistory {
				continue // the history numbered the attempts, and has none this call could be
			}
			extra = append(extra, Attempt{ExecutionID: first.ExecutionID, StepID: first.StepID, Tool: first.Tool, Effect: first.Effect,
				Provider: first.Provider, Args: first.Args, RecognisedBy: EngineTemporal, TraceID: traceID, SpanID: call.ParentSpanID,
				StartedAt: call.StartedAt})
			continue
		}
		// The worker never exported its end: however the engine declared
		// the attempt over (a heartbeat timeout), it never finished where
		// it ran, and is lost once a later one runs. The engine's failure
		// stays its error.
		out[at].StartedAt, out[at].TraceID, out[at].SpanID = call.StartedAt, cmp.Or(out[at].TraceID, traceID), call.ParentSpanID
		out[at].Outcome, out[at].EndedAt = "", time.Time{}
	}
	if len(extra) > 0 {
		// Attempts no history numbered: all of the step's are its spans',
		// numbered by start as span attempts are (NumberSpanAttempts).
		out = append(extra, out...)
		slices.SortStableFunc(out, func(a, b Attempt) int { return a.StartedAt.Compare(b.StartedAt) })
		for i := range out {
			out[i].Number = i + 1
		}
	}
	r.Steps[step].Attempts = out
}

// soleEngineStep is the index of the run's one step an engine's history
// or spans made, -1 when there is none or more than one (then which made
// a call is not known).
func soleEngineStep(steps []Step) int {
	step := -1
	for i, s := range steps {
		if len(s.Attempts) > 0 && s.Attempts[0].RecognisedBy == EngineTemporal {
			if step >= 0 {
				return -1
			}
			step = i
		}
	}
	return step
}

// lostEngineCalls are the HTTP calls in traceID, started before the
// step's first known attempt, whose parent span is neither stored nor an
// attempt's: one per missing parent, by start.
func lostEngineCalls(spans []Span, traceID string, known map[string]bool, before time.Time) []Span {
	present := map[string]bool{}
	for _, s := range spans {
		present[s.SpanID] = true
	}
	var lost []Span
	seen := map[string]bool{}
	for _, s := range spans {
		if s.Role != RoleHTTP || s.TraceID != traceID || s.ParentSpanID == "" || present[s.ParentSpanID] || known[s.ParentSpanID] ||
			seen[s.ParentSpanID] || s.StartedAt.IsZero() || !s.StartedAt.Before(before) {
			continue
		}
		seen[s.ParentSpanID] = true
		lost = append(lost, s)
	}
	slices.SortFunc(lost, func(a, b Span) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), cmp.Compare(a.ParentSpanID, b.ParentSpanID))
	})
	return lost
}

// EngineEvents are what a workflow engine's history tells of a run beside
// its activities: signals, timers, markers, cancel requests, each a
// context span at the run's top (no parent), and the client's start of the
// workflow. Only a run with an engine's attempts has them; an agent's
// context spans (its chains and sub-agents) stay in the trace's tree.
func (r Run) EngineEvents() []Span {
	engine := false
	for _, s := range r.Steps {
		if len(s.Attempts) > 0 && s.Attempts[0].RecognisedBy == EngineTemporal {
			engine = true
			break
		}
	}
	if !engine {
		return nil
	}
	var out []Span
	for _, s := range r.Spans {
		if s.Role == RoleContext && s.ParentSpanID == "" && !s.StartedAt.IsZero() {
			out = append(out, s)
		}
	}
	sortSpans(out)
	return out
}
