package web_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncetrace/oncetrace/views"
	"github.com/oncetrace/oncetrace/web"
)

// axeScript is axe-core as `npm ci` in testdata/axe installs it (the
// version is pinned by package-lock.json).
const axeScript = "testdata/axe/node_modules/axe-core/axe.min.js"

// requireAxe returns axe-core's source, or skips the test loudly, or fails
// it when CI requires the browser tests.
func requireAxe(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(axeScript)
	if err == nil {
		return string(src)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	msg := "axe-core is not installed: run `npm ci` in web/testdata/axe (what .ci/run does)"
	if os.Getenv("ONCETRACE_REQUIRE_BROWSER") == "1" {
		t.Fatalf("ONCETRACE_REQUIRE_BROWSER=1 but %s", msg)
	}
	fmt.Fprintln(os.Stderr, "!!! "+t.Name()+" SKIPPED: "+msg)
	t.Skip(msg)
	return ""
}

// axeNode is one element a rule failed on, with the colours axe measured
// when the rule is color-contrast.
type axeNode struct {
	Target     string  `json:"target"`
	HTML       string  `json:"html"`
	Area       string  `json:"area"`
	Summary    string  `json:"summary"`
	FG         string  `json:"fg"`
	BG         string  `json:"bg"`
	Ratio      float64 `json:"ratio"`
	Expected   string  `json:"expected"`
	FontSize   string  `json:"fontSize"`
	FontWeight string  `json:"fontWeight"`
}

type axeViolation struct {
	ID     string    `json:"id"`
	Impact string    `json:"impact"`
	Help   string    `json:"help"`
	Nodes  []axeNode `json:"nodes"`
}

// runAxe runs every axe rule on the page and keeps the serious and
// critical violations. Each element is placed in the part of the UI it
// belongs to, so a failure says whose stylesheet to change.
const runAxe = `(async () => {
  const areaOf = (el) => {
    if (location.pathname.startsWith('/compare')) return 'compare view';
    if (!el) return 'page';
    if (el.closest('#detail, .detail-panel, .detail')) return 'detail panel';
    if (el.closest('.timeline-block, svg.timeline, .legend, [data-testid=timeline], [class^="tl-"], [class*=" tl-"]')) return 'timeline (timeline.css)';
    return 'page (oncetrace.css)';
  };
  const r = await axe.run(document, {resultTypes: ['violations', 'incomplete']});
  const unsure = {};
  for (const v of r.incomplete.filter(v => v.id === 'color-contrast')) {
    for (const n of v.nodes) {
      let el = null;
      try { el = document.querySelector(n.target[n.target.length - 1]); } catch (e) {}
      // SVG text is the timeline's many labels: counted; others named.
      const a = areaOf(el) + (el && el.closest('svg') ? ' (svg text)' : ': ' + n.target.join(' ') + ' (' + ((n.any[0] || {}).message || '') + ')');
      unsure[a] = (unsure[a] || 0) + 1;
    }
  }
  const violations = r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical').map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => {
      const sel = n.target.map(x => Array.isArray(x) ? x.join(' >>> ') : x);
      let el = null;
      try { el = document.querySelector(sel[sel.length - 1]); } catch (e) {}
      const checks = [].concat(n.any || [], n.all || [], n.none || []);
      const d = (checks.find(c => c.data && c.data.fgColor) || {data: {}}).data;
      return {target: sel.join(' '), html: n.html.slice(0, 200), area: areaOf(el), summary: n.failureSummary || '',
        fg: d.fgColor || '', bg: d.bgColor || '', ratio: d.contrastRatio || 0, expected: String(d.expectedContrastRatio || ''),
        fontSize: d.fontSize || '', fontWeight: String(d.fontWeight || '')};
    }),
  }));
  return {violations, contrastUnsure: unsure};
})()`

// axeResult is what runAxe returns: the violations, and per part of the UI
// how many elements axe could not judge for contrast (SVG text, text over
// several backgrounds), which it reports as incomplete, not as violations.
type axeResult struct {
	Violations     []axeViolation `json:"violations"`
	ContrastUnsure map[string]int `json:"contrastUnsure"`
}

// a11yPage is a page the accessibility test visits.
type a11yPage struct {
	name, url string
	// mobile pages must fit a 390 px screen without scrolling sideways.
	mobile bool
}

// a11yLoad navigates and waits for the page's load, trying the wait again
// when a navigation cuts it short (browserLoad's single poll fails then).
func a11yLoad(t *testing.T, ctx context.Context, u string) {
	t.Helper()
	browserDo(t, ctx, "load "+u, chromedp.Navigate(u))
	waitAcrossNavigation(t, ctx, u+" to load", `document.readyState === "complete"`)
}

// loadDemo runs `oncetrace demo` against the server: the six scenarios'
// executions, named demo-<scenario>-a11y.
func loadDemo(t *testing.T, serverURL string) []string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "oncetrace")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/oncetrace/oncetrace/cmd/oncetrace").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/oncetrace: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "demo", "--server", serverURL, "--run", "a11y", "--journal-dir", t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("oncetrace demo: %v\n%s", err, out)
	}
	var ids []string
	for _, sc := range []string{"naive", "crash", "safe", "safe-rerun", "key-only", "crash-safe"} {
		ids = append(ids, "demo-"+sc+"-a11y")
	}
	return ids
}

// TestBrowserAccessibility runs axe-core on every page, in light and in
// dark, and fails on any serious or critical violation; then it checks at
// 390 px that the pages fit the screen and the list shows its findings.
func TestBrowserAccessibility(t *testing.T) {
	chromium := requireChromium(t)
	axeSrc := requireAxe(t)
	srv := startOncetraceServe(t)
	demoIDs := loadDemo(t, srv.url)
	postUIEvents(t, srv.url, uiEvents())

	// The login form shows only on a server with a read token, the message
	// page only with the SMTP sink: in-process servers for those.
	rs := startReadServer(t, "ingest-secret", web.AuthConfig{Exposed: true})
	ms := startMailServer(t)
	const messageID = "<invoice-7@agent.acme.dev>"
	ms.send(t, "jordan@acme.dev", invoiceMail(messageID))

	pages := []a11yPage{
		{"executions", srv.url + "/", true},
		{"executions filtered", srv.url + "/?status=completed&has_findings=true&q=exec", true},
		{"executions, nothing matches", srv.url + "/?q=nothing-matches-this", true},
	}
	for _, id := range demoIDs {
		pages = append(pages, a11yPage{"execution " + id, srv.url + views.ExecutionURL(id), false})
	}
	for _, id := range []string{uiDupExec, uiCrashExec, "exec_safe", "exec_failed", "exec_running"} {
		pages = append(pages, a11yPage{"execution " + id, srv.url + views.ExecutionURL(id), false})
	}
	pages = append(pages,
		a11yPage{"attempt", srv.url + views.AttemptURL(uiDupExec, "step-4", 2), true},
		a11yPage{"effect", srv.url + views.EffectURL(uiDupExec, "mail-api", "msg_41bcc8"), true},
		a11yPage{"outbox", srv.url + "/outbox", true},
		a11yPage{"key", srv.url + views.KeyURL(uiDupKey), true},
		a11yPage{"live", srv.url + "/live", true},
		a11yPage{"not found", srv.url + "/no/such/page", true},
		a11yPage{"login", rs.ts.URL + "/login", true},
		a11yPage{"message", ms.ts.URL + views.MessageURL("smtp", messageID), true},
		a11yPage{"executions, unknown filter", srv.url + "/?recipient=jordan", true},
		a11yPage{"steps tab", srv.url + views.StepsURL(uiDupExec, "attempts", "desc"), false},
		a11yPage{"zoomed timeline", srv.url + views.ExecutionURL(uiCrashExec) + "?from=0.5&to=60", false},
		a11yPage{"compare", srv.url + views.CompareURL(uiDupExec, "exec_safe"), false},
		a11yPage{"compare, unknown id", srv.url + views.CompareURL(uiDupExec, "no-such-execution"), true},
	)

	names := make([]string, len(pages))
	for i, p := range pages {
		names[i] = p.name
	}
	t.Logf("%d pages: %s", len(pages), strings.Join(names, ", "))
	ctx := startBrowser(t, chromium)
	dir := artifactsDir(t)

	t.Run("axe", func(t *testing.T) {
		type found struct {
			page, scheme string
			v            axeViolation
			n            axeNode
		}
		var all []found
		unsure := map[string]int{}
		defer func() {
			if len(unsure) > 0 {
				t.Logf("axe-core could not judge the contrast of (incomplete, checked by neither axe nor this test): %v", unsure)
			}
		}()
		for _, scheme := range []string{"light", "dark"} {
			setColorScheme(t, ctx, scheme)
			for i, p := range pages {
				a11yLoad(t, ctx, p.url)
				if i == 0 {
					// An error and a critical finding never share a colour.
					cs := browserEval[[]string](t, ctx, `['--error', '--critical', '--error-text', '--critical-text'].map(v => getComputedStyle(document.documentElement).getPropertyValue(v).trim())`)
					if cs[0] == cs[1] || cs[2] == cs[3] {
						t.Errorf("%s: --error %s / --critical %s, --error-text %s / --critical-text %s: want error and critical in different colours", scheme, cs[0], cs[1], cs[2], cs[3])
					}
				}
				if status := browserEval[string](t, ctx, `document.querySelector('[data-testid=error]') ? document.title : ''`); status != "" && p.name != "not found" {
					t.Errorf("%s (%s): got the error page %q, want the page", p.name, p.url, status)
				}
				if !browserEval[bool](t, ctx, axeSrc+";\ntypeof axe === 'object'") {
					t.Fatalf("%s: axe-core did not load into the page", p.name)
				}
				check := func(name string) {
					sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
					res, err := chromedp.Run(sctx, chromedp.Evaluate[axeResult](runAxe, chromedp.EvalAwaitPromise))
					cancel()
					if err != nil {
						t.Fatalf("%s: axe.run: %v", name, err)
					}
					for area, n := range res.ContrastUnsure {
						unsure[area] += n
					}
					for _, v := range res.Violations {
						for _, n := range v.Nodes {
							all = append(all, found{name, scheme, v, n})
						}
					}
				}
				check(p.name)
				if p.name == "execution "+uiDupExec {
					// Again with the detail panel open: a click on a bar opens it.
					sel := attemptSelector(uiDupExec, "step-4", 2)
					if !browserEval[bool](t, ctx, `(() => { const a = document.querySelector(`+strconv.Quote(sel)+`); if (!a) return false;
  a.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true})); return true; })()`) {
						t.Fatalf("%s: got no %s to open the detail panel with", p.name, sel)
					}
					browserWait(t, ctx, "the detail panel to show an attempt", `!!document.querySelector('#detail [data-testid=attempt-detail]')`)
					check(p.name + " with the detail panel open")
				}
			}
		}
		if len(all) == 0 {
			t.Logf("axe-core: no serious or critical violation on %d pages in light and dark", len(pages))
			return
		}
		// One entry per element and rule, with the pages it fails on,
		// grouped by the part of the UI: who fixes what.
		type key struct{ area, rule, impact, target, colours string }
		var order []key
		where := map[key][]string{}
		detail := map[key]found{}
		for _, f := range all {
			k := key{f.n.Area, f.v.ID, f.v.Impact, f.n.Target, ""}
			if f.v.ID == "color-contrast" {
				k.colours = fmt.Sprintf("colour %s on %s: %.2f:1, want %s (font %s, weight %s)", f.n.FG, f.n.BG, f.n.Ratio, f.n.Expected, f.n.FontSize, f.n.FontWeight)
			}
			if _, seen := where[k]; !seen {
				order = append(order, k)
				detail[k] = f
			}
			where[k] = append(where[k], f.page+" ("+f.scheme+")")
		}
		sort.SliceStable(order, func(i, j int) bool {
			if order[i].area != order[j].area {
				return order[i].area < order[j].area
			}
			return order[i].rule < order[j].rule
		})
		var b strings.Builder
		fmt.Fprintf(&b, "axe-core: %d serious or critical violations (%d distinct), want none:\n", len(all), len(order))
		for _, k := range order {
			f := detail[k]
			fmt.Fprintf(&b, "  [%s] %s (%s): %s\n      html: %s\n", k.area, k.rule, k.impact, k.target, f.n.HTML)
			if k.colours != "" {
				fmt.Fprintf(&b, "      %s\n", k.colours)
			} else {
				fmt.Fprintf(&b, "      %s: %s\n", f.v.Help, strings.Join(strings.Fields(f.n.Summary), " "))
			}
			fmt.Fprintf(&b, "      on %d pages: %s\n", len(where[k]), strings.Join(where[k], "; "))
		}
		t.Error(b.String())
	})

	t.Run("skip link", func(t *testing.T) {
		setColorScheme(t, ctx, "light")
		browserLoad(t, ctx, srv.url+views.ExecutionURL(uiDupExec))
		browserDo(t, ctx, "press Tab", chromedp.KeyEvent("\t"))
		type focus struct {
			Text          string
			Top, Bottom   float64
			Height        float64
			Hash, Focused string
		}
		f := browserEval[focus](t, ctx, `(() => { const el = document.activeElement, r = el.getBoundingClientRect();
  return {Text: el.textContent.trim(), Top: r.top, Bottom: r.bottom, Height: r.height}; })()`)
		if f.Text != "Skip to content" || f.Top < 0 || f.Bottom > viewportH || f.Height == 0 {
			t.Fatalf("first Tab: got %q focused at y %.0f–%.0f, want the visible \"Skip to content\" link", f.Text, f.Top, f.Bottom)
		}
		browserDo(t, ctx, "press Enter", chromedp.KeyEvent("\r"))
		browserWait(t, ctx, "the skip link to reach #main", `location.hash === "#main"`)
		f = browserEval[focus](t, ctx, `({Hash: location.hash, Focused: document.activeElement.id})`)
		if f.Focused != "main" {
			t.Errorf("after the skip link: got #%s focused, want #main", f.Focused)
		}
	})

	t.Run("390px", func(t *testing.T) {
		const phoneW, phoneH = 390, 844
		browserDo(t, ctx, "emulate a phone's viewport", chromedp.EmulateViewport(phoneW, phoneH))
		defer browserDo(t, ctx, "restore the viewport", chromedp.EmulateViewport(viewportW, viewportH))
		for _, scheme := range []string{"light", "dark"} {
			setColorScheme(t, ctx, scheme)
			for _, p := range pages {
				a11yLoad(t, ctx, p.url)
				// The widest elements past the right edge name the culprit.
				type overflow struct {
					ScrollW float64  `json:"scrollW"`
					InnerW  float64  `json:"innerW"`
					Wide    []string `json:"wide"`
				}
				o := browserEval[overflow](t, ctx, `(() => {
  const w = document.documentElement.clientWidth;
  const wide = [...document.querySelectorAll('body *')].filter(el => el.getBoundingClientRect().right > w + 1)
    .filter(el => !el.parentElement || el.parentElement.getBoundingClientRect().right <= w + 1)
    .slice(0, 5).map(el => el.tagName.toLowerCase() + (el.className && el.className.baseVal === undefined ? '.' + String(el.className).trim().replace(/\s+/g, '.') : '') + ' right ' + Math.round(el.getBoundingClientRect().right));
  return {scrollW: document.documentElement.scrollWidth, innerW: w, wide};
})()`)
				if o.ScrollW > o.InnerW {
					if p.mobile {
						t.Errorf("%s at %d px (%s): the page is %.0f px wide, want no sideways scroll; past the edge: %v", p.name, phoneW, scheme, o.ScrollW, o.Wide)
					} else {
						// The execution page's timeline and the compare view
						// have their own layouts: reported, not failed here.
						t.Logf("%s at %d px (%s): the page is %.0f px wide; past the edge: %v", p.name, phoneW, scheme, o.ScrollW, o.Wide)
					}
				}
			}
			browserLoad(t, ctx, srv.url+"/")
			type cell struct {
				Left, Right, Width float64
				Text, Label        string
			}
			cells := browserEval[[]cell](t, ctx, `[...document.querySelectorAll('[data-testid=execution-row] td[data-label=Findings]')].map(td => {
  const r = td.getBoundingClientRect();
  return {Left: r.left, Right: r.right, Width: r.width, Text: td.innerText.trim(), Label: getComputedStyle(td, '::before').content};
})`)
			if len(cells) < 5 {
				t.Errorf("executions at %d px (%s): got %d findings cells, want one per row", phoneW, scheme, len(cells))
			}
			for i, c := range cells {
				if c.Width <= 0 || c.Left < 0 || c.Right > phoneW || c.Text == "" || c.Label != `"Findings"` {
					t.Errorf("executions at %d px (%s): row %d's findings cell at x %.0f–%.0f says %q under the label %s, want it on screen under \"Findings\"", phoneW, scheme, i, c.Left, c.Right, c.Text, c.Label)
				}
			}
			browserScreenshot(t, ctx, dir, "executions-390-"+scheme+".png")
		}
	})

	select {
	case err := <-srv.exited:
		srv.exited <- err
		t.Errorf("oncetrace serve exited during the test: %v\n%s", err, srv.logText())
	default:
	}
}
