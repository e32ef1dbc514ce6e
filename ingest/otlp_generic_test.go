package ingest_test

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/oncetrace/oncetrace/trace"
)

// TestMapOTLPGenericRule: a framework no entry of the span map names, whose
// attributes plainly say "tool" or name a model and its tokens, is still
// read, by the generic fallback, and its attempts say so (recognised_by).
func TestMapOTLPGenericRule(t *testing.T) {
	args := `{"to":"jordan@acme.dev","subject":"Your June invoice"}`
	// A run as such a framework exports it: an agent span, two calls of one
	// tool with the same arguments (the first timed out), a model call,
	// and the HTTP calls below.
	spans := []testSpan{
		{id: 1, name: "agent billing-agent", end: 900, attrs: kv{"acmeflow.span.type": "agent", "acmeflow.name": "billing-agent"}},
		{id: 2, parent: 1, name: "llm", start: 1, end: 80, attrs: kv{"acmeflow.span.type": "llm", "acmeflow.llm.model": "gpt-4o-mini",
			"acmeflow.usage.input_tokens": 120, "acmeflow.usage.output_tokens": 28}},
		{id: 3, parent: 1, name: "tool", start: 100, end: 1100, status: ptrace.StatusCodeError, message: "The operation was aborted due to timeout",
			attrs: kv{"acmeflow.span.type": "tool", "acmeflow.name": "send_invoice_email", "acmeflow.input": args}},
		{id: 4, parent: 3, name: "POST", kind: ptrace.SpanKindClient, start: 101, end: 1099, attrs: kv{"http.request.method": "POST"}},
		{id: 5, parent: 1, name: "tool", start: 1200, end: 1300,
			attrs: kv{"acmeflow.span.type": "TOOL", "acmeflow.name": "send_invoice_email", "acmeflow.input": `{"subject":"Your June invoice","to":"jordan@acme.dev"}`,
				"acmeflow.output": `{"status":"sent"}`}},
	}
	events := mapSpans(t, nil, spans...)
	first, retry := attemptOf(t, events, 3), attemptOf(t, events, 5)
	if first.StepID != retry.StepID {
		t.Errorf("steps: got %q and %q, want one step (same tool, same arguments)", first.StepID, retry.StepID)
	}
	for _, a := range []*trace.Attempt{first, retry} {
		if a.Tool != "send_invoice_email" || a.RecognisedBy != "generic" || string(a.Args) != `{"subject":"Your June invoice","to":"jordan@acme.dev"}` {
			t.Errorf("attempt %s: got tool %q, recognised by %q, args %s; want send_invoice_email by the generic rule with its arguments",
				a.SpanID, a.Tool, a.RecognisedBy, a.Args)
		}
	}
	if first.Outcome != trace.OutcomeTimeout || retry.Outcome != trace.OutcomeOK || string(retry.Result) != `{"status":"sent"}` {
		t.Errorf("outcomes: got %q then %q (result %s), want timeout then ok with the result", first.Outcome, retry.Outcome, retry.Result)
	}
	if s := spanOf(t, events, 2); s.Role != trace.RoleModel || s.Model != "gpt-4o-mini" || s.InputTokens != 120 || s.OutputTokens != 28 {
		t.Errorf("llm: got %+v, want a model call of gpt-4o-mini, 120 in, 28 out", *s)
	}
	if role := roleOf(events, 4); role != "http" {
		t.Errorf("POST: got %s, want http", role)
	}

	for _, tc := range []struct {
		name  string
		attrs map[string]any
		want  string // role
		tool  string // for an attempt
	}{
		{"a kind attribute, upper case, with a tool name", kv{"traceai.kind": "TOOL", "traceai.tool.name": "lookup", "traceai.tool_call_args": `{"q":1}`}, "attempt", "lookup"},
		{"a span.kind attribute: the namespace is before it", kv{"foo.span.kind": "tool", "foo.tool_name": "lookup"}, "attempt", "lookup"},
		{"a subtype with only an output", kv{"foo.subtype": "tool", "foo.output": "ok"}, "attempt", "t"},
		{"a tool named by its namespace's tool attribute", kv{"bar.type": "tool", "bar.tool": "lookup", "bar.args": `{}`}, "attempt", "lookup"},
		{"a type of tool without a name, input or output there is context", kv{"foo.span.type": "tool", "foo.id": "7"}, "context", ""},
		{"the name in another namespace is context", kv{"foo.span.type": "tool", "bar.name": "lookup"}, "context", ""},
		{"another type is context", kv{"foo.span.type": "tool_call", "foo.name": "lookup"}, "context", ""},
		{"a bare type without a namespace is context", kv{"type": "tool", "name": "lookup"}, "context", ""},
		{"a model and tokens are a model call", kv{"x.model_name": "m", "x.token_count.prompt": 3}, "model", ""},
		{"a model.name and tokens are a model call", kv{"x.model.name": "m", "x.tokens.in": 3}, "model", ""},
		{"a model without tokens is context", kv{"x.model": "m"}, "context", ""},
		{"a model with a token limit only is context", kv{"x.model": "m", "x.max_tokens": 1000}, "context", ""},
		{"tokens without a model are context", kv{"x.input_tokens": 3}, "context", ""},
		{"a span no rule of a known dialect gives a role is tried", kv{"openinference.span.kind": "CHAIN", "x.kind": "tool", "x.name": "n"}, "attempt", "n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := mapSpans(t, nil, testSpan{id: 1, name: "root", end: 100}, testSpan{id: 2, parent: 1, name: "t", start: 1, attrs: tc.attrs})
			if got := roleOf(events, 2); got != tc.want {
				t.Fatalf("role: got %s, want %s", got, tc.want)
			}
			if tc.want == "attempt" {
				if a := attemptOf(t, events, 2); a.Tool != tc.tool || a.RecognisedBy != "generic" {
					t.Errorf("got tool %q by %q, want %q by generic", a.Tool, a.RecognisedBy, tc.tool)
				}
			}
		})
	}

	t.Run("a span a known dialect recognises is not marked", func(t *testing.T) {
		a := attemptOf(t, mapSpans(t, nil, toolSpan(2, kv{"acmeflow.span.type": "tool", "acmeflow.name": "other"})), 2)
		if a.RecognisedBy != "" || a.Tool != "execute_tool send" {
			t.Errorf("got tool %q by %q, want the GenAI tool call, unmarked", a.Tool, a.RecognisedBy)
		}
	})
}
