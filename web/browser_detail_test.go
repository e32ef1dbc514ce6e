package web_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/oncetrace/oncetrace/views"
)

const manyExec = "exec_many"

// manyStepEvents is an execution of n one-attempt steps, long enough that
// its last lanes lie far below the first screen; step-7 retried and sent
// an email twice, so it has a finding.
func manyStepEvents(n int) []map[string]any {
	base := uiBase.Add(time.Hour)
	ts := func(sec float64) string {
		return base.Add(time.Duration(sec * float64(time.Second))).Format(time.RFC3339Nano)
	}
	events := []map[string]any{{"type": "execution", "execution_id": manyExec, "name": "crawler", "status": "completed",
		"started_at": ts(0), "ended_at": ts(float64(n) + 5)}}
	for i := range n {
		s := float64(i)
		ev := map[string]any{"type": "attempt", "execution_id": manyExec, "step_id": fmt.Sprintf("step-%d", i),
			"attempt": 1, "tool": "fetch_page", "effect": "read", "started_at": ts(s), "ended_at": ts(s + 0.6), "outcome": "ok"}
		if i == 7 {
			ev["tool"], ev["effect"], ev["provider"], ev["outcome"] = "send_email", "write", "mail-api", "timeout"
		}
		events = append(events, ev)
	}
	events = append(events,
		map[string]any{"type": "attempt", "execution_id": manyExec, "step_id": "step-7", "attempt": 2, "tool": "send_email", "effect": "write",
			"provider": "mail-api", "started_at": ts(7.7), "ended_at": ts(7.9), "outcome": "ok"},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "msg_m1", "execution_id": manyExec, "step_id": "step-7", "at": ts(7.3)},
		map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "msg_m2", "execution_id": manyExec, "step_id": "step-7", "at": ts(7.8)},
	)
	return events
}

// farLink opens every collapsed group (as a reader expanding them would),
// scrolls the last visible detail link matching sel into the middle of the
// viewport and returns its href and how far down the page it lies; null
// when there is none.
const farLinkJS = `((sel) => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const links = Array.from(document.querySelectorAll(sel)).filter(a => {
    const r = a.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && a.checkVisibility();
  });
  if (links.length === 0) return null;
  const a = links[links.length - 1];
  const pageY = a.getBoundingClientRect().top + window.scrollY;
  a.scrollIntoView({block: 'center', inline: 'center'});
  return {href: a.getAttribute('href'), pageY: pageY, innerH: window.innerHeight};
})`

type farLink struct {
	Href   string  `json:"href"`
	PageY  float64 `json:"pageY"`
	InnerH float64 `json:"innerH"`
}

// clickLinkByHref clicks the middle of the visible link with that href
// (of its bar, on the timeline) with the mouse, checking that nothing
// covers it.
func clickLinkByHref(t *testing.T, ctx context.Context, sel, href string) {
	t.Helper()
	type point struct {
		X, Y  float64
		OnTop bool
	}
	p := browserEval[*point](t, ctx, `(() => {
  const a = Array.from(document.querySelectorAll(`+strconv.Quote(sel)+`)).find(a => a.getAttribute('href') === `+strconv.Quote(href)+` && a.getBoundingClientRect().width > 0 && a.checkVisibility());
  if (!a) return null;
  // A timeline bar's link also holds its label: aim at the bar.
  const r = (a.querySelector('rect') || a).getBoundingClientRect();
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  const hit = document.elementFromPoint(x, y);
  return {X: x, Y: y, OnTop: !!hit && a.contains(hit)};
})()`)
	if p == nil {
		t.Fatalf("click: got no visible %s with href %s", sel, href)
	}
	if !p.OnTop {
		t.Fatalf("click: the middle of %s (%.0f, %.0f) is covered by another element, want it on top", href, p.X, p.Y)
	}
	browserDo(t, ctx, "click "+href, chromedp.MouseClickXY(p.X, p.Y), chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, 1, 1))
}

// viewportScreenshot saves what the reader sees: the viewport, not the
// whole page (a full-page capture draws a fixed sheet at the page's end).
func viewportScreenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Call(sctx, page.CaptureScreenshot, page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng})
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	if err := os.WriteFile(path, png.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png.Data))
}

// panelBox is where the detail panel is drawn and what it shows.
type panelBox struct {
	Top, Left, Bottom, Right float64
	InnerW, InnerH           float64
	Display, Position        string
	Heading                  string
	FocusInPanel             bool
	LinkVisible              bool // the clicked link is on screen, not under the panel
}

func measurePanel(t *testing.T, ctx context.Context, sel, href string) panelBox {
	t.Helper()
	return browserEval[panelBox](t, ctx, `(() => {
  const p = document.getElementById('detail');
  const r = p.getBoundingClientRect(), cs = getComputedStyle(p);
  const h = p.querySelector('[data-testid=attempt-detail] h3');
  const a = Array.from(document.querySelectorAll(`+strconv.Quote(sel)+`)).find(a => a.getAttribute('href') === `+strconv.Quote(href)+` && a.getBoundingClientRect().width > 0 && a.checkVisibility());
  let visible = false;
  if (a) {
    const ar = (a.querySelector('rect') || a).getBoundingClientRect();
    const hit = document.elementFromPoint(ar.left + ar.width / 2, ar.top + ar.height / 2);
    visible = !!hit && a.contains(hit);
  }
  return {Top: r.top, Left: r.left, Bottom: r.bottom, Right: r.right, InnerW: window.innerWidth, InnerH: window.innerHeight,
    Display: cs.display, Position: cs.position, Heading: h ? h.textContent.replace(/\s+/g, ' ').trim() : '',
    FocusInPanel: p.contains(document.activeElement), LinkVisible: visible};
})()`)
}

// TestBrowserDetailBesideClick checks issue 12's "detail beside the
// click": at a laptop's, a tablet's and a phone's width, clicking an
// attempt far down a 60-step execution (on the timeline and in the step
// table) shows its detail inside the viewport; on narrow screens the
// detail is a bottom sheet that takes the focus and gives it back on
// Escape. It skips and fails as TestBrowser does.
func TestBrowserDetailBesideClick(t *testing.T) {
	chromium := requireChromium(t)
	srv := startOncetraceServe(t)
	postUIEvents(t, srv.url, manyStepEvents(60))
	dir := artifactsDir(t)
	ctx := startBrowser(t, chromium)
	t.Cleanup(func() { _ = chromedp.Do(ctx, chromedp.EmulateViewport(viewportW, viewportH)) })

	pages := []struct {
		name, path, sel string
	}{
		{"timeline", views.ExecutionURL(manyExec), "a.attempt-link"},
		{"steps", views.StepsURL(manyExec, "", ""), "a.step-detail-link[data-testid=step-detail]"},
	}
	for _, size := range []struct {
		w, h  int64
		sheet bool
	}{{1440, 900, false}, {768, 1024, true}, {390, 844, true}} {
		for _, v := range pages {
			name := fmt.Sprintf("%s at %d×%d", v.name, size.w, size.h)
			browserDo(t, ctx, "viewport "+name, chromedp.EmulateViewport(size.w, size.h))
			browserLoad(t, ctx, srv.url+v.path)
			expandAll(t, ctx) // the lanes past the first 15, as a reader's "show more" brings them
			far := browserEval[*farLink](t, ctx, farLinkJS+"("+strconv.Quote(v.sel)+")")
			if far == nil {
				t.Fatalf("%s: got no %s on the page, want the execution's attempts", name, v.sel)
			}
			if far.PageY < far.InnerH {
				t.Errorf("%s: the last attempt link is at y %.0f, within the first %.0f px screen: the test wants one far down the page", name, far.PageY, far.InnerH)
			}
			u, err := url.Parse(far.Href)
			if err != nil {
				t.Fatal(err)
			}
			stepID := u.Query().Get("step")
			if stepID == "" {
				t.Fatalf("%s: the link %s names no step", name, far.Href)
			}
			scrolled := browserEval[float64](t, ctx, `window.scrollY`)
			if w := browserEval[float64](t, ctx, `document.documentElement.scrollWidth`); w > float64(size.w)+0.5 {
				t.Logf("%s: the page is %.0f px wide, wider than the viewport", name, w)
			}
			clickLinkByHref(t, ctx, v.sel, far.Href)
			want := stepID + " · attempt " + u.Query().Get("n")
			browserWait(t, ctx, name+": the panel to show "+want,
				`(document.querySelector('#detail [data-testid=attempt-detail] h3') || {textContent: ''}).textContent.replace(/\s+/g, ' ').trim() === `+strconv.Quote(want))
			// Let a scroll that keeps the link above the sheet settle.
			time.Sleep(150 * time.Millisecond)
			p := measurePanel(t, ctx, v.sel, far.Href)
			t.Logf("%s: clicked %s at page y %.0f (scrolled to %.0f); panel %s at x %.0f–%.0f, y %.0f–%.0f of %.0f×%.0f",
				name, want, far.PageY, scrolled, p.Position, p.Left, p.Right, p.Top, p.Bottom, p.InnerW, p.InnerH)
			if p.Display == "none" || p.Bottom <= p.Top || p.Right <= p.Left {
				t.Errorf("%s: got the panel not drawn (display %s, %.0f×%.0f), want it shown", name, p.Display, p.Right-p.Left, p.Bottom-p.Top)
			}
			if p.Top < 0 || p.Left < 0 || p.Bottom > p.InnerH+0.5 || p.Right > p.InnerW+0.5 {
				t.Errorf("%s: got the panel at x %.0f–%.0f, y %.0f–%.0f, want it inside the %.0f×%.0f viewport, beside the click",
					name, p.Left, p.Right, p.Top, p.Bottom, p.InnerW, p.InnerH)
			}
			if p.Heading != want {
				t.Errorf("%s: panel heading: got %q, want %q", name, p.Heading, want)
			}
			if !p.LinkVisible {
				t.Errorf("%s: got the clicked link off screen or under the panel, want it still in view", name)
			}
			viewportScreenshot(t, ctx, filepath.Join(dir, fmt.Sprintf("detail-%s-%d.png", v.name, size.w)))
			if !size.sheet {
				if p.Position != "sticky" {
					t.Errorf("%s: got panel position %s, want a sticky side panel", name, p.Position)
				}
				continue
			}
			if p.Position != "fixed" {
				t.Errorf("%s: got panel position %s, want a fixed bottom sheet", name, p.Position)
			}
			if p.Bottom < p.InnerH-1 || p.Bottom-p.Top > 0.61*p.InnerH {
				t.Errorf("%s: got the sheet at y %.0f–%.0f, want it on the bottom edge and at most 60%% of the %.0f px height", name, p.Top, p.Bottom, p.InnerH)
			}
			if !p.FocusInPanel {
				t.Errorf("%s: got the focus outside the sheet after opening, want it moved into the sheet", name)
			}
			browserDo(t, ctx, name+": press Escape", chromedp.KeyEvent(kb.Escape))
			browserWait(t, ctx, name+": Escape to close the sheet", `getComputedStyle(document.getElementById('detail')).display === 'none'`)
			back := browserEval[string](t, ctx, `document.activeElement ? (document.activeElement.getAttribute('href') || '') : ''`)
			if back != far.Href {
				t.Errorf("%s: after Escape the focus is on %q, want it back on the clicked link %s", name, back, far.Href)
			}
		}
	}

	// The close button closes the sheet too.
	browserDo(t, ctx, "viewport 390", chromedp.EmulateViewport(390, 844))
	browserLoad(t, ctx, srv.url+views.ExecutionURL(manyExec))
	expandAll(t, ctx)
	far := browserEval[*farLink](t, ctx, farLinkJS+`("a.attempt-link")`)
	if far == nil {
		t.Fatal("no attempt link at 390 px")
	}
	clickLinkByHref(t, ctx, "a.attempt-link", far.Href)
	browserWait(t, ctx, "the sheet to open", `document.getElementById('detail').classList.contains('open')`)
	browserDo(t, ctx, "click Close", chromedp.Click(chromedp.CSS(`[data-testid=detail-close]`)))
	browserWait(t, ctx, "Close to close the sheet", `getComputedStyle(document.getElementById('detail')).display === 'none'`)

	// A link to an attempt's anchor (as a finding's) opens the sheet too.
	browserEval[bool](t, ctx, `(location.hash = `+strconv.Quote("#"+views.AttemptAnchor("step-7", 1))+`, true)`)
	browserWait(t, ctx, "a link to step-7 attempt 1 to open the sheet",
		`document.getElementById('detail').classList.contains('open') && (document.querySelector('#detail [data-testid=attempt-detail] h3') || {textContent: ''}).textContent.replace(/\s+/g, ' ').trim() === "step-7 · attempt 1"`)
	if p := measurePanel(t, ctx, "a.attempt-link", views.AttemptURL(manyExec, "step-7", 1)); p.Top < 0 || p.Bottom > p.InnerH+0.5 || !p.FocusInPanel {
		t.Errorf("hash link at 390 px: got the sheet at y %.0f–%.0f (focus inside %v), want it in the %.0f px viewport with the focus", p.Top, p.Bottom, p.FocusInPanel, p.InnerH)
	}
}

// TestBrowserTimeZoneToggle checks the header's toggle end to end: in a
// browser whose zone is Asia/Tokyo the page shows UTC, the toggle stores
// the browser's zone in the cookie and the reloaded page shows every time
// in it, named; toggling again returns to UTC.
func TestBrowserTimeZoneToggle(t *testing.T) {
	chromium := requireChromium(t)
	srv := startOncetraceServe(t)
	postUIEvents(t, srv.url, uiEvents())
	ctx := startBrowser(t, chromium)
	if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Tokyo"}); err != nil {
		t.Fatalf("emulate the Asia/Tokyo zone: %v", err)
	}
	page := srv.url + views.ExecutionURL(uiDupExec)
	browserLoad(t, ctx, page)
	const timesJS = `Array.from(document.querySelectorAll('time')).map(el => el.textContent.trim())`
	check := func(zone string) {
		t.Helper()
		times := browserEval[[]string](t, ctx, timesJS)
		if len(times) == 0 {
			t.Fatalf("got no <time> on the execution page, want its start")
		}
		for _, s := range times {
			if !strings.HasSuffix(s, " "+zone) {
				t.Errorf("got time %q, want it in %s and saying so", s, zone)
			}
		}
	}
	check("UTC")
	if got := browserEval[string](t, ctx, `document.getElementById('tz-toggle').hidden ? 'hidden' : document.getElementById('tz-toggle').textContent.trim()`); got != "Show local times" {
		t.Fatalf("toggle: got %q, want a visible \"Show local times\"", got)
	}
	browserDo(t, ctx, "click the zone toggle", chromedp.Click(chromedp.CSS(`#tz-toggle`)))
	waitAcrossNavigation(t, ctx, "the page in Asia/Tokyo",
		`document.readyState === "complete" && !!document.getElementById('tz-toggle') && document.getElementById('tz-toggle').dataset.zone === "Asia/Tokyo"`)
	check("Asia/Tokyo")
	if got := browserEval[string](t, ctx, `document.cookie`); !strings.Contains(got, "oncetrace_tz=Asia/Tokyo") {
		t.Errorf("cookie: got %q, want oncetrace_tz=Asia/Tokyo", got)
	}
	browserDo(t, ctx, "click the zone toggle again", chromedp.Click(chromedp.CSS(`#tz-toggle`)))
	waitAcrossNavigation(t, ctx, "the page in UTC again",
		`document.readyState === "complete" && !!document.getElementById('tz-toggle') && document.getElementById('tz-toggle').dataset.zone === "UTC"`)
	check("UTC")
}
