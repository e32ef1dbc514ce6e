package web_test

import (
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// summaryJSON is what the executions list and an execution's JSON twin
// both say of an execution: its counts, findings and audit state.
type summaryJSON struct {
	trace.Counts
	Findings         int              `json:"findings"`
	CriticalFindings int              `json:"critical_findings"`
	AuditState       trace.AuditState `json:"audit_state"`
}

// TestListAndPageCountsAgree posts events one commit at a time, so that
// what the list stored at an earlier commit could go stale, then checks
// that every execution's row on the list says what its page says: its
// counts, findings and audit state (one owner of derived state).
func TestListAndPageCountsAgree(t *testing.T) {
	base := startPagesServer(t)
	events := append(uiEvents(), auditEvents()...)
	// An email that names no execution, only the key an earlier commit's
	// attempt sent, and a provider first heard of after the attempt that
	// calls it: each changes an execution no event of it named again.
	at := func(sec int) string {
		return uiBase.Add(3*time.Hour + time.Duration(sec)*time.Second).Format(time.RFC3339Nano)
	}
	events = append(events,
		map[string]any{"type": "execution", "execution_id": "exec_late", "name": "late-agent", "status": "completed", "started_at": at(0), "ended_at": at(9)},
		map[string]any{"type": "attempt", "execution_id": "exec_late", "step_id": "send", "attempt": 1, "tool": "send_invoice_email", "effect": "write",
			"provider": "mail-api", "idempotency_key": "ik_late", "started_at": at(1), "ended_at": at(2), "outcome": "timeout"},
		map[string]any{"type": "attempt", "execution_id": "exec_late", "step_id": "send", "attempt": 2, "tool": "send_invoice_email", "effect": "write",
			"provider": "mail-api", "idempotency_key": "ik_late", "started_at": at(3), "ended_at": at(4), "outcome": "ok"},
		map[string]any{"type": "attempt", "execution_id": "exec_late", "step_id": "charge", "attempt": 1, "tool": "charge_card", "effect": "write",
			"provider": "pay-api", "idempotency_key": "ik_late_pay", "started_at": at(5), "ended_at": at(6), "outcome": "ok"},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "msg_late_1", "idempotency_key": "ik_late", "target": "jordan@acme.dev", "at": at(2)},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "msg_late_2", "idempotency_key": "ik_late", "target": "jordan@acme.dev", "at": at(4)},
		map[string]any{"type": "effect", "provider": "pay-api", "effect_id": "ch_other", "idempotency_key": "ik_someone_else", "at": at(7)},
	)
	for _, ev := range events {
		postUIEvents(t, base, []map[string]any{ev})
	}

	var list struct {
		Executions []struct {
			ID string `json:"execution_id"`
			summaryJSON
		} `json:"executions"`
	}
	getJSON(t, base+"/api/v1/executions?limit=200", &list)
	if len(list.Executions) < 5 {
		t.Fatalf("executions: got %d, want the fixtures' (at least 5)", len(list.Executions))
	}
	late := false
	for _, row := range list.Executions {
		if row.ID == "exec_late" {
			late = true
			// Both emails matched by key alone: a duplicate, critical.
			if row.Effects != 2 || row.AuditState != trace.StateCritical {
				t.Errorf("exec_late on the list: got %d effects, audit %q; want 2, critical", row.Effects, row.AuditState)
			}
		}
		var page struct {
			Execution summaryJSON   `json:"execution"`
			Audit     trace.Verdict `json:"audit"`
		}
		getJSON(t, base+views.ExecutionAPIURL(row.ID), &page)
		page.Execution.AuditState = page.Audit.State
		if page.Execution != row.summaryJSON {
			t.Errorf("%s: list says %+v, page says %+v; want the same", row.ID, row.summaryJSON, page.Execution)
		}
	}
	if !late {
		t.Error("exec_late: not on the list")
	}
}
