package ingest

import (
	"strings"
	"testing"
)

// TestJSONLookup: the value at a path of a JSON object, found by skipping
// the members before it, is what decoding the whole object finds.
func TestJSONLookup(t *testing.T) {
	doc := `{"id":"resp_1","output":[{"type":"text","text":"a } ] , \" : brace"},{"n":[1,[2,3]]}],` +
		` "k\u0065y" : {"deep": {"x": -1.5e3}}, "usage":{"input_tokens":120,"output_tokens":28},"flag":true,"none":null}`
	for _, tc := range []struct {
		path, want string
		ok         bool
	}{
		{"id", `"resp_1"`, true},
		{"usage.input_tokens", "120", true},
		{"usage.output_tokens", "28", true},
		{"key.deep.x", "-1.5e3", true},
		{"key.deep", `{"x": -1.5e3}`, true},
		{"flag", "true", true},
		{"none", "null", true},
		{"output", `[{"type":"text","text":"a } ] , \" : brace"},{"n":[1,[2,3]]}]`, true},
		{"usage.total_tokens", "", false},
		{"id.x", "", false},
		{"missing", "", false},
	} {
		got, ok := jsonLookup(doc, strings.Split(tc.path, "."))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %q %v, want %q %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
	for _, bad := range []string{"", "[1]", "<html>", `{"a":`, `{"a" 1}`, `{"a":"x`, `{"a":[1,2}`} {
		if got, ok := jsonLookup(bad, []string{"a", "b"}); ok {
			t.Errorf("%q: got %q, want nothing", bad, got)
		}
	}
}
