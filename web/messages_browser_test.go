package web_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncetrace/oncetrace/views"
)

// consoleRecorder keeps what a target wrote to its console.
type consoleRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func recordConsole(t *testing.T, ctx context.Context) *consoleRecorder {
	t.Helper()
	r := &consoleRecorder{}
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	messages := chromedp.Console(cctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			r.mu.Lock()
			r.msgs = append(r.msgs, m.String())
			r.mu.Unlock()
		}
	}()
	return r
}

// waitFor reports whether every one of the texts shows in the console
// within d.
func (r *consoleRecorder) waitFor(d time.Duration, texts ...string) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		all, found := r.all(), 0
		for _, s := range texts {
			if strings.Contains(all, s) {
				found++
			}
		}
		if found == len(texts) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func (r *consoleRecorder) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}

// messageFrame is the state of the message's HTML frame, read inside it.
type messageFrame struct {
	Title   string `json:"title"`
	Visible string `json:"visible"`
	Color   string `json:"color"`
	URL     string `json:"url"`
	Cookie  string `json:"cookie"`
}

const readMessageFrame = `(() => {
  let cookie = "";
  try { cookie = document.cookie } catch (e) { cookie = "(no access: " + e.name + ")" }
  const p = document.getElementById("visible");
  return {title: document.title, visible: p ? p.textContent : "", color: p ? getComputedStyle(p).color : "",
          url: location.href, cookie: cookie};
})()`

// TestBrowserMessageHostileHTML: a message whose HTML part carries script
// in every form, a meta refresh, a javascript: link and a form renders in
// Chromium with its text visible and nothing of it executing, whether the
// links are clicked or not: the sandboxed frame of the message page, and
// the HTML part's own policy when it is opened on its own.
func TestBrowserMessageHostileHTML(t *testing.T) {
	chromium := requireChromium(t)
	ms := startMailServer(t)
	const id = "<hostile@agent.acme.dev>"
	ms.send(t, "jordan@acme.dev", hostileMessage(id))
	ctx := startBrowser(t, chromium)
	pageConsole := recordConsole(t, ctx)

	// The canary counts what reaches it: a navigation to it shows.
	browserLoad(t, ctx, ms.ts.URL+"/canary/control")
	if hits := ms.canaryHits(); len(hits) != 1 {
		t.Fatalf("canary control: got %v, want the one visit", hits)
	}

	pageURL := ms.ts.URL + views.MessageURL("smtp", id)
	browserLoad(t, ctx, pageURL)
	if got := browserEval[string](t, ctx, `document.querySelector("[data-testid=message-text] pre").innerText`); !strings.Contains(got, "Hello Jordan, your June invoice: 42.00 EUR") {
		t.Errorf("text part: got %q, want it shown", got)
	}
	if got := browserEval[string](t, ctx, `document.querySelector("[data-testid=message-html-frame]").getAttribute("sandbox")`); got != "" {
		t.Errorf("frame sandbox attribute: got %q, want empty", got)
	}

	// The frame runs in its own process (an opaque origin): read it as its
	// own target.
	frameCtx := attachFrame(t, ctx, ms.ts.URL+views.MessageHTMLURL("smtp", id))
	frameConsole := recordConsole(t, frameCtx)
	read := func(when string) {
		t.Helper()
		f := browserEval[messageFrame](t, frameCtx, readMessageFrame)
		if f.Visible != "Your June invoice: 42.00 EUR, due July 15." {
			t.Errorf("%s: the HTML's text: got %q, want it rendered", when, f.Visible)
		}
		if f.Color != "rgb(0, 128, 0)" {
			t.Errorf("%s: the HTML's own style: got color %q, want rgb(0, 128, 0) (inline styles apply)", when, f.Color)
		}
		if f.Title == "PWNED" || strings.Contains(f.Cookie, "pwned") || f.URL != ms.ts.URL+views.MessageHTMLURL("smtp", id) {
			t.Errorf("%s: the frame: got title %q, cookie %q, URL %q; want no script run and no refresh", when, f.Title, f.Cookie, f.URL)
		}
	}
	read("after loading")
	time.Sleep(1500 * time.Millisecond) // longer than the meta refresh's 0 s
	read("a moment later")

	// Click the javascript: link and the form's button, where the HTML
	// puts them; Chromium says what it blocked, which shows the click
	// landed. A click right after a scroll may reach the frame before its
	// new place does, so each is tried again until it lands.
	click := func(what string, y float64, blocked string) {
		t.Helper()
		for try := 0; ; try++ {
			rect := browserEval[struct{ Left, Top float64 }](t, ctx, `(() => {
  const f = document.querySelector("[data-testid=message-html-frame]");
  f.scrollIntoView();
  const r = f.getBoundingClientRect();
  return {Left: r.left, Top: r.top};
})()`)
			time.Sleep(200 * time.Millisecond)
			browserDo(t, ctx, "click "+what, chromedp.MouseClickXY(rect.Left+20, rect.Top+y))
			if frameConsole.waitFor(2*time.Second, blocked) {
				return
			}
			if try == 4 {
				t.Errorf("clicking %s: got the frame's console\n%s\nwant %q", what, frameConsole.all(), blocked)
				return
			}
		}
	}
	click("the javascript: link", 80, "Running the JavaScript URL")
	click("the form's button", 140, "'allow-forms'")
	read("after the clicks")
	t.Logf("the frame's console:\n%s", frameConsole.all())

	browserScreenshot(t, ctx, artifactsDir(t), "message-hostile.png")
	if got := browserEval[string](t, ctx, `location.href`); got != pageURL {
		t.Errorf("the page: got location %q, want it still %q", got, pageURL)
	}
	if got := browserEval[string](t, ctx, `document.title`); got != "Message Your June invoice · oncetrace" {
		t.Errorf("the page's title: got %q, want it untouched", got)
	}
	if got := browserEval[string](t, ctx, `document.cookie`); strings.Contains(got, "pwned") {
		t.Errorf("the page's cookies: got %q, want none set by the message", got)
	}

	// Opened on its own, the HTML part runs nothing either: its policy
	// sandboxes it without the frame.
	partURL := ms.ts.URL + views.MessageHTMLURL("smtp", id)
	browserLoad(t, ctx, partURL)
	time.Sleep(1500 * time.Millisecond)
	alone := browserEval[messageFrame](t, ctx, readMessageFrame)
	if alone.Title == "PWNED" || strings.Contains(alone.Cookie, "pwned") || alone.URL != partURL || alone.Visible == "" {
		t.Errorf("the HTML part on its own: got %+v, want its text, no script run and no refresh", alone)
	}
	if !pageConsole.waitFor(10*time.Second, "Blocked script execution", "Refused to execute the redirect") {
		t.Errorf("console: got\n%s\nwant Chromium to report the sandbox blocking the script and the refresh", pageConsole.all())
	}
	console := pageConsole.all()

	if hits := ms.canaryHits(); len(hits) != 1 {
		t.Errorf("requests from the message's HTML: got %v, want none (only the control)", hits[1:])
	}
	if strings.Contains(console, "PWNED") {
		t.Errorf("console: got\n%s\nwant nothing logged by the message's script", console)
	}
	t.Logf("console:\n%s", console)
}

// attachFrame returns a context on the iframe target at url, which
// Chromium runs apart from the page.
func attachFrame(t *testing.T, ctx context.Context, url string) context.Context {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		infos, err := chromedp.Targets(ctx)
		if err != nil {
			t.Fatalf("targets: %v", err)
		}
		for _, info := range infos {
			if info.Type == "iframe" && info.URL == url {
				frameCtx, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(info.TargetID))
				t.Cleanup(cancel)
				// The first Run attaches, for as long as its context
				// lives: it must not be one with a timeout.
				if err := chromedp.Do(frameCtx); err != nil {
					t.Fatalf("attach to the frame at %s: %v", url, err)
				}
				return frameCtx
			}
		}
		if time.Now().After(deadline) {
			var seen []string
			for _, info := range infos {
				seen = append(seen, info.Type+" "+info.URL)
			}
			t.Fatalf("no iframe target at %s; targets: %v", url, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
