package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncetrace/oncetrace/web"
)

// TestBrowserLogin drives headless Chromium through the login of a server
// configured as exposed: the page leads to the form, the token leads back
// to it with an HttpOnly session, the live WebSocket opens with that
// session, a link from another site opens the page without a second login
// (the SameSite=Strict cookie is not sent on that first request), and
// logging out leads back to the form. It skips and fails as TestBrowser does.
func TestBrowserLogin(t *testing.T) {
	chromium := requireChromium(t)
	rs := startReadServer(t, "ingest-secret", web.AuthConfig{Exposed: true})
	rs.seed(t, "ingest-secret")
	target := rs.ts.URL + "/executions/exec_secret"
	// Another site: "localhost" and "127.0.0.1" are different sites to a
	// browser, so following this link is a cross-site navigation.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!DOCTYPE html><title>chat</title><a id="go" href="%s">exec_secret</a>`, target)
	}))
	defer other.Close()
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	ctx := startBrowser(t, chromium)

	browserLoad(t, ctx, target)
	if path := browserEval[string](t, ctx, `location.pathname + location.search`); path != "/login?next=%2Fexecutions%2Fexec_secret" {
		t.Fatalf("without a session: at %q, want the login form", path)
	}
	dir := artifactsDir(t)
	browserScreenshot(t, ctx, dir, "login.png")
	browserDo(t, ctx, "log in",
		chromedp.SendKeys(chromedp.CSS("#login-token"), "ingest-secret"),
		chromedp.Click(chromedp.CSS(`[data-testid=login-submit]`)))
	waitAcrossNavigation(t, ctx, "the execution page after login",
		`location.pathname === "/executions/exec_secret" && document.readyState === "complete" && !!document.querySelector("[data-testid=logout]")`)
	browserScreenshot(t, ctx, dir, "logged-in.png")
	if got := browserEval[string](t, ctx, `document.cookie`); strings.Contains(got, "oncetrace_session") {
		t.Errorf("document.cookie: got %q, want the session out of reach of scripts (HttpOnly)", got)
	}
	if got := browserEval[bool](t, ctx, `document.body.textContent.includes("send_invoice_email")`); !got {
		t.Errorf("execution page after login: the trace is not shown")
	}

	browserLoad(t, ctx, rs.ts.URL+"/live")
	browserWait(t, ctx, "the live WebSocket to open with the session", `document.getElementById("live-status").textContent === "live"`)

	browserLoad(t, ctx, otherURL)
	browserDo(t, ctx, "follow the link from another site", chromedp.Click(chromedp.CSS("#go")))
	waitAcrossNavigation(t, ctx, "the execution page, not the form, after a cross-site link",
		fmt.Sprintf(`location.href === %q && document.readyState === "complete" && !!document.querySelector("[data-testid=logout]")`, target))

	browserDo(t, ctx, "log out", chromedp.Click(chromedp.CSS(`[data-testid=logout]`)))
	waitAcrossNavigation(t, ctx, "the login form after logout", `location.pathname === "/login" && document.readyState === "complete"`)
	browserDo(t, ctx, "open the execution page after logout", chromedp.Navigate(target))
	waitAcrossNavigation(t, ctx, "the login form for the execution page after logout",
		`location.pathname === "/login" && document.readyState === "complete" && !!document.querySelector("[data-testid=login-form]")`)
}

// waitAcrossNavigation polls a predicate while the page navigates (a form
// post, a redirect, a reload): an evaluation cut short by a navigation is
// tried again.
func waitAcrossNavigation(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	var last error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok, err := chromedp.Run(sctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		last = err
	}
	url := browserEval[string](t, ctx, "location.href")
	t.Fatalf("waiting for %s (%s): not true within 15s at %s (last error %v)", what, expr, url, last)
}
