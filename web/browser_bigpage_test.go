package web_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/oncetrace/oncetrace/views"
)

// TestBrowserExecutionPageAtAnySize loads the execution page of 2,000
// steps, 10,000 attempts and 1,000 findings and of 10 steps of the same
// shape in one Chromium, alternately: the big one's first answer must stay
// within the bounds, and its load time is compared with the small one's.
// Then it follows every "show more" link, as a reader's clicks would,
// until every lane, finding and incident is on the page.
//
// Issue 24 asks for a load within 3× the small one's. The first answer
// is bounded, but building it needs the whole execution read and derived
// (ReadExecution, NewExecution): that read is most of the big page's time
// when the page is read from the store. The web keeps the model while the
// store is unchanged (execution_cache.go), so reloads, fragments and
// other readers of the page cost only the drawing; it carries the model
// over commits that cannot change it (execution_carry.go) and builds it
// ahead once ingest goes quiet (execution_warm.go). The four are
// measured, alternately, and logged, not asserted: a timing is a
// measurement, and under the suite's own load it says nothing
// (docs/ui.md has the runs). The bounds on bytes and elements are
// asserted, and that the page after another execution's commit and once
// ingest went quiet was answered from a model.
func TestBrowserExecutionPageAtAnySize(t *testing.T) {
	chromium := requireChromium(t)
	base := startHugeServer(t)
	ctx := startBrowser(t, chromium)
	huge, small := base+views.ExecutionURL("huge"), base+views.ExecutionURL("small")

	type load struct {
		Ms                float64 // navigation start to the load event's end
		Server            float64 // request sent to the first byte of the answer
		Bytes, Elements   int
		Lanes, Findings   int
		HasMore, Overview bool
	}
	const measure = `(() => {
  const n = performance.getEntriesByType('navigation')[0];
  return {Ms: n.loadEventEnd - n.startTime, Server: n.responseStart - n.requestStart, Bytes: n.decodedBodySize, Elements: document.getElementsByTagName('*').length,
    Lanes: document.querySelectorAll('[data-testid=lane]').length, Findings: document.querySelectorAll('[data-testid=finding]').length,
    HasMore: !!document.querySelector('a[data-more]'), Overview: !!document.querySelector('[data-testid=overview-trouble]')};
})()`
	browserLoad(t, ctx, small) // the static files in the cache for both
	// Each round loads both pages four times: right after a commit to
	// each (a label), so read from the store; right after a commit of
	// another execution, which the server carried the models over
	// (execution_carry.go); after another commit to each once ingest went
	// quiet, when the server had built the huge page's model ahead of the
	// request (execution_warm.go); then again, from the models kept.
	type series struct{ ms, server []float64 }
	var hugeRead, smallRead, hugeCarried, smallCarried, hugeQuiet, smallQuiet, hugeKept, smallKept series
	var h, s load
	loadInto := func(url string, into *series) load {
		browserLoad(t, ctx, url)
		l := browserEval[load](t, ctx, measure)
		into.ms, into.server = append(into.ms, l.Ms), append(into.server, l.Server)
		return l
	}
	label := func(round string) {
		var events []map[string]any
		for _, id := range []string{"huge", "small", "other"} {
			events = append(events, map[string]any{"type": "execution", "execution_id": id, "labels": map[string]any{round: "1"}})
		}
		postUIEvents(t, base, events)
	}
	// answered checks that the huge page's last load was answered from a
	// model (kept or carried), not read.
	answered := func(what string, before map[string]int) {
		if after := modelCounts(t, base); after["kept"] != before["kept"]+1 || after["read"] != before["read"] {
			t.Errorf("the huge page %s: got models %v after %v, want it answered from a model, not read", what, after, before)
		}
	}
	for i := range 5 {
		label(fmt.Sprintf("read-%d", i))
		loadInto(small, &smallRead)
		loadInto(huge, &hugeRead)

		postUIEvents(t, base, []map[string]any{{"type": "execution", "execution_id": fmt.Sprintf("other-%d", i), "name": "other", "status": "running"}})
		loadInto(small, &smallCarried)
		before := modelCounts(t, base)
		loadInto(huge, &hugeCarried)
		answered("after a commit of another execution", before)

		warmed := modelCounts(t, base)["warmed"]
		label(fmt.Sprintf("quiet-%d", i))
		awaitWarmed(t, base, warmed)
		loadInto(small, &smallQuiet)
		before = modelCounts(t, base)
		loadInto(huge, &hugeQuiet)
		answered("once ingest went quiet", before)

		s = loadInto(small, &smallKept)
		h = loadInto(huge, &hugeKept)
	}
	median := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
	for _, r := range []struct {
		name        string
		huge, small series
	}{{"read from the store (right after a commit to it)", hugeRead, smallRead},
		{"carried over another execution's commit", hugeCarried, smallCarried},
		{"once ingest went quiet (built ahead)", hugeQuiet, smallQuiet},
		{"model kept", hugeKept, smallKept}} {
		hm, sm := median(r.huge.ms), median(r.small.ms)
		t.Logf("Chromium, median of 5 loads, %s: %d steps %.0f ms (server %.0f ms), %d steps %.0f ms (server %.0f ms); ratio %.2f",
			r.name, hugeSteps, hm, median(r.huge.server), smallSteps, sm, median(r.small.server), hm/sm)
	}
	t.Logf("first answers: %d steps %d bytes of HTML, %d elements, %d lanes, %d findings; %d steps %d bytes, %d elements",
		hugeSteps, h.Bytes, h.Elements, h.Lanes, h.Findings, smallSteps, s.Bytes, s.Elements)
	if h.Bytes > maxFirstHTMLBytes || h.Elements > maxFirstElements {
		t.Errorf("huge page in Chromium: got %d bytes and %d elements, want at most %d and %d", h.Bytes, h.Elements, maxFirstHTMLBytes, maxFirstElements)
	}
	if !h.HasMore || !h.Overview || s.HasMore {
		t.Errorf("got huge page with more links %v and trouble in the overview %v, small with more links %v; want the huge one's rest behind links, marked in the overview, and the small one whole",
			h.HasMore, h.Overview, s.HasMore)
	}

	browserScreenshot(t, ctx, artifactsDir(t), "execution-huge-first-answer.png")

	followed := expandAll(t, ctx)
	type seen struct{ Lanes, Distinct, Findings, Incidents int }
	got := browserEval[seen](t, ctx, `(() => {
  const lanes = [...document.querySelectorAll('[data-testid=lane]')].map(l => l.dataset.step);
  return {Lanes: lanes.length, Distinct: new Set(lanes).size, Findings: document.querySelectorAll('[data-testid=finding]').length,
    Incidents: document.querySelectorAll('[data-testid=incident]').length};
})()`)
	t.Logf("followed %d links in Chromium: %+v", followed, got)
	if got.Lanes != hugeSteps || got.Distinct != hugeSteps || got.Findings != hugeFindings || got.Incidents != hugeIncidents {
		t.Errorf("after following every link: got %+v, want %d lanes once each, %d findings, %d incidents", got, hugeSteps, hugeFindings, hugeIncidents)
	}
}
