package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/web"
)

// TestUnknownDialectOutboxProvesDuplicate: a framework-shaped trace in a
// dialect no entry names (its tool spans carry only a generic "tool" type
// attribute, a name and an input), whose tool is retried after a lost
// response, and the two identical emails it sent through the sandbox. With
// the generic rule switched off (a --span-map entry named "generic" that
// matches nothing) no step is mapped, yet the outbox proves the duplicate:
// critical, naming both emails. With the generic rule, one step with two
// attempts, recognised by the generic rule, holds them.
func TestUnknownDialectOutboxProvesDuplicate(t *testing.T) {
	const traceID = "5b8efff798038103d269b633813fc60c"
	const s = int64(1_751_292_131_000_000_000)
	const ms = int64(1_000_000)
	root := otlpJSONSpan(traceID, "00000000000000a0", "", "billing-agent", 1, s, s+900*ms, map[string]string{"zeta.type": "agent", "zeta.name": "billing-agent"}, "")
	input := `{"to":"jordan@acme.dev","subject":"Your June invoice","body":"Invoice INV-0612 is attached."}`
	tool := func(spanID string, at int64, errType string) string {
		return otlpJSONSpan(traceID, spanID, "00000000000000a0", "send_invoice_email", 1, s+at*ms, s+(at+200)*ms,
			map[string]string{"zeta.type": "tool", "zeta.name": "send_invoice_email", "zeta.input": input}, errType)
	}
	httpSpan := func(spanID, parent string, at int64) string {
		return otlpJSONSpan(traceID, spanID, parent, "POST", 3, s+at*ms, s+(at+100)*ms,
			map[string]string{"http.request.method": "POST", "url.full": "http://127.0.0.1/sandbox/mail/v1/send"}, "")
	}
	noGeneric, err := ingest.ParseSpanDialects([]byte(`{"dialects":[{"name":"generic"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		spanMap *ingest.SpanMap
		steps   int
	}{
		{"without the generic rule", ingest.NewSpanMap(noGeneric), 0},
		{"with the generic rule", nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServerOn(t, "sqlite", tc.name, ingest.DefaultLimits, func(c *web.Config) { c.SpanMap = tc.spanMap })
			postOTLPJSON(t, srv, root, tool("00000000000000b1", 100, "TimeoutError"), httpSpan("00000000000000c1", "00000000000000b1", 110),
				tool("00000000000000b2", 400, ""), httpSpan("00000000000000c2", "00000000000000b2", 410))
			for i, span := range []string{"00000000000000c1", "00000000000000c2"} {
				req, _ := http.NewRequest(http.MethodPost, srv.ts.URL+"/sandbox/mail/v1/send", strings.NewReader(input))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("traceparent", fmt.Sprintf("00-%s-%s-01", traceID, span))
				resp, err := srv.ts.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("email %d: got %d, want 200", i+1, resp.StatusCode)
				}
			}
			var x struct {
				Audit struct {
					State string `json:"state"`
				} `json:"audit"`
				Steps []struct {
					Attempts []struct {
						Outcome      string `json:"outcome"`
						RecognisedBy string `json:"recognised_by"`
					} `json:"attempts"`
				} `json:"steps"`
				Findings []struct {
					Rule     string `json:"rule"`
					Severity string `json:"severity"`
					Effects  []any  `json:"effects"`
					Message  string `json:"message"`
				} `json:"findings"`
			}
			if err := json.Unmarshal(srv.get(t, "/api/v1/executions/"+traceID), &x); err != nil {
				t.Fatal(err)
			}
			if x.Audit.State != "critical" {
				t.Errorf("audit state: got %q, want critical", x.Audit.State)
			}
			dup := 0
			for _, f := range x.Findings {
				if f.Rule == "duplicate_effect" && f.Severity == "critical" && len(f.Effects) == 2 {
					dup++
					if tc.steps == 0 && !strings.Contains(f.Message, "no tool call of a known dialect tied them to a step") {
						t.Errorf("message: got %q, want it to say no tool call tied them to a step", f.Message)
					}
				}
			}
			if dup != 1 {
				t.Errorf("findings: got %+v, want one critical duplicate_effect naming both emails", x.Findings)
			}
			if len(x.Steps) != tc.steps {
				t.Fatalf("steps: got %d, want %d", len(x.Steps), tc.steps)
			}
			if tc.steps == 1 {
				if got := len(x.Steps[0].Attempts); got != 2 {
					t.Fatalf("attempts: got %d, want 2", got)
				}
				for _, a := range x.Steps[0].Attempts {
					if a.RecognisedBy != "generic" {
						t.Errorf("attempt recognised_by: got %q, want generic", a.RecognisedBy)
					}
				}
				if x.Steps[0].Attempts[0].Outcome != "timeout" {
					t.Errorf("attempt 1: got %q, want timeout", x.Steps[0].Attempts[0].Outcome)
				}
			}
		})
	}
}
