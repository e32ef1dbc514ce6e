package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
)

// otlpJSONSpan writes one span of an OTLP/JSON request.
func otlpJSONSpan(traceID, spanID, parentID, name string, kind int, start, end int64, attrs map[string]string, errorType string) string {
	var kvs []string
	for k, v := range attrs {
		kvs = append(kvs, fmt.Sprintf(`{"key":%q,"value":{"stringValue":%q}}`, k, v))
	}
	status := `{"code":1}`
	if errorType != "" {
		kvs = append(kvs, fmt.Sprintf(`{"key":"error.type","value":{"stringValue":%q}}`, errorType))
		status = `{"code":2,"message":"failed"}`
	}
	parent := ""
	if parentID != "" {
		parent = fmt.Sprintf(`"parentSpanId":%q,`, parentID)
	}
	return fmt.Sprintf(`{"traceId":%q,"spanId":%q,%s"name":%q,"kind":%d,"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[%s],"status":%s}`,
		traceID, spanID, parent, name, kind, start, end, strings.Join(kvs, ","), status)
}

func postOTLPJSON(t *testing.T, srv *testServer, spans ...string) {
	t.Helper()
	body := `{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"spans":[` + strings.Join(spans, ",") + `]}]}]}`
	resp, err := srv.ts.Client().Post(srv.ts.URL+"/v1/traces", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/traces: got %d, want 200", resp.StatusCode)
	}
}

// TestOTLPNoSilentMerge: spans of one run exported in different requests
// are never stored as one. Two model calls, alike in everything but their
// span ids, stay two model calls; two tool calls with the same tool and
// arguments but new call ids are two attempts of one step, numbered by
// start time whatever request brought them, and the later one arriving
// first changes nothing.
func TestOTLPNoSilentMerge(t *testing.T) {
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	const s = int64(1_751_292_131_000_000_000)
	const ms = int64(1_000_000)
	root := otlpJSONSpan(traceID, "00000000000000a0", "", "invoke_agent billing-agent", 1, s, s+900*ms,
		map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent"}, "")
	model := func(spanID string, at int64) string {
		return otlpJSONSpan(traceID, spanID, "00000000000000a0", "chat gpt-4o", 3, s+at*ms, s+(at+50)*ms,
			map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}, "")
	}
	tool := func(spanID, callID string, at int64, errType string) string {
		return otlpJSONSpan(traceID, spanID, "00000000000000a0", "execute_tool send_invoice_email", 1, s+at*ms, s+(at+100)*ms,
			map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_invoice_email",
				"gen_ai.tool.call.id": callID, "gen_ai.tool.call.arguments": `{"to":"jordan@acme.dev","subject":"June"}`}, errType)
	}

	orders := map[string][][]string{
		"in order": {
			{model("00000000000000b1", 0), tool("00000000000000c1", "call_A", 100, "TimeoutError")},
			{model("00000000000000b2", 0), tool("00000000000000c2", "call_B", 300, "")},
			{root},
		},
		"later first": {
			{root, tool("00000000000000c2", "call_B", 300, "")},
			{model("00000000000000b2", 0)},
			{tool("00000000000000c1", "call_A", 100, "TimeoutError"), model("00000000000000b1", 0)},
		},
	}
	var answers []string
	for _, name := range []string{"in order", "later first"} {
		t.Run(name, func(t *testing.T) {
			srv := startServer(t, name, ingest.DefaultLimits)
			for _, req := range orders[name] {
				postOTLPJSON(t, srv, req...)
			}
			data := srv.get(t, "/api/v1/executions/"+traceID)
			answers = append(answers, string(data))
			var x frameworkExecution
			if err := json.Unmarshal(data, &x); err != nil {
				t.Fatal(err)
			}
			if len(x.ModelCalls) != 2 || x.ModelCalls[0].SpanID == x.ModelCalls[1].SpanID {
				t.Errorf("model calls: got %+v, want two distinct ones", x.ModelCalls)
			}
			if len(x.Steps) != 1 {
				t.Fatalf("steps: got %d, want one step for both tool calls", len(x.Steps))
			}
			got := []string{}
			for _, a := range x.Steps[0].Attempts {
				got = append(got, fmt.Sprintf("%d %s %s", a.Attempt, a.Outcome, a.SpanID))
			}
			want := []string{"1 timeout 00000000000000c1", "2 ok 00000000000000c2"}
			if strings.Join(got, "; ") != strings.Join(want, "; ") {
				t.Errorf("attempts: got %v, want %v", got, want)
			}
			if x.Execution.Name != "billing-agent" || x.Execution.Status != "completed" {
				t.Errorf("execution: got %q %q, want billing-agent completed", x.Execution.Name, x.Execution.Status)
			}
		})
	}
	if len(answers) == 2 && answers[0] != answers[1] {
		t.Errorf("the execution differs with the order its spans arrived in:\n%s\n%s", answers[0], answers[1])
	}
}

// TestTraceEffectBeforeNamedSpans: spans that name their execution
// (oncetrace.execution.id) and an email that carries only their trace
// context give one execution whichever arrives first: an email that came
// first makes the trace id a placeholder execution, which goes once the
// spans say whose trace it is.
func TestTraceEffectBeforeNamedSpans(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const s = int64(1_751_292_131_000_000_000)
	const ms = int64(1_000_000)
	named := map[string]string{"oncetrace.execution.id": "run-42"}
	root := otlpJSONSpan(traceID, "00000000000000a0", "", "billing-agent", 1, s, s+900*ms, named, "")
	tool := otlpJSONSpan(traceID, "00000000000000c1", "00000000000000a0", "execute_tool send_invoice_email", 1, s+100*ms, s+300*ms,
		map[string]string{"oncetrace.execution.id": "run-42", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_invoice_email",
			"gen_ai.tool.call.arguments": `{"to":"jordan@acme.dev"}`}, "")
	httpSpan := otlpJSONSpan(traceID, "00000000000000d1", "00000000000000c1", "POST", 3, s+110*ms, s+290*ms,
		map[string]string{"oncetrace.execution.id": "run-42", "http.request.method": "POST"}, "")
	email := []byte(`{"type":"effect","id":"fx-1","provider":"sandbox-mail","effect_id":"msg_1","target":"jordan@acme.dev",
		"at":"2025-06-30T14:02:11.200Z","trace_id":"` + traceID + `","span_id":"00000000000000d1"}`)

	var snaps []*snapshot
	for _, order := range []string{"email first", "email last"} {
		srv := startServer(t, order, ingest.DefaultLimits)
		if order == "email first" {
			srv.post(t, body{kind: "json", contentType: "application/json", data: email})
		}
		postOTLPJSON(t, srv, root, tool, httpSpan)
		if order == "email last" {
			srv.post(t, body{kind: "json", contentType: "application/json", data: email})
		}
		snap := srv.snapshot(t)
		if snap.counts.executions != 1 {
			t.Errorf("%s: got %d executions (%s), want run-42 alone", order, snap.counts.executions, snap.part("executions page 0"))
		}
		var x frameworkExecution
		if err := json.Unmarshal(srv.get(t, "/api/v1/executions/run-42"), &x); err != nil {
			t.Fatal(err)
		}
		if len(x.Effects) != 1 || x.Audit.State != "clean" {
			t.Errorf("%s: run-42 has effects %+v, audit %q; want its email and clean", order, x.Effects, x.Audit.State)
		}
		snaps = append(snaps, snap)
	}
	compareSnapshots(t, "email last", snaps[1], "email first", snaps[0])
}

// TestSpanAttemptsAndSentNumbers: attempts identified by their spans take
// the numbers that attempts sent with one leave free, by start time, and
// no arrival order loses one or merges two.
func TestSpanAttemptsAndSentNumbers(t *testing.T) {
	bySpan := func(span, start string) string {
		return `{"type":"attempt","execution_id":"x","step_id":"s","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"` + span +
			`","tool":"send","started_at":"` + start + `","ended_at":"` + start + `","outcome":"ok"}`
	}
	sent := `{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,"tool":"send","started_at":"2026-06-30T14:00:05Z","ended_at":"2026-06-30T14:00:06Z","outcome":"error"}`
	a := bySpan("00000000000000a1", "2026-06-30T14:00:01Z")
	b := bySpan("00000000000000b2", "2026-06-30T14:00:02Z")
	want := []string{"1 error ", "2 ok 00000000000000a1", "3 ok 00000000000000b2"}
	var answers []string
	for _, order := range [][]string{{a, b, sent}, {sent, b, a}, {b, sent, a}} {
		srv := startServer(t, "order", ingest.DefaultLimits)
		for _, ev := range order {
			srv.post(t, body{kind: "json", contentType: "application/json", data: []byte(ev)})
		}
		data := srv.get(t, "/api/v1/executions/x")
		answers = append(answers, string(data))
		var x frameworkExecution
		if err := json.Unmarshal(data, &x); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, st := range x.Steps {
			for _, at := range st.Attempts {
				got = append(got, fmt.Sprintf("%d %s %s", at.Attempt, at.Outcome, at.SpanID))
			}
		}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Errorf("attempts: got %v, want %v", got, want)
		}
	}
	for i := 1; i < len(answers); i++ {
		if answers[i] != answers[0] {
			t.Errorf("order %d gives another execution:\n%s\nwant\n%s", i, answers[i], answers[0])
		}
	}
}
