package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oncetrace/oncetrace/views"
)

// At 390 px the timeline is wider than the screen; it opens scrolled to
// the incident, so that the culprit attempt and the extra email (the last
// duplicate) are in view without a swipe (the crash run's were off to the
// right). The original may be left of them when all do not fit.
func TestBrowserMobileTimelineOpensAtIncident(t *testing.T) {
	chromium := requireChromium(t)
	srv := startOncetraceServe(t)
	postUIEvents(t, srv.url, uiEvents())
	ctx := startBrowser(t, chromium)
	browserDo(t, ctx, "viewport 390×844", chromedp.EmulateViewport(390, 844))
	for _, id := range []string{uiCrashExec, uiDupExec} {
		browserLoad(t, ctx, srv.url+views.ExecutionURL(id))
		browserScreenshot(t, ctx, artifactsDir(t), "execution-"+id+"-390.png")
		type seen struct {
			Wider    bool
			Marks    int
			Outside  []string
			Scrolled float64
		}
		got := browserEval[seen](t, ctx, `(() => {
  const box = document.querySelector('#timeline .tl-scroll');
  const b = box.getBoundingClientRect();
  const name = box.querySelector('.tl-name');
  const left = b.left + (name ? name.offsetWidth : 0);
  const dups = Array.from(box.querySelectorAll('[data-testid=effect][data-state=duplicate]'))
    .sort((a, b) => Number(a.getAttribute('data-at')) - Number(b.getAttribute('data-at')));
  const marks = Array.from(box.querySelectorAll('[data-testid=culprit]')).concat(dups.slice(-1).map(a => a.querySelector('rect')));
  const outside = marks.filter(m => { const r = m.getBoundingClientRect(); return r.left < left - 1 || r.right > b.right + 1; })
    .map(m => (m.getAttribute('data-testid') || 'effect') + ' ' + (m.closest('a') ? m.closest('a').id : '') + ' at ' + Math.round(m.getBoundingClientRect().left) + '–' + Math.round(m.getBoundingClientRect().right));
  return {Wider: box.scrollWidth > box.clientWidth + 1, Marks: marks.length, Outside: outside, Scrolled: box.scrollLeft};
})()`)
		if !got.Wider || got.Marks < 2 {
			t.Fatalf("%s at 390 px: got a timeline wider than its box %v and %d incident marks, want wider and at least 2 (the test proves nothing otherwise)", id, got.Wider, got.Marks)
		}
		if len(got.Outside) > 0 {
			t.Errorf("%s at 390 px (scrollLeft %.0f): got %q outside the visible part of the timeline, want the incident in view", id, got.Scrolled, got.Outside)
		}
	}
}
