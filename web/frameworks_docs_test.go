package web_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
	"github.com/oncetrace/oncetrace/web"
)

var docShots = flag.Bool("docshots", false, "write docs/img/otlp-<framework>.png from the frameworks' naive fixtures (needs Chromium)")

// docsImageDir is docs/img, beside the web package.
const docsImageDir = "../docs/img"

// TestFrameworkDocScreenshots writes the screenshots of docs/otlp.md
// § Frameworks: each framework's naive run, replayed into a real server and
// shown by real headless Chromium, 1280 px wide, light theme, cropped below
// the timeline. It also logs every run's audit (naive and keyed), which is
// what the section says of each framework. It runs only with -docshots:
//
//	go test ./web -run TestFrameworkDocScreenshots -docshots -v
func TestFrameworkDocScreenshots(t *testing.T) {
	if !*docShots {
		t.Skip("writes docs/img/otlp-*.png: run with -docshots")
	}
	chromium := requireChromium(t)
	ctx := startBrowser(t, chromium)
	setColorScheme(t, ctx, "light")
	for _, r := range loadFixtureRuns(t) {
		t.Run(r.name(), func(t *testing.T) {
			srv, clock := startServerWithSandboxClock(t, r.name())
			for _, q := range r.requests {
				switch q.Kind {
				case "otlp":
					replayOTLP(t, srv, r, q)
				case "mail":
					clock.Store(int64(q.AtMS * float64(time.Millisecond)))
					replayMail(t, srv, r, q)
				}
			}
			id := r.traceID(t)
			var x docShotRun
			if err := json.Unmarshal(srv.get(t, "/api/v1/executions/"+id), &x); err != nil {
				t.Fatal(err)
			}
			logAudit(t, r.name(), x)
			if r.manifest.Run != "naive" {
				return
			}
			browserLoad(t, ctx, srv.ts.URL+views.ExecutionURL(id))
			checkDocShotContent(t, ctx, x.Audit.State)
			path := filepath.Join(docsImageDir, "otlp-"+r.manifest.Framework+".png")
			writeCroppedScreenshot(t, ctx, path)
		})
	}
}

// startServerWithSandboxClock is startServer with the sandbox's clock set
// by the test. The replay then stamps each email with the time its request
// was recorded, not the time it was replayed: otherwise the emails would be
// drawn minutes or days after the spans they came from.
func startServerWithSandboxClock(t *testing.T, name string, opts ...func(*web.Config)) (*testServer, *atomic.Int64) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), t.TempDir()+"/oncetrace.db", sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	clock := &atomic.Int64{} // Unix nanoseconds
	clock.Store(time.Now().UnixNano())
	w := writer.New(db, writer.DefaultConfig)
	cfg := web.Config{DB: db, Writer: w, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig,
		Sandbox: sandbox.Config{Now: func() time.Time { return time.Unix(0, clock.Load()).UTC() }}}
	for _, opt := range opts {
		opt(&cfg)
	}
	ts := httptest.NewServer(web.New(cfg))
	t.Cleanup(func() {
		ts.Close()
		w.Close()
		db.Close()
	})
	return &testServer{name: name, ts: ts, db: db}, clock
}

// docShotRun is what the test logs of a run, read from the execution's JSON.
type docShotRun struct {
	Execution struct {
		Name       string `json:"name"`
		NameSource string `json:"name_source"`
		Status     string `json:"status"`
	} `json:"execution"`
	Audit struct {
		State        string            `json:"state"`
		Unverified   []string          `json:"unverified_steps"`
		Unattributed []json.RawMessage `json:"unattributed_effects"`
	} `json:"audit"`
	Steps []struct {
		Tool     string `json:"tool"`
		Effect   string `json:"effect"`
		Attempts []struct {
			Attempt        int    `json:"attempt"`
			Outcome        string `json:"outcome"`
			IdempotencyKey string `json:"idempotency_key"`
		} `json:"attempts"`
	} `json:"steps"`
	ModelCalls []trace.Span `json:"model_calls"`
	Effects    []struct {
		EffectID string `json:"effect_id"`
		State    string `json:"state"`
	} `json:"effects"`
	Findings []trace.Finding `json:"findings"`
}

// logAudit prints what the audit says of one run: what docs/otlp.md
// § Frameworks says of each framework.
func logAudit(t *testing.T, name string, x docShotRun) {
	t.Helper()
	var steps []string
	for _, s := range x.Steps {
		var as []string
		for _, a := range s.Attempts {
			k := a.IdempotencyKey
			if k == "" {
				k = "no key"
			}
			as = append(as, fmt.Sprintf("%d %s (%s)", a.Attempt, a.Outcome, k))
		}
		steps = append(steps, s.Tool+" "+s.Effect+": "+strings.Join(as, ", "))
	}
	var models []string
	for _, m := range x.ModelCalls {
		models = append(models, fmt.Sprintf("%s %d/%d", m.Model, m.InputTokens, m.OutputTokens))
	}
	var effects []string
	for _, e := range x.Effects {
		effects = append(effects, e.EffectID+" "+e.State)
	}
	t.Logf("%s: %q (name_source %q) %s; audit %s (unverified steps %d, unattributed effects %d); steps [%s]; model calls [%s]; effects [%s]",
		name, x.Execution.Name, x.Execution.NameSource, x.Execution.Status, x.Audit.State, len(x.Audit.Unverified), len(x.Audit.Unattributed),
		strings.Join(steps, "; "), strings.Join(models, ", "), strings.Join(effects, ", "))
	for _, f := range x.Findings {
		t.Logf("  %s %s: %s", f.Severity, f.Rule, f.Message)
	}
}

// checkDocShotContent checks that what the section describes is on the page
// before it is captured: the audit, a tool step's lane, the model-call lane
// and both emails in the outbox lane.
func checkDocShotContent(t *testing.T, ctx context.Context, state string) {
	t.Helper()
	for sel, want := range map[string]int{
		`[data-testid=execution-header] [data-testid=audit-` + state + `]`: 1,
		`[data-testid=lane]`:                             1,
		`[data-testid=model-lane]`:                       1,
		`[data-testid=outbox-lane] [data-testid=effect]`: 2,
	} {
		if got := browserEval[int](t, ctx, countSelector(sel)); got != want {
			t.Errorf("%s: got %d, want %d", sel, got, want)
		}
	}
}

// writeCroppedScreenshot captures the page from the top to just below the
// timeline and its detail panel, at 1280 CSS pixels and device scale 1.
func writeCroppedScreenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	bottom := browserEval[float64](t, ctx, `(() => {
  const els = [document.querySelector('[data-testid=timeline]'), document.querySelector('[data-testid=detail-panel]')];
  return Math.max(...els.filter(Boolean).map(el => el.getBoundingClientRect().bottom + window.scrollY));
})()`)
	if bottom <= 0 || math.IsInf(bottom, 0) {
		t.Fatalf("timeline bottom: got %v, want the timeline on the page", bottom)
	}
	height := math.Ceil(bottom + 24)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	beyond := true
	png, err := chromedp.Call(sctx, page.CaptureScreenshot, page.CaptureScreenshotParams{
		Format:                page.CaptureScreenshotFormatPng,
		Clip:                  &page.Viewport{X: 0, Y: 0, Width: viewportW, Height: height, Scale: 1},
		CaptureBeyondViewport: &beyond,
	})
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	if err := os.WriteFile(path, png.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d×%.0f, %d bytes)", path, viewportW, height, len(png.Data))
	if len(png.Data) > 300<<10 {
		t.Errorf("%s: %d bytes, want at most 300 KiB for the docs", path, len(png.Data))
	}
}
