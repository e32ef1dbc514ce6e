package views

import (
	"fmt"
	"strings"

	"github.com/oncetrace/oncetrace/trace"
)

// HTTPCalls are the HTTP client calls an attempt made, for its detail: the
// run's HTTP spans below the attempt's span, by start time.
func HTTPCalls(run trace.Run, a trace.Attempt) []trace.Span {
	if a.SpanID == "" {
		return nil
	}
	return run.HTTPCalls()[a.SpanID]
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
