package web_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// executionAttempts reads an execution's JSON twin and counts its attempts
// and findings.
func executionAttempts(t *testing.T, base, id string) (attempts, findings int) {
	t.Helper()
	r := fetchPage(t, base+"/api/v1/executions/"+id, false)
	if r.status != 200 {
		t.Fatalf("GET execution %s: got %d %s", id, r.status, r.body)
	}
	var x struct {
		Steps []struct {
			Attempts []json.RawMessage `json:"attempts"`
		} `json:"steps"`
		Findings []json.RawMessage `json:"findings"`
	}
	if err := json.Unmarshal(r.body, &x); err != nil {
		t.Fatal(err)
	}
	for _, s := range x.Steps {
		attempts += len(s.Attempts)
	}
	return attempts, len(x.Findings)
}

// TestExecutionModelKeptOnlyWhileTheStoreIsUnchanged: the web keeps the
// model of an execution it read, and answers from it exactly while the
// store's change token is the one it was read at: a retry committed after
// the page was read is on the next answer, with the finding it makes, and
// so is a commit that reaches the execution only through its key (an
// email of another source).
func TestExecutionModelKeptOnlyWhileTheStoreIsUnchanged(t *testing.T) {
	base := startPagesServer(t)
	at := func(s int) string { return time.Date(2026, 7, 2, 9, 0, s, 0, time.UTC).Format(time.RFC3339Nano) }
	attempt := func(n int, outcome string) map[string]any {
		return map[string]any{"type": "attempt", "execution_id": "kept", "step_id": "send", "attempt": n, "tool": "send_email",
			"effect": "write", "provider": "mail-api", "idempotency_key": "ik_kept", "started_at": at(n), "ended_at": at(n), "outcome": outcome}
	}
	postUIEvents(t, base, []map[string]any{attempt(1, "timeout")})
	for range 3 { // read, then kept
		if a, _ := executionAttempts(t, base, "kept"); a != 1 {
			t.Fatalf("before the retry: got %d attempts, want 1", a)
		}
	}
	postUIEvents(t, base, []map[string]any{attempt(2, "ok")})
	if a, _ := executionAttempts(t, base, "kept"); a != 2 {
		t.Errorf("after the retry: got %d attempts, want 2 (a model of the state before it answered)", a)
	}
	_, before := executionAttempts(t, base, "kept")
	for j := range 2 {
		postUIEvents(t, base, []map[string]any{{"type": "effect", "provider": "mail-api", "effect_id": fmt.Sprintf("msg_%d", j),
			"idempotency_key": "ik_kept", "target": "jo@acme.dev", "at": at(3 + j)}})
	}
	if _, after := executionAttempts(t, base, "kept"); after <= before {
		t.Errorf("after two emails under its key: got %d findings, as before them (%d); want the duplicate's", after, before)
	}
}

// TestExecutionModelSharedByConcurrentReaders: many readers of one big
// execution at once, its page, its fragments and its JSON, get whole
// answers (the race detector watches the one model they share).
func TestExecutionModelSharedByConcurrentReaders(t *testing.T) {
	base := startPagesServer(t)
	postUIEvents(t, base, hugeEvents("shared", 200))
	paths := []string{views.ExecutionURL("shared"), views.ExecutionURL("shared") + "/lanes?offset=20&end=60",
		views.FindingsURL("shared", trace.RuleDuplicateEffect, 5), views.IncidentsURL("shared", 3), "/api/v1/executions/shared"}
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			path := paths[i%len(paths)]
			r := fetchPage(t, base+path, false)
			if r.status != 200 || len(r.body) < 1000 {
				t.Errorf("GET %s: got %d and %d bytes", path, r.status, len(r.body))
			}
		})
	}
	wg.Wait()
	if a, _ := executionAttempts(t, base, "shared"); a != 1000 {
		t.Errorf("after the concurrent reads: got %d attempts, want 1000", a)
	}
}
