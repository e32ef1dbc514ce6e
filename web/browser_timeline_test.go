package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/oncetrace/oncetrace/views"
)

const bigExec = "exec_big"

// bigEvents is a 300-step execution like the one issue 12 was found with:
// one to four attempts a step (750), an email every fifth step and two
// every 25th (72 effects, 12 duplicates), a 40 s crash after step 150
// (worker w1 → w2, an attempt that never ended), and an end 5 s after the
// last attempt.
func bigEvents() []map[string]any {
	base := time.Date(2026, 7, 1, 9, 0, 0, 0, time.UTC)
	ts := func(sec float64) string {
		return base.Add(time.Duration(sec * float64(time.Second))).Format(time.RFC3339Nano)
	}
	var events []map[string]any
	sec := 0.0
	for i := range 300 {
		stepID := fmt.Sprintf("step-%d", i+1)
		n := 1 + (i*7)%4
		worker := "w1"
		if i >= 150 {
			worker = "w2"
		}
		if i == 150 {
			sec += 40
		}
		tool, kind := "fetch_page", "read"
		if i%5 == 0 {
			tool, kind = "send_email", "write"
		}
		for k := 1; k <= n; k++ {
			outcome := "ok"
			if k < n {
				outcome = []string{"timeout", "error"}[k%2]
			}
			ev := map[string]any{"type": "attempt", "execution_id": bigExec, "step_id": stepID, "attempt": k, "tool": tool, "effect": kind,
				"worker": worker, "started_at": ts(sec), "ended_at": ts(sec + 0.03), "outcome": outcome}
			if kind == "write" {
				ev["provider"] = "mail-api"
			}
			events = append(events, ev)
			sec += 0.035
		}
		if i == 149 {
			events = append(events, map[string]any{"type": "attempt", "execution_id": bigExec, "step_id": stepID, "attempt": n + 1,
				"tool": tool, "effect": kind, "worker": "w1", "started_at": ts(sec)})
		}
		if kind == "write" {
			for j, suffix := range []string{"a", "b"} {
				if j == 1 && i%25 != 0 {
					break
				}
				events = append(events, map[string]any{"type": "effect", "provider": "mail-api", "effect_id": fmt.Sprintf("msg_%03d_%s", i, suffix),
					"target": fmt.Sprintf("user%d@acme.dev", i), "execution_id": bigExec, "step_id": stepID, "at": ts(sec - 0.02 + 0.005*float64(j))})
			}
		}
	}
	events = append([]map[string]any{{"type": "execution", "execution_id": bigExec, "name": "big-agent", "status": "completed",
		"started_at": ts(0), "ended_at": ts(sec + 5)}}, events...)
	return events
}

// expandAll follows every "show more" link of the page, as a reader's
// clicks would, each fetching its fragment in place, until none is left;
// it returns how many it followed.
func expandAll(t *testing.T, ctx context.Context) int {
	t.Helper()
	for n := 0; ; n++ {
		if !browserEval[bool](t, ctx, `(() => { const a = document.querySelector('a[data-more]'); if (!a) return false; a.click(); return true; })()`) {
			return n
		}
		browserWait(t, ctx, "a fragment in place", `!document.querySelector('[data-loading]')`)
	}
}

// textBox is a visible text's box in the page, as the browser laid it out.
type textBox struct {
	Text                     string
	Left, Top, Right, Bottom float64
}

// measureLabels returns every visible text of the timeline: the SVG texts,
// the lane names and the group summaries.
const measureLabels = `(() => {
  const out = [];
  document.querySelectorAll('.tl-scroll svg text, .tl-scroll .tl-name > span, .tl-scroll .tl-summary, .tl-overview-wrap .tl-name > span').forEach(el => {
    // Chromium lays out a closed group's content when asked, though it
    // shows none of it.
    const group = el.closest('details');
    if (group && !group.open && el.tagName !== 'SUMMARY') return;
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || !el.textContent.trim()) return;
    out.push({Text: el.textContent.replace(/\s+/g, ' ').trim(), Left: r.left, Top: r.top, Right: r.right, Bottom: r.bottom});
  });
  return out;
})()`

// overlappingLabels names the pairs of boxes that overlap by more than
// half a pixel each way.
func overlappingLabels(boxes []textBox) []string {
	var out []string
	for i := range boxes {
		for j := i + 1; j < len(boxes); j++ {
			a, b := boxes[i], boxes[j]
			w := min(a.Right, b.Right) - max(a.Left, b.Left)
			h := min(a.Bottom, b.Bottom) - max(a.Top, b.Top)
			if w > 0.5 && h > 0.5 {
				out = append(out, fmt.Sprintf("%q at (%.0f,%.0f)-(%.0f,%.0f) and %q at (%.0f,%.0f)-(%.0f,%.0f)",
					a.Text, a.Left, a.Top, a.Right, a.Bottom, b.Text, b.Left, b.Top, b.Right, b.Bottom))
			}
		}
	}
	return out
}

func checkNoOverlap(t *testing.T, boxes []textBox, what string) {
	t.Helper()
	if len(boxes) < 50 {
		t.Errorf("%s: got %d visible labels, want the timeline's many labels", what, len(boxes))
	}
	if o := overlappingLabels(boxes); len(o) > 0 {
		t.Errorf("%s: got %d overlapping labels, want none:\n%s", what, len(o), strings.Join(o[:min(len(o), 15)], "\n"))
	}
}

// timelineLowContrast is a script: the timeline's visible texts whose colour
// against the background behind them is under WCAG AA's 4.5:1, as
// "text: ratio (fg on bg)". Labels sit beside bars, never on their fills,
// so the background is the first opaque one of the text's ancestors.
const timelineLowContrast = `(() => {
  const parse = c => { const m = /rgba?\(([^)]+)\)/.exec(c || ''); if (!m) return null; const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const behind = el => { for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor); if (c && c.a > 0) return c; } return {r: 255, g: 255, b: 255, a: 1}; };
  const out = [];
  document.querySelectorAll('.tl-scroll text, .tl-scroll tspan, .tl-name span, .tl-summary, .tl-zoom, .tl-zoomed').forEach(el => {
    const group = el.closest('details');
    if (group && !group.open && el.tagName !== 'SUMMARY') return;
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own || el.getBoundingClientRect().width === 0) return;
    const fg = parse(getComputedStyle(el)[el instanceof SVGElement ? 'fill' : 'color']), bg = behind(el);
    if (!fg) { out.push(el.textContent.trim() + ': no colour'); return; }
    const a = lum(fg), b = lum(bg), ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) out.push(el.textContent.trim().slice(0, 40) + ': ' + ratio.toFixed(2) + ' (' + JSON.stringify(fg) + ' on ' + JSON.stringify(bg) + ')');
  });
  return [...new Set(out)];
})()`

func checkContrast(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	if low := browserEval[[]string](t, ctx, timelineLowContrast); len(low) > 0 {
		t.Errorf("%s: got %d timeline texts under 4.5:1, want none:\n%s", what, len(low), strings.Join(low[:min(len(low), 15)], "\n"))
	}
}

// inViewport is a script: is the element's box (by id) inside the
// viewport and inside the timeline's scroll box?
func inViewport(id string) string {
	return `(() => {
  const el = document.getElementById(` + fmt.Sprintf("%q", id) + `);
  if (!el) return "no element";
  const lane = el.closest('.lane');
  const r = (lane || el).getBoundingClientRect(), box = el.closest('.tl-scroll').getBoundingClientRect();
  if (el.closest('details:not([open])')) return "in a closed group";
  if (r.top < 0 || r.bottom > innerHeight) return "outside the viewport: top " + r.top + " bottom " + r.bottom + " of " + innerHeight;
  if (r.top < box.top || r.bottom > box.bottom + 1) return "outside the scroll box: top " + r.top + " bottom " + r.bottom + ", box " + box.top + "–" + box.bottom;
  if (lane && !lane.classList.contains('tl-target')) return "not highlighted";
  return "";
})()`
}

// TestBrowserTimelineBig drives Chromium over a 300-step execution: no two
// labels overlap at 1440×900, a link to a lane in a collapsed group opens
// it and brings the lane into view, a zoomed URL draws only its range, a
// drag on the overview zooms, and at 390 px the lane names stay pinned
// while the timeline scrolls sideways. Screenshots go to artifactsDir.
func TestBrowserTimelineBig(t *testing.T) {
	chromium := requireChromium(t)
	srv := startOncetraceServe(t)
	postUIEvents(t, srv.url, bigEvents())
	dir := artifactsDir(t)
	ctx := startBrowser(t, chromium)
	page := srv.url + views.ExecutionURL(bigExec)

	browserDo(t, ctx, "viewport 1440×900", chromedp.EmulateViewport(1440, 900))
	setColorScheme(t, ctx, "light")
	browserLoad(t, ctx, page)
	if n := browserEval[int](t, ctx, `document.querySelectorAll('[data-testid=lane]').length`); n != 15 {
		t.Fatalf("lanes as the page loads: got %d, want the first 15", n)
	}
	expandAll(t, ctx)
	if n := browserEval[int](t, ctx, `document.querySelectorAll('[data-testid=lane]').length`); n != 300 {
		t.Fatalf("lanes after following every link: got %d, want all 300", n)
	}
	checkNoOverlap(t, browserEval[[]textBox](t, ctx, measureLabels), "1440 light")
	checkContrast(t, ctx, "1440 light")
	font := browserEval[string](t, ctx, `getComputedStyle(document.querySelector('.tl-scroll svg text')).fontFamily`)
	if !strings.Contains(font, "monospace") {
		t.Errorf("timeline font: got %q, want the monospace stack the layout's width estimate assumes", font)
	}
	browserScreenshot(t, ctx, dir, "timeline-big-light-1440.png")

	t.Run("sticky axis", func(t *testing.T) {
		top := browserEval[float64](t, ctx, `(() => { const b = document.querySelector('.tl-scroll'); b.scrollTop = 3000; return document.querySelector('[data-testid=axis]').getBoundingClientRect().top - b.getBoundingClientRect().top; })()`)
		if top < -1 || top > 2 {
			t.Errorf("axis after scrolling the lanes: got %.0f px from the box's top, want it stuck there", top)
		}
		browserEval[int](t, ctx, `document.querySelector('.tl-scroll').scrollTop = 0`)
	})

	t.Run("link to a collapsed lane", func(t *testing.T) {
		// A lane in the last group, closed as the page loads.
		id := browserEval[string](t, ctx, `(() => { const g = [...document.querySelectorAll('details.tl-group')].pop(); return g.open ? "" : g.querySelector('[data-testid=attempt]').id; })()`)
		if id == "" {
			t.Fatalf("last group: got it open or empty, want a closed group")
		}
		browserEval[string](t, ctx, `location.hash = "#`+id+`"`)
		browserWait(t, ctx, "the lane of #"+id+" in view", inViewport(id)+` === ""`)

		// The user closes the flagged group, then clicks a finding's link
		// into it: the group opens again and the lane comes into view.
		target := browserEval[string](t, ctx, `(() => {
  const g = document.querySelector('details.tl-group'); g.open = false;
  const a = [...document.querySelectorAll('a[href^="#a-"]')].find(a => { const el = document.getElementById(a.getAttribute('href').slice(1)); return el && g.contains(el) && a.getBoundingClientRect().width > 0; });
  if (!a) return "";
  a.scrollIntoView({block: "center"}); a.click();
  return a.getAttribute('href').slice(1);
})()`)
		if target == "" {
			t.Fatalf("findings: got no visible link to an attempt in the flagged group, want one")
		}
		browserWait(t, ctx, "the finding's lane in view", inViewport(target)+` === ""`)
	})

	t.Run("zoomed URL", func(t *testing.T) {
		const from, to = 2.0, 4.5
		browserLoad(t, ctx, fmt.Sprintf("%s?from=%g&to=%g", page, from, to))
		expandAll(t, ctx)
		type drawn struct {
			Bars, Effects, Ticks []string
			Counts               []int
		}
		got := browserEval[drawn](t, ctx, fmt.Sprintf(`(() => {
  const out = {Bars: [], Effects: [], Ticks: [], Counts: [0, 0]};
  document.querySelectorAll('[data-testid=attempt]').forEach(a => {
    out.Counts[0]++;
    const s = +a.dataset.start, e = +a.dataset.end;
    if (!(e >= %[1]d && s <= %[2]d)) out.Bars.push(a.id + " " + s + "–" + e);
  });
  document.querySelectorAll('[data-testid=effect]').forEach(a => {
    out.Counts[1]++;
    const at = +a.dataset.at;
    if (!(at >= %[1]d && at <= %[2]d)) out.Effects.push(a.id + " " + at);
  });
  document.querySelectorAll('[data-testid=tick]').forEach(k => {
    const v = parseFloat(k.childNodes[k.childNodes.length - 1].textContent.replace('+', ''));
    if (!(v >= %[3]g - 0.001 && v <= %[4]g + 0.001)) out.Ticks.push(k.textContent);
  });
  return out;
})()`, int(from*1000), int(to*1000), from, to))
		if got.Counts[0] < 30 || got.Counts[0] > 120 || got.Counts[1] == 0 {
			t.Errorf("zoomed: got %d bars and %d effects drawn, want the ~70 attempts and some effects of 2–4.5 s", got.Counts[0], got.Counts[1])
		}
		for _, what := range [][]string{got.Bars, got.Effects, got.Ticks} {
			if len(what) > 0 {
				t.Errorf("zoomed to %g–%g s: got drawn outside the range: %q", from, to, what)
			}
		}
		if ids := browserEval[int](t, ctx, `document.querySelectorAll('.tl-anchor[id^="a-"]').length`); ids < 600 {
			t.Errorf("zoomed: got %d ids kept for attempts outside the range, want the rest of the 750", ids)
		}
		checkNoOverlap(t, browserEval[[]textBox](t, ctx, measureLabels), "zoomed")
		if href := browserEval[string](t, ctx, `document.querySelector('[data-testid=zoom-reset]').href`); strings.TrimSuffix(href, "#timeline") != page {
			t.Errorf("reset zoom: got %q, want %q", href, page)
		}

		resp, err := http.Get(page + "?from=abc")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "from") {
			t.Errorf("?from=abc: got %d %q, want 400 naming from", resp.StatusCode, body)
		}
	})

	t.Run("drag on the overview", func(t *testing.T) {
		browserLoad(t, ctx, page)
		type rect struct{ Left, Top, Width, Height float64 }
		r := browserEval[rect](t, ctx, `(() => { const o = document.querySelector('[data-testid=overview]'); o.scrollIntoView({block: "center"}); const r = o.getBoundingClientRect(); return {Left: r.left, Top: r.top, Width: r.width, Height: r.height}; })()`)
		y := r.Top + r.Height/2
		x1, x2 := r.Left+r.Width*0.2, r.Left+r.Width*0.4
		browserDo(t, ctx, "drag on the overview",
			chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, x1, y, chromedp.ButtonLeft, chromedp.ClickCount(1)),
			chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, (x1+x2)/2, y, chromedp.ButtonLeft),
			chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x2, y, chromedp.ButtonLeft),
			chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, x2, y, chromedp.ButtonLeft, chromedp.ClickCount(1)))
		// The page navigates: poll until the zoomed one has loaded, through
		// the moment the old document's context is gone.
		const zoomed = `location.search.includes("from=") && location.search.includes("to=") && document.readyState === "complete" && !!document.querySelector('[data-testid=zoomed]')`
		deadline := time.Now().Add(10 * time.Second)
		for {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](zoomed))
			if err == nil && ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("drag on the overview: got no zoomed page within 10 s (last error %v)", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		expandAll(t, ctx)
		if n := browserEval[int](t, ctx, `document.querySelectorAll('[data-testid=attempt]').length`); n == 0 || n >= 750 {
			t.Errorf("after the drag: got %d bars, want part of the 750", n)
		}
	})

	setColorScheme(t, ctx, "dark")
	browserLoad(t, ctx, page)
	checkNoOverlap(t, browserEval[[]textBox](t, ctx, measureLabels), "1440 dark")
	checkContrast(t, ctx, "1440 dark")
	browserScreenshot(t, ctx, dir, "timeline-big-dark-1440.png")

	t.Run("390 px", func(t *testing.T) {
		browserDo(t, ctx, "viewport 390×844", chromedp.EmulateViewport(390, 844))
		for _, scheme := range []string{"dark", "light"} {
			setColorScheme(t, ctx, scheme)
			browserLoad(t, ctx, page)
			checkNoOverlap(t, browserEval[[]textBox](t, ctx, measureLabels), "390 "+scheme)
			browserScreenshot(t, ctx, dir, "timeline-big-"+scheme+"-390.png")
		}
		type pinned struct {
			ScrollLeft, NameLeft, BoxLeft, NameRight float64
			Text                                     string
		}
		p := browserEval[pinned](t, ctx, `(() => {
  const box = document.querySelector('.tl-scroll');
  box.scrollIntoView({block: "start"});
  box.scrollLeft = 400;
  const name = document.querySelector('details[open] [data-testid=lane] .tl-name');
  const r = name.getBoundingClientRect(), b = box.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + 10, r.top + 8);
  return {ScrollLeft: box.scrollLeft, NameLeft: r.left, BoxLeft: b.left, NameRight: r.right, Text: hit && name.contains(hit) ? name.textContent.trim() : ""};
})()`)
		if p.ScrollLeft < 100 {
			t.Errorf("390 px: got scrollLeft %.0f after scrolling 400 px, want the timeline to scroll sideways", p.ScrollLeft)
		}
		if p.NameLeft < p.BoxLeft-1 || p.NameLeft > p.BoxLeft+2 || p.NameRight > 390 || p.Text == "" {
			t.Errorf("390 px after scrolling sideways: got the lane name at %.0f–%.0f (box at %.0f), on top %q, want it pinned at the box's left and visible", p.NameLeft, p.NameRight, p.BoxLeft, p.Text)
		}
	})
}

// TestTimelineRange checks the zoom's query: seconds since the start,
// each bound optional; anything else is a 400 naming the parameter.
func TestTimelineRange(t *testing.T) {
	base := startPagesServer(t)
	postUIEvents(t, base, uiEvents())
	page := base + views.ExecutionURL(uiDupExec)
	tests := []struct {
		query  string
		status int
		want   string // in the body
	}{
		{"from=0.5&to=10.6", http.StatusOK, `Showing +0.500 s to +10.600 s of 12.000 s`},
		{"from=10", http.StatusOK, `Showing +10.000 s to +12.000 s`},
		{"to=1", http.StatusOK, `Showing +0.000 s to +1.000 s`},
		{"", http.StatusOK, `name="from" min="0" step="0.001" value="0.000"`},
		{"from=abc", http.StatusBadRequest, "from: must be seconds since the execution"},
		{"from=-1", http.StatusBadRequest, "from: must be seconds"},
		{"to=NaN", http.StatusBadRequest, "to: must be seconds"},
		{"from=1e9", http.StatusBadRequest, "from: must be seconds"},
		{"from=3&to=2", http.StatusBadRequest, "to: must be after from"},
		{"from=3&to=3", http.StatusBadRequest, "to: must be after from"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			got := fetchPage(t, page+"?"+tc.query, false)
			if got.status != tc.status || !strings.Contains(string(got.body), tc.want) {
				t.Errorf("GET ?%s: got %d, want %d with %q in\n%.600s", tc.query, got.status, tc.status, tc.want, got.body)
			}
		})
	}
}
