package web_test

import (
	"path/filepath"
	"testing"

	"github.com/oncetrace/oncetrace/views"
)

// TestDemoDocScreenshots writes docs/demo.md's screenshots: the demo's
// naive and safe executions, run for real by `oncetrace demo` against a
// real server and shown by headless Chromium, light theme, cropped below
// the timeline. It runs only with -docshots:
//
//	go test ./web -run TestDemoDocScreenshots -docshots -v
func TestDemoDocScreenshots(t *testing.T) {
	if !*docShots {
		t.Skip("writes docs/img/demo-*.png: run with -docshots")
	}
	chromium := requireChromium(t)
	srv := startOncetraceServe(t)
	loadDemo(t, srv.url)
	ctx := startBrowser(t, chromium)
	setColorScheme(t, ctx, "light")
	for _, sc := range []string{"naive", "safe"} {
		browserLoad(t, ctx, srv.url+views.ExecutionURL("demo-"+sc+"-a11y"))
		writeCroppedScreenshot(t, ctx, filepath.Join(docsImageDir, "demo-"+sc+".png"))
	}
}
