package trace

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Stray HTTP spans (docs/audit.md, "Evidence", the inferred kind): some
// frameworks lose the trace context between a tool call and the HTTP
// request it makes (LangGraph without a root span of the program's own,
// Mastra's OtelExporter), so the request's HTTP client span starts a trace
// of its own and the effect it caused carries that trace. Such a trace is
// no execution. Its effect joins, marked inferred, the execution whose
// tool attempt was in flight at that moment with arguments naming what the
// effect names (the tool's "to" is the email's recipient); with no such
// attempt, or several in different executions, it stays an orphan.

// StrayTraces are the traces of spans that hold nothing but lone HTTP
// client spans: no parent, no tool attempt, no other span, and no
// execution named after them by an execution event. traced reports
// whether a trace has attempts; named whether an execution event names an
// execution with the trace's id.
func StrayTraces(spans []Span, traced, named func(traceID string) bool) map[string]bool {
	stray := map[string]bool{}
	other := map[string]bool{}
	for _, s := range spans {
		if s.Role == RoleHTTP && s.ParentSpanID == "" {
			stray[s.TraceID] = true
		} else {
			other[s.TraceID] = true
		}
	}
	for t := range stray {
		if other[t] || traced(t) || named(t) {
			delete(stray, t)
		}
	}
	return stray
}

// Placeholder reports whether the execution holds nothing an execution
// event sent: a row made because something named its id.
func (x Execution) Placeholder() bool {
	return x.Name == "" && x.StartedAt.IsZero() && x.EndedAt.IsZero() && x.IdempotencyKey == "" && len(x.Labels) == 0 &&
		(x.Status == "" || x.Status == StatusRunning)
}

// InferAttempt finds the tool attempt of r that an effect of a stray trace
// joins: a possibly writing attempt in flight when the effect happened
// (started at or before it, and not ended before it) whose arguments
// name the effect's target. It gives the reason, for the effect's detail,
// and false when no attempt or more than one step qualifies.
func InferAttempt(e Effect, r Run) (Attempt, string, bool) {
	if e.Target == "" || e.At.IsZero() {
		return Attempt{}, "", false
	}
	var found Attempt
	steps := 0
	for _, s := range r.Steps {
		if !s.Class().SideEffecting() {
			continue
		}
		var best Attempt
		ok := false
		for _, a := range s.Attempts {
			if !inFlight(a, e.At) || !argsName(a.Args, e.Target) {
				continue
			}
			if !ok || a.StartedAt.After(best.StartedAt) {
				best, ok = a, true
			}
		}
		if ok {
			steps++
			found = best
		}
	}
	if steps != 1 {
		return Attempt{}, "", false
	}
	tool := cmp.Or(found.Tool, found.StepID)
	return found, fmt.Sprintf("inferred: the request's HTTP span left the trace (a lone HTTP root span); %s attempt %d was in flight at that moment with arguments naming %s",
		tool, found.Number, e.Target), true
}

// inFlight reports whether the attempt was running at t.
func inFlight(a Attempt, t time.Time) bool {
	if a.StartedAt.IsZero() || a.StartedAt.After(t) {
		return false
	}
	return a.EndedAt.IsZero() || !a.EndedAt.Before(t)
}

// argsName reports whether some string in the arguments is the target, or
// one of the targets of a list ("a@x, b@y"), case-insensitively.
func argsName(args json.RawMessage, target string) bool {
	if len(args) == 0 {
		return false
	}
	var v any
	if json.Unmarshal(args, &v) != nil {
		return false
	}
	targets := map[string]bool{}
	for _, t := range strings.Split(target, ",") {
		if t = strings.ToLower(strings.TrimSpace(t)); t != "" {
			targets[t] = true
		}
	}
	var walk func(v any, depth int) bool
	walk = func(v any, depth int) bool {
		if depth > 32 {
			return false
		}
		switch x := v.(type) {
		case string:
			return targets[strings.ToLower(strings.TrimSpace(x))]
		case []any:
			for _, y := range x {
				if walk(y, depth+1) {
					return true
				}
			}
		case map[string]any:
			for _, y := range x {
				if walk(y, depth+1) {
					return true
				}
			}
		}
		return false
	}
	return walk(v, 0)
}
