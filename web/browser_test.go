package web_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/oncetrace/oncetrace/views"
)

const browserSkipMessage = "SKIPPED: browser test needs Chromium (apt-get install chromium); set ONCETRACE_REQUIRE_BROWSER=1 to make this a failure"

// The viewport of a common laptop screen: the red duplicate must be in it
// as soon as the execution page loads.
const viewportW, viewportH = 1280, 800

// findChromium returns $CHROMIUM, /usr/bin/chromium or chromium on PATH,
// or "". A $CHROMIUM that does not run is not replaced by another browser:
// the user named that one.
func findChromium() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		abs, err := exec.LookPath(p)
		if err != nil {
			return ""
		}
		return abs
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// requireChromium returns Chromium's path, or skips the test loudly (even
// without -v, on stderr), or fails it when CI requires the browser.
func requireChromium(t *testing.T) string {
	t.Helper()
	path := findChromium()
	if path != "" {
		return path
	}
	if os.Getenv("ONCETRACE_REQUIRE_BROWSER") == "1" {
		t.Fatalf("ONCETRACE_REQUIRE_BROWSER=1 but Chromium was not found ($CHROMIUM=%q, /usr/bin/chromium, chromium on PATH): apt-get install chromium", os.Getenv("CHROMIUM"))
	}
	fmt.Fprintln(os.Stderr, "!!! "+t.Name()+" "+browserSkipMessage)
	t.Skip(browserSkipMessage)
	return ""
}

// oncetraceProcess is an `oncetrace serve` the test started.
type oncetraceProcess struct {
	url    string
	logs   string
	exited chan error
}

func (p *oncetraceProcess) logText() string {
	b, _ := os.ReadFile(p.logs)
	return string(b)
}

// startOncetraceServe builds cmd/oncetrace and runs `serve` on a free
// loopback port and a database in t.TempDir(), waits for /healthz, and
// stops that process (by its PID) when the test ends.
func startOncetraceServe(t *testing.T) *oncetraceProcess {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "oncetrace")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/oncetrace/oncetrace/cmd/oncetrace").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/oncetrace: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	p := &oncetraceProcess{url: "http://" + addr, logs: filepath.Join(dir, "serve.log"), exited: make(chan error, 1)}
	logFile, err := os.Create(p.logs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--addr", addr, "--db", filepath.Join(dir, "oncetrace.db"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start oncetrace serve: %v", err)
	}
	go func() {
		p.exited <- cmd.Wait()
		logFile.Close()
	}()
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		_ = syscall.Kill(pid, syscall.SIGTERM) // a clean shutdown drains the writer
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(pid, syscall.SIGKILL)
			<-p.exited
		}
	})

	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("oncetrace serve exited before /healthz answered: %v\n%s", err, p.logText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("oncetrace serve: /healthz did not answer 200 within 30s\n%s", p.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startBrowser starts headless Chromium with a fresh profile; it stops when
// the test ends.
func startBrowser(t *testing.T, chromium string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox,
		chromedp.Headless,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(viewportW, viewportH),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	// Registered after the profile's TempDir, so Chromium is gone before the
	// directory is removed.
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(viewportW, viewportH)); err != nil {
		t.Fatalf("start Chromium %s: %v", chromium, err)
	}
	return ctx
}

// artifactsDir is $ONCETRACE_ARTIFACTS, or artifacts/browser in the repository.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ONCETRACE_ARTIFACTS")
	if dir == "" {
		root, err := filepath.Abs("..")
		if err != nil {
			t.Fatal(err)
		}
		for ; ; root = filepath.Dir(root) {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				break
			}
			if filepath.Dir(root) == root {
				t.Fatal("no go.mod above the test's directory: set ONCETRACE_ARTIFACTS")
			}
		}
		dir = filepath.Join(root, "artifacts", "browser")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browserDo runs actions with a timeout, failing the test with what was being done.
func browserDo(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func browserEval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// browserWait polls a JavaScript predicate until it is true.
func browserWait(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := chromedp.Run(sctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(10*time.Second)))
		// A page that navigates while it is polled (a form that submits
		// itself) takes the poll's execution context with it: poll the
		// new page.
		if err != nil && strings.Contains(err.Error(), "Cannot find context with specified id") && sctx.Err() == nil {
			continue
		}
		if err != nil {
			t.Fatalf("waiting for %s (%s): %v", what, expr, err)
		}
		return
	}
}

// browserLoad navigates and waits for the page and its deferred script.
func browserLoad(t *testing.T, ctx context.Context, u string) {
	t.Helper()
	browserDo(t, ctx, "load "+u, chromedp.Navigate(u))
	browserWait(t, ctx, u+" to load", `document.readyState === "complete"`)
}

func browserScreenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

func setColorScheme(t *testing.T, ctx context.Context, scheme string) {
	t.Helper()
	_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
	})
	if err != nil {
		t.Fatalf("emulate prefers-color-scheme: %s: %v", scheme, err)
	}
}

// duplicateMark is where the outbox's red duplicates are drawn, as the
// browser laid them out.
type duplicateMark struct {
	Count    int     `json:"count"`
	Top      float64 `json:"top"`
	Left     float64 `json:"left"`
	Bottom   float64 `json:"bottom"`
	Right    float64 `json:"right"`
	InnerW   float64 `json:"innerW"`
	InnerH   float64 `json:"innerH"`
	ScrollY  float64 `json:"scrollY"`
	Fill     string  `json:"fill"`
	Critical string  `json:"critical"`
	OnTop    bool    `json:"onTop"` // the mark's centre hits the mark, not something drawn over it
	Label    string  `json:"label"`
}

// The JavaScript that measures the first duplicate effect; it returns null
// when there is none.
const measureDuplicate = `(() => {
  const all = document.querySelectorAll('[data-testid=effect][data-state=duplicate]');
  if (all.length === 0) return null;
  const el = all[0], mark = el.querySelector('rect');
  const r = el.getBoundingClientRect(), m = mark.getBoundingClientRect();
  const hit = document.elementFromPoint(m.left + m.width / 2, m.top + m.height / 2);
  return {
    count: all.length, top: r.top, left: r.left, bottom: r.bottom, right: r.right,
    innerW: window.innerWidth, innerH: window.innerHeight, scrollY: window.scrollY,
    fill: getComputedStyle(mark).fill,
    critical: getComputedStyle(document.documentElement).getPropertyValue('--critical').trim(),
    onTop: !!hit && el.contains(hit),
    label: el.querySelector('text').textContent.trim(),
  };
})()`

// hexToRGB turns "#c23b00" into "rgb(194, 59, 0)", as getComputedStyle writes it.
func hexToRGB(t *testing.T, hex string) string {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimPrefix(hex, "#"), 16, 32)
	if err != nil || len(hex) != 7 {
		t.Fatalf("--critical: got %q, want a #rrggbb colour", hex)
	}
	return fmt.Sprintf("rgb(%d, %d, %d)", v>>16, v>>8&0xff, v&0xff)
}

// checkDuplicateInView checks that the red duplicate is in the viewport as
// the page loads, drawn on top, in the critical colour.
func checkDuplicateInView(t *testing.T, ctx context.Context, scheme string) {
	t.Helper()
	m := browserEval[*duplicateMark](t, ctx, measureDuplicate)
	if m == nil {
		t.Fatalf("%s: got no [data-testid=effect][data-state=duplicate], want the two duplicate emails", scheme)
	}
	t.Logf("%s: first red duplicate at x %.0f–%.0f, y %.0f–%.0f of a %.0f×%.0f viewport", scheme, m.Left, m.Right, m.Top, m.Bottom, m.InnerW, m.InnerH)
	if m.Count != 2 {
		t.Errorf("%s: got %d duplicate effects, want 2", scheme, m.Count)
	}
	if m.ScrollY != 0 || m.Top < 0 || m.Left < 0 || m.Bottom > m.InnerH || m.Right > m.InnerW || m.Bottom <= m.Top {
		t.Errorf("%s: the red duplicate is not in the viewport without scrolling: got box top %.0f left %.0f bottom %.0f right %.0f (scrollY %.0f), want within %.0f×%.0f — a UI bug: the duplicate must be impossible to miss",
			scheme, m.Top, m.Left, m.Bottom, m.Right, m.ScrollY, m.InnerW, m.InnerH)
	}
	if !m.OnTop {
		t.Errorf("%s: the duplicate's mark is covered by another element, want it drawn on top", scheme)
	}
	if want := hexToRGB(t, m.Critical); m.Fill != want {
		t.Errorf("%s: duplicate fill: got %s, want the critical colour %s (%s)", scheme, m.Fill, want, m.Critical)
	}
	var r, g, b int
	if _, err := fmt.Sscanf(m.Fill, "rgb(%d, %d, %d)", &r, &g, &b); err != nil || r < 150 || r <= g || r <= b {
		t.Errorf("%s: duplicate fill: got %s, want a red", scheme, m.Fill)
	}
	if !strings.Contains(m.Label, "duplicate") {
		t.Errorf("%s: duplicate label: got %q, want it to say duplicate (never colour alone)", scheme, m.Label)
	}
}

// attemptSelector selects an attempt's bar by its permalink.
func attemptSelector(execID, stepID string, n int) string {
	return fmt.Sprintf(`[data-testid=attempt][href=%q]`, views.AttemptURL(execID, stepID, n))
}

// clickAttempt clicks the middle of an attempt's bar with the mouse.
// chromedp.Click cannot: it waits for offsetWidth, which SVG elements lack.
func clickAttempt(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	type point struct {
		X, Y  float64
		OnTop bool
	}
	p := browserEval[*point](t, ctx, `(() => {
  const link = document.querySelector(`+strconv.Quote(sel)+`);
  if (!link) return null;
  const r = link.querySelector('rect').getBoundingClientRect();
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  const hit = document.elementFromPoint(x, y);
  return {X: x, Y: y, OnTop: !!hit && link.contains(hit)};
})()`)
	if p == nil {
		t.Fatalf("click: got no %s, want the attempt's bar", sel)
	}
	if !p.OnTop {
		t.Fatalf("click: the middle of %s (%.0f, %.0f) is covered by another element, want the bar on top", sel, p.X, p.Y)
	}
	// Then the pointer leaves, so no hover outline lingers in a screenshot.
	browserDo(t, ctx, "click "+sel, chromedp.MouseClickXY(p.X, p.Y), chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, 1, 1))
}

// panelHeading is the heading of the detail the #detail panel shows, or "".
const panelHeading = `(document.querySelector('#detail [data-testid=attempt-detail] h3') || {textContent: ''}).textContent.replace(/\s+/g, ' ').trim()`

// TestBrowser drives headless Chromium against a real `oncetrace serve`
// holding a green duplicate: the red duplicate must be visible on load, an
// attempt's detail must open by click and by keyboard, and the list and
// execution pages are saved as screenshots in light and dark.
func TestBrowser(t *testing.T) {
	chromium := requireChromium(t)
	srv := startOncetraceServe(t)
	postUIEvents(t, srv.url, uiEvents())
	dir := artifactsDir(t)
	ctx := startBrowser(t, chromium)
	execURL := srv.url + views.ExecutionURL(uiDupExec)

	setColorScheme(t, ctx, "light")
	browserLoad(t, ctx, srv.url+"/")
	if n := browserEval[int](t, ctx, `document.querySelectorAll('[data-testid=execution-row]').length`); n != 5 {
		t.Errorf("executions list: got %d rows, want 5", n)
	}
	browserScreenshot(t, ctx, dir, "executions-light.png")

	browserLoad(t, ctx, execURL)
	checkDuplicateInView(t, ctx, "light")

	// Click: the panel shows the attempt's detail; the page stays.
	first := attemptSelector(uiDupExec, "step-4", 1)
	clickAttempt(t, ctx, first)
	browserWait(t, ctx, "the panel to show step-4 attempt 1", panelHeading+` === "step-4 · attempt 1"`)
	args := browserEval[string](t, ctx, `(document.querySelector('#detail [data-testid=detail-args]') || {textContent: ''}).textContent`)
	if !strings.Contains(args, `"to": "jordan@acme.dev"`) || !strings.Contains(args, `"subject": "Your June invoice"`) {
		t.Errorf("attempt detail args: got %q, want the formatted JSON of the arguments", args)
	}
	// The page stays; its URL names the selection (views.SelectAttemptURL).
	if loc := browserEval[string](t, ctx, `location.pathname + location.search + location.hash`); loc != views.SelectAttemptURL(uiDupExec, "step-4", 1) {
		t.Errorf("after the click: got location %s, want to stay on %s", loc, views.SelectAttemptURL(uiDupExec, "step-4", 1))
	}

	// Keyboard: Tab from the focused bar to the next attempt opens it.
	var focused string
	for range 60 {
		browserDo(t, ctx, "press Tab", chromedp.KeyEvent("\t"))
		focused = browserEval[string](t, ctx, `(document.activeElement && document.activeElement.matches('[data-testid=attempt]')) ? document.activeElement.getAttribute('href') : ''`)
		if focused != "" && focused != views.AttemptURL(uiDupExec, "step-4", 1) {
			break
		}
	}
	if focused == "" {
		t.Fatalf("Tab: got no attempt focused after 60 presses, want the timeline's bars in the tab order")
	}
	u, err := url.Parse(focused)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s · attempt %s", u.Query().Get("step"), u.Query().Get("n"))
	if focused != views.AttemptURL(uiDupExec, "step-4", 2) {
		t.Errorf("Tab after step-4 attempt 1: got %s focused, want step-4 attempt 2, the next bar", focused)
	}
	browserWait(t, ctx, "the panel to show the focused attempt ("+want+")", panelHeading+` === `+strconv.Quote(want))
	if result := browserEval[string](t, ctx, `(document.querySelector('#detail [data-testid=detail-result]') || {textContent: ''}).textContent`); focused == views.AttemptURL(uiDupExec, "step-4", 2) && !strings.Contains(result, "msg_41bcc8") {
		t.Errorf("keyboard-opened detail result: got %q, want the second email's message id", result)
	}
	browserScreenshot(t, ctx, dir, "execution-light.png")

	browserLoad(t, ctx, srv.url+views.ExecutionURL(uiCrashExec))
	browserScreenshot(t, ctx, dir, "execution-crash-light.png")

	setColorScheme(t, ctx, "dark")
	browserLoad(t, ctx, srv.url+"/")
	bg := browserEval[string](t, ctx, `getComputedStyle(document.body).backgroundColor`)
	var r, g, b int
	if _, err := fmt.Sscanf(bg, "rgb(%d, %d, %d)", &r, &g, &b); err != nil || r+g+b > 200 {
		t.Errorf("dark theme: got body background %q, want a dark colour", bg)
	}
	browserScreenshot(t, ctx, dir, "executions-dark.png")
	browserLoad(t, ctx, execURL)
	checkDuplicateInView(t, ctx, "dark")
	clickAttempt(t, ctx, first)
	browserWait(t, ctx, "the panel to show step-4 attempt 1", panelHeading+` === "step-4 · attempt 1"`)
	browserScreenshot(t, ctx, dir, "execution-dark.png")
	browserLoad(t, ctx, srv.url+views.ExecutionURL(uiCrashExec))
	browserScreenshot(t, ctx, dir, "execution-crash-dark.png")

	select {
	case err := <-srv.exited:
		srv.exited <- err
		t.Errorf("oncetrace serve exited during the test: %v\n%s", err, srv.logText())
	default:
	}
}
