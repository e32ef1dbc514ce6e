package views

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/oncetrace/oncetrace/trace"
)

// spanIndex finds the HTTP client spans a tool attempt made: the spans
// below the attempt's span, through context spans, down to (not into) a
// nested tool attempt. It is trace's walk (spanTree.httpCalls), which trace
// does not export; it only decides what the page lists, never what the audit
// concludes.
type spanIndex struct {
	children map[string][]trace.Span // parent span id -> the spans under it
	tools    map[string]bool         // span ids of tool attempts
}

// maxSpanWalk bounds the walk, so a cycle in hostile input ends.
const maxSpanWalk = 1024

func newSpanIndex(run trace.Run) spanIndex {
	ix := spanIndex{children: map[string][]trace.Span{}, tools: map[string]bool{}}
	for _, s := range run.Steps {
		for _, a := range s.Attempts {
			if a.SpanID != "" {
				ix.tools[a.SpanID] = true
			}
		}
	}
	for _, s := range run.Spans {
		if s.ParentSpanID != "" && s.ParentSpanID != s.SpanID {
			ix.children[s.ParentSpanID] = append(ix.children[s.ParentSpanID], s)
		}
	}
	return ix
}

// httpCalls are the HTTP client spans under spanID, by start time.
func (ix spanIndex) httpCalls(spanID string) []trace.Span {
	if spanID == "" || len(ix.children) == 0 {
		return nil
	}
	var out []trace.Span
	stack := []string{spanID}
	seen := map[string]bool{}
	for len(stack) > 0 && len(seen) < maxSpanWalk {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[cur] {
			continue
		}
		seen[cur] = true
		for _, c := range ix.children[cur] {
			if ix.tools[c.SpanID] {
				continue
			}
			if c.Role == trace.RoleHTTP {
				out = append(out, c)
			}
			stack = append(stack, c.SpanID)
		}
	}
	sortByStart(out)
	return out
}

func sortByStart(ss []trace.Span) {
	slices.SortStableFunc(ss, func(a, b trace.Span) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), cmp.Compare(a.SpanID, b.SpanID))
	})
}

// HTTPCalls are the HTTP client calls an attempt made, for its detail: the
// run's HTTP spans below the attempt's span, by start time.
func HTTPCalls(run trace.Run, a trace.Attempt) []trace.Span {
	return newSpanIndex(run).httpCalls(a.SpanID)
}

// HTTPCallLabel is one HTTP call as a line: "POST https://… → 200, 120 ms".
func HTTPCallLabel(s trace.Span) string {
	var b strings.Builder
	b.WriteString(orDash(s.HTTPMethod))
	if s.HTTPURL != "" {
		b.WriteString(" " + s.HTTPURL)
	}
	switch {
	case s.HTTPStatus != 0:
		fmt.Fprintf(&b, " → %d", s.HTTPStatus)
	case s.Error != "":
		b.WriteString(" → ✗ " + s.Error)
	case !s.Ended():
		b.WriteString(" → no response yet")
	}
	if d := spanDuration(s); d != "" {
		b.WriteString(", " + d)
	}
	return b.String()
}

func spanDuration(s trace.Span) string {
	if s.StartedAt.IsZero() || s.EndedAt.IsZero() {
		return ""
	}
	return Duration(s.EndedAt.Sub(s.StartedAt))
}

// ModelLabel is a model call as its bar says it: "gpt-4o · 120 in / 18
// out", "✗ gpt-4o · error", or "… gpt-4o" while it runs.
func ModelLabel(s trace.Span) string {
	name := modelName(s)
	switch {
	case s.Error != "":
		return "✗ " + name + " · error"
	case !s.Ended():
		return "… " + name
	case s.InputTokens == 0 && s.OutputTokens == 0:
		return name
	}
	return fmt.Sprintf("%s · %d in / %d out", name, s.InputTokens, s.OutputTokens)
}

func modelName(s trace.Span) string {
	switch {
	case s.Model != "":
		return s.Model
	case s.Name != "":
		return s.Name
	}
	return "model"
}

// modelTitle is a model call's hover text: everything the bar may not
// have room for.
func modelTitle(s trace.Span) string {
	parts := []string{"model call " + modelName(s)}
	if s.Name != "" && s.Name != s.Model {
		parts[0] += " (" + s.Name + ")"
	}
	parts = append(parts, fmt.Sprintf("%d input tokens, %d output tokens", s.InputTokens, s.OutputTokens))
	if d := spanDuration(s); d != "" {
		parts = append(parts, d)
	} else if !s.Ended() {
		parts = append(parts, "no end yet")
	}
	if s.Error != "" {
		parts = append(parts, "error: "+s.Error)
	}
	if !s.StartedAt.IsZero() {
		parts = append(parts, "at "+UTC(s.StartedAt))
	}
	return strings.Join(parts, ", ")
}

// ClassLabel is a step's effect class as a reader needs it: "unknown" says
// what it means to the audit.
func ClassLabel(c trace.EffectClass) string {
	if c == trace.EffectUnknown {
		return "unknown (unclassified tool: treated as possibly writing)"
	}
	if c == "" {
		return "no class"
	}
	return string(c)
}
