package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
	"github.com/oncetrace/oncetrace/web"
)

var modelsRE = regexp.MustCompile(`(?m)^oncetrace_execution_models_total\{source="(\w+)"\} (\d+)$`)

// modelCounts scrapes the server's execution models by source.
func modelCounts(t *testing.T, base string) map[string]int {
	t.Helper()
	r := fetchPage(t, base+"/metrics", false)
	counts := map[string]int{}
	for _, m := range modelsRE.FindAllStringSubmatch(string(r.body), -1) {
		counts[m[1]], _ = strconv.Atoi(m[2])
	}
	if len(counts) != 4 {
		t.Fatalf("GET /metrics: got execution models %v, want kept, read, warmed and carried", counts)
	}
	return counts
}

// awaitWarmed waits until the server has built more than before models
// ahead of requests, or fails.
func awaitWarmed(t *testing.T, base string, before int) map[string]int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c := modelCounts(t, base)
		if c["warmed"] > before {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("no model built ahead 30 s after ingest went quiet: got %v, want warmed over %d", c, before)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// warmSteps makes hugeEvents' execution big enough to be built ahead:
// 2,000 attempts, 500 effects, 200 findings.
const warmSteps = 400

// TestBigExecutionBuiltAheadOnceIngestIsQuiet: once ingest stops, the
// server builds the page model of the big execution it just wrote, so the
// first request for the page is answered without reading it; it never
// builds a small one's; a model built ahead answers only the state it
// was built at: an attempt committed after it is on the next answer; a
// commit of another execution leaves it answering (carried); and a big
// page read lately is built again after a commit that made it stale.
func TestBigExecutionBuiltAheadOnceIngestIsQuiet(t *testing.T) {
	base := startPagesServer(t)
	postUIEvents(t, base, hugeEvents("small", smallSteps))
	big := hugeEvents("big", warmSteps)
	for i := 0; i < len(big); i += 1000 {
		postUIEvents(t, base, big[i:min(i+1000, len(big))])
	}
	before := awaitWarmed(t, base, 0)
	if before["warmed"] != 1 {
		t.Errorf("after writing one big and one small execution: got %v built ahead, want 1 (the big one's)", before)
	}
	if page := fetchPage(t, base+views.ExecutionURL("big"), false); page.status != 200 || !strings.Contains(string(page.body), fmt.Sprintf("%d findings", warmSteps/2)) {
		t.Fatalf("GET the big execution: got %d, want 200 with its %d findings", page.status, warmSteps/2)
	}
	after := modelCounts(t, base)
	if after["kept"] != before["kept"]+1 || after["read"] != before["read"] {
		t.Errorf("the first request for the big page: got models %v after %v, want one more kept and none read", after, before)
	}

	// One more attempt, then at once the page: read again, with it.
	postUIEvents(t, base, []map[string]any{{"type": "attempt", "execution_id": "big", "step_id": "late-step", "attempt": 1,
		"tool": "send_email", "effect": "write", "provider": "mail-api", "outcome": "ok",
		"started_at": "2026-07-02T12:00:00Z", "ended_at": "2026-07-02T12:00:01Z"}})
	fetchPage(t, base+views.ExecutionURL("big"), false)
	if now := modelCounts(t, base); now["read"] != after["read"]+1 {
		t.Errorf("the page after a commit to the big execution: got models %v after %v, want it read again", now, after)
	}
	if attempts, _ := executionAttempts(t, base, "big"); attempts != warmSteps*5+1 {
		t.Errorf("after one more attempt: got %d attempts, want %d", attempts, warmSteps*5+1)
	}

	// A commit of another execution cannot change it: the model read just
	// now is carried over it (execution_carry.go) and answers at once.
	before = modelCounts(t, base)
	postUIEvents(t, base, []map[string]any{{"type": "execution", "execution_id": "other", "name": "other", "status": "running"}})
	fetchPage(t, base+views.ExecutionURL("big"), false)
	if after := modelCounts(t, base); after["carried"] < before["carried"]+1 || after["kept"] != before["kept"]+1 || after["read"] != before["read"] {
		t.Errorf("the big page after a commit of another execution: got models %v after %v, want it carried and answering, none read", after, before)
	}

	// An effect anchored nowhere may be joined to any execution, so the
	// model is not carried over its commit; as someone read the page
	// lately, it is built again once ingest is quiet.
	warmed := modelCounts(t, base)["warmed"]
	postUIEvents(t, base, []map[string]any{{"type": "effect", "provider": "sms-api", "effect_id": "stray-1", "at": "2026-07-02T12:00:00Z"}})
	before = awaitWarmed(t, base, warmed)
	fetchPage(t, base+views.ExecutionURL("big"), false)
	if after := modelCounts(t, base); after["kept"] != before["kept"]+1 || after["read"] != before["read"] {
		t.Errorf("the big page read lately, after an effect anchored nowhere: got models %v after %v, want one more kept and none read", after, before)
	}
}

// TestNewestBigExecutionBuiltAheadAtStart: a server started on a database
// that holds a big execution builds its model before any request.
func TestNewestBigExecutionBuiltAheadAtStart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "oncetrace.db")
	db, err := sqlite.Open(ctx, path, sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w := writer.New(db, writer.DefaultConfig)
	t.Cleanup(w.Close)
	var events []trace.Event
	for _, raw := range hugeEvents("big", warmSteps) {
		body, err := json.Marshal(raw)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := ingest.ParseEvent(body, ingest.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	if _, err := w.Write(ctx, events); err != nil {
		t.Fatal(err)
	}
	ws := web.New(web.Config{DB: db, Writer: w, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig})
	srv := httptest.NewServer(ws)
	t.Cleanup(func() {
		srv.Close()
		ws.Close()
	})
	before := awaitWarmed(t, srv.URL, 0)
	fetchPage(t, srv.URL+views.ExecutionURL("big"), false)
	if after := modelCounts(t, srv.URL); after["kept"] != before["kept"]+1 || after["read"] != before["read"] {
		t.Errorf("the first request after start: got models %v after %v, want one more kept and none read", after, before)
	}
}
