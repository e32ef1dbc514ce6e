package trace

import (
	"encoding/json"
	"strconv"
	"time"
)

// EventType names what an ingest event describes.
type EventType string

const (
	EventExecution EventType = "execution"
	EventAttempt   EventType = "attempt"
	EventEffect    EventType = "effect"
	EventSpan      EventType = "span"
)

// Event is one validated ingest event. Exactly one of Execution, Attempt,
// Effect and Span is set, holding only the fields the event carried.
type Event struct {
	ID        string
	Type      EventType
	Execution *Execution
	Attempt   *Attempt
	Effect    *Effect
	Span      *Span
	// Body is the event as stored in the raw log: canonical JSON (sorted
	// keys) with its id, so an export re-imports to the same id.
	Body json.RawMessage
}

// Entity identifies what the event describes; the events of one entity are
// folded together into its materialised state.
func (e Event) Entity() string {
	switch e.Type {
	case EventExecution:
		return "x\x00" + e.Execution.ID
	case EventAttempt:
		a := e.Attempt
		if a.Number == 0 && a.SpanID != "" {
			// Identified by its span: its number is derived from the others'.
			return "a\x00" + a.ExecutionID + "\x00" + a.StepID + "\x00span:" + a.TraceID + "/" + a.SpanID
		}
		return "a\x00" + a.ExecutionID + "\x00" + a.StepID + "\x00" + strconv.Itoa(a.Number)
	case EventSpan:
		return "s\x00" + e.Span.TraceID + "\x00" + e.Span.SpanID
	default:
		return "e\x00" + e.Effect.Provider + "\x00" + e.Effect.ID
	}
}

// ExecutionID is the execution the event names, or "".
func (e Event) ExecutionID() string {
	switch e.Type {
	case EventExecution:
		return e.Execution.ID
	case EventAttempt:
		return e.Attempt.ExecutionID
	case EventSpan:
		return e.Span.ExecutionID
	default:
		return e.Effect.ExecutionID
	}
}

// When is the event's own time, the first key of the fold order: the end
// when it carries one, else its start.
func (e Event) When() time.Time {
	switch e.Type {
	case EventExecution:
		return firstSet(e.Execution.EndedAt, e.Execution.StartedAt)
	case EventAttempt:
		return firstSet(e.Attempt.EndedAt, e.Attempt.StartedAt)
	case EventSpan:
		return firstSet(e.Span.EndedAt, e.Span.StartedAt)
	default:
		return e.Effect.At
	}
}

func firstSet(ts ...time.Time) time.Time {
	for _, t := range ts {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}
