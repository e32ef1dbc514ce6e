package web_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// TestKeySharedAcrossExecutions is the article's email_tool.py through the
// real server: its key hashes only the arguments, so two executions send
// one key. Each execution sees its own email, neither gets a
// duplicate_effect built from the other's, and the shared key is a
// warning on both. When the provider answers the second from its key
// store instead, the second run's email never went out: critical.
func TestKeySharedAcrossExecutions(t *testing.T) {
	attempt := func(exec, start, end string, dedup bool) string {
		return fmt.Sprintf(`{"type":"attempt","execution_id":%q,"step_id":"step-4","attempt":1,"tool":"send_invoice_email","effect":"write",
			"provider":"mail-api","args":{"to":"jordan@acme.dev","subject":"Your invoice"},"idempotency_key":"ik_args_only",
			"started_at":%q,"ended_at":%q,"outcome":"ok","deduplicated":%v}`, exec, start, end, dedup)
	}
	email := func(exec, id, at string) string {
		return fmt.Sprintf(`{"type":"effect","provider":"mail-api","effect_id":%q,"idempotency_key":"ik_args_only","execution_id":%q,
			"step_id":"step-4","target":"jordan@acme.dev","at":%q}`, id, exec, at)
	}
	june := []string{attempt("june", "2026-06-30T14:00:00Z", "2026-06-30T14:00:01Z", false), email("june", "msg_june", "2026-06-30T14:00:00.500Z")}
	julyOwn := []string{attempt("july", "2026-07-31T14:00:00Z", "2026-07-31T14:00:01Z", false), email("july", "msg_july", "2026-07-31T14:00:00.500Z")}
	julySuppressed := []string{attempt("july", "2026-07-31T14:00:00Z", "2026-07-31T14:00:01Z", true)}

	type effectID struct {
		EffectID string `json:"effect_id"`
	}
	type view struct {
		Effects  []effectID      `json:"effects"`
		Findings []trace.Finding `json:"findings"`
		Audit    struct {
			State string `json:"state"`
		} `json:"audit"`
	}
	load := func(srv *testServer, id string) (v view, rules []string) {
		if err := json.Unmarshal(srv.get(t, "/api/v1/executions/"+id), &v); err != nil {
			t.Fatal(err)
		}
		for _, f := range v.Findings {
			rules = append(rules, string(f.Severity)+" "+string(f.Rule))
		}
		return v, rules
	}
	for _, tc := range []struct {
		name   string
		events []string
		july   []string // its rules, sorted
	}{
		{"each run's provider sent its email", append(slices.Clone(june), julyOwn...), []string{"warning key_shared_across_executions"}},
		{"the same, july first", append(slices.Clone(julyOwn), june...), []string{"warning key_shared_across_executions"}},
		{"the provider took july's request for a repeat", append(slices.Clone(julySuppressed), june...),
			[]string{"critical suppressed_as_repeat", "warning key_shared_across_executions"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, tc.name, ingest.DefaultLimits)
			for _, ev := range tc.events {
				srv.post(t, body{kind: "json", contentType: "application/json", data: []byte(ev)})
			}
			juneView, juneRules := load(srv, "june")
			if !slices.Contains(juneView.Effects, effectID{"msg_june"}) {
				t.Errorf("june: effects %+v, want msg_june among them", juneView.Effects)
			}
			if !slices.Equal(juneRules, []string{"warning key_shared_across_executions"}) || juneView.Audit.State != "clean" {
				t.Errorf("june: got findings %v and state %q, want only the shared-key warning, clean", juneRules, juneView.Audit.State)
			}
			_, julyRules := load(srv, "july")
			slices.Sort(julyRules)
			if !slices.Equal(julyRules, tc.july) {
				t.Errorf("july: got findings %v, want %v", julyRules, tc.july)
			}
		})
	}
}
