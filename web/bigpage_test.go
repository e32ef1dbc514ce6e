package web_test

import (
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/views"
)

// hugeEvents is an execution of steps steps of five attempts each (four
// that failed, then one ok), every step a keyed send_email with its own
// email, where every fourth step sent a second email under its key (a
// duplicate_effect) and every fourth step, two later, carried no key (an
// unkeyed_retry): at 2,000 steps, 10,000 attempts, 2,500 effects and
// 1,000 findings.
func hugeEvents(execID string, steps int) []map[string]any {
	base := time.Date(2026, 7, 2, 9, 0, 0, 0, time.UTC)
	ts := func(ms int) string { return base.Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano) }
	events := []map[string]any{}
	ms := 0
	for i := range steps {
		stepID := fmt.Sprintf("step-%d", i+1)
		key := fmt.Sprintf("ik_%s_%d", execID, i+1)
		for n := 1; n <= 5; n++ {
			outcome := []string{"timeout", "error"}[n%2]
			if n == 5 {
				outcome = "ok"
			}
			ev := map[string]any{"type": "attempt", "execution_id": execID, "step_id": stepID, "attempt": n, "tool": "send_email",
				"effect": "write", "provider": "mail-api", "worker": "w1", "started_at": ts(ms), "ended_at": ts(ms + 40), "outcome": outcome,
				"args": map[string]any{"to": fmt.Sprintf("user%d@acme.dev", i+1)}}
			if i%4 != 2 {
				ev["idempotency_key"] = key
			}
			events = append(events, ev)
			ms += 50
		}
		emails := 1
		if i%4 == 0 {
			emails = 2
		}
		for j := range emails {
			ev := map[string]any{"type": "effect", "provider": "mail-api", "effect_id": fmt.Sprintf("msg_%s_%d_%d", execID, i+1, j),
				"target": fmt.Sprintf("user%d@acme.dev", i+1), "execution_id": execID, "step_id": stepID, "at": ts(ms - 20 + 5*j)}
			if i%4 != 2 {
				ev["idempotency_key"] = key
			}
			events = append(events, ev)
		}
	}
	return append([]map[string]any{{"type": "execution", "execution_id": execID, "name": "huge-agent", "status": "completed",
		"started_at": ts(0), "ended_at": ts(ms + 100)}}, events...)
}

// Sizes of the generated executions the big-page tests compare.
const (
	hugeSteps, hugeFindings, hugeIncidents = 2000, 1000, 500
	smallSteps                             = 10
)

// Bounds the acceptance of issue 24 sets on the execution page's first
// answer, at any size.
const (
	maxFirstHTMLBytes = 600_000
	maxFirstElements  = 6000
)

// startHugeServer is a real server with the huge execution ("huge") and a
// small one ("small") of the same shape, written through the ingest API.
func startHugeServer(t *testing.T) string {
	t.Helper()
	base := startPagesServer(t)
	for _, evs := range [][]map[string]any{hugeEvents("huge", hugeSteps), hugeEvents("small", smallSteps)} {
		for i := 0; i < len(evs); i += 2000 {
			postUIEvents(t, base, evs[i:min(i+2000, len(evs))])
		}
	}
	return base
}

var (
	startTagRE = regexp.MustCompile(`<[a-zA-Z][a-zA-Z0-9-]*`)
	moreRE     = regexp.MustCompile(`<a href="([^"]+)" data-more>`)
	laneRE     = regexp.MustCompile(`data-testid="lane" data-step="([^"]+)"`)
	findingRE  = regexp.MustCompile(`data-testid="finding" data-rule="`)
	incidentRE = regexp.MustCompile(`data-testid="incident" `)
)

// TestExecutionPageBounded checks the first answer of a 10,000-attempt
// execution's page against the bounds, and, without a script, follows
// every "show more" link (each a page of its own) until every lane,
// finding and incident has been seen once.
func TestExecutionPageBounded(t *testing.T) {
	base := startHugeServer(t)
	first := fetchPage(t, base+views.ExecutionURL("huge"), false)
	if first.status != http.StatusOK {
		t.Fatalf("GET the huge execution: got %d, want 200", first.status)
	}
	elements := len(startTagRE.FindAll(first.body, -1))
	t.Logf("first answer of %d steps, %d findings: %d bytes, %d elements", hugeSteps, hugeFindings, len(first.body), elements)
	if len(first.body) > maxFirstHTMLBytes || elements > maxFirstElements {
		t.Errorf("first answer: got %d bytes and %d elements, want at most %d and %d", len(first.body), elements, maxFirstHTMLBytes, maxFirstElements)
	}
	page := string(first.body)
	for _, want := range []string{"1000 findings", "Steps with findings · 1000 lanes", "(of 497)", "(of 490)", "(of 985)"} {
		if !strings.Contains(page, want) {
			t.Errorf("first answer: got no %q, want the counts of what it leaves out", want)
		}
	}

	lanes, findings, incidents := map[string]int{}, 0, 0
	count := func(body []byte) {
		for _, m := range laneRE.FindAllSubmatch(body, -1) {
			lanes[string(m[1])]++
		}
		findings += len(findingRE.FindAll(body, -1))
		incidents += len(incidentRE.FindAll(body, -1))
	}
	count(first.body)
	queue := moreLinks(first.body)
	fetched := 0
	for len(queue) > 0 {
		href := queue[0]
		queue = queue[1:]
		p := fetchPage(t, base+href, false)
		if p.status != http.StatusOK || !strings.Contains(string(p.body), "<html") {
			t.Fatalf("GET %s without the script: got %d, want a page of its own", href, p.status)
		}
		fetched++
		count(p.body)
		queue = append(queue, moreLinks(p.body)...)
	}
	t.Logf("followed %d links", fetched)
	if len(lanes) != hugeSteps || findings != hugeFindings || incidents != hugeIncidents {
		t.Errorf("after following every link: got %d lanes, %d findings, %d incidents, want %d, %d, %d",
			len(lanes), findings, incidents, hugeSteps, hugeFindings, hugeIncidents)
	}
	for step, n := range lanes {
		if n != 1 {
			t.Errorf("lane %s: got it %d times, want once", step, n)
		}
	}

	// A finding's link to a lane not on the first answer leads to a page
	// that has it.
	lane := fetchPage(t, base+views.LaneURL("huge", "step-1999"), false)
	if lane.status != http.StatusOK || !strings.Contains(string(lane.body), `data-step="step-1999"`) {
		t.Errorf("lane of step-1999: got %d, want its lane", lane.status)
	}
	if p := fetchPage(t, base+views.LaneURL("huge", "nope"), false); p.status != http.StatusNotFound {
		t.Errorf("lane of an unknown step: got %d, want 404", p.status)
	}
}

// moreLinks are the hrefs of an answer's "show more" links.
func moreLinks(body []byte) []string {
	var out []string
	for _, m := range moreRE.FindAllSubmatch(body, -1) {
		out = append(out, html.UnescapeString(string(m[1])))
	}
	return out
}
