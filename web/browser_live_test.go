package web_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/views"
)

const (
	browserLiveExec = "exec_browser_live" // running while the test watches it
	browserTailExec = "exec_browser_tail" // posted while /live is open
)

// noReload marks the window; a reload would lose the mark.
const (
	markWindow   = `window.__oncetraceNoReload = true`
	windowMarked = `window.__oncetraceNoReload === true`
)

func countSelector(sel string) string {
	return `document.querySelectorAll(` + strconv.Quote(sel) + `).length`
}

// TestBrowserLive drives headless Chromium against a real `oncetrace
// serve`: a running execution's page shows a newly posted attempt and its
// email without a reload, then its completion; /live shows a newly posted
// event's row at the top. It skips and fails as TestBrowser does.
func TestBrowserLive(t *testing.T) {
	chromium := requireChromium(t)
	srv := startOncetraceServe(t)
	start := time.Now().UTC().Add(-3 * time.Second)
	at := func(d time.Duration) string { return start.Add(d).Format(time.RFC3339Nano) }
	postUIEvents(t, srv.url, []map[string]any{
		{"type": "execution", "execution_id": browserLiveExec, "name": "billing-agent", "status": "running", "started_at": at(0)},
		{"type": "attempt", "execution_id": browserLiveExec, "step_id": "step-1", "attempt": 1, "tool": "lookup_customer",
			"effect": "read", "worker": "pid-7", "started_at": at(0), "ended_at": at(500 * time.Millisecond), "outcome": "ok"},
	})
	dir := artifactsDir(t)
	ctx := startBrowser(t, chromium)

	// The execution page, while the execution runs.
	browserLoad(t, ctx, srv.url+views.ExecutionURL(browserLiveExec))
	if n := browserEval[int](t, ctx, countSelector(`#live-execution[data-live-url]`)); n != 1 {
		t.Fatalf("running execution page: got %d #live-execution, want 1 (the page subscribes while it runs)", n)
	}
	attempts := browserEval[int](t, ctx, countSelector(`[data-testid=attempt]`))
	if attempts != 1 {
		t.Fatalf("before: got %d [data-testid=attempt], want 1", attempts)
	}
	if n := browserEval[int](t, ctx, countSelector(`[data-testid=effect]`)); n != 0 {
		t.Fatalf("before: got %d [data-testid=effect], want 0", n)
	}
	browserEval[bool](t, ctx, markWindow)

	postUIEvents(t, srv.url, []map[string]any{
		{"type": "attempt", "execution_id": browserLiveExec, "step_id": "step-2", "attempt": 1, "tool": "send_invoice_email",
			"effect": "write", "provider": "mail-api", "idempotency_key": "ik_browser_live", "worker": "pid-7",
			"args":       map[string]any{"to": "jordan@acme.dev"},
			"started_at": at(time.Second), "ended_at": at(1300 * time.Millisecond), "outcome": "ok"},
		{"type": "effect", "provider": "mail-api", "effect_id": "msg_browser_live", "idempotency_key": "ik_browser_live",
			"execution_id": browserLiveExec, "step_id": "step-2", "target": "jordan@acme.dev", "at": at(1200 * time.Millisecond)},
	})
	newAttempt := attemptSelector(browserLiveExec, "step-2", 1)
	browserWait(t, ctx, "the new attempt and its email on the page without a reload",
		countSelector(`[data-testid=attempt]`)+` === `+strconv.Itoa(attempts+1)+
			` && document.querySelector(`+strconv.Quote(newAttempt)+`) !== null`+
			` && `+countSelector(`[data-testid=effect]`)+` === 1`)
	if !browserEval[bool](t, ctx, windowMarked) {
		t.Fatal("the execution page reloaded, want it updated in place")
	}
	browserScreenshot(t, ctx, dir, "live-execution-light.png")

	// The execution ends: the header says so and the page stops listening.
	postUIEvents(t, srv.url, []map[string]any{
		{"type": "execution", "execution_id": browserLiveExec, "status": "completed", "ended_at": at(2 * time.Second)},
	})
	browserWait(t, ctx, "the header to show completed",
		`document.querySelector('#execution-header h1').textContent.includes('completed')`)
	if !browserEval[bool](t, ctx, windowMarked) {
		t.Fatal("the execution page reloaded at the end, want it updated in place")
	}

	// /live: a new event's row appears at the top.
	browserLoad(t, ctx, srv.url+"/live")
	browserWait(t, ctx, "the live status to say live", `document.getElementById('live-status').textContent === 'live'`)
	rows := browserEval[int](t, ctx, countSelector(`#live-rows tr`))
	if rows != 5 {
		t.Errorf("/live before: got %d rows, want the 5 events posted so far", rows)
	}
	browserEval[bool](t, ctx, markWindow)
	postUIEvents(t, srv.url, []map[string]any{
		{"type": "attempt", "execution_id": browserTailExec, "step_id": "step-1", "attempt": 1, "tool": "fetch_report",
			"effect": "read", "started_at": at(3 * time.Second)},
	})
	browserWait(t, ctx, "the new event's row at the top of /live",
		countSelector(`#live-rows tr`)+` === `+strconv.Itoa(rows+1)+
			` && document.querySelector('#live-rows tr[data-testid=live-event]').textContent.includes(`+strconv.Quote(browserTailExec)+`)`)
	if !browserEval[bool](t, ctx, windowMarked) {
		t.Fatal("/live reloaded, want the row inserted in place")
	}
	browserScreenshot(t, ctx, dir, "live-light.png")

	select {
	case err := <-srv.exited:
		srv.exited <- err
		t.Errorf("oncetrace serve exited during the test: %v\n%s", err, srv.logText())
	default:
	}
}
