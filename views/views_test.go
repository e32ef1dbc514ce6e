package views_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
	"golang.org/x/net/html"

	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
	"github.com/oncetrace/oncetrace/views/htmlcheck"
)

// The fixture is one running execution that holds every case the timeline
// must explain. Times are seconds after t0.
//
//	step-1 lookup_customer     error, then ok
//	step-2 create_invoice      ok; replayed from the journal after the crash
//	step-4 send_invoice_email  timeout, then ok; two emails: a green-looking duplicate
//	step-5 send_receipt        timeout, then ok deduplicated by the mail API; one email
//	step-6 export_report       started at 14 s, never finished: lost
//	                           — 53 s with no process running, worker w1 → w2 —
//	step-7 notify_team         started at 68 s, no end yet: running
var t0 = time.Date(2026, 6, 30, 14, 2, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

const execID = "exec_fixture"

type attemptOpt func(*trace.Attempt)

func key(k string) attemptOpt    { return func(a *trace.Attempt) { a.IdempotencyKey = k } }
func worker(w string) attemptOpt { return func(a *trace.Attempt) { a.Worker = w } }
func args(js string) attemptOpt  { return func(a *trace.Attempt) { a.Args = json.RawMessage(js) } }
func result(js string) attemptOpt {
	return func(a *trace.Attempt) { a.Result = json.RawMessage(js) }
}
func failed(msg string) attemptOpt { return func(a *trace.Attempt) { a.Error = msg } }
func dedup(a *trace.Attempt)       { a.Deduplicated = true }

// try is an attempt; a negative end means it never reported one.
func try(n int, start, end float64, outcome trace.Outcome, opts ...attemptOpt) trace.Attempt {
	a := trace.Attempt{Number: n, StartedAt: at(start), Outcome: outcome}
	if end >= 0 {
		a.EndedAt = at(end)
	}
	for _, o := range opts {
		o(&a)
	}
	return a
}

func step(id, tool string, class trace.EffectClass, provider string, attempts ...trace.Attempt) trace.Step {
	for i := range attempts {
		attempts[i].ExecutionID, attempts[i].StepID = execID, id
		attempts[i].Tool, attempts[i].Effect, attempts[i].Provider = tool, class, provider
	}
	return trace.Step{ExecutionID: execID, ID: id, Tool: tool, Effect: class, Provider: provider, Attempts: attempts}
}

func mail(id, k, stepID string, sec float64) trace.Effect {
	return trace.Effect{Provider: "mail-api", ID: id, IdempotencyKey: k, ExecutionID: execID, StepID: stepID, Target: "jordan@acme.dev", At: at(sec)}
}

func fixtureRun() trace.Run {
	return trace.Run{
		Execution: trace.Execution{ID: execID, Name: "billing-agent", Status: trace.StatusRunning, StartedAt: at(0), IdempotencyKey: "run_7f3a"},
		Steps: []trace.Step{
			step("step-1", "lookup_customer", trace.EffectRead, "",
				try(1, 0, 0.4, trace.OutcomeError, worker("w1"), failed("connection reset")),
				try(2, 0.5, 0.9, trace.OutcomeOK, worker("w1"))),
			step("step-2", "create_invoice", trace.EffectWrite, "billing-api",
				try(1, 1.0, 1.5, trace.OutcomeOK, worker("w1"), key("ik_inv"), result(`{"invoice_id":"inv_1"}`)),
				try(2, 67.0, 67.05, trace.OutcomeReplayed, worker("w2"), key("ik_inv"), result(`{"invoice_id":"inv_1"}`))),
			step("step-4", "send_invoice_email", trace.EffectWrite, "mail-api",
				try(1, 2.0, 12.0, trace.OutcomeTimeout, worker("w1"), key("ik_dup"), args(`{"subject":"Your June invoice","to":"jordan@acme.dev"}`), failed("network timeout after 10s")),
				try(2, 12.1, 12.3, trace.OutcomeOK, worker("w1"), key("ik_dup"), args(`{"subject":"Your June invoice","to":"jordan@acme.dev"}`), result(`{"message_id":"msg_b","status":"sent"}`))),
			step("step-5", "send_receipt", trace.EffectWrite, "mail-api",
				try(1, 12.5, 13.0, trace.OutcomeTimeout, worker("w1"), key("ik_rcpt")),
				try(2, 13.1, 13.3, trace.OutcomeOK, worker("w1"), key("ik_rcpt"), dedup, result(`{"message_id":"msg_c"}`))),
			step("step-6", "export_report", trace.EffectWrite, "", try(1, 14.0, -1, "", worker("w1"))),
			step("step-7", "notify_team", trace.EffectWrite, "", try(1, 68.0, -1, "", worker("w2"))),
		},
		Effects: []trace.Effect{
			mail("msg_a", "ik_dup", "step-4", 2.2),
			mail("msg_b", "ik_dup", "step-4", 12.2),
			mail("msg_c", "ik_rcpt", "step-5", 12.6),
		},
		FedProviders: map[string]bool{"mail-api": true},
	}
}

// execution is the model every view of run is built from, as the web
// handlers build it from a store read: its findings as the audit finds
// them, its effects' states as trace derives them; orphans are the orphan
// effects near it, listed if it is unverified.
func execution(run trace.Run, orphans ...trace.Effect) views.Execution {
	return views.NewExecution(views.ExecutionInput{Run: run, Findings: trace.AuditRun(run, trace.DefaultConfig),
		States: trace.EffectStates(run), Orphans: orphans, Analysis: trace.DefaultConfig})
}

// executionView is the execution page of run, built as the handler builds
// it (views.NewExecution, then Page).
func executionView(run trace.Run, orphans ...trace.Effect) views.ExecutionView {
	return execution(run, orphans...).Page(views.TimeRange{}, time.Time{})
}

// renderPage renders a whole page, checks that it is valid HTML that needs
// no inline script or style, and parses it.
func renderPage(t *testing.T, c templ.Component) *html.Node {
	t.Helper()
	return renderChecked(t, c, htmlcheck.Document)
}

// renderFragment is renderPage for a fragment (the detail panel's).
func renderFragment(t *testing.T, c templ.Component) *html.Node {
	t.Helper()
	return renderChecked(t, c, htmlcheck.Fragment)
}

func renderChecked(t *testing.T, c templ.Component, check func([]byte) htmlcheck.Problems) *html.Node {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	if ps := check(buf.Bytes()); len(ps) > 0 {
		t.Errorf("got invalid HTML:\n%s\nwant none", ps)
	}
	if ps := htmlcheck.InlineCode(buf.Bytes()); len(ps) > 0 {
		t.Errorf("got inline code a strict CSP blocks:\n%s\nwant none", ps)
	}
	doc, err := html.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return doc
}

// byTestID returns the elements under n with data-testid=id, in document order.
func byTestID(n *html.Node, id string) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && attr(d, "data-testid") == id {
			out = append(out, d)
		}
	}
	return out
}

// one returns the only element with data-testid=id, failing otherwise.
func one(t *testing.T, n *html.Node, id string) *html.Node {
	t.Helper()
	got := byTestID(n, id)
	if len(got) != 1 {
		t.Fatalf("data-testid=%q: got %d elements, want 1", id, len(got))
	}
	return got[0]
}

// attrOK is an attribute's value and whether it is present at all.
func attrOK(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// text is an element's text with runs of white space collapsed; separate
// text nodes (such as table cells) are separated by a space.
func text(n *html.Node) string {
	var parts []string
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			parts = append(parts, d.Data)
		}
	}
	return strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
}

// prose is an element's text as a reader sees it: text nodes joined as
// written, runs of white space collapsed.
func prose(n *html.Node) string { return strings.Join(strings.Fields(rawText(n)), " ") }

// rawText is an element's text as written, white space kept.
func rawText(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return b.String()
}

func texts(ns []*html.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = text(n)
	}
	return out
}

// ancestor returns the closest ancestor of n with data-testid=id.
func ancestor(n *html.Node, id string) *html.Node {
	for p := n.Parent; p != nil; p = p.Parent {
		if p.Type == html.ElementNode && attr(p, "data-testid") == id {
			return p
		}
	}
	return nil
}

func laneOf(n *html.Node) string {
	if l := ancestor(n, "lane"); l != nil {
		return attr(l, "data-step")
	}
	return ""
}

// TestExecutionPage renders the fixture's execution page and checks each
// thing the timeline must say, by data-testid.
func TestExecutionPage(t *testing.T) {
	doc := renderPage(t, views.ExecutionPage(executionView(fixtureRun())))

	t.Run("duplicate finding", func(t *testing.T) {
		var dup *html.Node
		for _, f := range byTestID(doc, "finding") {
			if attr(f, "data-rule") == string(trace.RuleDuplicateEffect) {
				dup = f
			}
		}
		if dup == nil {
			t.Fatalf("findings: got %q, want a duplicate_effect finding", texts(byTestID(doc, "finding")))
		}
		msg := text(one(t, dup, "finding-message"))
		for _, want := range []string{"step-4 (send_invoice_email)", "2 effects", "mail-api msg_a, mail-api msg_b"} {
			if !strings.Contains(msg, want) {
				t.Errorf("duplicate finding message: got %q, want it to contain %q", msg, want)
			}
		}
		if got, want := attr(dup, "class"), "severity-critical"; !strings.Contains(got, want) {
			t.Errorf("duplicate finding class: got %q, want it to contain %q", got, want)
		}
		// The finding links to the effects it names, on this page.
		var hrefs []string
		for d := range dup.Descendants() {
			if d.Type == html.ElementNode && d.Data == "a" {
				hrefs = append(hrefs, attr(d, "href"))
			}
		}
		for _, want := range []string{"#" + views.EffectAnchor("mail-api", "msg_a"), "#" + views.EffectAnchor("mail-api", "msg_b"), views.KeyURL("ik_dup")} {
			if !slices.Contains(hrefs, want) {
				t.Errorf("duplicate finding links: got %q, want one to %q", hrefs, want)
			}
		}
	})

	t.Run("outbox count", func(t *testing.T) {
		counts := map[string]*html.Node{}
		for _, c := range byTestID(doc, "outbox-count") {
			counts[laneOf(c)] = c
		}
		tests := []struct {
			step, want string
			duplicate  bool
		}{
			{"step-4", "· 2 emails for step-4", true},
			{"step-5", "· 1 email for step-5", false},
		}
		for _, tc := range tests {
			c := counts[tc.step]
			if c == nil {
				t.Errorf("lane %s: got no outbox-count, want %q", tc.step, tc.want)
				continue
			}
			if got := text(c); got != tc.want {
				t.Errorf("lane %s outbox-count: got %q, want %q", tc.step, got, tc.want)
			}
			if got := strings.Contains(attr(c, "class"), "duplicate"); got != tc.duplicate {
				t.Errorf("lane %s outbox-count drawn as a duplicate: got %v, want %v", tc.step, got, tc.duplicate)
			}
		}
		if len(counts) != 2 {
			t.Errorf("outbox counts: got them on lanes %v, want only step-4 and step-5", slices.Sorted(maps.Keys(counts)))
		}
	})

	t.Run("dedupe badge", func(t *testing.T) {
		badge := one(t, doc, "dedupe-badge")
		if got, want := text(badge), "≡ deduplicated"; got != want {
			t.Errorf("dedupe badge: got %q, want %q", got, want)
		}
		link := ancestor(badge, "attempt")
		if got, want := laneOf(badge), "step-5"; got != want {
			t.Errorf("dedupe badge: got it on lane %q, want %q", got, want)
		}
		if link == nil || attr(link, "href") != views.AttemptURL(execID, "step-5", 2) {
			t.Errorf("dedupe badge: got it outside the link to step-5 attempt 2, want inside")
		}
	})

	t.Run("replay ghost", func(t *testing.T) {
		ghost := one(t, doc, "replay-ghost")
		if got, want := laneOf(ghost), "step-2"; got != want {
			t.Errorf("replay ghost: got it on lane %q, want %q", got, want)
		}
		if got := attr(ghost, "class"); !strings.Contains(got, "ghost") {
			t.Errorf("replay ghost class: got %q, want it to contain ghost", got)
		}
		if link := ancestor(ghost, "attempt"); link == nil || !strings.Contains(text(link), "from journal, tool not called") {
			t.Errorf("replay ghost: got no label saying it came from the journal, want one")
		}
	})

	t.Run("gap label", func(t *testing.T) {
		gap := one(t, doc, "gap")
		if got, want := text(one(t, gap, "gap-label")), "53 s — no process running"; got != want {
			t.Errorf("gap label: got %q, want %q", got, want)
		}
		if got, want := attr(gap, "class"), "gap-crash"; !strings.Contains(got, want) {
			t.Errorf("gap class: got %q, want it to contain %q", got, want)
		}
		if got, want := text(gap), "worker w1 → w2"; !strings.Contains(got, want) {
			t.Errorf("gap text: got %q, want it to contain %q", got, want)
		}
	})

	t.Run("outcome labels", func(t *testing.T) {
		got := map[string][]string{}
		for _, l := range byTestID(doc, "outcome-label") {
			got[laneOf(l)] = append(got[laneOf(l)], text(l))
		}
		want := map[string][]string{
			"step-1": {"✗ error", "✓ ok"},
			"step-2": {"✓ ok", "↺ replayed — from journal, tool not called"},
			"step-4": {"◔ timeout", "✓ ok"},
			"step-5": {"◔ timeout", "✓ ok"},
			"step-6": {"? lost"},
			"step-7": {"… running"},
		}
		for _, s := range slices.Sorted(maps.Keys(want)) {
			if !slices.Equal(got[s], want[s]) {
				t.Errorf("lane %s outcome labels: got %q, want %q", s, got[s], want[s])
			}
		}
	})

	t.Run("outbox lane", func(t *testing.T) {
		var got []string
		for _, e := range byTestID(one(t, doc, "outbox-lane"), "effect") {
			label := ""
			for d := range e.Descendants() {
				if d.Type == html.ElementNode && d.Data == "text" {
					label = text(d)
				}
			}
			got = append(got, attr(e, "data-state")+": "+label)
			if href := attr(e, "href"); !strings.HasPrefix(href, views.ExecutionURL(execID)+"/effect?") {
				t.Errorf("effect link: got %q, want the effect's permalink", href)
			}
		}
		// The duplicate emails are placed as the incident tells them.
		want := []string{"duplicate: ◆ duplicate msg_a · 1 of 2 · original", "duplicate: ◆ duplicate msg_b · 2 of 2 · extra", "matched: ◆ msg_c"}
		if !slices.Equal(got, want) {
			t.Errorf("outbox lane: got %q, want %q", got, want)
		}
	})

	t.Run("detail panel and no collapse", func(t *testing.T) {
		one(t, doc, "detail-panel")
		if got := byTestID(doc, "lanes-collapsed"); len(got) != 0 {
			t.Errorf("6 steps: got %q, want no lanes-collapsed", texts(got))
		}
		if got, want := len(byTestID(doc, "lane")), 6; got != want {
			t.Errorf("lanes: got %d, want %d", got, want)
		}
	})
}

// manySteps is a completed execution with n one-attempt steps.
func manySteps(n int) trace.Run {
	run := trace.Run{Execution: trace.Execution{ID: execID, Status: trace.StatusCompleted, StartedAt: at(0)}}
	for i := range n {
		s := float64(i) * 0.01
		run.Steps = append(run.Steps, step(fmt.Sprintf("step-%04d", i), "fetch_page", trace.EffectRead, "", try(1, s, s+0.005, trace.OutcomeOK)))
	}
	return run
}

// TestExecutionPageCollapsesLanes checks that every lane is reachable
// from the page whatever the number of steps: a few as they are, many in
// collapsible groups, lanes with findings first and expanded (the first
// 15 on the page: a screenful), the rest collapsed in chunks whose lanes a link
// fetches.
func TestExecutionPageCollapsesLanes(t *testing.T) {
	tests := []struct {
		name       string
		steps      int
		wantGroups []bool // open or not, in order; nil: not grouped
	}{
		{"few lanes", 20, nil},
		{"many lanes", 237, []bool{true, false, false, false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := renderPage(t, views.ExecutionPage(executionView(manySteps(tc.steps))))
			want := tc.steps
			if tc.wantGroups != nil {
				want = 15
			}
			if got := len(byTestID(doc, "lane")); got != want {
				t.Errorf("lanes: got %d, want %d: all of a few, the first 15 of many", got, want)
			}
			if got := byTestID(doc, "lanes-collapsed"); len(got) != 0 {
				t.Errorf("lanes-collapsed: got %q, want none: no lane is left off the page", texts(got))
			}
			groups := byTestID(doc, "lane-group")
			var open []bool
			for _, g := range groups {
				_, isOpen := attrOK(g, "open")
				open = append(open, isOpen)
			}
			if !slices.Equal(open, tc.wantGroups) {
				t.Errorf("groups open: got %v, want %v", open, tc.wantGroups)
			}
			if len(groups) > 1 {
				if got := len(byTestID(groups[1], "lane")); got != 0 {
					t.Errorf("second group: got %d lanes, want none but a link to them", got)
				}
				if got := text(one(t, groups[1], "lanes-more")); got != "show 50 more lanes" {
					t.Errorf("second group: got %q, want a link to its 50 lanes", got)
				}
				if got := text(one(t, groups[0], "lane-group-summary")); !strings.HasPrefix(got, "step-0000 … step-0049 · 50 lanes · 50 attempts") {
					t.Errorf("first group summary: got %q, want the steps it holds and their counts", got)
				}
			}
		})
	}

	t.Run("findings first", func(t *testing.T) {
		run := manySteps(60)
		run.Steps[42] = step(run.Steps[42].ID, "send_email", trace.EffectWrite, "mail-api", run.Steps[42].Attempts...)
		run.Effects = []trace.Effect{mail("m1", "", run.Steps[42].ID, 0.421), mail("m2", "", run.Steps[42].ID, 0.423)}
		doc := renderPage(t, views.ExecutionPage(executionView(run)))
		groups := byTestID(doc, "lane-group")
		if len(groups) < 2 {
			t.Fatalf("groups: got %d, want the flagged lanes' group and the rest", len(groups))
		}
		if _, isOpen := attrOK(groups[0], "open"); !isOpen {
			t.Errorf("flagged group: got it closed, want it open")
		}
		lanes := byTestID(groups[0], "lane")
		if len(lanes) != 1 || attr(lanes[0], "data-step") != run.Steps[42].ID {
			t.Errorf("flagged group: got lanes %q, want only %s", texts(lanes), run.Steps[42].ID)
		}
		if got := text(one(t, groups[0], "lane-group-summary")); !strings.HasPrefix(got, "Steps with findings · 1 lane") {
			t.Errorf("flagged group summary: got %q", got)
		}
	})
}

// findAttempt is the detail of an attempt of run, as the attempt page
// builds it.
func findAttempt(t *testing.T, run trace.Run, stepID string, n int) views.AttemptView {
	t.Helper()
	v, ok := execution(run).Attempt(stepID, n)
	if !ok {
		t.Fatalf("fixture has no %s attempt %d", stepID, n)
	}
	return v
}

// TestAttemptDetail renders attempts' details, as the panel and as a page,
// and checks the fields a reader opens them for.
func TestAttemptDetail(t *testing.T) {
	run := fixtureRun()
	tests := []struct {
		step                 string
		n                    int
		wantHeading, wantKey string
		wantArgs, wantResult string // a line of the formatted JSON, "" for none
		wantDedupe           bool
		wantText             []string
	}{
		{step: "step-4", n: 1, wantHeading: "step-4 · attempt 1", wantKey: "ik_dup",
			wantArgs: `"to": "jordan@acme.dev"`, wantText: []string{"◔ timeout", "network timeout after 10s", "10 s", "w1", "msg_a", "msg_b"}},
		{step: "step-5", n: 2, wantHeading: "step-5 · attempt 2", wantKey: "ik_rcpt",
			wantResult: `"message_id": "msg_c"`, wantDedupe: true, wantText: []string{"✓ ok", "≡ yes", "200 ms"}},
		{step: "step-2", n: 2, wantHeading: "step-2 · attempt 2", wantKey: "ik_inv",
			wantResult: `"invoice_id": "inv_1"`, wantText: []string{"↺ replayed", "the tool was not called", "w2"}},
		{step: "step-6", n: 1, wantHeading: "step-6 · attempt 1", wantText: []string{"? lost", "none"}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s attempt %d", tc.step, tc.n), func(t *testing.T) {
			v := findAttempt(t, run, tc.step, tc.n)
			for _, doc := range []*html.Node{renderFragment(t, views.AttemptDetail(v)), renderPage(t, views.AttemptDetailPage(v))} {
				d := one(t, doc, "attempt-detail")
				var h3 string
				for n := range d.Descendants() {
					if n.Type == html.ElementNode && n.Data == "h3" {
						h3 = text(n)
					}
				}
				if h3 != tc.wantHeading {
					t.Errorf("heading: got %q, want %q", h3, tc.wantHeading)
				}
				keys := byTestID(d, "detail-key")
				switch {
				case tc.wantKey == "" && len(keys) > 0:
					t.Errorf("key: got %q, want none", texts(keys))
				case tc.wantKey != "" && (len(keys) != 1 || attr(keys[0], "href") != views.KeyURL(tc.wantKey)):
					t.Errorf("key link: got %d links %q, want one to %q", len(keys), texts(keys), views.KeyURL(tc.wantKey))
				}
				for id, want := range map[string]string{"detail-args": tc.wantArgs, "detail-result": tc.wantResult} {
					got := byTestID(d, id)
					// Indented: the field on its own line, two spaces in.
					if want != "" && (len(got) != 1 || !strings.Contains(rawText(got[0]), "\n  "+want)) {
						t.Errorf("%s: got %q, want indented JSON with the line %q", id, texts(got), want)
					}
				}
				if got := len(byTestID(d, "detail-dedupe")) == 1; got != tc.wantDedupe {
					t.Errorf("dedupe flag shown: got %v, want %v", got, tc.wantDedupe)
				}
				all := text(d)
				for _, w := range tc.wantText {
					if !strings.Contains(all, w) {
						t.Errorf("detail text: got %q, want it to contain %q", all, w)
					}
				}
			}
		})
	}
}

// TestEffectDetail checks an effect's detail: its state, and for a
// duplicate how many effects its step caused.
func TestEffectDetail(t *testing.T) {
	run := fixtureRun()
	effects := map[string]trace.Effect{}
	for _, f := range run.Effects {
		effects[f.ID] = f
	}
	tests := []struct {
		id           string
		state        trace.MatchState
		stepID       string
		siblings     int
		wantState    string
		wantSiblings string // "" for none
	}{
		{"msg_b", trace.MatchDuplicate, "step-4", 2, "◆ duplicate", "2 effects for step-4: one logical step acted 2 times."},
		{"msg_c", trace.MatchMatched, "step-5", 1, "◆ matched", ""},
		{"msg_x", trace.MatchOrphan, "", 0, "◇ orphan", ""},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			f, ok := effects[tc.id]
			if !ok {
				f = trace.Effect{Provider: "mail-api", ID: tc.id, At: at(30)}
			}
			v := views.EffectView{ExecutionID: execID, Effect: f, State: tc.state, StepID: tc.stepID, Siblings: tc.siblings}
			for _, doc := range []*html.Node{renderFragment(t, views.EffectDetail(v)), renderPage(t, views.EffectDetailPage(v))} {
				d := one(t, doc, "effect-detail")
				if got := text(one(t, d, "effect-state")); got != tc.wantState {
					t.Errorf("state: got %q, want %q", got, tc.wantState)
				}
				sib := byTestID(d, "effect-siblings")
				switch {
				case tc.wantSiblings == "" && len(sib) > 0:
					t.Errorf("siblings: got %q, want none", texts(sib))
				case tc.wantSiblings != "" && (len(sib) != 1 || text(sib[0]) != tc.wantSiblings):
					t.Errorf("siblings: got %q, want %q", texts(sib), tc.wantSiblings)
				}
				if tc.stepID == "" && !strings.Contains(text(d), "matches no attempt of this execution") {
					t.Errorf("orphan detail: got %q, want it to say it matches no attempt", text(d))
				}
			}
		})
	}
}

// TestOutboxPage checks that each effect row carries its state in words and
// links to its execution and key, and the empty state.
func TestOutboxPage(t *testing.T) {
	run := fixtureRun()
	orphan := trace.Effect{Provider: "mail-api", ID: "msg_x", Target: "someone@else.dev", At: at(30)}
	rows := []views.OutboxRow{
		{Effect: run.Effects[0], State: trace.MatchDuplicate},
		{Effect: run.Effects[1], State: trace.MatchDuplicate},
		{Effect: orphan, State: trace.MatchOrphan},
		{Effect: run.Effects[2], State: trace.MatchMatched},
	}
	doc := renderPage(t, views.OutboxPage(views.OutboxView{Rows: rows, NextURL: "/outbox?cursor=abc"}))
	// The state in words, once, beside its icon.
	wantState := map[trace.MatchState]string{trace.MatchDuplicate: "◆ duplicate", trace.MatchOrphan: "◇ orphan", trace.MatchMatched: "◆ matched"}
	got := byTestID(doc, "effect-row")
	if len(got) != len(rows) {
		t.Fatalf("effect rows: got %d, want %d", len(got), len(rows))
	}
	for i, r := range rows {
		if s := attr(got[i], "data-state"); s != string(r.State) {
			t.Errorf("row %d (%s): got state %q, want %q", i, r.ID, s, r.State)
		}
		cells := texts(rowCells(got[i]))
		if len(cells) < 3 || cells[0] != wantState[r.State] || cells[2] != r.ID {
			t.Errorf("row %d: got cells %q, want state %q and effect %s", i, cells, wantState[r.State], r.ID)
		}
		var hrefs []string
		for d := range got[i].Descendants() {
			if d.Type == html.ElementNode && d.Data == "a" {
				hrefs = append(hrefs, attr(d, "href"))
			}
		}
		if r.ExecutionID != "" && !slices.Contains(hrefs, views.ExecutionURL(r.ExecutionID)+"#"+views.EffectAnchor(r.Provider, r.ID)) {
			t.Errorf("row %d: got links %q, want one to its place on the execution page", i, hrefs)
		}
		if r.IdempotencyKey != "" && !slices.Contains(hrefs, views.KeyURL(r.IdempotencyKey)) {
			t.Errorf("row %d: got links %q, want one to its key's page", i, hrefs)
		}
	}

	empty := renderPage(t, views.OutboxPage(views.OutboxView{}))
	if got := text(one(t, empty, "empty")); !strings.Contains(got, "No effects yet") {
		t.Errorf("empty outbox: got %q, want it to say there are no effects yet", got)
	}
}

func rowCells(tr *html.Node) []*html.Node {
	var cells []*html.Node
	for c := tr.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.Data == "td" {
			cells = append(cells, c)
		}
	}
	return cells
}

// TestKeyPage checks the key-centric view, and that it flags a key reused
// with different arguments.
func TestKeyPage(t *testing.T) {
	run := fixtureRun()
	sent := findAttempt(t, run, "step-4", 1)
	other := sent.Attempt
	other.ExecutionID, other.Number, other.Args = "exec_other", 1, json.RawMessage(`{"subject":"Your July invoice","to":"jordan@acme.dev"}`)
	finding := trace.Finding{Rule: trace.RuleKeyCollision, Severity: trace.SeverityCritical, ExecutionID: execID, StepID: "step-4",
		IdempotencyKey: "ik_dup", Message: "key ik_dup was sent with different arguments"}
	otherRun := trace.Run{Execution: trace.Execution{ID: "exec_other", Status: trace.StatusCompleted},
		Steps: []trace.Step{{ExecutionID: "exec_other", ID: "step-4", Attempts: []trace.Attempt{other}}}}
	runs := map[string]trace.Run{execID: run, "exec_other": otherRun}
	tests := []struct {
		name       string
		v          views.KeyView
		wantReused string // "" when the key was used consistently
	}{
		{"consistent", views.NewKeyView(views.KeyInput{Key: "ik_rcpt", Runs: runs, Attempts: []trace.Attempt{
			findAttempt(t, run, "step-5", 1).Attempt, findAttempt(t, run, "step-5", 2).Attempt,
		}, Effects: []views.OutboxRow{{Effect: run.Effects[2], State: trace.MatchMatched}}}), ""},
		{"reused with other arguments", views.NewKeyView(views.KeyInput{Key: "ik_dup", Runs: runs, Attempts: []trace.Attempt{
			sent.Attempt, other,
		}, Findings: []trace.Finding{finding}}), "with different arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := renderPage(t, views.KeyPage(tc.v))
			if got := text(one(t, doc, "key")); got != tc.v.Key {
				t.Errorf("key: got %q, want %q", got, tc.v.Key)
			}
			if got, want := len(byTestID(doc, "key-attempt")), len(tc.v.Attempts); got != want {
				t.Errorf("attempts: got %d rows, want %d", got, want)
			}
			if got, want := len(byTestID(doc, "effect-row")), len(tc.v.Effects); got != want {
				t.Errorf("effects: got %d rows, want %d", got, want)
			}
			reused := byTestID(doc, "key-reused")
			switch {
			case tc.wantReused == "" && len(reused) > 0:
				t.Errorf("key-reused: got %q, want none", texts(reused))
			case tc.wantReused != "" && (len(reused) != 1 || !strings.Contains(text(reused[0]), tc.wantReused)):
				t.Errorf("key-reused: got %q, want one saying %q", texts(reused), tc.wantReused)
			}
			if got, want := len(byTestID(doc, "finding")), len(tc.v.Findings); got != want {
				t.Errorf("findings: got %d, want %d", got, want)
			}
		})
	}
}

// TestExecutionsPage checks the list's rows and badges, paging, and the
// empty states.
func TestExecutionsPage(t *testing.T) {
	run := fixtureRun()
	rows := []views.ExecutionRow{
		{Execution: run.Execution, Counts: run.Counts(), Findings: 2, CriticalFindings: 1, AuditState: trace.StateCritical},
		{Execution: trace.Execution{ID: "exec_clean", Status: trace.StatusCompleted, StartedAt: at(0), EndedAt: at(4.5)}, Counts: trace.Counts{Steps: 1, Attempts: 1}, AuditState: trace.StateClean},
		{Execution: trace.Execution{ID: "exec_warn", Status: trace.StatusFailed, StartedAt: at(0)}, Findings: 3, AuditState: trace.StateUnverified},
		{Execution: trace.Execution{ID: "exec_old", Status: trace.StatusCompleted, StartedAt: at(0)}},
	}
	doc := renderPage(t, views.ExecutionsPage(views.ExecutionsView{Rows: rows, NextURL: "/?cursor=next", BaseURL: "http://127.0.0.1:9"}))
	got := byTestID(doc, "execution-row")
	if len(got) != len(rows) {
		t.Fatalf("rows: got %d, want %d", len(got), len(rows))
	}
	wantBadges := [][]string{{"✗ 1 critical", "! 1 warning"}, {}, {"! 3 warnings"}, {}}
	// The audit state in words; nothing for a row not analysed since.
	wantAudit := [][]string{{"✗ critical"}, {"✓ clean"}, {"? unverified"}, {}}
	for i := range rows {
		if b := texts(byTestID(got[i], "findings-badge")); !slices.Equal(b, wantBadges[i]) {
			t.Errorf("row %s badges: got %q, want %q", rows[i].ID, b, wantBadges[i])
		}
		audit := byTestID(got[i], "audit-badge")
		if b := texts(audit); !slices.Equal(b, wantAudit[i]) {
			t.Errorf("row %s audit badge: got %q, want %q", rows[i].ID, b, wantAudit[i])
		}
		for _, a := range audit {
			if c := attr(a, "class"); !strings.Contains(c, "audit-badge-"+string(rows[i].AuditState)) {
				t.Errorf("row %s audit badge class: got %q, want its state's", rows[i].ID, c)
			}
		}
	}
	// "✓ clean" is the audit's word only: a row with no finding is not clean.
	if row := text(got[3]); strings.Contains(row, "clean") {
		t.Errorf("row not analysed, no findings: got %q, want no claim of clean", row)
	}
	if row := text(got[0]); !strings.Contains(row, "running ✗ critical exec_fixture billing-agent") {
		t.Errorf("first row: got %q, want status, audit state, id and name", row)
	}
	if row := text(got[1]); !strings.Contains(row, "4.5 s") || !strings.Contains(row, "✓ clean") {
		t.Errorf("clean row: got %q, want its duration 4.5 s and ✓ clean", row)
	}
	if next := one(t, doc, "next-page"); attr(next, "href") != "/?cursor=next" {
		t.Errorf("next page: got %q, want /?cursor=next", attr(next, "href"))
	}

	empty := renderPage(t, views.ExecutionsPage(views.ExecutionsView{BaseURL: "http://127.0.0.1:9"}))
	if got := text(one(t, empty, "empty")); !strings.Contains(got, "curl http://127.0.0.1:9/api/v1/events") || !strings.Contains(got, "--demo") {
		t.Errorf("empty list: got %q, want a curl line to this server and the demo", got)
	}
	filtered := renderPage(t, views.ExecutionsPage(views.ExecutionsView{Filter: views.ListFilter{Status: "failed", Audit: "unverified"}}))
	if got := text(one(t, filtered, "empty")); !strings.Contains(got, "No execution matches these filters") {
		t.Errorf("empty filtered list: got %q, want it to say nothing matches", got)
	}
	sel := one(t, filtered, "audit-filter")
	var options, selected []string
	for d := range sel.Descendants() {
		if d.Type == html.ElementNode && d.Data == "option" {
			options = append(options, attr(d, "value"))
			if _, ok := attrOK(d, "selected"); ok {
				selected = append(selected, attr(d, "value"))
			}
		}
	}
	if attr(sel, "name") != "audit" || !slices.Equal(options, []string{"", "critical", "unverified", "clean"}) || !slices.Equal(selected, []string{"unverified"}) {
		t.Errorf("audit filter: got name %q, options %q, selected %q, want audit, any and the three states, unverified selected", attr(sel, "name"), options, selected)
	}
}

// TestErrorPage checks that an error page names the status and the reason.
func TestErrorPage(t *testing.T) {
	doc := renderPage(t, views.ErrorPage(views.ErrorView{Status: http.StatusNotFound, Message: "execution exec_nope: not found"}))
	got := text(one(t, doc, "error"))
	for _, want := range []string{"404 Not Found", "execution exec_nope: not found", "Back to executions"} {
		if !strings.Contains(got, want) {
			t.Errorf("error page: got %q, want it to contain %q", got, want)
		}
	}
}

// pctOf reads a position such as "24.5%".
func pctOf(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || !strings.HasSuffix(s, "%") {
		t.Fatalf("position %q: not a percentage", s)
	}
	return v
}

// twoStretches is 2 s of work on w1, a gap of the given length, and 2 s of
// work on w2.
func twoStretches(gap time.Duration) trace.Run {
	g := gap.Seconds()
	return trace.Run{
		Execution: trace.Execution{ID: execID, Status: trace.StatusCompleted},
		Steps: []trace.Step{
			step("step-a", "plan", trace.EffectRead, "", try(1, 0, 2, trace.OutcomeOK, worker("w1"))),
			step("step-b", "act", trace.EffectRead, "", try(1, 2+g, 4+g, trace.OutcomeOK, worker("w2"))),
		},
	}
}

// TestTimelineBrokenAxis checks that a gap takes the same, small width
// whatever its length, so that the work around it stays legible, and that
// the work after it starts where the gap ends.
func TestTimelineBrokenAxis(t *testing.T) {
	const eps = 0.001
	var gapW float64
	for i, gap := range []time.Duration{53 * time.Second, 10 * time.Minute, 3 * time.Hour} {
		t.Run(gap.String(), func(t *testing.T) {
			run := twoStretches(gap)
			tl := views.NewTimeline(views.TimelineInput{Run: run, Gaps: trace.Gaps(run, trace.DefaultConfig)})
			if len(tl.Gaps) != 1 {
				t.Fatalf("gaps: got %d, want 1", len(tl.Gaps))
			}
			g := tl.Gaps[0]
			if want := views.Duration(gap) + " — no process running"; g.Label != want {
				t.Errorf("gap label: got %q, want %q", g.Label, want)
			}
			if g.Workers != "w1 → w2" || g.Seconds != gap.Seconds() {
				t.Errorf("gap: got workers %q, %v s, want w1 → w2, %v s", g.Workers, g.Seconds, gap.Seconds())
			}
			gx, gw := g.X, g.W
			if i == 0 {
				gapW = gw
			} else if math.Abs(gw-gapW) > eps {
				t.Errorf("gap width: got %v%%, want %v%% as for a 53 s gap: a gap takes a fixed width", gw, gapW)
			}
			a, b := tl.Lanes[0].Bars[0], tl.Lanes[1].Bars[0]
			ax, aw, bx, bw := a.X, a.W, b.X, b.W
			if math.Abs(aw-bw) > eps {
				t.Errorf("two 2 s attempts: got widths %v px and %v px, want equal", aw, bw)
			}
			if gw >= aw {
				t.Errorf("gap of %v: got %v px wide, want narrower than 2 s of work (%v px)", gap, gw, aw)
			}
			if math.Abs(ax+aw-gx) > eps || math.Abs(gx+gw-bx) > eps {
				t.Errorf("got work ending at %v px, gap %v–%v px, work starting at %v px, want them to abut", ax+aw, gx, gx+gw, bx)
			}
			if math.Abs(g.Mid-(gx+gw/2)) > eps {
				t.Errorf("gap label position: got %v, want the middle of %v–%v px", g.Mid, gx, gx+gw)
			}
		})
	}
}

// TestTimelineStaysInside checks that every bar, effect, tick and gap of
// the fixture and of edge cases lies within the chart (0–ChartWidth px), that a 1 ms
// attempt is still visible, and that ticks read as offsets from the start.
func TestTimelineStaysInside(t *testing.T) {
	many := manySteps(50)
	many.Steps[49].Attempts[0].EndedAt = many.Steps[49].Attempts[0].StartedAt.Add(time.Millisecond)
	manyGaps := trace.Run{Execution: trace.Execution{ID: execID, Status: trace.StatusCompleted}}
	for i := range 12 {
		s := float64(i) * 100
		manyGaps.Steps = append(manyGaps.Steps, step(fmt.Sprintf("s%02d", i), "wait", trace.EffectRead, "", try(1, s, s+1, trace.OutcomeOK)))
	}
	tests := []struct {
		name     string
		run      trace.Run
		wantEnd  string // the last tick's label
		wantGaps int
	}{
		{"fixture", fixtureRun(), "+1 min 8 s", 1},
		{"many short steps", many, "+" + views.Duration(490*time.Millisecond+time.Millisecond), 0},
		{"twelve gaps", manyGaps, "+18 min 21 s", 11},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := views.NewTimeline(views.TimelineInput{Run: tc.run, Gaps: trace.Gaps(tc.run, trace.DefaultConfig), States: trace.EffectStates(tc.run)})
			const width = views.ChartWidth
			inside := func(what string, x, w float64) {
				t.Helper()
				if x < 0 || x+w > width || w < 0 {
					t.Errorf("%s: got %v–%v px, want within 0–%d px", what, x, x+w, width)
				}
			}
			for _, l := range tl.Lanes {
				for _, b := range l.Bars {
					inside(fmt.Sprintf("%s attempt %d", l.StepID, b.Number), b.X, b.W)
					if b.W < 4 {
						t.Errorf("%s attempt %d: got width %v px, want visible (4 px at least)", l.StepID, b.Number, b.W)
					}
				}
				for _, a := range l.Arrows {
					inside(l.StepID+" retry arrow", a.X1, a.X2-a.X1)
				}
			}
			for _, e := range tl.Effects {
				inside("effect "+e.ID, e.X, 0)
			}
			var gapTotal float64
			for _, g := range tl.Gaps {
				inside("gap "+g.Label, g.X, g.W)
				gapTotal += g.W
			}
			if len(tl.Gaps) != tc.wantGaps {
				t.Errorf("gaps: got %d, want %d", len(tl.Gaps), tc.wantGaps)
			}
			if gapTotal > width/2 {
				t.Errorf("gaps together: got %v px of %d, want under half, the rest for work", gapTotal, width)
			}
			for _, k := range tl.Ticks {
				inside("tick "+k.Label, k.X, 0)
			}
			if len(tl.Ticks) < 2 || tl.Ticks[0].Label != "+0 s" || tl.Ticks[len(tl.Ticks)-1].Label != tc.wantEnd {
				var labels []string
				for _, k := range tl.Ticks {
					labels = append(labels, k.Label)
				}
				t.Errorf("ticks: got %q, want from +0 s to %s", labels, tc.wantEnd)
			}
		})
	}

	if tl := views.NewTimeline(views.TimelineInput{Run: trace.Run{Execution: trace.Execution{ID: execID}}}); !tl.Empty {
		t.Errorf("execution without timed attempts: got a timeline with %d lanes, want Empty", len(tl.Lanes))
	}
}

// oneWrite is a completed execution: a read, then a write step that sends
// an email, with the given effects in its outbox.
func oneWrite(effects ...trace.Effect) trace.Run {
	return trace.Run{
		Execution: trace.Execution{ID: execID, Name: "billing-agent", Status: trace.StatusCompleted, StartedAt: at(0), EndedAt: at(2)},
		Steps: []trace.Step{
			step("step-1", "lookup_customer", trace.EffectRead, "", try(1, 0, 0.2, trace.OutcomeOK)),
			step("step-2", "send_invoice_email", trace.EffectWrite, "mail-api", try(1, 0.3, 0.8, trace.OutcomeOK, key("ik_1"))),
		},
		Effects: effects,
	}
}

// auditStates are the three blocks' test ids.
var auditStates = []string{"audit-critical", "audit-unverified", "audit-clean"}

// TestExecutionPageAuditStates checks that the page says exactly one of the
// three audit states, and that only clean claims that every side effect
// happened once.
func TestExecutionPageAuditStates(t *testing.T) {
	// An effect of the execution's trace whose span's tool call never arrived.
	unattributed := trace.Effect{Provider: "mail-api", ID: "msg_u", ExecutionID: execID, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		SpanID: "00f067aa0ba902b7", Target: "jordan@acme.dev", At: at(0.6)}
	orphan := trace.Effect{Provider: "mail-api", ID: "msg_orphan", Target: "someone@acme.dev", IdempotencyKey: "ik_other", At: at(0.7)}
	readOnly := manySteps(2)
	unknown := oneWrite()
	unknown.Steps[1] = step("step-2", "send_invoice_email", trace.EffectUnknown, "", try(1, 0.3, 0.8, trace.OutcomeOK))
	tests := []struct {
		name    string
		run     trace.Run
		orphans []trace.Effect
		want    string   // the one audit block
		text    []string // what it says
		links   []string // hrefs it holds
		orphanN int      // nearby orphans listed
	}{
		{name: "write step without an effect", run: oneWrite(), orphans: []trace.Effect{orphan}, want: "audit-unverified",
			text: []string{"? Unverified: no outbox feed reported effects for 1 step: step-2 (send_invoice_email).",
				"POST /api/v1/events", "POST /sandbox/mail/v1/send", "traceparent", "docs/otlp.md"},
			links: []string{"#" + views.AttemptAnchor("step-2", 1), views.KeyURL("ik_other")}, orphanN: 1},
		{name: "unknown step without an effect", run: unknown, want: "audit-unverified",
			text: []string{"no outbox feed reported effects for 1 step: step-2 (send_invoice_email)."}},
		{name: "an effect whose tool call was never exported", run: oneWrite(mail("msg_1", "ik_1", "step-2", 0.5), unattributed), want: "audit-unverified",
			text:  []string{"? Unverified: 1 effect of this execution's trace hangs from a span with no tool call oncetrace recognises above it", "mail-api msg_u"},
			links: []string{"#" + views.EffectAnchor("mail-api", "msg_u")}},
		{name: "its effect", run: oneWrite(mail("msg_1", "ik_1", "step-2", 0.5)), want: "audit-clean",
			text: []string{"✓ Clean: every side effect happened once — the effect of its one side-effecting step is known"}},
		{name: "read only", run: readOnly, want: "audit-clean",
			text: []string{"✓ Clean: every side effect happened once — no step of this execution has a side effect"}},
		{name: "two effects", run: oneWrite(mail("msg_1", "ik_1", "step-2", 0.5), mail("msg_2", "ik_1", "step-2", 0.7)), want: "audit-critical",
			text: []string{"✗ Critical: 1 critical finding, listed under Findings below."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := renderPage(t, views.ExecutionPage(executionView(tc.run, tc.orphans...)))
			for _, id := range auditStates {
				if got, want := len(byTestID(doc, id)), map[bool]int{true: 1}[id == tc.want]; got != want {
					t.Errorf("data-testid=%s: got %d elements, want %d", id, got, want)
				}
			}
			block := one(t, doc, tc.want)
			got := prose(block)
			for _, w := range tc.text {
				if !strings.Contains(got, w) {
					t.Errorf("%s: got %q, want it to contain %q", tc.want, got, w)
				}
			}
			var hrefs []string
			for d := range block.Descendants() {
				if d.Type == html.ElementNode && d.Data == "a" {
					hrefs = append(hrefs, attr(d, "href"))
				}
			}
			for _, w := range tc.links {
				if !slices.Contains(hrefs, w) {
					t.Errorf("%s links: got %q, want one to %q", tc.want, hrefs, w)
				}
			}
			if n := len(byTestID(doc, "nearby-orphan")); n != tc.orphanN {
				t.Errorf("nearby orphans: got %d, want %d", n, tc.orphanN)
			}
			// Only clean may say it; no finding is not clean.
			page := text(doc)
			if claims := strings.Contains(page, "every side effect happened once"); claims != (tc.want == "audit-clean") {
				t.Errorf("page claims every side effect happened once: got %v, want %v", claims, tc.want == "audit-clean")
			}
		})
	}

	t.Run("nearby orphan row", func(t *testing.T) {
		doc := renderPage(t, views.ExecutionPage(executionView(oneWrite(), orphan)))
		row := text(one(t, doc, "nearby-orphan"))
		for _, w := range []string{"mail-api", "◇ orphan msg_orphan", "someone@acme.dev", "2026-06-30 14:02:00.700 UTC", "ik_other"} {
			if !strings.Contains(row, w) {
				t.Errorf("nearby orphan: got %q, want it to contain %q", row, w)
			}
		}
	})

	t.Run("a lane in a collapsed group is linked to its attempt's page", func(t *testing.T) {
		run := manySteps(250)
		last := run.Steps[len(run.Steps)-1]
		run.Steps[len(run.Steps)-1] = step(last.ID, "send_email", trace.EffectWrite, "", last.Attempts...)
		doc := renderPage(t, views.ExecutionPage(executionView(run)))
		block := one(t, doc, "audit-unverified")
		// The collapsed group's lanes are not on the first answer: the
		// link leads to the attempt's own page.
		want := views.AttemptURL(run.Execution.ID, last.ID, 1)
		var hrefs []string
		for d := range block.Descendants() {
			if d.Type == html.ElementNode && d.Data == "a" {
				hrefs = append(hrefs, attr(d, "href"))
			}
		}
		if !slices.Contains(hrefs, want) {
			t.Errorf("unverified step: got links %q, want one to %q", hrefs, want)
		}
		for d := range doc.Descendants() {
			if d.Type == html.ElementNode && attr(d, "id") == views.AttemptAnchor(last.ID, 1) {
				t.Errorf("attempt %s: got it on the first answer, want its lane left to its group's fragment", last.ID)
			}
		}
	})
}

// modelCall is a model-call span of the execution.
func modelCall(id string, start, end float64, model string, in, out int64) trace.Span {
	return trace.Span{ExecutionID: execID, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: id, Role: trace.RoleModel,
		Name: "chat " + model, Model: model, InputTokens: in, OutputTokens: out, StartedAt: at(start), EndedAt: at(end)}
}

// TestModelLane checks the model calls' lane: one bar each with the model
// and its tokens, errors labelled, between the outbox and the steps, and
// not counted as steps.
func TestModelLane(t *testing.T) {
	run := oneWrite(mail("msg_1", "ik_1", "step-2", 0.5))
	failedCall := modelCall("0000000000000b02", 1.0, 1.9, "gpt-4o-mini", 0, 0)
	failedCall.Error = "rate limited"
	run.Spans = []trace.Span{
		failedCall,
		modelCall("0000000000000b01", 0, 0.9, "gpt-4o", 120, 18),
		{ExecutionID: execID, SpanID: "0000000000000c01", Role: trace.RoleContext, Name: "agent step", StartedAt: at(0), EndedAt: at(2)},
	}
	v := executionView(run)
	if v.Execution.Steps != 2 || v.Execution.Attempts != 2 || v.Execution.Retries != 0 {
		t.Errorf("counts: got %d steps, %d attempts, %d retries, want 2, 2, 0: model calls are not steps",
			v.Execution.Steps, v.Execution.Attempts, v.Execution.Retries)
	}
	doc := renderPage(t, views.ExecutionPage(v))
	lane := one(t, doc, "model-lane")
	if got := text(lane); !strings.HasPrefix(got, "model calls 2 calls · 120 in / 18 out") {
		t.Errorf("model lane: got %q, want it to start with its label and totals", got)
	}
	calls := byTestID(lane, "model-call")
	if len(calls) != 2 {
		t.Fatalf("model calls: got %d, want 2", len(calls))
	}
	wantLabels := []string{"gpt-4o · 120 in / 18 out", "✗ gpt-4o-mini · error"}
	for i, c := range calls {
		if got := text(one(t, c, "model-label")); got != wantLabels[i] {
			t.Errorf("model call %d label: got %q, want %q", i, got, wantLabels[i])
		}
	}
	if title := text(calls[0]); !strings.Contains(title, "120 input tokens, 18 output tokens") {
		t.Errorf("model call title: got %q, want the tokens", title)
	}
	if c := attr(calls[1], "class"); !strings.Contains(c, "model-error") || !strings.Contains(text(calls[1]), "error: rate limited") {
		t.Errorf("failed model call: got class %q, text %q, want model-error and the error", c, text(calls[1]))
	}
	if n := len(byTestID(doc, "lane")); n != 2 {
		t.Errorf("step lanes: got %d, want 2", n)
	}

	// The header holds the axis, the outbox lane and the model calls, in
	// that order, above the step lanes.
	var order []string
	for d := range one(t, doc, "timeline").Descendants() {
		if id := attr(d, "data-testid"); d.Type == html.ElementNode && slices.Contains([]string{"axis", "outbox-lane", "model-lane", "lane"}, id) {
			order = append(order, id)
		}
	}
	if want := []string{"axis", "outbox-lane", "model-lane", "lane", "lane"}; !slices.Equal(order, want) {
		t.Errorf("rows: got %q, want %q", order, want)
	}
	tl := v.Timeline
	if e := tl.Effects[0]; !e.Linked || len(tl.Lanes[1].Marks) != 1 || tl.Lanes[1].Marks[0].X != e.X {
		t.Errorf("effect: got linked %v, step-2 marks %v, want a mark in step-2's lane at the effect's x %v", e.Linked, tl.Lanes[1].Marks, e.X)
	}

	// A narrow call at the right edge: its label ends where it ends.
	edge := oneWrite()
	edge.Spans = []trace.Span{modelCall("0000000000000b01", 0, 0.2, "gpt-4o", 120, 18), modelCall("0000000000000b02", 1.96, 2, "gpt-4o", 5, 1)}
	last := views.NewTimeline(views.TimelineInput{Run: edge}).Models[1]
	if last.Label.Text == "" || last.Label.Anchor != "end" || math.Abs(last.Label.X-last.X-last.W) > 0.001 {
		t.Errorf("narrow call at the right edge: got label %q at %v anchored %s, want one below ending at the bar's end", last.Label.Text, last.Label.X, last.Label.Anchor)
	}

	none := views.NewTimeline(views.TimelineInput{Run: oneWrite()})
	if len(none.Models) != 0 {
		t.Errorf("no model calls: got %d model bars, want none", len(none.Models))
	}
	if doc := renderPage(t, views.ExecutionPage(executionView(oneWrite()))); len(byTestID(doc, "model-lane")) != 0 {
		t.Errorf("no model calls: got a model lane, want none")
	}
}

// TestModelLaneMany checks that fifty short model calls each get a bar and
// a title, and that the labels that show do not run into each other.
func TestModelLaneMany(t *testing.T) {
	run := oneWrite()
	for i := range 50 {
		s := 0.3 + float64(i)*0.03
		run.Spans = append(run.Spans, modelCall(fmt.Sprintf("%016x", i+1), s, s+0.02, "gpt-4o", 1000, 50))
	}
	run.Spans[49].EndedAt = at(30) // one long call at the end
	tl := views.NewTimeline(views.TimelineInput{Run: run})
	if len(tl.Models) != 50 {
		t.Fatalf("model bars: got %d, want 50", len(tl.Models))
	}
	labelled := 0
	var boxes [][3]float64 // row, from, to
	for i, m := range tl.Models {
		if !strings.Contains(m.Title, "gpt-4o") || !strings.Contains(m.Title, "1000 input tokens, 50 output tokens") {
			t.Errorf("model call %d title: got %q, want the model and its tokens", i, m.Title)
		}
		if m.Label.Text == "" {
			continue
		}
		labelled++
		// 12 px monospace: 0.6 em a character, 1.1 em a symbol.
		from, to := m.Label.Box()
		if w := 7.2 * float64(len([]rune(m.Label.Text))); to-from < w-0.01 {
			t.Errorf("model call %d: got label %q estimated %v px, want at least %v", i, m.Label.Text, to-from, w)
		}
		if from < 0 || to > views.ChartWidth {
			t.Errorf("model call %d: got label %q at %v–%v px, want inside the chart", i, m.Label.Text, from, to)
		}
		for _, o := range boxes {
			if o[0] == m.Label.Y && from < o[2] && o[1] < to {
				t.Errorf("model call %d: got label %q at %v–%v px over another at %v–%v px", i, m.Label.Text, from, to, o[1], o[2])
			}
		}
		boxes = append(boxes, [3]float64{m.Label.Y, from, to})
	}
	if labelled == 0 || labelled == 50 {
		t.Errorf("labelled model calls: got %d of 50, want the wide one labelled and the narrow ones not", labelled)
	}
	if last := tl.Models[49]; last.Label.Text != "gpt-4o · 1000 in / 50 out" {
		t.Errorf("long model call: got label %q, want the full label", last.Label.Text)
	}
}

// spanned is oneWrite whose write attempt came from a tool span that made
// an HTTP call through a context span, beside an HTTP call of another span.
func spanned() trace.Run {
	run := oneWrite(mail("msg_1", "ik_1", "step-2", 0.5))
	run.Steps[1].Attempts[0].SpanID = "00000000000000a1"
	run.Spans = []trace.Span{
		{ExecutionID: execID, SpanID: "00000000000000c1", ParentSpanID: "00000000000000a1", Role: trace.RoleContext, Name: "mail.send", StartedAt: at(0.35), EndedAt: at(0.75)},
		{ExecutionID: execID, SpanID: "00000000000000h1", ParentSpanID: "00000000000000c1", Role: trace.RoleHTTP, Name: "POST",
			HTTPMethod: "POST", HTTPURL: "https://api.mail.test/v1/send", HTTPStatus: 200, StartedAt: at(0.4), EndedAt: at(0.6)},
		{ExecutionID: execID, SpanID: "00000000000000h2", ParentSpanID: "00000000000000ff", Role: trace.RoleHTTP,
			HTTPMethod: "GET", HTTPURL: "https://elsewhere.test/", HTTPStatus: 404, StartedAt: at(0.1), EndedAt: at(0.2)},
	}
	return run
}

// TestAttemptHTTPCalls checks that an attempt's detail lists the HTTP
// calls made under its span, and that its bar marks them.
func TestAttemptHTTPCalls(t *testing.T) {
	run := spanned()
	v := findAttempt(t, run, "step-2", 1)
	v.HTTPCalls = views.HTTPCalls(run, v.Attempt)
	d := renderFragment(t, views.AttemptDetail(v))
	calls := texts(byTestID(d, "http-call"))
	if want := []string{"POST https://api.mail.test/v1/send → 200, 200 ms"}; !slices.Equal(calls, want) {
		t.Errorf("HTTP calls: got %q, want %q", calls, want)
	}
	if other := findAttempt(t, run, "step-1", 1); len(views.HTTPCalls(run, other.Attempt)) != 0 {
		t.Errorf("an attempt without a span: got HTTP calls, want none")
	}

	doc := renderPage(t, views.ExecutionPage(executionView(run)))
	marks := byTestID(doc, "http-mark")
	if len(marks) != 1 || laneOf(marks[0]) != "step-2" {
		t.Fatalf("HTTP marks: got %d, want 1 on step-2", len(marks))
	}
	bar := views.NewTimeline(views.TimelineInput{Run: run}).Lanes[1].Bars[0]
	mx, _ := strconv.ParseFloat(attr(marks[0], "x"), 64)
	mw, _ := strconv.ParseFloat(attr(marks[0], "width"), 64)
	if mx < bar.X-0.05 || mx+mw > bar.X+bar.W+0.1 || mw <= 0 {
		t.Errorf("HTTP mark: got %v–%v px, want inside its bar %v–%v px", mx, mx+mw, bar.X, bar.X+bar.W)
	}
}

// TestUnknownClass checks that a step nobody classified says so on its lane
// and in its detail.
func TestUnknownClass(t *testing.T) {
	run := oneWrite()
	run.Steps[1] = step("step-2", "search_docs", trace.EffectUnknown, "", try(1, 0.3, 0.8, trace.OutcomeOK))
	doc := renderPage(t, views.ExecutionPage(executionView(run)))
	badge := one(t, doc, "unknown-badge")
	if got := text(badge); got != "? unknown" || laneOf(badge) != "step-2" {
		t.Errorf("unknown badge: got %q on lane %q, want ? unknown on step-2", got, laneOf(badge))
	}
	for _, l := range byTestID(doc, "lane") {
		var title string
		for d := range l.Descendants() {
			if d.Type == html.ElementNode && attr(d, "class") == "tl-name" {
				title = attr(d, "title")
			}
		}
		if attr(l, "data-step") == "step-2" && !strings.Contains(title, "unclassified tool: treated as possibly writing") {
			t.Errorf("unknown lane: got title %q, want it to explain the class", title)
		}
	}
	d := renderFragment(t, views.AttemptDetail(findAttempt(t, run, "step-2", 1)))
	if got, want := text(one(t, d, "detail-class")), "(unknown (unclassified tool: treated as possibly writing))"; got != want {
		t.Errorf("detail class: got %q, want %q", got, want)
	}
	d = renderFragment(t, views.AttemptDetail(findAttempt(t, run, "step-1", 1)))
	if got, want := text(one(t, d, "detail-class")), "(read)"; got != want {
		t.Errorf("detail class: got %q, want %q", got, want)
	}
}

// TestDuration checks that durations read as a person would say them.
func TestDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0 s"},
		{500 * time.Microsecond, "500 µs"},
		{110 * time.Millisecond, "110 ms"},
		{999 * time.Millisecond, "999 ms"},
		{time.Second, "1 s"},
		{1500 * time.Millisecond, "1.5 s"},
		{1234 * time.Millisecond, "1.23 s"},
		{10100 * time.Millisecond, "10.1 s"},
		{53 * time.Second, "53 s"},
		{4*time.Minute + 2*time.Second, "4 min 2 s"},
		{4*time.Minute + 59600*time.Millisecond, "5 min 0 s"},
		{2*time.Hour + 5*time.Minute, "2 h 5 min"},
		{50 * time.Hour, "2 d 2 h"},
		{-3 * time.Second, "-3 s"},
	}
	for _, tc := range tests {
		if got := views.Duration(tc.d); got != tc.want {
			t.Errorf("Duration(%v): got %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestEffectWhat: what was asked of the provider shows on the effect in
// the outbox table (the summary and the fingerprint shortened) and in its
// detail (both whole); an effect without them says so.
func TestEffectWhat(t *testing.T) {
	asked := trace.Effect{Provider: "sandbox-mail", ID: "msg_1", Target: "jordan@acme.dev", At: at(30),
		Fingerprint: "mail:f7e72175d66aa67ad8dfe772c85c46bd", Summary: "email to jordan@acme.dev, subject 'Your June invoice'"}
	bare := trace.Effect{Provider: "mail-api", ID: "msg_2", At: at(31)}
	doc := renderPage(t, views.OutboxPage(views.OutboxView{Rows: []views.OutboxRow{{Effect: asked, State: trace.MatchOrphan}, {Effect: bare, State: trace.MatchOrphan}}}))
	what := byTestID(doc, "effect-what")
	if len(what) != 2 {
		t.Fatalf("effect-what cells: got %d, want 2", len(what))
	}
	if got, want := text(what[0]), asked.Summary+" mail:f7e72175…"; got != want {
		t.Errorf("what was asked, in the table: got %q, want %q", got, want)
	}
	if fp := one(t, what[0], "effect-fingerprint"); attr(fp, "title") != asked.Fingerprint {
		t.Errorf("the shortened fingerprint's title: got %q, want %q", attr(fp, "title"), asked.Fingerprint)
	}
	if got := text(what[1]); got != "—" {
		t.Errorf("an effect without a fingerprint, in the table: got %q, want —", got)
	}

	d := one(t, renderFragment(t, views.EffectDetail(views.EffectView{ExecutionID: execID, Effect: asked, State: trace.MatchOrphan})), "effect-detail")
	if got := text(one(t, d, "effect-summary")); got != asked.Summary {
		t.Errorf("detail summary: got %q, want %q", got, asked.Summary)
	}
	if got := text(one(t, d, "effect-fingerprint")); got != asked.Fingerprint {
		t.Errorf("detail fingerprint: got %q, want %q", got, asked.Fingerprint)
	}
	d = one(t, renderFragment(t, views.EffectDetail(views.EffectView{ExecutionID: execID, Effect: bare, State: trace.MatchOrphan})), "effect-detail")
	if got := text(one(t, d, "effect-summary")); got != "?" || len(byTestID(d, "effect-fingerprint")) != 0 {
		t.Errorf("detail of an effect without a fingerprint: got summary %q and %d fingerprints, want ? (as an unknown target) and none", got, len(byTestID(d, "effect-fingerprint")))
	}

	// The outbox lane's mark says it on hover.
	run := fixtureRun()
	run.Effects[0].Summary = asked.Summary
	page := renderPage(t, views.ExecutionPage(executionView(run)))
	var titled bool
	for _, e := range byTestID(one(t, page, "outbox-lane"), "effect") {
		titled = titled || (attr(e, "id") == views.EffectAnchor(run.Effects[0].Provider, run.Effects[0].ID) && strings.Contains(text(e), asked.Summary))
	}
	if !titled {
		t.Errorf("outbox lane: got no mark of %s whose title says %q", run.Effects[0].ID, asked.Summary)
	}

	for fp, want := range map[string]string{
		"http:0123456789abcdef0123456789abcdef": "http:01234567…",
		"short":                                 "short",
		"a-fingerprint-of-another-shape-x":      "a-fingerprint-of…",
	} {
		if got := views.ShortFingerprint(fp); got != want {
			t.Errorf("ShortFingerprint(%q): got %q, want %q", fp, got, want)
		}
	}
}

// TestWorkflowEventsLane: a Temporal run's signals, timers and markers
// (context spans at the run's top, from its history) get a lane of their
// own, each a bar with its name; an agent's context spans do not.
func TestWorkflowEventsLane(t *testing.T) {
	temporalStep := func() trace.Step {
		s := step("5", "SendInvoiceEmail", trace.EffectWrite, "mail-api", try(1, 1, 2, trace.OutcomeOK))
		s.Attempts[0].RecognisedBy = trace.EngineTemporal
		return s
	}
	events := []trace.Span{
		{ExecutionID: execID, TraceID: "t1", SpanID: "s1", Role: trace.RoleContext, Name: "signal approve", StartedAt: at(0.5), EndedAt: at(0.5)},
		{ExecutionID: execID, TraceID: "t1", SpanID: "s2", Role: trace.RoleContext, Name: "timer 6 (1s)", StartedAt: at(2), EndedAt: at(3)},
		{ExecutionID: execID, TraceID: "t1", SpanID: "s3", ParentSpanID: "s2", Role: trace.RoleContext, Name: "nested", StartedAt: at(2.5)},
	}
	for _, tc := range []struct {
		name  string
		step  trace.Step
		names []string
	}{
		{"temporal", temporalStep(), []string{"signal approve", "timer 6 (1s)"}},
		{"agent", step("step-1", "send_invoice_email", trace.EffectWrite, "mail-api", try(1, 1, 2, trace.OutcomeOK)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := trace.Run{Execution: trace.Execution{ID: execID, Status: trace.StatusCompleted, StartedAt: at(0), EndedAt: at(3)},
				Steps: []trace.Step{tc.step}, Spans: events}
			doc := renderPage(t, views.ExecutionPage(executionView(run)))
			lanes, marks := byTestID(doc, "events-lane"), byTestID(doc, "workflow-event")
			if len(tc.names) == 0 {
				if len(lanes) != 0 {
					t.Errorf("got a workflow events lane for an agent's run, want none")
				}
				return
			}
			if len(lanes) != 1 || len(marks) != len(tc.names) {
				t.Fatalf("got %d events lanes with %d events, want one with %d", len(lanes), len(marks), len(tc.names))
			}
			for i, m := range marks {
				if got := text(m); !strings.Contains(got, tc.names[i]+" at ") {
					t.Errorf("event %d: got title %q, want %q at its time", i, got, tc.names[i])
				}
			}
		})
	}
}
