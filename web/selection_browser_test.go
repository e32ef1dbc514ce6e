package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/oncetrace/oncetrace/views"
)

const selExec = "exec_sel"

// twoKeyEvents are selExec with steps step-1 and step-2, each timing out
// and retried with the same key (ik_cus_00000001, ik_cus_00000002: the
// same head, a different tail), each sending two emails under its key.
func twoKeyEvents() []map[string]any {
	at := func(ms int) string {
		return time.Date(2026, 6, 30, 14, 2, 11, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano)
	}
	events := []map[string]any{{"type": "execution", "execution_id": selExec, "name": "keys", "status": "completed", "started_at": at(0), "ended_at": at(9000)}}
	for i, key := range []string{"ik_cus_00000001", "ik_cus_00000002"} {
		stepID, base := "step-"+strconv.Itoa(i+1), i*4000
		for n, outcome := range []string{"timeout", "ok"} {
			events = append(events, map[string]any{"type": "attempt", "execution_id": selExec, "step_id": stepID, "attempt": n + 1,
				"tool": "send_invoice_email", "effect": "write", "provider": "mail-api", "idempotency_key": key, "worker": "pid-1",
				"started_at": at(base + n*1500), "ended_at": at(base + n*1500 + 1000), "outcome": outcome})
			events = append(events, map[string]any{"type": "effect", "provider": "mail-api", "effect_id": "msg_" + stepID + "_" + strconv.Itoa(n+1),
				"idempotency_key": key, "execution_id": selExec, "step_id": stepID, "target": "jordan@acme.dev", "at": at(base + n*1500 + 200)})
		}
	}
	return events
}

func postEventList(t *testing.T, base string, events []map[string]any) {
	t.Helper()
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	for _, ev := range events {
		if err := enc.Encode(ev); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Post(base+"/api/v1/events", "application/x-ndjson", &body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 || strings.Contains(string(data), `"error"`) {
		t.Fatalf("POST /api/v1/events: got %d %s, want every event accepted", resp.StatusCode, data)
	}
}

// TestBrowserSelectionInURL: clicking an attempt or an effect puts it in
// the URL (no reload), reloading that URL opens the same detail, Back
// returns to the previous one, and the incident's "copy link" copies the
// page with its culprit selected.
func TestBrowserSelectionInURL(t *testing.T) {
	chromium := requireChromium(t)
	srv := startOncetraceServe(t)
	postEventList(t, srv.url, twoKeyEvents())
	ctx := startBrowser(t, chromium)
	page := srv.url + views.ExecutionURL(selExec)
	js := strconv.Quote

	browserLoad(t, ctx, page)
	browserEval[any](t, ctx, `window.notReloaded = true`)
	clickInView(t, ctx, attemptSelector(selExec, "step-2", 1))
	browserWait(t, ctx, "the panel to show step-2's attempt 1", panelHeading+` === "step-2 · attempt 1"`)
	attemptURL := srv.url + views.SelectAttemptURL(selExec, "step-2", 1)
	if got := browserEval[string](t, ctx, `location.href`); got != attemptURL {
		t.Errorf("URL after clicking an attempt: got %q, want %q", got, attemptURL)
	}
	if !browserEval[bool](t, ctx, `window.notReloaded === true`) {
		t.Errorf("clicking an attempt reloaded the page, want the URL changed in place")
	}

	// The server renders the selection: the detail is there before any script.
	resp, err := http.Get(attemptURL)
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(html), `data-selected="`+views.AttemptAnchor("step-2", 1)+`"`) ||
		!strings.Contains(string(html), `data-testid="attempt-detail"`) {
		t.Errorf("GET %s: got %d without the attempt's detail in the panel", attemptURL, resp.StatusCode)
	}
	browserLoad(t, ctx, attemptURL)
	if h := browserEval[string](t, ctx, panelHeading); h != "step-2 · attempt 1" {
		t.Errorf("reloaded: got panel %q, want step-2's attempt 1", h)
	}
	if !browserEval[bool](t, ctx, `document.getElementById(`+js(views.AttemptAnchor("step-2", 1))+`).classList.contains("selected")`) {
		t.Errorf("reloaded: got the attempt's bar unmarked, want it selected")
	}

	// An effect, then Back.
	effect := `[data-testid=effect][href=` + js(views.EffectURL(selExec, "mail-api", "msg_step-1_2")) + `]`
	clickInView(t, ctx, effect)
	effectHeading := `(document.querySelector('#detail [data-testid=effect-detail] h3') || {textContent: ''}).textContent.replace(/\s+/g, ' ').trim()`
	browserWait(t, ctx, "the panel to show the effect", effectHeading+`.includes("msg_step-1_2")`)
	effectURL := srv.url + views.SelectEffectURL(selExec, "mail-api", "msg_step-1_2")
	if got := browserEval[string](t, ctx, `location.href`); got != effectURL {
		t.Errorf("URL after clicking an effect: got %q, want %q", got, effectURL)
	}
	browserLoad(t, ctx, effectURL)
	if h := browserEval[string](t, ctx, effectHeading); !strings.Contains(h, "msg_step-1_2") {
		t.Errorf("reloaded: got effect panel %q, want msg_step-1_2", h)
	}
	clickInView(t, ctx, attemptSelector(selExec, "step-1", 2))
	browserWait(t, ctx, "the panel to show step-1's attempt 2", panelHeading+` === "step-1 · attempt 2"`)
	browserEval[any](t, ctx, `history.back()`)
	browserWait(t, ctx, "Back to select the effect again", `location.href === `+js(effectURL)+` && `+effectHeading+`.includes("msg_step-1_2")`)

	// The incident's copy link: the page with its culprit selected.
	browserLoad(t, ctx, page)
	grantClipboard(t, ctx, srv.url)
	first := `document.querySelector('[data-testid=incident] [data-testid=copy-link]')`
	if !browserEval[bool](t, ctx, first+` !== null && getComputedStyle(`+first+`).display !== "none"`) {
		t.Fatalf("incident: got no visible copy-link button")
	}
	browserEval[any](t, ctx, first+`.click()`)
	browserWait(t, ctx, "the link to be copied", first+`.getAttribute("data-copied") !== null`)
	copied := browserEval[string](t, ctx, first+`.getAttribute("data-copied")`)
	step := browserEval[string](t, ctx, `document.querySelector('[data-testid=incident]').getAttribute('data-step')`)
	if want := srv.url + views.SelectAttemptURL(selExec, step, 2); copied != want {
		t.Errorf("copy link: got %q, want %q", copied, want)
	}
	clip, err := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	if err != nil || clip != copied {
		t.Errorf("clipboard: got %q (%v), want %q", clip, err, copied)
	}
	browserLoad(t, ctx, copied)
	if h := browserEval[string](t, ctx, panelHeading); h != step+" · attempt 2" {
		t.Errorf("the copied link: got panel %q, want %s's attempt 2", h, step)
	}
}

// TestBrowserKeysRenderDistinct: two keys with the same head,
// ik_cus_00000001 and ik_cus_00000002, never read alike: on the execution
// page (incidents, findings, the detail panel), the outbox and their own
// pages, every link to one key shows a text no link to the other shows.
// Focusing a cut key, or tapping its copy button, shows it whole.
func TestBrowserKeysRenderDistinct(t *testing.T) {
	chromium := requireChromium(t)
	srv := startOncetraceServe(t)
	postEventList(t, srv.url, twoKeyEvents())
	ctx := startBrowser(t, chromium)
	keys := []string{"ik_cus_00000001", "ik_cus_00000002"}
	js := strconv.Quote

	// linkTexts are the texts, as drawn, of the links to each key's page.
	linkTexts := func(where string) [2][]string {
		t.Helper()
		var out [2][]string
		for i, k := range keys {
			out[i] = browserEval[[]string](t, ctx, `[...document.querySelectorAll('a[href='+`+js(js(views.KeyURL(k)))+`+']')].map(a => a.innerText.trim()).filter(s => s !== "")`)
		}
		if len(out[0]) == 0 || len(out[1]) == 0 {
			t.Errorf("%s: got links to the keys %q and %q, want both shown", where, out[0], out[1])
		}
		for _, a := range out[0] {
			for _, b := range out[1] {
				if a == b {
					t.Errorf("%s: both keys render as %q", where, a)
				}
			}
		}
		return out
	}

	page := srv.url + views.ExecutionURL(selExec)
	browserLoad(t, ctx, page)
	got := linkTexts("execution page")
	incident := browserEval[[]string](t, ctx, `[...document.querySelectorAll('[data-testid=incident-sentence]')].map(p => p.innerText)`)
	if len(incident) != 2 || !strings.Contains(strings.Join(incident, "\n"), "ik_cus_…00001") || !strings.Contains(strings.Join(incident, "\n"), "ik_cus_…00002") {
		t.Errorf("incident sentences: got %q, want the keys cut in the middle, ik_cus_…00001 and ik_cus_…00002", incident)
	}
	t.Logf("execution page: %q", got)
	for i, s := range []string{"step-1", "step-2"} {
		clickInView(t, ctx, attemptSelector(selExec, s, 1))
		browserWait(t, ctx, "the panel", panelHeading+` === `+js(s+" · attempt 1"))
		if k := browserEval[string](t, ctx, `document.querySelector('#detail [data-testid=detail-key]').innerText.trim()`); k != keys[i] {
			t.Errorf("detail of %s: got key %q, want %q", s, k, keys[i])
		}
	}
	linkTexts("execution page with a detail open")

	// Focus shows a cut key whole; so does a tap on its copy button.
	cut := `[...document.querySelectorAll('[data-testid=incident-sentence] a')].find(a => a.querySelector('.sid[data-id=` + js(keys[0]) + `]'))`
	browserEval[any](t, ctx, cut+`.focus()`)
	if s := browserEval[string](t, ctx, cut+`.innerText.trim()`); s != keys[0] {
		t.Errorf("focused cut key: got %q, want %q", s, keys[0])
	}
	browserEval[any](t, ctx, `document.activeElement.blur()`)
	if s := browserEval[string](t, ctx, cut+`.innerText.trim()`); s != "ik_cus_…00001" {
		t.Errorf("cut key without focus: got %q, want ik_cus_…00001", s)
	}
	grantClipboard(t, ctx, srv.url)
	browserEval[any](t, ctx, cut+`.nextElementSibling.click()`)
	browserWait(t, ctx, "the copy button to copy the key", cut+`.nextElementSibling.getAttribute("data-copied") === `+js(keys[0]))
	if s := browserEval[string](t, ctx, cut+`.innerText.trim()`); s != keys[0] {
		t.Errorf("after a tap on copy: got %q, want the key whole, %q", s, keys[0])
	}

	browserLoad(t, ctx, srv.url+"/outbox")
	linkTexts("outbox")
	for _, k := range keys {
		browserLoad(t, ctx, srv.url+views.KeyURL(k))
		if s := browserEval[string](t, ctx, `document.querySelector('[data-testid=key]').innerText`); s != k {
			t.Errorf("key page: got %q, want %q", s, k)
		}
	}
}

// grantClipboard lets pages of origin read and write the clipboard without
// asking, as a reader who clicked "allow" would, and focuses the page.
func grantClipboard(t *testing.T, ctx context.Context, origin string) {
	t.Helper()
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		_, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
			Permission: &browser.PermissionDescriptor{Name: name}, Setting: browser.PermissionSettingGranted, Origin: origin})
		if err != nil {
			t.Fatalf("grant %s: %v", name, err)
		}
	}
	// Reading the clipboard back needs a focused document, which a
	// headless window is not.
	if _, err := chromedp.Call(ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true}); err != nil {
		t.Fatalf("emulate focus: %v", err)
	}
}

// clickInView scrolls a bar or mark to the middle of the window, then
// clicks it as clickAttempt does.
func clickInView(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	browserEval[any](t, ctx, `document.querySelector(`+strconv.Quote(sel)+`).scrollIntoView({block: "center", inline: "center"})`)
	clickAttempt(t, ctx, sel)
}
