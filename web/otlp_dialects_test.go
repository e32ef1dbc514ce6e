package web_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/views"
)

// TestOTLPGenericRule: a run of a framework in a dialect that no entry of
// the span map names, whose tool spans carry only a "tool" type, a name
// and an input in a namespace of their own, has one step with two
// attempts (the same tool with the same arguments), each marked as
// recognised by the generic rule, and its model call in its lane.
func TestOTLPGenericRule(t *testing.T) {
	const traceID = "5b8efff798038103d269b633813fc60c"
	const s = int64(1_751_292_131_000_000_000)
	const ms = int64(1_000_000)
	args := `{"to":"jordan@acme.dev","subject":"Your June invoice"}`
	srv := startServer(t, "generic", ingest.DefaultLimits)
	postOTLPJSON(t, srv,
		otlpJSONSpan(traceID, "00000000000000a0", "", "agent billing-agent", 1, s, s+2000*ms,
			map[string]string{"acmeflow.span.type": "agent"}, ""),
		otlpJSONSpan(traceID, "00000000000000b1", "00000000000000a0", "llm", 1, s+10*ms, s+90*ms,
			map[string]string{"acmeflow.span.type": "llm", "acmeflow.model": "gpt-4o-mini", "acmeflow.usage.input_tokens": "120"}, ""),
		otlpJSONSpan(traceID, "00000000000000c1", "00000000000000a0", "tool", 1, s+100*ms, s+1100*ms,
			map[string]string{"acmeflow.span.type": "tool", "acmeflow.name": "send_invoice_email", "acmeflow.input": args}, "TimeoutError"))
	postOTLPJSON(t, srv,
		otlpJSONSpan(traceID, "00000000000000c2", "00000000000000a0", "tool", 1, s+1200*ms, s+1300*ms,
			map[string]string{"acmeflow.span.type": "tool", "acmeflow.name": "send_invoice_email", "acmeflow.input": args}, ""))

	var x struct {
		Execution struct {
			Name string `json:"name"`
		} `json:"execution"`
		Steps []struct {
			Tool     string `json:"tool"`
			Attempts []struct {
				Attempt      int    `json:"attempt"`
				Outcome      string `json:"outcome"`
				RecognisedBy string `json:"recognised_by"`
			} `json:"attempts"`
		} `json:"steps"`
		ModelCalls []struct {
			Model       string `json:"model"`
			InputTokens int64  `json:"input_tokens"`
		} `json:"model_calls"`
	}
	if err := json.Unmarshal(srv.get(t, "/api/v1/executions/"+traceID), &x); err != nil {
		t.Fatal(err)
	}
	if len(x.Steps) != 1 || x.Steps[0].Tool != "send_invoice_email" || len(x.Steps[0].Attempts) != 2 {
		t.Fatalf("steps: got %+v, want one step of send_invoice_email with two attempts", x.Steps)
	}
	for i, a := range x.Steps[0].Attempts {
		want := []string{"timeout", "ok"}[i]
		if a.Attempt != i+1 || a.Outcome != want || a.RecognisedBy != "generic" {
			t.Errorf("attempt %d: got #%d %s recognised by %q, want #%d %s by generic", i, a.Attempt, a.Outcome, a.RecognisedBy, i+1, want)
		}
	}
	if len(x.ModelCalls) != 1 || x.ModelCalls[0].Model != "gpt-4o-mini" || x.ModelCalls[0].InputTokens != 120 {
		t.Errorf("model calls: got %+v, want gpt-4o-mini with 120 input tokens", x.ModelCalls)
	}
	page := string(srv.get(t, views.StepsURL(traceID, "", "")))
	if !strings.Contains(page, `data-testid="step-recognised-by"`) || !strings.Contains(page, "recognised by the generic rule") {
		t.Errorf("the step table does not mark the step as recognised by the generic rule")
	}
}
