package web_test

import (
	"html"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // zones must not depend on the host's zoneinfo, as in cmd/oncetrace

	"github.com/oncetrace/oncetrace/views"
)

// TestExecutionPageViewParams checks the execution page's view, sort and
// dir parameters on a real server: the step table renders, sorted, and an
// unknown value is a 400 naming the parameter and the values it takes.
func TestExecutionPageViewParams(t *testing.T) {
	base := startPagesServer(t)
	postUIEvents(t, base, uiEvents())
	page := base + views.ExecutionURL(uiDupExec)

	for _, q := range []string{"", "?view=timeline", "?view=steps", "?view=steps&sort=attempts&dir=desc", "?view=steps&sort=findings"} {
		r := fetchPage(t, page+q, false)
		checkHTMLResponse(t, page+q, r, http.StatusOK, false)
		table := strings.Contains(string(r.body), `data-testid="step-table"`)
		if wantTable := strings.Contains(q, "view=steps"); table != wantTable {
			t.Errorf("GET %s: got step table %v, want %v", q, table, wantTable)
		}
	}

	r := fetchPage(t, page+"?view=steps&sort=attempts&dir=desc", false)
	rows := regexp.MustCompile(`data-testid="step-row" data-step="([^"]+)"`).FindAllStringSubmatch(string(r.body), -1)
	if len(rows) == 0 {
		t.Fatalf("steps view: got no rows, want the execution's steps")
	}
	if rows[0][1] != "step-4" {
		t.Errorf("sort=attempts&dir=desc: got %s first, want step-4 (two attempts)", rows[0][1])
	}

	tests := []struct{ query, want string }{
		{"?view=table", "view: must be one of timeline, steps"},
		{"?view=steps&sort=name", "sort: must be one of step, tool, class, attempts, outcome, effects, findings"},
		{"?view=steps&dir=up", "dir: must be one of asc, desc"},
	}
	for _, tt := range tests {
		r := fetchPage(t, page+tt.query, false)
		checkHTMLResponse(t, tt.query, r, http.StatusBadRequest, false)
		if body := html.UnescapeString(string(r.body)); !strings.Contains(body, tt.want) {
			t.Errorf("GET %s: got a 400 without %q, want the parameter and its values named", tt.query, tt.want)
		}
	}
}

// fetchWithZone fetches a page with the time zone cookie set (none when
// zone is "").
func fetchWithZone(t *testing.T, u, zone string, fragment bool) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if zone != "" {
		req.AddCookie(&http.Cookie{Name: "oncetrace_tz", Value: zone})
	}
	if fragment {
		req.Header.Set("X-Oncetrace-Fragment", "1")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: got %d, %v, want 200", u, resp.StatusCode, err)
	}
	return string(body)
}

var timeTag = regexp.MustCompile(`<time datetime="([^"]+)"[^>]*>([^<]*)</time>`)

// TestTimeZoneCookie checks that the oncetrace_tz cookie chooses the zone
// every time on a page and in a detail fragment is rendered in, named
// after it, and that a cookie naming no zone falls back to UTC.
func TestTimeZoneCookie(t *testing.T) {
	base := startPagesServer(t)
	postUIEvents(t, base, uiEvents())
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	pages := []struct {
		path     string
		fragment bool
	}{
		{"/", false},
		{views.ExecutionURL(uiDupExec), false},
		{views.AttemptURL(uiDupExec, "step-4", 1), true},
	}
	tests := []struct {
		cookie string
		loc    *time.Location
		suffix string
	}{
		{"", time.UTC, " UTC"},
		{"utc", time.UTC, " UTC"},
		{"America/New_York", newYork, " America/New_York"},
		{"Mars/Olympus_Mons", time.UTC, " UTC"},
		{"Local", time.UTC, " UTC"},
		{"../../../etc/passwd", time.UTC, " UTC"},
	}
	for _, p := range pages {
		for _, tt := range tests {
			body := fetchWithZone(t, base+p.path, tt.cookie, p.fragment)
			times := timeTag.FindAllStringSubmatch(body, -1)
			if len(times) == 0 {
				t.Fatalf("GET %s: got no <time>, want the page's times", p.path)
			}
			for _, m := range times {
				at, err := time.Parse(time.RFC3339Nano, m[1])
				if err != nil {
					t.Fatalf("GET %s: datetime %q: %v", p.path, m[1], err)
				}
				want := at.In(tt.loc).Format("2006-01-02 15:04:05.000") + tt.suffix
				if m[2] != want {
					t.Errorf("GET %s with cookie %q: got time %q, want %q", p.path, tt.cookie, m[2], want)
					break
				}
			}
			wantZone := strings.TrimSpace(tt.suffix)
			if p.fragment {
				continue
			}
			if !strings.Contains(body, `data-zone="`+wantZone+`"`) {
				t.Errorf("GET %s with cookie %q: got no toggle naming %s, want one", p.path, tt.cookie, wantZone)
			}
		}
	}
}
