package web_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncetrace/oncetrace/views"
)

// TestBrowserAnyPrintableID clicks through the pages of nasty ids in
// Chromium against a real `oncetrace serve`: the execution link from the
// list, an attempt's detail (by click and by its anchor in the URL), the
// key link in that detail, an effect's detail, and the permalinks. A
// browser, unlike Go's client, removes "." and ".." path segments (also
// written %2E%2E), so this is where such ids lost their pages.
func TestBrowserAnyPrintableID(t *testing.T) {
	chromium := requireChromium(t)
	srv := startOncetraceServe(t)
	ids := []string{"billing/2026-06;run=3", "..", ".", "frag#1", "50%", "ünïcødé a+b", `"quote'`}
	for _, id := range ids {
		if !postIDEvents(t, srv.url, nastyID{name: id, id: id}) {
			t.Fatalf("%q: refused at ingest", id)
		}
	}
	ctx := startBrowser(t, chromium)
	js := strconv.Quote

	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			// The list: click the execution's link, reach its page.
			browserLoad(t, ctx, srv.url+"/")
			if !browserEval[bool](t, ctx, `(() => {
  const a = [...document.querySelectorAll('[data-testid=execution-row] a')].find(a => a.textContent === `+js(id)+`);
  if (a) a.setAttribute('data-click-target', '');
  return !!a;
})()`) {
				t.Fatalf("list: got no link with the text %q", id)
			}
			clickToPage(t, ctx, "the list's link to "+id, "[data-click-target]", views.ExecutionURL(id))
			// The heading is the execution's name with its id beside it.
			if h1 := browserEval[string](t, ctx, `document.querySelector('[data-testid=execution-header] [data-testid=run-id]').textContent`); h1 != id {
				t.Errorf("execution header's id: got %q, want %q", h1, id)
			}

			// An attempt's bar: its detail in the panel, then its key link.
			clickAttempt(t, ctx, attemptSelector(id, id, 2))
			browserWait(t, ctx, "the panel to show attempt 2", panelHeading+` === `+js(id+" · attempt 2"))
			clickToPage(t, ctx, "the attempt detail's key link", "#detail [data-testid=detail-key]", views.KeyURL(id))
			if key := browserEval[string](t, ctx, `document.querySelector('[data-testid=key]').textContent`); key != id {
				t.Errorf("key page: got key %q, want %q", key, id)
			}
			if n := browserEval[int](t, ctx, `document.querySelectorAll('[data-testid=key-attempt]').length`); n != 2 {
				t.Errorf("key page: got %d attempts, want 2", n)
			}

			// An effect's mark: its detail in the panel.
			browserLoad(t, ctx, srv.url+views.ExecutionURL(id))
			clickAttempt(t, ctx, `[data-testid=effect][href=`+js(views.EffectURL(id, id, dupEffectID(id)))+`]`)
			browserWait(t, ctx, "the panel to show the second effect",
				`(document.querySelector('#detail [data-testid=effect-detail] h3') || {textContent: ''}).textContent.trim() === `+js(id+" · "+dupEffectID(id)))

			// An attempt's anchor in the URL opens it; the permalinks are pages.
			browserLoad(t, ctx, srv.url+views.ExecutionURL(id)+"#"+views.AttemptAnchor(id, 1))
			browserWait(t, ctx, "the anchored attempt in the panel", panelHeading+` === `+js(id+" · attempt 1"))
			browserLoad(t, ctx, srv.url+views.AttemptURL(id, id, 1))
			if h := browserEval[string](t, ctx, `(document.querySelector('[data-testid=attempt-detail] h3') || {textContent: ''}).textContent.trim()`); h != id+" · attempt 1" {
				t.Errorf("attempt permalink: got heading %q, want %q", h, id+" · attempt 1")
			}
			browserLoad(t, ctx, srv.url+views.EffectURL(id, id, id))
			if h := browserEval[string](t, ctx, `(document.querySelector('[data-testid=effect-detail] h3') || {textContent: ''}).textContent.trim()`); h != id+" · "+id {
				t.Errorf("effect permalink: got heading %q, want %q", h, id+" · "+id)
			}
		})
	}
}

// clickToPage clicks, with the mouse, the first element of the CSS
// selector sel, and waits until the browser shows the page at want (a
// path and query) and has loaded it. The element is looked up when it is
// clicked: the detail panel may have been filled again meanwhile.
func clickToPage(t *testing.T, ctx context.Context, what, sel, want string) {
	t.Helper()
	browserDo(t, ctx, "click "+what, chromedp.Click(chromedp.CSS(sel)))
	// Evaluations fail while the page changes; ask again until it is there.
	loaded := `document.readyState === "complete" && location.pathname + location.search === ` + strconv.Quote(want)
	deadline := time.Now().Add(15 * time.Second)
	for {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok, err := chromedp.Run(sctx, chromedp.Evaluate[bool](loaded))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			loc, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname + location.search`))
			t.Fatalf("click %s: got location %s (last error %v), want %s loaded", what, loc, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
