package views_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zone test must not depend on the host's zoneinfo

	"golang.org/x/net/html"

	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// stepIDs are a table's step ids in row order.
func stepIDs(tbl views.StepTable) []string {
	out := make([]string, len(tbl.Rows))
	for i, r := range tbl.Rows {
		out[i] = r.StepID
	}
	return out
}

// unorderedRun is the fixture with steps whose ids sort differently as
// text and as numbers, stored out of order.
func unorderedRun() trace.Run {
	run := fixtureRun()
	run.Steps = append(run.Steps,
		step("step-231", "fetch_page", trace.EffectRead, "", try(1, 70, 71, trace.OutcomeOK)),
		step("step-24", "fetch_page", trace.EffectRead, "", try(1, 72, 73, trace.OutcomeError), try(2, 73, 74, trace.OutcomeError), try(3, 74, 75, trace.OutcomeOK)),
	)
	return run
}

func TestStepTableRows(t *testing.T) {
	run := unorderedRun()
	fs := trace.AuditRun(run, trace.DefaultConfig)
	tbl := views.NewStepTable(views.StepTableInput{Run: run, Findings: fs})
	if tbl.Sort != "step" || tbl.Dir != "asc" {
		t.Errorf("default sort: got %s %s, want step asc", tbl.Sort, tbl.Dir)
	}
	want := []string{"step-1", "step-2", "step-4", "step-5", "step-6", "step-7", "step-24", "step-231"}
	if got := stepIDs(tbl); !slices.Equal(got, want) {
		t.Errorf("default order: got %v, want natural step order %v", got, want)
	}

	byID := map[string]views.StepRow{}
	for _, r := range tbl.Rows {
		byID[r.StepID] = r
	}
	stepFindings := map[string]int{}
	critical := map[string]bool{}
	for _, f := range fs {
		stepFindings[f.StepID]++
		critical[f.StepID] = critical[f.StepID] || f.Severity == trace.SeverityCritical
	}
	if !critical["step-4"] {
		t.Fatalf("fixture: got no critical finding on step-4, want the duplicate email's")
	}
	tests := []struct {
		step     string
		tool     string
		class    trace.EffectClass
		attempts int
		outcome  trace.Outcome
		effects  int
	}{
		{"step-1", "lookup_customer", trace.EffectRead, 2, trace.OutcomeOK, 0},
		{"step-2", "create_invoice", trace.EffectWrite, 2, trace.OutcomeReplayed, 0},
		{"step-4", "send_invoice_email", trace.EffectWrite, 2, trace.OutcomeOK, 2},
		{"step-5", "send_receipt", trace.EffectWrite, 2, trace.OutcomeOK, 1},
		{"step-6", "export_report", trace.EffectWrite, 1, run.Outcome(run.Steps[4].Attempts[0]), 0},
		{"step-24", "fetch_page", trace.EffectRead, 3, trace.OutcomeOK, 0},
	}
	for _, tt := range tests {
		r := byID[tt.step]
		if r.Tool != tt.tool || r.Class != tt.class || r.Attempts != tt.attempts || r.Outcome != tt.outcome || r.Effects != tt.effects {
			t.Errorf("%s: got tool %s class %s attempts %d outcome %s effects %d, want %s %s %d %s %d", tt.step,
				r.Tool, r.Class, r.Attempts, r.Outcome, r.Effects, tt.tool, tt.class, tt.attempts, tt.outcome, tt.effects)
		}
		if r.Findings != stepFindings[tt.step] || r.Critical != critical[tt.step] {
			t.Errorf("%s: got %d findings (critical %v), want %d (critical %v)", tt.step, r.Findings, r.Critical, stepFindings[tt.step], critical[tt.step])
		}
	}
	if got := byID["step-6"].Outcome; got != trace.OutcomeLost {
		t.Errorf("step-6: got outcome %q, want lost: the run moved on without it", got)
	}
	last := byID["step-24"]
	if want := views.AttemptURL(execID, "step-24", 3); last.DetailURL != want {
		t.Errorf("step-24 detail: got %s, want the last attempt's %s", last.DetailURL, want)
	}
	if want := views.ExecutionURL(execID) + "#" + views.AttemptAnchor("step-24", 3); last.LaneURL != want {
		t.Errorf("step-24 lane: got %s, want %s", last.LaneURL, want)
	}
}

func TestStepTableSort(t *testing.T) {
	run := unorderedRun()
	fs := trace.AuditRun(run, trace.DefaultConfig)
	tests := []struct {
		sort, dir string
		wantFirst []string
	}{
		{"step", "desc", []string{"step-231", "step-24", "step-7"}},
		// Ties keep natural order: step-1, 2, 4, 5 all have two attempts.
		{"attempts", "desc", []string{"step-24", "step-1", "step-2", "step-4", "step-5"}},
		{"attempts", "asc", []string{"step-6", "step-7", "step-231", "step-1"}},
		{"effects", "desc", []string{"step-4", "step-5", "step-1"}},
		{"findings", "desc", []string{"step-4"}},
		{"tool", "asc", []string{"step-2", "step-6", "step-24", "step-231", "step-1"}},
		{"outcome", "desc", []string{}},
	}
	for _, tt := range tests {
		tbl := views.NewStepTable(views.StepTableInput{Run: run, Findings: fs, Sort: tt.sort, Dir: tt.dir})
		got := stepIDs(tbl)
		if len(got) != len(run.Steps) {
			t.Fatalf("%s %s: got %d rows, want %d", tt.sort, tt.dir, len(got), len(run.Steps))
		}
		if !slices.Equal(got[:len(tt.wantFirst)], tt.wantFirst) {
			t.Errorf("sort=%s dir=%s: got %v, want it to start with %v", tt.sort, tt.dir, got, tt.wantFirst)
		}
	}
	def := views.NewStepTable(views.StepTableInput{Run: run})
	if got, want := def.SortURL("step"), views.StepsURL(execID, "step", "desc"); got != want || !strings.Contains(got, "dir=desc") {
		t.Errorf("header of the sorted column: got %s, want %s (the other direction)", got, want)
	}
	if got := def.SortURL("effects"); strings.Contains(got, "dir=") || !strings.Contains(got, "sort=effects") {
		t.Errorf("header of another column: got %s, want sort=effects ascending", got)
	}
	// Outcome descending puts the worst first: step-6 was lost, step-7 runs.
	tbl := views.NewStepTable(views.StepTableInput{Run: run, Findings: fs, Sort: "outcome", Dir: "desc"})
	if got := tbl.Rows[0]; got.Outcome != trace.OutcomeLost {
		t.Errorf("outcome desc: got %s (%s) first, want the lost step", got.StepID, got.Outcome)
	}
	if last := tbl.Rows[len(tbl.Rows)-1]; last.Outcome != trace.OutcomeOK {
		t.Errorf("outcome desc: got %s (%s) last, want an ok step", last.StepID, last.Outcome)
	}
}

// cellsOf is a row's th and td cells.
func cellsOf(tr *html.Node) []*html.Node {
	var cells []*html.Node
	for c := tr.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && (c.Data == "td" || c.Data == "th") {
			cells = append(cells, c)
		}
	}
	return cells
}

func TestExecutionPageStepsTab(t *testing.T) {
	run := unorderedRun()
	x := execution(run)
	v := x.Page(views.TimeRange{}, time.Time{})
	v.ShowSteps(x.StepTable("attempts", "desc"))
	doc := renderPage(t, views.ExecutionPage(v))

	// The findings' links to attempts and effects lead to the timeline
	// view, since the table has no such anchors: no link points at an id
	// missing from the page.
	ids := map[string]bool{}
	var hrefs []string
	for d := range doc.Descendants() {
		if d.Type != html.ElementNode {
			continue
		}
		if id := attr(d, "id"); id != "" {
			ids[id] = true
		}
		if d.Data == "a" {
			hrefs = append(hrefs, attr(d, "href"))
		}
	}
	toTimeline := 0
	for _, h := range hrefs {
		if strings.HasPrefix(h, "#") && !ids[h[1:]] {
			t.Errorf("steps tab: got a link to %s, an id not on the page", h)
		}
		if strings.HasPrefix(h, views.ExecutionURL(execID)+"#"+views.AttemptAnchor("step-4", 1)) {
			toTimeline++
		}
	}
	if toTimeline == 0 {
		t.Errorf("steps tab: got no link to step-4 attempt 1 on the timeline, want the duplicate's finding to lead there")
	}

	if got := byTestID(doc, "timeline"); len(got) != 0 {
		t.Errorf("steps tab: got the timeline drawn, want only the table")
	}
	one(t, doc, "detail-panel")
	if _, ok := attrOK(one(t, doc, "tab-steps"), "aria-current"); !ok {
		t.Errorf("steps tab: got no aria-current on the Steps tab, want it marked as the current view")
	}
	if _, ok := attrOK(one(t, doc, "tab-timeline"), "aria-current"); ok {
		t.Errorf("steps tab: got aria-current on the Timeline tab, want it only on Steps")
	}
	if got, want := attr(one(t, doc, "tab-timeline"), "href"), views.ExecutionURL(execID); got != want {
		t.Errorf("Timeline tab: got href %s, want %s", got, want)
	}

	rows := byTestID(doc, "step-row")
	if len(rows) != len(run.Steps) {
		t.Fatalf("got %d step rows, want %d", len(rows), len(run.Steps))
	}
	if got := attr(rows[0], "data-step"); got != "step-24" {
		t.Errorf("sorted by attempts desc: got %s first, want step-24 (3 attempts)", got)
	}
	for _, tr := range rows {
		id := attr(tr, "data-step")
		class := attr(tr, "class")
		cells := cellsOf(tr)
		if len(cells) != 7 {
			t.Fatalf("%s: got %d cells, want 7 (step, tool, class, attempts, outcome, effects, findings)", id, len(cells))
		}
		for i, c := range cells {
			var link *html.Node
			for d := range c.Descendants() {
				if d.Type == html.ElementNode && d.Data == "a" {
					link = d
					break
				}
			}
			if link == nil {
				t.Errorf("%s: cell %d (%q) is not a link, want every value to lead to the step", id, i, text(c))
			}
		}
		switch id {
		case "step-4":
			if !strings.Contains(class, "has-critical") {
				t.Errorf("step-4: got row class %q, want it marked has-critical", class)
			}
			if got := text(one(t, tr, "step-findings")); !strings.HasPrefix(got, "✗ ") || !strings.HasSuffix(got, " · critical") {
				t.Errorf("step-4 findings: got %q, want \"✗ N · critical\"", got)
			}
			if got := text(cells[5]); got != "2" {
				t.Errorf("step-4 effects: got %q, want 2", got)
			}
			if got := attr(one(t, tr, "step-detail"), "href"); got != views.AttemptURL(execID, "step-4", 2) {
				t.Errorf("step-4 detail link: got %s, want the last attempt's", got)
			}
			if got := attr(one(t, tr, "step-detail"), "class"); got != "step-detail-link" {
				t.Errorf("step-4 detail link: got class %q, want step-detail-link (the script opens it in the panel)", got)
			}
		case "step-231":
			if strings.Contains(class, "has-findings") {
				t.Errorf("step-231: got row class %q, want no findings mark", class)
			}
			if got := text(one(t, tr, "step-findings")); got != "—" {
				t.Errorf("step-231 findings: got %q, want —", got)
			}
		case "step-24":
			if got := text(one(t, tr, "step-outcome")); got != "✓ ok" {
				t.Errorf("step-24 outcome: got %q, want \"✓ ok\" (word and icon)", got)
			}
		}
	}

	// Headers: the sorted one says so and flips direction; the others sort
	// ascending (the default, left out of the URL).
	for _, h := range []struct{ sort, wantSort, wantDir string }{{"attempts", "attempts", ""}, {"tool", "tool", ""}, {"step", "", ""}} {
		a := one(t, doc, "sort-"+h.sort)
		u, err := url.Parse(attr(a, "href"))
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		if q.Get("view") != "steps" || q.Get("sort") != h.wantSort || q.Get("dir") != h.wantDir {
			t.Errorf("header %s: got href %s, want view=steps sort=%q dir=%q", h.sort, attr(a, "href"), h.wantSort, h.wantDir)
		}
		th := a.Parent
		s, ok := attrOK(th, "aria-sort")
		if h.sort == "attempts" && s != "descending" {
			t.Errorf("header attempts: got aria-sort %q, want descending", s)
		}
		if h.sort != "attempts" && ok {
			t.Errorf("header %s: got aria-sort %q, want none on an unsorted column", h.sort, s)
		}
	}
}

func TestExecutionPageTimelineTab(t *testing.T) {
	v := executionView(fixtureRun())
	v.View = views.ViewTimeline
	doc := renderPage(t, views.ExecutionPage(v))
	if got := attr(one(t, doc, "tab-timeline"), "aria-current"); got != "page" {
		t.Errorf("timeline tab: got aria-current %q, want page", got)
	}
	if got := byTestID(doc, "step-table"); len(got) != 0 {
		t.Errorf("timeline tab: got the step table, want only the timeline")
	}
	one(t, doc, "timeline")
	panel := one(t, doc, "detail-panel")
	if _, hidden := attrOK(one(t, panel, "detail-close"), "hidden"); !hidden {
		t.Errorf("detail panel: got the close button shown without the script, want it hidden until the script runs")
	}
}

func TestStepTableManySteps(t *testing.T) {
	run := manySteps(320)
	// Unpadded ids, which text order would scramble.
	for i := range run.Steps {
		run.Steps[i].ID = fmt.Sprintf("step-%d", i)
	}
	slices.Reverse(run.Steps)
	tbl := views.NewStepTable(views.StepTableInput{Run: run})
	if len(tbl.Rows) != 320 {
		t.Fatalf("got %d rows, want 320", len(tbl.Rows))
	}
	for i, r := range tbl.Rows {
		if want := fmt.Sprintf("step-%d", i); r.StepID != want {
			t.Fatalf("row %d: got %s, want %s", i, r.StepID, want)
		}
	}
	v := executionView(run)
	v.ShowSteps(tbl)
	doc := renderPage(t, views.ExecutionPage(v))
	if got := len(byTestID(doc, "step-row")); got != 320 {
		t.Errorf("rendered: got %d rows, want 320", got)
	}
}

// renderTimeIn renders a TimeTag with the zone a request's cookie chose.
func renderTimeIn(t *testing.T, ctx context.Context, at time.Time) *html.Node {
	t.Helper()
	var buf bytes.Buffer
	if err := views.TimeTag(at).Render(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for d := range doc.Descendants() {
		if d.Type == html.ElementNode && d.Data == "time" {
			return d
		}
	}
	t.Fatalf("TimeTag: got %q, want a <time>", buf.String())
	return nil
}

func TestTimeTagZone(t *testing.T) {
	at := time.Date(2026, 12, 1, 2, 3, 4, 123_000_000, time.UTC)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"no zone chosen", context.Background(), "2026-12-01 02:03:04.123 UTC"},
		{"UTC", views.WithZone(context.Background(), time.UTC), "2026-12-01 02:03:04.123 UTC"},
		{"Europe/Berlin", views.WithZone(context.Background(), berlin), "2026-12-01 03:03:04.123 Europe/Berlin"},
		{"Asia/Kolkata", views.WithZone(context.Background(), kolkata), "2026-12-01 07:33:04.123 Asia/Kolkata"},
	}
	for _, tt := range tests {
		el := renderTimeIn(t, tt.ctx, at)
		if got := text(el); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
		if got := attr(el, "datetime"); got != "2026-12-01T02:03:04.123Z" {
			t.Errorf("%s: got datetime %q, want the UTC instant", tt.name, got)
		}
		if got := attr(el, "title"); got != "2026-12-01 02:03:04.123 UTC" {
			t.Errorf("%s: got title %q, want the UTC time on hover", tt.name, got)
		}
	}
}

// TestZoneToggle checks that the header's toggle names the zone the page
// is in and offers the other one; it is hidden until the script, which
// alone knows the browser's zone, shows it.
func TestZoneToggle(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		loc            *time.Location
		zone, wantText string
	}{{time.UTC, "UTC", "Show local times"}, {berlin, "Europe/Berlin", "Show UTC"}} {
		var buf bytes.Buffer
		if err := views.ErrorPage(views.ErrorView{Status: 404, Message: "x"}).Render(views.WithZone(context.Background(), tt.loc), &buf); err != nil {
			t.Fatal(err)
		}
		doc, err := html.Parse(&buf)
		if err != nil {
			t.Fatal(err)
		}
		b := one(t, doc, "tz-toggle")
		if got := attr(b, "data-zone"); got != tt.zone {
			t.Errorf("%s: got data-zone %q, want %q", tt.zone, got, tt.zone)
		}
		if got := text(b); got != tt.wantText {
			t.Errorf("%s: got %q, want %q", tt.zone, got, tt.wantText)
		}
		if _, hidden := attrOK(b, "hidden"); !hidden {
			t.Errorf("%s: got the toggle shown without the script, want it hidden", tt.zone)
		}
	}
}

// TestStepRecognisedByMCP: a step an MCP proxy recorded says so and names
// the server; a span-map rule's says which rule; a framework's says
// nothing.
func TestStepRecognisedByMCP(t *testing.T) {
	for _, tc := range []struct {
		row  views.StepRow
		want string
	}{
		{views.StepRow{RecognisedBy: "mcp", Provider: "invoices"}, " MCP tools/call to invoices"},
		{views.StepRow{RecognisedBy: "generic"}, " recognised by the generic rule"},
		{views.StepRow{}, ""},
	} {
		if got, title := tc.row.Recognised(); got != tc.want || (got != "" && title == "") {
			t.Errorf("%+v: got %q (title %q), want %q with a title", tc.row, got, title, tc.want)
		}
	}
}
