package web_test

import (
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
// Issue 24 asks for a load within 3× the small one's; that is not met
// yet: the first answer is bounded, but the server still reads and
// derives the whole execution for it (ReadExecution, NewExecution), which
// is most of the big page's time (the Server figure logged): 5.1× on a
// quiet 2-core machine, 3.5× to 6.9× on a busy one, 23× when it shared
// the machine with the whole suite; before the bound, 50× and more. The
// ratio is logged, not asserted: a timing is a measurement, and under
// the suite's own load it says nothing (docs/ui.md has the runs). The
// bounds on bytes and elements are asserted.
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
	var hugeMs, smallMs, hugeServer, smallServer []float64
	var h, s load
	for range 5 {
		browserLoad(t, ctx, small)
		s = browserEval[load](t, ctx, measure)
		smallMs, smallServer = append(smallMs, s.Ms), append(smallServer, s.Server)
		browserLoad(t, ctx, huge)
		h = browserEval[load](t, ctx, measure)
		hugeMs, hugeServer = append(hugeMs, h.Ms), append(hugeServer, h.Server)
	}
	median := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
	hm, sm := median(hugeMs), median(smallMs)
	t.Logf("Chromium, median of 5 loads: %d steps %.0f ms (server %.0f ms; %d bytes of HTML, %d elements, %d lanes, %d findings); %d steps %.0f ms (server %.0f ms; %d bytes, %d elements); ratio %.2f",
		hugeSteps, hm, median(hugeServer), h.Bytes, h.Elements, h.Lanes, h.Findings, smallSteps, sm, median(smallServer), s.Bytes, s.Elements, hm/sm)
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
