package ingest_test

import (
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// acmeSpanMap is a made-up framework's dialect, as a user would write it
// for serve --span-map (docs/otlp.md § "Supporting a new framework").
const acmeSpanMap = `{"dialects": [{
  "name": "acme",
  "about": "Acme Agents: acme.kind says what a span is.",
  "tool": [{"when": [{"attr": "acme.kind", "equals": "tool"}]}],
  "model": [{"when": [{"attr": "acme.kind", "equals": "llm"}]}],
  "fields": {
    "execution_name": [{"attr": "acme.agent", "ranks_as": "gen_ai.agent.name"}],
    "tool": ["acme.tool"],
    "args": ["acme.input"],
    "result": ["acme.output"],
    "model": ["acme.model"],
    "input_tokens": ["acme.tokens.in"],
    "output_tokens": ["acme.tokens.out"]
  }
}]}`

func acmeConfig(t *testing.T) ingest.OTLPConfig {
	t.Helper()
	d, err := ingest.ParseSpanDialects([]byte(acmeSpanMap))
	if err != nil {
		t.Fatal(err)
	}
	return ingest.OTLPConfig{Limits: ingest.DefaultLimits, SpanMap: ingest.NewSpanMap(d)}
}

// TestSpanMapFile: a dialect from a span map file gives steps, attempts
// and model calls of spans no built-in entry knows, and names the
// execution.
func TestSpanMapFile(t *testing.T) {
	args := `{"to":"jordan@acme.dev"}`
	spans := []testSpan{
		{id: 1, name: "run", end: 900},
		{id: 2, parent: 1, name: "agent", start: 1, end: 890, attrs: kv{"acme.kind": "agent", "acme.agent": "billing-agent"}},
		{id: 3, parent: 2, name: "think", start: 2, end: 50, attrs: kv{"acme.kind": "llm", "acme.model": "acme-1", "acme.tokens.in": 40, "acme.tokens.out": 7}},
		{id: 4, parent: 2, name: "act", start: 60, end: 160, status: ptrace.StatusCodeError, message: "timed out",
			attrs: kv{"acme.kind": "tool", "acme.tool": "send_invoice_email", "acme.input": args}},
		{id: 5, parent: 2, name: "act", start: 200, end: 260,
			attrs: kv{"acme.kind": "tool", "acme.tool": "send_invoice_email", "acme.input": args, "acme.output": `{"id":"msg_1"}`}},
	}
	events := mapSpansWith(t, acmeConfig(t), nil, spans...)
	first, retry := attemptOf(t, events, 4), attemptOf(t, events, 5)
	if first.StepID != retry.StepID || first.Tool != "send_invoice_email" || string(first.Args) != args || string(retry.Result) != `{"id":"msg_1"}` {
		t.Errorf("attempts: got %+v and %+v, want two attempts of one send_invoice_email step with the file's fields", *first, *retry)
	}
	if first.Outcome != trace.OutcomeTimeout || retry.Outcome != trace.OutcomeOK || first.RecognisedBy != "" {
		t.Errorf("outcomes: got %q, %q (recognised by %q), want timeout, ok, by the file's entry", first.Outcome, retry.Outcome, first.RecognisedBy)
	}
	if s := spanOf(t, events, 3); s.Role != trace.RoleModel || s.Model != "acme-1" || s.InputTokens != 40 || s.OutputTokens != 7 {
		t.Errorf("model call: got %+v, want acme-1, 40 in, 7 out", *s)
	}
	if ev := events[otlpEventID(1, 2)+":name"]; ev.Execution == nil || ev.Execution.Name != "billing-agent" || ev.Execution.NameSource != "gen_ai.agent.name" {
		t.Errorf("agent span: got %+v, want a name event billing-agent ranked as gen_ai.agent.name", ev.Execution)
	}

	// Without the file, the built-in map reads these spans by the generic
	// rule only (acme.kind says tool, beside acme.tool and acme.input):
	// the same steps, marked as a guess.
	builtin := mapSpans(t, nil, spans...)
	if a := attemptOf(t, builtin, 4); a.RecognisedBy != "generic" || a.Tool != "send_invoice_email" || a.StepID != first.StepID {
		t.Errorf("built-in: got tool %q of step %q by %q, want the generic rule's reading of the same step", a.Tool, a.StepID, a.RecognisedBy)
	}
	if role := roleOf(builtin, 3); role != "model" {
		t.Errorf("built-in: think: got %s, want a model call by the generic rule (acme.model, acme.tokens.*)", role)
	}
}

// TestSpanMapOrder: a file's entries come after oncetrace's own and before
// the built-in ones; an entry named like a built-in replaces it; later
// files replace earlier ones.
func TestSpanMapOrder(t *testing.T) {
	parse := func(s string) ingest.SpanDialects {
		t.Helper()
		d, err := ingest.ParseSpanDialects([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	m := ingest.NewSpanMap(parse(acmeSpanMap), parse(`{"dialects": [{"name": "vercel-ai", "tool": [{"when": [{"span_name": "vercel.tool"}]}]},
		{"name": "zeta"}]}`), parse(`{"dialects": [{"name": "zeta", "about": "again"}]}`))
	got := strings.Join(m.Dialects(), " ")
	want := "oncetrace acme vercel-ai zeta temporal restate dbos gen_ai mcp openinference openllmetry mastra google-adk opentelemetry generic"
	if got != want {
		t.Errorf("dialects:\n got %s\nwant %s", got, want)
	}
	if got := strings.Join(ingest.BuiltinSpanMap().Dialects(), " "); got != "oncetrace temporal restate dbos gen_ai mcp vercel-ai openinference openllmetry mastra google-adk opentelemetry generic" {
		t.Errorf("built-in dialects: got %s", got)
	}

	// The replaced vercel-ai entry no longer knows ai.toolCall; its own
	// rule does.
	cfg := ingest.OTLPConfig{Limits: ingest.DefaultLimits, SpanMap: m}
	events := mapSpansWith(t, cfg, nil, testSpan{id: 1, name: "root", end: 100},
		testSpan{id: 2, parent: 1, name: "ai.toolCall", start: 1, attrs: kv{"ai.toolCall.name": "send"}},
		testSpan{id: 3, parent: 1, name: "vercel.tool", start: 2})
	if roleOf(events, 2) != "context" || roleOf(events, 3) != "attempt" {
		t.Errorf("got %s and %s, want the file's vercel-ai entry to replace the built-in one", roleOf(events, 2), roleOf(events, 3))
	}

	// An empty entry named generic turns the fallback off.
	off := ingest.OTLPConfig{Limits: ingest.DefaultLimits, SpanMap: ingest.NewSpanMap(parse(`{"dialects": [{"name": "generic"}]}`))}
	events = mapSpansWith(t, off, nil, testSpan{id: 1, name: "root", end: 100},
		testSpan{id: 2, parent: 1, name: "t", start: 1, attrs: kv{"foo.span.type": "tool", "foo.name": "lookup"}})
	if role := roleOf(events, 2); role != "context" {
		t.Errorf("without the generic rule: got %s, want context", role)
	}

	// oncetrace's markers still win over a file's entries.
	events = mapSpansWith(t, acmeConfig(t), nil, testSpan{id: 1, name: "root", end: 100},
		testSpan{id: 2, parent: 1, name: "x", start: 1, attrs: kv{"acme.kind": "llm", "oncetrace.step.id": "step-4"}})
	if role := roleOf(events, 2); role != "attempt" {
		t.Errorf("oncetrace.step.id on an acme llm span: got %s, want a tool call", role)
	}
}

// TestSpanMapsApart: building a map with a file's entries leaves the
// built-in map (and any other) reading spans as before: the entries they
// share are not renumbered for the new map's attributes.
func TestSpanMapsApart(t *testing.T) {
	tool := []testSpan{{id: 1, name: "run", end: 100},
		{id: 2, parent: 1, name: "execute_tool send", start: 1, attrs: kv{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send"}},
		{id: 3, parent: 1, name: "act", start: 20, attrs: kv{"acme.kind": "tool", "acme.tool": "send"}}}
	acme := acmeConfig(t)
	if a := attemptOf(t, mapSpansWith(t, acme, nil, tool...), 3); a.Tool != "send" || a.RecognisedBy != "" {
		t.Errorf("the file's map: got %+v, want an acme tool call of send", *a)
	}
	for range 2 { // and after a second map with the same entries
		acmeConfig(t)
		events := mapSpans(t, nil, tool...)
		if a := attemptOf(t, events, 2); a.Tool != "send" {
			t.Errorf("the built-in map after another was built: got %+v, want a GenAI tool call of send", *a)
		}
		if a := attemptOf(t, mapSpansWith(t, acme, nil, tool...), 2); a.Tool != "send" {
			t.Errorf("the first file map after another was built: got %+v, want a GenAI tool call of send", *a)
		}
	}
}

// TestSpanMapErrors: a bad span map file is refused with the entry and the
// key named.
func TestSpanMapErrors(t *testing.T) {
	entry := func(body string) string { return `{"dialects": [{"name": "acme", ` + body + `}]}` }
	for _, tc := range []struct {
		name, file, want string
	}{
		{"not JSON", `{"dialects": [`, "span map: not JSON"},
		{"no dialects list", `{"entries": []}`, `span map: unknown key "entries"`},
		{"an entry that is not an object", `{"dialects": [7]}`, `span map: dialects[0]: got a JSON number, want an object`},
		{"a name that is no id", `{"dialects": [{"name": "Acme Agents"}]}`, `dialects[0]: name "Acme Agents": want 1 to 64 of a-z`},
		{"oncetrace's own name", `{"dialects": [{"name": "oncetrace"}]}`, `entry "oncetrace" (dialects[0]): name: "oncetrace" is oncetrace's own attributes`},
		{"a name twice", `{"dialects": [{"name": "acme"}, {"name": "acme"}]}`, `entry "acme" (dialects[1]): the name is given twice`},
		{"an unknown key of an entry", entry(`"tools": []`), `entry "acme" (dialects[0]): unknown key "tools"`},
		{"a rule without conditions", entry(`"tool": [{"when": []}]`), `entry "acme" (dialects[0]): tool[0].when: want at least one condition`},
		{"a misspelt condition key", entry(`"tool": [{"when": [{"atr": "acme.kind", "equals": "tool"}]}]`), `tool[0].when[0]: unknown key "atr"`},
		{"a condition with two subjects", entry(`"model": [{"when": [{"attr": "a", "span_name": "b", "present": true}]}]`),
			`model[0].when[0]: want exactly one of "attr", "span_name"`},
		{"an attribute without a test", entry(`"tool": [{"when": [{"attr": "acme.kind"}]}]`), `tool[0].when[0]: attribute "acme.kind": want exactly one of "equals"`},
		{"a bad pattern", entry(`"tool": [{"when": [{"span_name_matches": "(("}]}]`), `tool[0].when[0]: "span_name_matches": error parsing regexp`},
		{"an unknown kind", entry(`"http": [{"when": [{"kind": "CLIENT"}]}]`), `http[0].when[0]: "kind": want client, server`},
		{"even_at_root on a model rule", entry(`"model": [{"even_at_root": true, "when": [{"kind": "client"}]}]`), `model[0].even_at_root: only a tool or context rule`},
		{"an outcome that does not exist", entry(`"tool": [{"when": [{"kind": "client"}], "without_error_status": {"outcome": "unknown"}}]`),
			`tool[0].without_error_status.outcome: want ok, error or timeout, not "unknown"`},
		{"an unknown field", entry(`"fields": {"arguments": ["acme.input"]}`), `fields.arguments: not a field; the fields are execution_id, session`},
		{"an execution name without a rank", entry(`"fields": {"execution_name": ["acme.agent"]}`), `fields.execution_name[0]: an execution name needs "ranks_as"`},
		{"a rank that does not exist", entry(`"fields": {"execution_name": [{"attr": "acme.agent", "ranks_as": "acme"}]}`),
			`fields.execution_name[0]: "ranks_as": want one of gen_ai.agent.name, ai.telemetry.functionId, traceloop.entity.name, span, not "acme"`},
		{"an unknown transform", entry(`"fields": {"args": [{"attr": "acme.input", "transform": "unwrap"}]}`), `fields.args[0]: "transform": the one transform is "unwrap_openllmetry_args"`},
		{"a span name as JSON", entry(`"fields": {"result": [{"span_name": true}]}`), `fields.result[0]: "span_name": the span's name is no JSON`},
		{"a gated execution id", entry(`"fields": {"execution_id": [{"attr": "acme.run", "when": [{"kind": "server"}]}]}`),
			`fields.execution_id[0]: execution_id is also read off resources and span events`},
		{"a json_key without attr", entry(`"fields": {"model": [{"span_name_after": "x", "json_key": "a"}]}`), `fields.model[0]: "json_key": with "attr" only`},
		{"a string where a list goes", entry(`"fields": {"tool": "acme.tool"}`), `"fields": got a JSON string, want a list`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ingest.ParseSpanDialects([]byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
