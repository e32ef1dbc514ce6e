package views_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// compareSideRun is execution id, started a day × day after t0: step-1
// looks the customer up; step-2 sends the invoice once per given key ("" is
// an attempt without one), and the mail API delivered emails emails.
func compareSideRun(id string, day int, keys []string, emails int) views.Execution {
	shift := time.Duration(day) * 24 * time.Hour
	mv := func(a trace.Attempt) trace.Attempt {
		a.ExecutionID, a.StartedAt, a.EndedAt = id, a.StartedAt.Add(shift), a.EndedAt.Add(shift)
		return a
	}
	invoice := json.RawMessage(`{"subject":"Your June invoice","to":"jordan@acme.dev"}`)
	lookup := mv(trace.Attempt{StepID: "step-1", Number: 1, Tool: "lookup_customer", Effect: trace.EffectRead,
		StartedAt: at(0), EndedAt: at(0.2), Outcome: trace.OutcomeOK})
	var sends []trace.Attempt
	for i, k := range keys {
		outcome := trace.OutcomeOK
		if i < len(keys)-1 {
			outcome = trace.OutcomeTimeout
		}
		sends = append(sends, mv(trace.Attempt{StepID: "step-2", Number: i + 1, Tool: "send_invoice_email", Effect: trace.EffectWrite,
			Provider: "mail-api", IdempotencyKey: k, Worker: "pid-1", Args: invoice,
			StartedAt: at(0.5 + 10*float64(i)), EndedAt: at(0.5 + 10*float64(i) + 0.3), Outcome: outcome}))
	}
	r := trace.Run{
		Execution: trace.Execution{ID: id, Name: "billing-agent", Status: trace.StatusCompleted, StartedAt: at(0).Add(shift), EndedAt: at(12).Add(shift)},
		Steps: []trace.Step{
			{ExecutionID: id, ID: "step-1", Attempts: []trace.Attempt{lookup}},
			{ExecutionID: id, ID: "step-2", Attempts: sends},
		},
	}
	states := map[trace.EffectRef]trace.MatchState{}
	for i := range emails {
		e := trace.Effect{Provider: "mail-api", ID: id + "-msg-" + string(rune('1'+i)), ExecutionID: id, StepID: "step-2",
			Target: "jordan@acme.dev", At: at(0.6 + 10*float64(i)).Add(shift)}
		r.Effects = append(r.Effects, e)
		states[e.Ref()] = trace.MatchMatched
		if emails > 1 {
			states[e.Ref()] = trace.MatchDuplicate
		}
	}
	return views.NewExecution(views.ExecutionInput{Run: r, Findings: trace.AuditRun(r, trace.DefaultConfig), States: states,
		Analysis: trace.DefaultConfig})
}

func compareView(a, b views.Execution) views.CompareView {
	return views.NewCompareView(views.CompareInput{A: a, B: b, Comparison: trace.Compare(a.Run, b.Run)})
}

// sideEffects are the effects listed in a row's side ("a" or "b").
func sideEffects(t *testing.T, row *html.Node, side string) []*html.Node {
	t.Helper()
	return byTestID(one(t, row, "compare-side-"+side), "compare-effect")
}

// TestComparePage renders yesterday's run (one email, keyed) beside
// today's (a timeout, a retry without a key, two emails) and checks that
// the difference is said in words, marked, listed first, and linked.
func TestComparePage(t *testing.T) {
	yesterday := compareSideRun("exec_yesterday", 0, []string{"ik_1"}, 1)
	today := compareSideRun("exec_today", 1, []string{"", ""}, 2)
	doc := renderPage(t, views.ComparePage(compareView(yesterday, today)))

	want := "≠ 1 step differs: step-2 (send_invoice_email) sends 2 emails in b, 1 in a."
	if got := prose(one(t, doc, "compare-summary")); !strings.HasPrefix(got, want) {
		t.Errorf("summary: got %q, want it to start with %q", got, want)
	}
	rows := byTestID(doc, "compare-row")
	if got := texts(byTestID(doc, "compare-step")); !slices.Equal(got, []string{"step-1 (lookup_customer)", "step-2 (send_invoice_email)"}) {
		t.Fatalf("rows: got %q, want step-1 then step-2", got)
	}
	same, differs := rows[0], rows[1]
	if attr(same, "data-differs") != "false" || strings.Contains(attr(same, "class"), "differs") {
		t.Errorf("step-1: got data-differs=%q class=%q, want an unmarked row", attr(same, "data-differs"), attr(same, "class"))
	}
	if attr(differs, "data-differs") != "true" || !strings.Contains(attr(differs, "class"), "differs") {
		t.Errorf("step-2: got data-differs=%q class=%q, want a marked row", attr(differs, "data-differs"), attr(differs, "class"))
	}
	// The mark is a word and an icon, never the colour alone.
	if got := text(differs); !strings.Contains(got, "≠ differs") {
		t.Errorf("step-2: got %q, want the word \"≠ differs\" in the row", got)
	}
	wantDiffs := []string{"b: 2 emails, a: 1", "b: 2 attempts, a: 1", "b retried without a key"}
	if got := texts(byTestID(differs, "compare-difference")); !slices.Equal(got, wantDiffs) {
		t.Errorf("step-2 differences: got %q, want %q", got, wantDiffs)
	}
	if got := len(sideEffects(t, differs, "a")); got != 1 {
		t.Errorf("step-2 side a: got %d effects, want 1", got)
	}
	if got := len(sideEffects(t, differs, "b")); got != 2 {
		t.Errorf("step-2 side b: got %d effects, want 2", got)
	}
	if got := texts(byTestID(one(t, differs, "compare-side-b"), "compare-attempt")); len(got) != 2 || !strings.Contains(got[0], "no key") || !strings.Contains(got[0], "◔ timeout") {
		t.Errorf("step-2 side b attempts: got %q, want 2, the first a timeout with no key", got)
	}
	if got := text(one(t, same, "compare-side-a")); strings.Contains(got, "no key") {
		t.Errorf("step-1 side a: got %q, want no \"no key\" for a read", got)
	}
	if got := text(one(t, differs, "compare-side-a")); !strings.Contains(got, "key ik_1") {
		t.Errorf("step-2 side a: got %q, want its key ik_1", got)
	}

	links := byTestID(doc, "compare-differing")
	if len(links) != 1 {
		t.Fatalf("differing list: got %d items, want 1", len(links))
	}
	var href string
	for d := range links[0].Descendants() {
		if d.Type == html.ElementNode && d.Data == "a" {
			href = attr(d, "href")
		}
	}
	if want := "#" + attr(differs, "id"); href != want || href == "#" {
		t.Errorf("differing link: got href %q, want %q", href, want)
	}

	facts := map[string]*html.Node{}
	for _, f := range byTestID(doc, "compare-fact") {
		facts[attr(f, "data-fact")] = f
	}
	for name, wantDiffers := range map[string]string{"Effects": "true", "Retries": "true", "Audit": "true", "Status": "false", "Name": "false", "Started": "false"} {
		f := facts[name]
		if f == nil {
			t.Errorf("fact %s: got none, want one", name)
			continue
		}
		if got := attr(f, "data-differs"); got != wantDiffers {
			t.Errorf("fact %s: got data-differs=%q, want %q (%s)", name, got, wantDiffers, text(f))
		}
	}
	if got := text(facts["Effects"]); got != "Effects ≠ differs 1 2" {
		t.Errorf("fact Effects: got %q, want \"Effects ≠ differs 1 2\"", got)
	}
	if got := attr(one(t, doc, "compare-swap"), "href"); got != views.CompareURL("exec_today", "exec_yesterday") {
		t.Errorf("swap: got %q, want b and a exchanged", got)
	}
}

// TestComparePageError shows the message and the form again, with what
// the user typed.
func TestComparePageError(t *testing.T) {
	v := views.CompareView{Form: views.CompareForm{A: "exec_a", B: "q?x=1"}, Error: `b: no execution "q?x=1"`}
	doc := renderPage(t, views.ComparePage(v))
	if got := text(one(t, doc, "compare-error")); got != `✗ b: no execution "q?x=1"` {
		t.Errorf("error: got %q", got)
	}
	var values []string
	for d := range one(t, doc, "compare-form").Descendants() {
		if d.Type == html.ElementNode && d.Data == "input" {
			values = append(values, attr(d, "name")+"="+attr(d, "value"))
		}
	}
	if !slices.Equal(values, []string{"a=exec_a", "b=q?x=1"}) {
		t.Errorf("form: got %q, want the ids typed", values)
	}
	if got := len(byTestID(doc, "compare-steps")); got != 0 {
		t.Errorf("steps: got %d tables, want none with an error", got)
	}
}

// TestKeyPageCompareLinks: the key page offers to compare the first
// execution that sent the key with each other one.
func TestKeyPageCompareLinks(t *testing.T) {
	attempt := func(exec string, n int) views.KeyAttempt {
		return views.KeyAttempt{Attempt: trace.Attempt{ExecutionID: exec, StepID: "step-1", Number: n}, Outcome: trace.OutcomeOK}
	}
	v := views.KeyView{Key: "ik_shared", Attempts: []views.KeyAttempt{attempt("exec_1", 1), attempt("exec_1", 2), attempt("billing/2026;run=2", 1), attempt("exec_3", 1)}}
	doc := renderPage(t, views.KeyPage(v))
	var hrefs []string
	for d := range one(t, doc, "key-compare").Descendants() {
		if d.Type == html.ElementNode && d.Data == "a" {
			hrefs = append(hrefs, attr(d, "href"))
		}
	}
	want := []string{views.CompareURL("exec_1", "billing/2026;run=2"), views.CompareURL("exec_1", "exec_3")}
	if !slices.Equal(hrefs, want) {
		t.Errorf("compare links: got %q, want %q", hrefs, want)
	}
	single := views.KeyView{Key: "ik_once", Attempts: v.Attempts[:2]}
	if got := len(byTestID(renderPage(t, views.KeyPage(single)), "key-compare")); got != 0 {
		t.Errorf("one execution: got %d compare blocks, want none", got)
	}
}
