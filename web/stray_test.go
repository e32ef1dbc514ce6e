package web_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
)

// TestStrayHTTPSpansJoinInAnyOrder: an agent whose HTTP requests left its
// trace (LangGraph without a root span of the program's own) sent two
// identical emails from lone HTTP root spans of traces t2 and t3. In every
// arrival order, one request an event, the traces are no executions, both
// emails join exec_1's tool step (inferred), and the step is a critical
// duplicate; a third email to someone no attempt names stays an orphan.
func TestStrayHTTPSpansJoinInAnyOrder(t *testing.T) {
	events := []string{
		`{"type":"execution","execution_id":"exec_1","name":"billing-agent","status":"completed","started_at":"2026-06-30T10:00:00Z","ended_at":"2026-06-30T10:00:05Z"}`,
		`{"type":"attempt","execution_id":"exec_1","step_id":"s1","attempt":1,"tool":"send_invoice_email","effect":"unknown","args":{"to":"jordan@acme.dev","subject":"Your June invoice"},"started_at":"2026-06-30T10:00:01Z","ended_at":"2026-06-30T10:00:02Z","outcome":"timeout"}`,
		`{"type":"attempt","execution_id":"exec_1","step_id":"s1","attempt":2,"tool":"send_invoice_email","effect":"unknown","args":{"to":"jordan@acme.dev","subject":"Your June invoice"},"started_at":"2026-06-30T10:00:03Z","ended_at":"2026-06-30T10:00:04Z","outcome":"ok"}`,
		`{"type":"span","execution_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2","trace_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2","span_id":"bbbbbbbbbbbbbbb2","role":"http","name":"POST","http_method":"POST","started_at":"2026-06-30T10:00:01.100Z","ended_at":"2026-06-30T10:00:02Z","error":"TimeoutError"}`,
		`{"type":"span","execution_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa3","trace_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa3","span_id":"bbbbbbbbbbbbbbb3","role":"http","name":"POST","http_method":"POST","started_at":"2026-06-30T10:00:03.100Z","ended_at":"2026-06-30T10:00:03.300Z"}`,
		`{"type":"span","execution_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa4","trace_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa4","span_id":"bbbbbbbbbbbbbbb4","role":"http","name":"POST","http_method":"POST","started_at":"2026-06-30T10:00:03.100Z","ended_at":"2026-06-30T10:00:03.300Z"}`,
		`{"type":"effect","provider":"mail-api","effect_id":"m1","target":"jordan@acme.dev","fingerprint":"mail:aa","trace_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2","span_id":"bbbbbbbbbbbbbbb2","at":"2026-06-30T10:00:01.500Z"}`,
		`{"type":"effect","provider":"mail-api","effect_id":"m2","target":"jordan@acme.dev","fingerprint":"mail:aa","trace_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa3","span_id":"bbbbbbbbbbbbbbb3","at":"2026-06-30T10:00:03.200Z"}`,
		`{"type":"effect","provider":"mail-api","effect_id":"m3","target":"someone@else.dev","fingerprint":"mail:bb","trace_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa4","span_id":"bbbbbbbbbbbbbbb4","at":"2026-06-30T10:00:03.200Z"}`,
	}
	orders := map[string][]int{
		"as sent":       {0, 1, 2, 3, 4, 5, 6, 7, 8},
		"effects first": {6, 7, 8, 3, 4, 5, 0, 1, 2},
		"spans last":    {6, 7, 8, 0, 1, 2, 3, 4, 5},
		"attempts last": {3, 6, 4, 7, 5, 8, 0, 2, 1},
		"interleaved":   {7, 1, 4, 8, 0, 6, 2, 5, 3},
	}
	var first map[string]string
	for _, engine := range []string{"sqlite", "postgres"} {
		for name, order := range orders {
			srv := startServerOn(t, engine, engine+"/"+name, ingest.DefaultLimits)
			for _, i := range order {
				srv.post(t, encodeBody([]json.RawMessage{json.RawMessage(events[i])}, bodyNDJSON))
			}
			got := map[string]string{
				"executions": string(srv.get(t, "/api/v1/executions")),
				"exec_1":     string(srv.get(t, "/api/v1/executions/exec_1")),
				"findings":   string(srv.get(t, "/api/v1/findings")),
				"effects":    string(srv.get(t, "/api/v1/effects")),
			}
			if first == nil {
				first = got
				checkStrayJoin(t, engine+"/"+name, got)
				continue
			}
			for k, v := range got {
				if v != first[k] {
					t.Errorf("%s/%s: %s differs from the first order's:\ngot  %s\nwant %s", engine, name, k, v, first[k])
				}
			}
		}
	}
}

func checkStrayJoin(t *testing.T, name string, got map[string]string) {
	t.Helper()
	var list struct {
		Executions []struct {
			ID string `json:"execution_id"`
		} `json:"executions"`
	}
	if err := json.Unmarshal([]byte(got["executions"]), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Executions) != 1 || list.Executions[0].ID != "exec_1" {
		t.Errorf("%s: executions: got %s, want exec_1 alone (a lone HTTP root span is no execution)", name, got["executions"])
	}
	var x struct {
		Effects []struct {
			ID       string `json:"effect_id"`
			State    string `json:"state"`
			Joined   string `json:"joined_execution_id"`
			Inferred string `json:"inferred"`
		} `json:"effects"`
	}
	if err := json.Unmarshal([]byte(got["exec_1"]), &x); err != nil {
		t.Fatal(err)
	}
	if len(x.Effects) != 2 {
		t.Fatalf("%s: exec_1 effects: got %s, want m1 and m2", name, got["exec_1"])
	}
	for _, e := range x.Effects {
		if e.State != "duplicate" || e.Joined != "exec_1" || !strings.HasPrefix(e.Inferred, "inferred: ") {
			t.Errorf("%s: effect %s: got state %q joined %q inferred %q, want a duplicate joined to exec_1 with its reason", name, e.ID, e.State, e.Joined, e.Inferred)
		}
	}
	if !strings.Contains(got["findings"], `"rule":"duplicate_effect","severity":"critical","execution_id":"exec_1","step_id":"s1"`) {
		t.Errorf("%s: findings: got %s, want a critical duplicate_effect of exec_1's s1", name, got["findings"])
	}
	if !strings.Contains(got["findings"], `"rule":"orphan_effect"`) || !strings.Contains(got["findings"], "m3") {
		t.Errorf("%s: findings: got %s, want m3 an orphan: no attempt in flight names its recipient", name, got["findings"])
	}
}

// TestRepeatedOutboxOnlyEffects: with no run id at all (webhooks or SMTP
// with no traces), identical effects at one provider within the window
// are a repeated_effect warning on the later one, in any arrival order.
func TestRepeatedOutboxOnlyEffects(t *testing.T) {
	events := []string{
		`{"type":"effect","provider":"postmark","effect_id":"n1","target":"jordan@acme.dev","fingerprint":"mail:aa","summary":"email to jordan@acme.dev, subject 'Your June invoice'","at":"2026-06-30T10:00:00Z"}`,
		`{"type":"effect","provider":"postmark","effect_id":"n2","target":"jordan@acme.dev","fingerprint":"mail:aa","summary":"email to jordan@acme.dev, subject 'Your June invoice'","at":"2026-06-30T10:03:00Z"}`,
		`{"type":"effect","provider":"postmark","effect_id":"n3","target":"jordan@acme.dev","fingerprint":"mail:aa","summary":"email to jordan@acme.dev, subject 'Your June invoice'","at":"2026-06-30T10:30:00Z"}`,
		`{"type":"effect","provider":"postmark","effect_id":"n4","target":"sam@acme.dev","fingerprint":"mail:bb","at":"2026-06-30T10:03:00Z"}`,
		`{"type":"effect","provider":"sendgrid","effect_id":"n5","target":"jordan@acme.dev","fingerprint":"mail:aa","at":"2026-06-30T10:01:00Z"}`,
	}
	var first string
	for _, order := range [][]int{{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 0, 4, 1, 3}} {
		srv := startServer(t, "repeat", ingest.DefaultLimits)
		for _, i := range order {
			srv.post(t, encodeBody([]json.RawMessage{json.RawMessage(events[i])}, bodyNDJSON))
		}
		got := string(srv.get(t, "/api/v1/findings"))
		if first == "" {
			first = got
			var page struct {
				Findings []struct {
					Rule    string `json:"rule"`
					Effects []struct {
						ID string `json:"effect_id"`
					} `json:"effects"`
					Message string `json:"message"`
				} `json:"findings"`
			}
			if err := json.Unmarshal([]byte(got), &page); err != nil {
				t.Fatal(err)
			}
			var repeated []string
			for _, f := range page.Findings {
				if f.Rule == "repeated_effect" {
					repeated = append(repeated, f.Effects[0].ID)
					if want := "postmark n2 asked for the same email (email to jordan@acme.dev, subject 'Your June invoice') as postmark n1 did 3m earlier"; !strings.HasPrefix(f.Message, want) {
						t.Errorf("message: got %q, want it to start %q", f.Message, want)
					}
				}
			}
			if len(repeated) != 1 || repeated[0] != "n2" {
				t.Errorf("repeated_effect on %v, want n2 alone (n3 is 27m after n2, n4 asked something else, n5 went to another provider): %s", repeated, got)
			}
			continue
		}
		if got != first {
			t.Errorf("order %v: findings differ:\ngot  %s\nwant %s", order, got, first)
		}
	}
}
