package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/net/html"

	"github.com/oncetrace/oncetrace/views"
)

// The compare fixture: yesterday's run sent the invoice once with a key;
// today's timed out and retried without one, and the mail API delivered
// twice. Today's id needs the query form of a URL.
const (
	cmpYesterday = "exec_yesterday"
	cmpToday     = "billing/2026-07;run=2?today"
)

// compareEvents are both runs as native events.
func compareEvents() []map[string]any {
	day := time.Date(2026, 6, 30, 9, 0, 0, 0, time.UTC)
	ts := func(d time.Time, sec float64) string {
		return d.Add(time.Duration(sec * float64(time.Second))).Format(time.RFC3339Nano)
	}
	invoice := map[string]any{"to": "jordan@acme.dev", "subject": "Your June invoice"}
	var events []map[string]any
	run := func(id string, d time.Time, sends []map[string]any, emails int) {
		events = append(events,
			map[string]any{"type": "execution", "execution_id": id, "name": "billing-agent", "status": "completed",
				"started_at": ts(d, 0), "ended_at": ts(d, 12)},
			map[string]any{"type": "attempt", "execution_id": id, "step_id": "step-1", "attempt": 1, "tool": "lookup_customer",
				"effect": "read", "started_at": ts(d, 0), "ended_at": ts(d, 0.2), "outcome": "ok"})
		for i, s := range sends {
			ev := map[string]any{"type": "attempt", "execution_id": id, "step_id": "step-2", "attempt": i + 1,
				"tool": "send_invoice_email", "effect": "write", "provider": "mail-api", "worker": "pid-1", "args": invoice,
				"started_at": ts(d, 0.5+10*float64(i)), "ended_at": ts(d, 0.8+10*float64(i))}
			for k, v := range s {
				ev[k] = v
			}
			events = append(events, ev)
		}
		for i := range emails {
			events = append(events, map[string]any{"type": "effect", "provider": "mail-api", "effect_id": id + "/msg-" + string(rune('1'+i)),
				"execution_id": id, "step_id": "step-2", "target": "jordan@acme.dev", "at": ts(d, 0.6+10*float64(i))})
		}
	}
	run(cmpYesterday, day, []map[string]any{{"outcome": "ok", "idempotency_key": "ik_yesterday"}}, 1)
	run(cmpToday, day.Add(24*time.Hour), []map[string]any{{"outcome": "timeout", "error": "network timeout after 10s"}, {"outcome": "ok"}}, 2)
	return events
}

type compareJSON struct {
	A struct {
		ID    string `json:"execution_id"`
		Audit struct {
			State string `json:"state"`
		} `json:"audit"`
		Effects int `json:"effects"`
	} `json:"a"`
	B struct {
		ID      string `json:"execution_id"`
		Effects int    `json:"effects"`
	} `json:"b"`
	Summary        string `json:"summary"`
	DifferingSteps int    `json:"differing_steps"`
	Steps          []struct {
		Match string `json:"match"`
		A     *struct {
			StepID  string `json:"step_id"`
			Effects []any  `json:"effects"`
		} `json:"a"`
		B *struct {
			StepID   string `json:"step_id"`
			Attempts []struct {
				Outcome string `json:"outcome"`
				Key     string `json:"idempotency_key"`
			} `json:"attempts"`
			Effects []struct {
				State string `json:"state"`
			} `json:"effects"`
		} `json:"b"`
		Differences []struct {
			Kind string `json:"kind"`
			Text string `json:"text"`
		} `json:"differences"`
	} `json:"steps"`
}

func getCompareJSON(t *testing.T, rawURL string) compareJSON {
	t.Helper()
	r := fetchPage(t, rawURL, false)
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: got %d %s, want 200", rawURL, r.status, r.body)
	}
	var got compareJSON
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	return got
}

// compareFormURL is the URL a browser submits when the list's "Compare
// selected" form is sent with every checkbox ticked: the form's action and
// method, and the checkboxes that belong to it (form="compare-form").
func compareFormURL(t *testing.T, base string, page []byte) string {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var action, method string
	q := url.Values{}
	for n := range doc.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		get := func(k string) string {
			for _, a := range n.Attr {
				if a.Key == k {
					return a.Val
				}
			}
			return ""
		}
		switch {
		case n.Data == "form" && get("id") == "compare-form":
			action, method = get("action"), get("method")
		case n.Data == "input" && get("type") == "checkbox" && get("form") == "compare-form":
			q.Add(get("name"), get("value"))
		}
	}
	if action != "/compare" || !strings.EqualFold(method, "get") {
		t.Fatalf("list: got compare form action %q method %q, want GET /compare", action, method)
	}
	return base + action + "?" + q.Encode()
}

// TestCompare serves the compare page and its JSON twin from a real server
// on a real SQLite file, reached by a and b, by the list's checkboxes, and
// with every kind of bad selection.
func TestCompare(t *testing.T) {
	base := startPagesServer(t)
	postUIEvents(t, base, compareEvents())

	pageURL := base + views.CompareURL(cmpYesterday, cmpToday)
	page := fetchPage(t, pageURL, false)
	checkHTMLResponse(t, "/compare", page, http.StatusOK, false)
	summary := "1 step differs: step-2 (send_invoice_email) sends 2 emails in b, 1 in a."
	for _, want := range []string{summary, `data-testid="compare-summary"`, "b: 2 emails, a: 1", "b retried without a key"} {
		if !bytes.Contains(page.body, []byte(want)) {
			t.Errorf("GET /compare: got no %q, want it", want)
		}
	}
	if got := bytes.Count(page.body, []byte(`data-testid="compare-row"`)); got != 2 {
		t.Errorf("GET /compare: got %d rows, want 2 (step-1, step-2)", got)
	}
	if got := bytes.Count(page.body, []byte(`data-differs="true" data-testid="compare-row"`)) +
		bytes.Count(page.body, []byte(`data-testid="compare-row" data-differs="true"`)); got != 1 {
		t.Errorf("GET /compare: got %d differing rows, want 1", got)
	}

	got := getCompareJSON(t, base+views.CompareAPIURL(cmpYesterday, cmpToday))
	if got.A.ID != cmpYesterday || got.B.ID != cmpToday || got.A.Effects != 1 || got.B.Effects != 2 {
		t.Errorf("JSON header: got a %q (%d effects), b %q (%d effects), want %q (1), %q (2)", got.A.ID, got.A.Effects, got.B.ID, got.B.Effects, cmpYesterday, cmpToday)
	}
	if got.A.Audit.State != "clean" {
		t.Errorf("JSON a audit: got %q, want clean", got.A.Audit.State)
	}
	if got.Summary != summary || got.DifferingSteps != 1 || len(got.Steps) != 2 {
		t.Fatalf("JSON: got summary %q, %d differing of %d steps, want %q, 1 of 2", got.Summary, got.DifferingSteps, len(got.Steps), summary)
	}
	s := got.Steps[1]
	switch {
	case s.Match != "step_id" || s.A == nil || s.B == nil:
		t.Errorf("JSON step-2: got match %q, a %v, b %v, want both sides by step_id", s.Match, s.A, s.B)
	case len(s.A.Effects) != 1 || len(s.B.Effects) != 2 || len(s.B.Attempts) != 2:
		t.Errorf("JSON step-2: got %d effects in a, %d in b, %d attempts in b, want 1, 2, 2", len(s.A.Effects), len(s.B.Effects), len(s.B.Attempts))
	case len(s.Differences) == 0 || s.Differences[0].Kind != "effects" || s.Differences[0].Text != "b: 2 emails, a: 1":
		t.Errorf("JSON step-2 differences: got %+v, want effects first: \"b: 2 emails, a: 1\"", s.Differences)
	case s.B.Effects[0].State != "duplicate" || s.B.Attempts[0].Outcome != "timeout" || s.B.Attempts[0].Key != "":
		t.Errorf("JSON step-2 b: got %+v, want a duplicate effect and a timeout without a key first", s.B)
	}
	if len(got.Steps[0].Differences) != 0 {
		t.Errorf("JSON step-1: got differences %+v, want none", got.Steps[0].Differences)
	}

	// The list's form: the checkboxes send id=…&id=… newest first; the
	// older run becomes a.
	list := fetchPage(t, base+"/", false)
	checkHTMLResponse(t, "/", list, http.StatusOK, false)
	formURL := compareFormURL(t, base, list.body)
	if u, _ := url.Parse(formURL); len(u.Query()["id"]) != 2 {
		t.Fatalf("list form: got %s, want two id values", formURL)
	}
	checked := fetchPage(t, formURL, false)
	checkHTMLResponse(t, formURL, checked, http.StatusOK, false)
	if !bytes.Contains(checked.body, []byte(summary)) {
		t.Errorf("GET %s: got no %q, want the older run as a", formURL, summary)
	}
	apiForm := strings.Replace(formURL, "/compare?", "/api/v1/compare?", 1)
	if got := getCompareJSON(t, apiForm); got.A.ID != cmpYesterday || got.B.ID != cmpToday {
		t.Errorf("GET %s: got a %q, b %q, want the older %q as a", apiForm, got.A.ID, got.B.ID, cmpYesterday)
	}

	bad := []struct {
		query      url.Values
		status     int
		wantInBody string
	}{
		{url.Values{"a": {cmpYesterday}}, http.StatusBadRequest, "b: required"},
		{url.Values{"b": {cmpToday}}, http.StatusBadRequest, "a: required"},
		{url.Values{"a": {cmpToday}, "b": {cmpToday}}, http.StatusBadRequest, "b: must name another execution than a"},
		{url.Values{"id": {cmpToday}}, http.StatusBadRequest, "id: select exactly two executions"},
		{url.Values{"id": {cmpToday, cmpYesterday, "exec_x"}}, http.StatusBadRequest, "id: select exactly two executions"},
		{url.Values{"a": {"exec_nope"}, "b": {cmpToday}}, http.StatusNotFound, `a: no execution \"exec_nope\"`},
		{url.Values{"a": {cmpYesterday}, "b": {"q?x=1"}}, http.StatusNotFound, `b: no execution \"q?x=1\"`},
	}
	for _, tc := range bad {
		api := fetchPage(t, base+"/api/v1/compare?"+tc.query.Encode(), false)
		var body struct {
			Error string `json:"error"`
		}
		if api.status != tc.status || json.Unmarshal(api.body, &body) != nil || !strings.Contains(string(api.body), tc.wantInBody) {
			t.Errorf("GET /api/v1/compare?%s: got %d %s, want %d with an error saying %s", tc.query.Encode(), api.status, api.body, tc.status, tc.wantInBody)
		}
		ui := fetchPage(t, base+"/compare?"+tc.query.Encode(), false)
		checkHTMLResponse(t, "/compare?"+tc.query.Encode(), ui, tc.status, false)
		wantText := html.EscapeString(strings.ReplaceAll(tc.wantInBody, `\"`, `"`))
		if !bytes.Contains(ui.body, []byte(`data-testid="compare-error"`)) || !bytes.Contains(ui.body, []byte(`data-testid="compare-form"`)) ||
			!bytes.Contains(ui.body, []byte(wantText)) {
			t.Errorf("GET /compare?%s: got no message %q above the form, want both", tc.query.Encode(), wantText)
		}
	}
}

// lowContrast lists the visible text under main whose colour has less than
// 4.5:1 contrast (WCAG AA) against the background it is drawn on,
// translucent tints composed over what lies beneath them.
const lowContrast = `(() => {
  const parse = c => {
    let m = c.match(/^rgba?\(([^)]+)\)/);
    if (m) { const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; }
    m = c.match(/^color\(srgb ([^)]+)\)/);
    if (m) { const p = m[1].split(/[\s\/]+/).filter(Boolean).map(Number); return [p[0]*255, p[1]*255, p[2]*255, p.length > 3 ? p[3] : 1]; }
    return null;
  };
  const over = (top, under) => { const a = top[3]; return [0, 1, 2].map(i => top[i]*a + under[i]*(1-a)).concat(1); };
  const background = el => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) layers.push(c);
      if (c && c[3] === 1) break;
    }
    let bg = [255, 255, 255, 1];
    for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg);
    return bg;
  };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v/12.92 : Math.pow((v+0.055)/1.055, 2.4); }; return 0.2126*f(c[0]) + 0.7152*f(c[1]) + 0.0722*f(c[2]); };
  const out = [];
  for (const el of document.querySelectorAll('main *')) {
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own || el.getClientRects().length === 0) continue;
    const bg = background(el), fg = over(parse(getComputedStyle(el).color), bg);
    const l1 = lum(fg), l2 = lum(bg), ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
    if (ratio < 4.5) out.push(el.tagName + '.' + el.className + ' "' + el.textContent.trim().slice(0, 30) + '" ' + ratio.toFixed(2) + ':1');
  }
  return out;
})()`

// compareLayout is how the browser laid out the compare page.
type compareLayout struct {
	ScrollW, InnerW float64
	SummaryTop      float64
	Stacked         bool // the differing row's b side is below its a side
	Rows            int
}

const measureCompare = `(() => {
  const row = document.querySelector('[data-testid=compare-row][data-differs=true]');
  const a = row.querySelector('[data-testid=compare-side-a]').getBoundingClientRect();
  const b = row.querySelector('[data-testid=compare-side-b]').getBoundingClientRect();
  return {
    ScrollW: document.documentElement.scrollWidth, InnerW: window.innerWidth,
    SummaryTop: document.querySelector('[data-testid=compare-summary]').getBoundingClientRect().top,
    Stacked: b.top >= a.bottom - 1,
    Rows: document.querySelectorAll('[data-testid=compare-row]').length,
  };
})()`

// TestCompareBrowser shows the compare page in headless Chromium at
// 1440 px (light and dark) and 390 px: the summary is in view, all text
// passes WCAG AA, nothing scrolls sideways, and on a phone a row's two
// sides stack. With -docshots it writes docs/img/compare.png and
// compare-mobile.png.
func TestCompareBrowser(t *testing.T) {
	chromium := requireChromium(t)
	base := startPagesServer(t)
	postUIEvents(t, base, compareEvents())
	ctx := startBrowser(t, chromium)
	u := base + views.CompareURL(cmpYesterday, cmpToday)
	dir := artifactsDir(t)

	for _, tc := range []struct {
		scheme  string
		w, h    int64
		stacked bool
		shot    string
	}{
		{"light", 1440, 900, false, "compare.png"},
		{"dark", 1440, 900, false, "compare-dark.png"},
		{"light", 390, 844, true, "compare-mobile.png"},
	} {
		name := fmt.Sprintf("%s %d px", tc.scheme, tc.w)
		browserDo(t, ctx, "viewport "+name, chromedp.EmulateViewport(tc.w, tc.h))
		setColorScheme(t, ctx, tc.scheme)
		browserLoad(t, ctx, u)
		m := browserEval[compareLayout](t, ctx, measureCompare)
		t.Logf("%s: %+v", name, m)
		if m.Rows != 2 {
			t.Errorf("%s: got %d rows, want 2", name, m.Rows)
		}
		if m.ScrollW > m.InnerW {
			t.Errorf("%s: the page is %.0f px wide in a %.0f px viewport, want no sideways scroll", name, m.ScrollW, m.InnerW)
		}
		if m.SummaryTop < 0 || m.SummaryTop > float64(tc.h) {
			t.Errorf("%s: the summary starts at y %.0f, want it in the first screen (%d px)", name, m.SummaryTop, tc.h)
		}
		if m.Stacked != tc.stacked {
			t.Errorf("%s: got sides stacked %v, want %v", name, m.Stacked, tc.stacked)
		}
		if low := browserEval[[]string](t, ctx, lowContrast); len(low) > 0 {
			t.Errorf("%s: got text below 4.5:1:\n%s\nwant none", name, strings.Join(low, "\n"))
		}
		browserScreenshot(t, ctx, dir, tc.shot)
		if *docShots && tc.shot != "compare-dark.png" {
			browserScreenshot(t, ctx, docsImageDir, tc.shot)
		}
	}
}
