package trace

import (
	"sort"
	"time"
)

// The merge rules (docs/api.md, "Merge rules") make stored state independent
// of arrival order: the events of one entity are sorted by their own time and
// id, then folded so that a field once set is kept, a terminal value beats a
// non-terminal one, and the earliest terminal value wins. A disagreeing
// terminal value is kept as a Conflict, never dropped silently.

// SortForFold orders events by (When, ID), the order every fold uses.
func SortForFold(events []Event) {
	sort.SliceStable(events, func(i, j int) bool {
		wi, wj := events[i].When(), events[j].When()
		if !wi.Equal(wj) {
			return wi.Before(wj)
		}
		return events[i].ID < events[j].ID
	})
}

// FoldExecution merges the execution events of one execution.
func FoldExecution(events []Event) Execution {
	SortForFold(events)
	var x Execution
	nameWithStatus := false
	for _, ev := range events {
		e := ev.Execution
		keepString(&x.ID, e.ID)
		// The best-ranked name wins; between names of one rank, the one of
		// an event that carries a status (the root span's, not a sub-agent's).
		if r, kept := nameRank(e.NameSource), nameRank(x.NameSource); e.Name != "" &&
			(x.Name == "" || r < kept || (r == kept && e.Status != "" && !nameWithStatus)) {
			x.Name, x.NameSource, nameWithStatus = e.Name, e.NameSource, e.Status != ""
		}
		keepString(&x.IdempotencyKey, e.IdempotencyKey)
		keepTime(&x.StartedAt, e.StartedAt)
		switch {
		case e.Status == "":
		case x.Status == "" || (x.Status == StatusRunning && e.Status.Terminal()):
			x.Status = e.Status
			if !e.EndedAt.IsZero() {
				x.EndedAt = e.EndedAt // the end belongs to the status that won
			}
		case x.Status.Terminal() && e.Status.Terminal() && e.Status != x.Status:
			x.Conflicts = append(x.Conflicts, Conflict{Field: "status", Kept: string(x.Status), Other: string(e.Status), EventID: ev.ID})
		}
		keepTime(&x.EndedAt, e.EndedAt)
		for k, v := range e.Labels {
			if _, ok := x.Labels[k]; !ok {
				if x.Labels == nil {
					x.Labels = map[string]string{}
				}
				x.Labels[k] = v
			}
		}
	}
	if x.Status == "" {
		x.Status = StatusRunning
	}
	return x
}

// FoldAttempt merges the events of one attempt.
func FoldAttempt(events []Event) Attempt {
	SortForFold(events)
	var a Attempt
	for _, ev := range events {
		e := ev.Attempt
		keepString(&a.ExecutionID, e.ExecutionID)
		keepString(&a.StepID, e.StepID)
		if a.Number == 0 {
			a.Number = e.Number
		}
		keepString(&a.Tool, e.Tool)
		// A class beats unknown, which says only that nobody classified
		// the tool: a client's span of an MCP call says nothing of its
		// class, the proxy beside it read it off the server's annotations.
		if a.Effect == "" || (a.Effect == EffectUnknown && e.Effect != "") {
			a.Effect = e.Effect
		}
		keepString(&a.Provider, e.Provider)
		keepString(&a.IdempotencyKey, e.IdempotencyKey)
		keepString(&a.Worker, e.Worker)
		keepString(&a.TraceID, e.TraceID)
		keepString(&a.SpanID, e.SpanID)
		keepString(&a.RecognisedBy, e.RecognisedBy)
		keepTime(&a.StartedAt, e.StartedAt)
		if len(a.Args) == 0 {
			a.Args = e.Args
		}
		switch {
		case e.Outcome == "":
		case a.Outcome == "":
			// The first terminal event decides everything about the end.
			a.Outcome = e.Outcome
			a.EndedAt = e.EndedAt
			a.Deduplicated = e.Deduplicated
			a.Result = e.Result
			a.Error = e.Error
		case e.Outcome != a.Outcome:
			a.Conflicts = append(a.Conflicts, Conflict{Field: "outcome", Kept: string(a.Outcome), Other: string(e.Outcome), EventID: ev.ID})
		}
	}
	return a
}

// FoldEffect merges the events of one effect.
func FoldEffect(events []Event) Effect {
	SortForFold(events)
	var f Effect
	for _, ev := range events {
		e := ev.Effect
		keepString(&f.Provider, e.Provider)
		keepString(&f.ID, e.ID)
		keepString(&f.IdempotencyKey, e.IdempotencyKey)
		keepString(&f.ExecutionID, e.ExecutionID)
		keepString(&f.StepID, e.StepID)
		keepString(&f.Target, e.Target)
		keepString(&f.TraceID, e.TraceID)
		keepString(&f.SpanID, e.SpanID)
		keepString(&f.Fingerprint, e.Fingerprint)
		keepString(&f.Summary, e.Summary)
		keepTime(&f.At, e.At)
	}
	return f
}

func keepString(dst *string, v string) {
	if *dst == "" {
		*dst = v
	}
}

func keepTime(dst *time.Time, v time.Time) {
	if dst.IsZero() {
		*dst = v
	}
}
