package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// acmeSpanMap is the made-up framework of docs/otlp.md § "Supporting a new
// framework": acme.kind says what a span is.
const acmeSpanMap = `{"dialects": [{
  "name": "acme",
  "about": "Acme Agents",
  "tool": [{"when": [{"attr": "acme.kind", "equals": "tool"}]}],
  "model": [{"when": [{"attr": "acme.kind", "equals": "llm"}]}],
  "fields": {
    "tool": ["acme.tool"], "args": ["acme.input"], "result": ["acme.output"],
    "model": ["acme.model"], "input_tokens": ["acme.tokens.in"], "output_tokens": ["acme.tokens.out"]
  }
}]}`

func TestServeSpanMapFlag(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, "acme.json", acmeSpanMap)
	c, err := serveFlags([]string{"--span-map", file})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.spanMap.Dialects(), ","); !strings.HasPrefix(got, "oncetrace,acme,temporal,") || !strings.HasSuffix(got, ",generic") {
		t.Errorf("dialects: got %s, want oncetrace's, the file's, then the built-in ones", got)
	}
	if c, err := serveFlags(nil); err != nil || c.spanMap != nil {
		t.Errorf("without --span-map: got %v, %v; want the built-in map (nil)", c.spanMap, err)
	}
	t.Setenv("ONCETRACE_SPAN_MAP", file)
	if c, err := serveFlags(nil); err != nil || c.spanMap == nil || c.spanMap.Dialects()[1] != "acme" {
		t.Errorf("from the environment: got %v, %v; want the file's entries", c.spanMap, err)
	}
	t.Setenv("ONCETRACE_SPAN_MAP", "")

	bad := writeFile(t, "bad.json", `{"dialects": [{"name": "acme", "tool": [{"when": [{"attr": "acme.kind", "equal": "tool"}]}]}]}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--span-map", filepath.Join(dir, "missing.json")}, "serve: --span-map: open"},
		{[]string{"--span-map", bad}, `serve: --span-map ` + bad + `: span map: entry "acme" (dialects[0]): tool[0].when[0]: unknown key "equal"`},
	} {
		if _, err := serveFlags(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// TestServeSpanMapThroughTheServer: serve --span-map, as a user runs it,
// reads a made-up framework's spans posted to /v1/traces: one step of two
// attempts and a model call, where the built-in map alone would mark them
// as the generic rule's guess.
func TestServeSpanMapThroughTheServer(t *testing.T) {
	srv := startDemoServer(t, filepath.Join(t.TempDir(), "spanmap.db"), "serve.log", "--span-map", writeFile(t, "acme.json", acmeSpanMap))
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const start = int64(1_751_292_131_000_000_000)
	span := func(id, parent, name string, at, end int64, failed bool, attrs map[string]string) string {
		var kvs []string
		for k, v := range attrs {
			kvs = append(kvs, fmt.Sprintf(`{"key":%q,"value":{"stringValue":%q}}`, k, v))
		}
		status := `{"code":1}`
		if failed {
			status = `{"code":2,"message":"The operation was aborted due to timeout"}`
		}
		parentField := ""
		if parent != "" {
			parentField = fmt.Sprintf(`"parentSpanId":%q,`, parent)
		}
		return fmt.Sprintf(`{"traceId":%q,"spanId":%q,%s"name":%q,"kind":1,"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[%s],"status":%s}`,
			traceID, id, parentField, name, start+at*1e6, start+end*1e6, strings.Join(kvs, ","), status)
	}
	args := `{"to":"jordan@acme.dev","subject":"Your June invoice"}`
	body := `{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"spans":[` + strings.Join([]string{
		span("00000000000000a0", "", "billing-agent", 0, 2000, false, nil),
		span("00000000000000b1", "00000000000000a0", "think", 10, 90, false, map[string]string{"acme.kind": "llm", "acme.model": "acme-1", "acme.tokens.in": "40", "acme.tokens.out": "7"}),
		span("00000000000000c1", "00000000000000a0", "act", 100, 1100, true, map[string]string{"acme.kind": "tool", "acme.tool": "send_invoice_email", "acme.input": args}),
		span("00000000000000c2", "00000000000000a0", "act", 1200, 1300, false, map[string]string{"acme.kind": "tool", "acme.tool": "send_invoice_email", "acme.input": args, "acme.output": `{"id":"msg_1"}`}),
	}, ",") + `]}]}]}`
	resp, err := http.Post(srv.url+"/v1/traces", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/traces: got %d, want 200", resp.StatusCode)
	}
	resp, err = http.Get(srv.url + "/api/v1/executions/" + traceID)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var x struct {
		Steps []struct {
			Tool     string `json:"tool"`
			Attempts []struct {
				Attempt      int             `json:"attempt"`
				Outcome      string          `json:"outcome"`
				Args         json.RawMessage `json:"args"`
				RecognisedBy string          `json:"recognised_by"`
			} `json:"attempts"`
		} `json:"steps"`
		ModelCalls []struct {
			Model        string `json:"model"`
			InputTokens  int64  `json:"input_tokens"`
			OutputTokens int64  `json:"output_tokens"`
		} `json:"model_calls"`
	}
	if err := json.Unmarshal(data, &x); err != nil {
		t.Fatalf("GET the execution: %v: %s", err, data)
	}
	if len(x.Steps) != 1 || x.Steps[0].Tool != "send_invoice_email" || len(x.Steps[0].Attempts) != 2 {
		t.Fatalf("steps: got %s, want one step of send_invoice_email with two attempts", data)
	}
	for i, a := range x.Steps[0].Attempts {
		want := []string{"timeout", "ok"}[i]
		if a.Attempt != i+1 || a.Outcome != want || a.RecognisedBy != "" || string(a.Args) != `{"subject":"Your June invoice","to":"jordan@acme.dev"}` {
			t.Errorf("attempt %d: got #%d %s (recognised by %q) args %s, want #%d %s by the acme entry", i, a.Attempt, a.Outcome, a.RecognisedBy, a.Args, i+1, want)
		}
	}
	if len(x.ModelCalls) != 1 || x.ModelCalls[0].Model != "acme-1" || x.ModelCalls[0].InputTokens != 40 || x.ModelCalls[0].OutputTokens != 7 {
		t.Errorf("model calls: got %+v, want acme-1 with 40 and 7 tokens", x.ModelCalls)
	}
	if !strings.Contains(srv.logText(), "dialects=oncetrace,acme,") {
		t.Errorf("serve's log does not list the span map's dialects:\n%s", srv.logText())
	}
}

// TestChaosSpanMapFlag: chaos gives --span-map to its embedded servers,
// and refuses it with --server, whose own serve reads spans.
func TestChaosSpanMapFlag(t *testing.T) {
	file := writeFile(t, "acme.json", acmeSpanMap)
	o, err := chaosFlags([]string{"--span-map", file, "--upstream", "mail=http://127.0.0.1:1", "--", "true"}, io.Discard)
	if err != nil || o.spanMap == nil || o.spanMap.Dialects()[1] != "acme" {
		t.Fatalf("got %v, %v; want the file's entries", o.spanMap, err)
	}
	_, err = chaosFlags([]string{"--span-map", file, "--server", "http://127.0.0.1:8080", "--upstream", "mail=http://127.0.0.1:1", "--", "true"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "give it to the --server's serve") {
		t.Errorf("with --server: got %v, want a refusal", err)
	}
	bad := writeFile(t, "bad.json", `{"dialects": [{"name": "Acme"}]}`)
	_, err = chaosFlags([]string{"--span-map", bad, "--upstream", "mail=http://127.0.0.1:1", "--", "true"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "chaos: --span-map "+bad+`: span map: dialects[0]: name "Acme"`) {
		t.Errorf("a bad file: got %v, want an error naming the file and the entry", err)
	}
}
