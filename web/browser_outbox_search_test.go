package web_test

import (
	"slices"
	"testing"

	"github.com/chromedp/chromedp"
)

// The outbox search, typed into the page's box as a reader would: an
// email is found by its recipient, its subject and its message id.
func TestBrowserOutboxSearch(t *testing.T) {
	chromium := requireChromium(t)
	srv := startOncetraceServe(t)
	postUIEvents(t, srv.url, outboxSearchEvents())
	ctx := startBrowser(t, chromium)
	for _, c := range []struct {
		search string
		want   []string
	}{
		{"to:jordan@acme.dev", []string{"<inv-1@acme.dev>", "<inv-2@acme.dev>"}},
		{`subject:"welcome aboard"`, []string{"<welcome@globex.io>"}},
		{"message-id:inv-2@acme.dev", []string{"<inv-2@acme.dev>"}},
	} {
		browserLoad(t, ctx, srv.url+"/outbox")
		browserDo(t, ctx, "search the outbox for "+c.search,
			chromedp.SendKeys(chromedp.CSS(`[data-testid=outbox-search]`), c.search),
			chromedp.Submit(chromedp.CSS(`[data-testid=outbox-search]`)),
		)
		waitAcrossNavigation(t, ctx, "the results of "+c.search, `location.search.includes('q=') && document.readyState === "complete"`)
		got := browserEval[[]string](t, ctx, `Array.from(document.querySelectorAll('[data-testid=effect-row] td:nth-child(3) code')).map(c => c.textContent)`)
		if !slices.Equal(got, c.want) {
			t.Errorf("search %s: got rows %q, want %q", c.search, got, c.want)
		}
		if box := browserEval[string](t, ctx, `document.querySelector('[data-testid=outbox-search]').value`); box != c.search {
			t.Errorf("search %s: the box shows %q after the search, want the search", c.search, box)
		}
	}
	browserScreenshot(t, ctx, artifactsDir(t), "outbox-search-light.png")
}
