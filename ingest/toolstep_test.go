package ingest_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
)

// TestToolStepIDMatchesTheSpanMapping: a recorder that sees a tool call's
// raw arguments (the MCP proxy) and derives its step with CanonicalArgs and
// ToolStepID gets the step the span mapping gives a span of the same call,
// whether the span carries the arguments as a JSON string or as a map, with
// keys in another order, spaces, numbers written their own way and a
// secret the server masks.
func TestToolStepIDMatchesTheSpanMapping(t *testing.T) {
	const tool = "charge_card"
	for _, tc := range []struct {
		name     string
		raw      string // what the wire carried
		spanArgs any    // what the span carries
	}{
		{"a JSON string", `{ "customer": "cus_1", "amount": 1.50, "meta": {"z": [1, 2e3], "a": "ü<&>"} }`,
			`{"meta":{"a":"ü<&>","z":[1,2e3]},"amount":1.50,"customer":"cus_1"}`},
		{"a secret", `{"customer": "cus_1", "api_key": "sk_live_1"}`, `{"api_key":"sk_live_1","customer":"cus_1"}`},
		{"a map attribute", `{"amount": 150, "customer": "cus_1", "tags": ["a", "b"]}`,
			map[string]any{"customer": "cus_1", "amount": 150, "tags": []any{"a", "b"}}},
		{"null", `null`, `null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			canon, err := ingest.CanonicalArgs(json.RawMessage(tc.raw), ingest.DefaultLimits.Redact)
			if err != nil {
				t.Fatal(err)
			}
			events := mapSpans(t, nil, testSpan{id: 1, name: "run", end: 100},
				testSpan{id: 2, parent: 1, name: "execute_tool " + tool, start: 1,
					attrs: kv{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.arguments": tc.spanArgs}})
			a := attemptOf(t, events, 2)
			if got, want := ingest.ToolStepID(tool, canon), a.StepID; got != want {
				t.Errorf("step: got %s from %s, want the span's %s (its args %s)", got, canon, want, a.Args)
			}
			if tc.raw != "null" && string(canon) != string(a.Args) {
				t.Errorf("canonical args: got %s, want what the attempt stores, %s", canon, a.Args)
			}
		})
	}

	// The form itself, as docs/otlp.md states it.
	canon, err := ingest.CanonicalArgs(json.RawMessage(`{"to": "j@acme.dev", "password": "hunter2", "n": 1.0}`), ingest.DefaultLimits.Redact)
	if want := `{"n":1.0,"password":"[redacted]","to":"j@acme.dev"}`; err != nil || string(canon) != want {
		t.Errorf("canonical args: got %s (%v), want %s", canon, err, want)
	}
	sum := sha256.Sum256([]byte(tool + "\x00" + string(canon)))
	if got, want := ingest.ToolStepID(tool, canon), "tool-"+hex.EncodeToString(sum[:])[:16]; got != want {
		t.Errorf("step id: got %s, want %s", got, want)
	}
	if ingest.ToolStepID(tool, nil) != ingest.ToolStepID(tool, json.RawMessage("null")) {
		t.Error("no arguments: want the step of arguments sent as null")
	}
	for _, bad := range []string{``, `{"a":`, `{} {}`} {
		if _, err := ingest.CanonicalArgs(json.RawMessage(bad), nil); err == nil {
			t.Errorf("CanonicalArgs(%q): got no error", bad)
		}
	}
}
