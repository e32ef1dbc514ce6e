package trace

import (
	"sort"
	"time"
)

// SpanRole says what an OpenTelemetry span that is neither the execution
// nor a tool call is to the audit.
type SpanRole string

const (
	// RoleModel is a model call: drawn in its own lane, never a step.
	RoleModel SpanRole = "model"
	// RoleHTTP is an HTTP client call: folded into the tool attempt above it.
	RoleHTTP SpanRole = "http"
	// RoleContext is anything else: kept so that an effect's span can be
	// traced up to its tool call through it.
	RoleContext SpanRole = "context"
)

// SpanRoles lists every role a span event may carry.
var SpanRoles = []SpanRole{RoleModel, RoleHTTP, RoleContext}

// Span is an OpenTelemetry span kept beside the steps: a model call, an
// HTTP client call or a context span. Spans link effects to tool calls
// through their parents, and model calls have a lane of their own.
type Span struct {
	ExecutionID  string    `json:"execution_id"`
	TraceID      string    `json:"trace_id"`
	SpanID       string    `json:"span_id"`
	ParentSpanID string    `json:"parent_span_id,omitempty"`
	Role         SpanRole  `json:"role"`
	Name         string    `json:"name,omitempty"`
	StartedAt    time.Time `json:"started_at,omitzero"`
	EndedAt      time.Time `json:"ended_at,omitzero"`
	Error        string    `json:"error,omitempty"` // set when the span ended with an error status
	Model        string    `json:"model,omitempty"`
	InputTokens  int64     `json:"input_tokens,omitempty"`
	OutputTokens int64     `json:"output_tokens,omitempty"`
	HTTPMethod   string    `json:"http_method,omitempty"`
	HTTPURL      string    `json:"http_url,omitempty"`
	HTTPStatus   int       `json:"http_status,omitempty"`
	// IdempotencyKey is the Idempotency-Key request header an HTTP client
	// span recorded; it is the key its tool attempt sent.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// Ended reports whether the span carries its end.
func (s Span) Ended() bool { return !s.EndedAt.IsZero() }

// FoldSpan merges the events of one span: a field once set is kept, and the
// end (with its status) comes from the first event that carries one.
func FoldSpan(events []Event) Span {
	SortForFold(events)
	var out Span
	ended := false
	for _, ev := range events {
		s := ev.Span
		keepString(&out.ExecutionID, s.ExecutionID)
		keepString(&out.TraceID, s.TraceID)
		keepString(&out.SpanID, s.SpanID)
		keepString(&out.ParentSpanID, s.ParentSpanID)
		keepString((*string)(&out.Role), string(s.Role))
		keepString(&out.Name, s.Name)
		keepTime(&out.StartedAt, s.StartedAt)
		keepString(&out.Model, s.Model)
		keepString(&out.HTTPMethod, s.HTTPMethod)
		keepString(&out.HTTPURL, s.HTTPURL)
		keepString(&out.IdempotencyKey, s.IdempotencyKey)
		if !ended && s.Ended() {
			ended = true
			out.EndedAt, out.Error = s.EndedAt, s.Error
			out.InputTokens, out.OutputTokens, out.HTTPStatus = s.InputTokens, s.OutputTokens, s.HTTPStatus
		}
	}
	return out
}

// ModelCalls are the run's model-call spans, by start time.
func (r Run) ModelCalls() []Span {
	var out []Span
	for _, s := range r.Spans {
		if s.Role == RoleModel {
			out = append(out, s)
		}
	}
	sortSpans(out)
	return out
}

func sortSpans(ss []Span) {
	sort.SliceStable(ss, func(i, j int) bool {
		if !ss[i].StartedAt.Equal(ss[j].StartedAt) {
			return ss[i].StartedAt.Before(ss[j].StartedAt)
		}
		return ss[i].SpanID < ss[j].SpanID
	})
}

// spanTree answers, for a span of the run's traces, which tool attempt is
// its nearest tool-call ancestor (itself included).
type spanTree struct {
	attempts map[string]Attempt // span id -> the tool attempt made from it
	parents  map[string]string  // span id -> parent span id, for the other spans
	children map[string][]Span  // parent span id -> the non-attempt spans under it
}

// maxSpanDepth bounds a walk up the tree, so a cycle in hostile input ends.
const maxSpanDepth = 256

func newSpanTree(r Run) spanTree {
	t := spanTree{attempts: map[string]Attempt{}, parents: map[string]string{}, children: map[string][]Span{}}
	for _, s := range r.Steps {
		for _, a := range s.Attempts {
			if a.SpanID != "" {
				t.attempts[a.SpanID] = a
			}
		}
	}
	for _, s := range r.Spans {
		t.parents[s.SpanID] = s.ParentSpanID
		if s.ParentSpanID != "" {
			t.children[s.ParentSpanID] = append(t.children[s.ParentSpanID], s)
		}
	}
	return t
}

// toolAttempt walks up from spanID to the nearest span that is a tool
// attempt. It fails when the walk reaches a span that never arrived.
func (t spanTree) toolAttempt(spanID string) (Attempt, bool) {
	for cur, depth := spanID, 0; cur != "" && depth < maxSpanDepth; depth++ {
		if a, ok := t.attempts[cur]; ok {
			return a, true
		}
		parent, known := t.parents[cur]
		if !known {
			return Attempt{}, false
		}
		cur = parent
	}
	return Attempt{}, false
}

// httpCalls returns the HTTP client spans below an attempt's span, down to
// (not into) any nested tool attempt, by start time.
func (t spanTree) httpCalls(spanID string) []Span {
	var out []Span
	stack := []string{spanID}
	seen := map[string]bool{}
	for len(stack) > 0 && len(seen) < 4*maxSpanDepth {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[cur] {
			continue
		}
		seen[cur] = true
		for _, c := range t.children[cur] {
			if _, nested := t.attempts[c.SpanID]; nested {
				continue
			}
			if c.Role == RoleHTTP {
				out = append(out, c)
			}
			stack = append(stack, c.SpanID)
		}
	}
	sortSpans(out)
	return out
}

// FoldHTTPCalls folds the HTTP client spans below each tool attempt into
// it: an attempt that names no idempotency key takes the one its HTTP
// call sent (the Idempotency-Key request header the HTTP instrumentation
// recorded). The store and World.Runs call it on every run they build, so
// the audit, the pages and the API all see the same attempts.
func (r *Run) FoldHTTPCalls() {
	if len(r.Spans) == 0 {
		return
	}
	tree := newSpanTree(*r)
	for i := range r.Steps {
		for j := range r.Steps[i].Attempts {
			a := &r.Steps[i].Attempts[j]
			if a.IdempotencyKey != "" || a.SpanID == "" {
				continue
			}
			for _, call := range tree.httpCalls(a.SpanID) {
				if call.IdempotencyKey != "" {
					a.IdempotencyKey = call.IdempotencyKey
					break
				}
			}
		}
	}
}

// HTTPCalls maps each tool attempt's span id to the HTTP client spans it
// made (below its span, through context spans, not into a nested tool
// attempt), by start time: what the timeline draws inside its bar and its
// detail lists.
func (r Run) HTTPCalls() map[string][]Span {
	out := map[string][]Span{}
	if len(r.Spans) == 0 {
		return out
	}
	tree := newSpanTree(r)
	for spanID := range tree.attempts {
		if calls := tree.httpCalls(spanID); len(calls) > 0 {
			out[spanID] = calls
		}
	}
	return out
}
