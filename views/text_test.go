package views_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode"

	"github.com/a-h/templ"
	"golang.org/x/net/html"

	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

func renderString(t *testing.T, c templ.Component) string {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	return buf.String()
}

func ctlSpan(code, name string) string {
	return `<span class="ctl" title="U+` + code + ` ` + name + `, sent as part of this text">&lt;U+` + code + `&gt;</span>`
}

// TestTextShowsHiddenCharacters: each character that would reorder, hide
// or break text is drawn as its code point; everything else, markup
// included, is escaped and kept.
func TestTextShowsHiddenCharacters(t *testing.T) {
	for _, tc := range []struct {
		name, in        string
		text, block     string // HTML of Text and TextBlock
		visible         string // Visible
		svgHasMarkerTag bool
	}{
		{name: "plain", in: "exec_01H8", text: "exec_01H8", block: "exec_01H8", visible: "exec_01H8"},
		{name: "markup is escaped", in: `<b>"x"</b>`, text: "&lt;b&gt;&#34;x&#34;&lt;/b&gt;", block: "&lt;b&gt;&#34;x&#34;&lt;/b&gt;", visible: `<b>"x"</b>`},
		{name: "right-to-left override", in: "invoice\u202egnp.exe",
			text:    "invoice" + ctlSpan("202E", "RIGHT-TO-LEFT OVERRIDE") + "gnp.exe",
			block:   "invoice" + ctlSpan("202E", "RIGHT-TO-LEFT OVERRIDE") + "gnp.exe",
			visible: "invoice<U+202E>gnp.exe", svgHasMarkerTag: true},
		{name: "newline and tab", in: "a\nb\tc",
			text:    "a" + ctlSpan("000A", "LINE FEED") + "b" + ctlSpan("0009", "TAB") + "c",
			block:   "a\nb\tc",
			visible: "a<U+000A>b<U+0009>c", svgHasMarkerTag: true},
		{name: "C1 control", in: "x\u0085y", text: "x" + ctlSpan("0085", "control character") + "y",
			block: "x" + ctlSpan("0085", "control character") + "y", visible: "x<U+0085>y", svgHasMarkerTag: true},
		{name: "emoji joiner kept", in: "👩\u200d💻", text: "👩\u200d💻", block: "👩\u200d💻", visible: "👩\u200d💻"},
		{name: "not UTF-8", in: "a\xffb", text: "a\xffb", block: "a\xffb", visible: "a\xffb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := renderString(t, views.Text(tc.in)); got != tc.text {
				t.Errorf("Text: got %q, want %q", got, tc.text)
			}
			if got := renderString(t, views.TextBlock(tc.in)); got != tc.block {
				t.Errorf("TextBlock: got %q, want %q", got, tc.block)
			}
			if got := views.Visible(tc.in); got != tc.visible {
				t.Errorf("Visible: got %q, want %q", got, tc.visible)
			}
			svg := renderString(t, views.SVGText(tc.in))
			if got := strings.Contains(svg, `<tspan class="ctl"`); got != tc.svgHasMarkerTag {
				t.Errorf("SVGText %q: has a <tspan> marker: got %v, want %v", svg, got, tc.svgHasMarkerTag)
			}
		})
	}
}

// hiddenRunes are the characters the issue names: bidi marks, embeddings,
// overrides and isolates, C0 and C1 controls, and the invisible ones.
var hiddenRunes = []rune{
	'\u200e', '\u200f', '\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069',
	'\u061c', '\u0000', '\u0007', '\u001b', '\u007f', '\u0080', '\u009b', '\u200b', '\u2060', '\ufeff', '\u2028',
}

func TestEveryHiddenCharacterGetsAMarker(t *testing.T) {
	for _, r := range hiddenRunes {
		in := "a" + string(r) + "b"
		want := fmt.Sprintf("a<U+%04X>b", r)
		if got := views.Visible(in); got != want {
			t.Errorf("Visible(%q): got %q, want %q", in, got, want)
		}
		if got := renderString(t, views.Text(in)); strings.ContainsRune(got, r) || !strings.Contains(got, fmt.Sprintf("&lt;U+%04X&gt;", r)) {
			t.Errorf("Text(%q): got %q, want the character replaced by its marker", in, got)
		}
	}
}

// spoof appends every hidden character to s, the override first: a page
// that obeyed it would show "gnp.exe" reversed.
func spoof(s string) string {
	var b strings.Builder
	b.WriteString(s + "\u202egnp.exe")
	for _, r := range hiddenRunes {
		b.WriteRune(r)
	}
	return b.String()
}

// hostileRun is the fixture with every text a client sends spoofed.
func hostileRun() trace.Run {
	run := fixtureRun()
	x := spoof("exec")
	run.Execution.ID, run.Execution.Name, run.Execution.IdempotencyKey = x, spoof("billing-agent"), spoof("run_key")
	run.Execution.Conflicts = []trace.Conflict{{Field: spoof("status"), Kept: spoof("completed"), Other: spoof("failed"), EventID: spoof("evt")}}
	args, _ := json.Marshal(map[string]string{"to": spoof("jordan@acme.dev")})
	for i := range run.Steps {
		s := &run.Steps[i]
		s.ExecutionID, s.ID, s.Tool = x, spoof(s.ID), spoof(s.Tool)
		if s.Provider != "" {
			s.Provider = spoof(s.Provider)
		}
		for j := range s.Attempts {
			a := &s.Attempts[j]
			a.ExecutionID, a.StepID, a.Tool, a.Provider = x, s.ID, s.Tool, s.Provider
			a.Worker, a.Error, a.Args = spoof(a.Worker), spoof("failed"), args
			if a.IdempotencyKey != "" {
				a.IdempotencyKey = spoof(a.IdempotencyKey)
			}
		}
	}
	for i := range run.Effects {
		f := &run.Effects[i]
		f.ExecutionID, f.ID, f.Target = x, spoof(f.ID), spoof(f.Target)
		f.Provider, f.StepID, f.IdempotencyKey = spoof(f.Provider), spoof(f.StepID), spoof(f.IdempotencyKey)
	}
	run.FedProviders = map[string]bool{spoof("mail-api"): true}
	return run
}

// checkNoHiddenText fails on a hidden character in any text a reader sees:
// text nodes (newline and tab aside, which templates and <pre> blocks
// use), and the title and aria-label attributes. It returns how many
// markers the page shows.
func checkNoHiddenText(t *testing.T, page string, doc *html.Node) int {
	t.Helper()
	markers := 0
	seen := map[string]bool{}
	report := func(where, s string) {
		for _, r := range s {
			if r == '\n' || r == '\t' {
				continue
			}
			if unicode.Is(unicode.Cc, r) || (unicode.Is(unicode.Cf, r) && r != '\u200d' && r != '\u200c') || r == '\u2028' {
				key := fmt.Sprintf("%s %U", where, r)
				if !seen[key] {
					seen[key] = true
					t.Errorf("%s: %s shows %U as is in %q; want it as a marker", page, where, r, s)
				}
			}
		}
	}
	for n := range doc.Descendants() {
		switch n.Type {
		case html.TextNode:
			report("text", n.Data)
		case html.ElementNode:
			for _, a := range n.Attr {
				if a.Key == "title" || a.Key == "aria-label" {
					report("attribute "+a.Key, a.Val)
				}
				if a.Key == "class" && a.Val == "ctl" {
					markers++
				}
			}
		}
	}
	return markers
}

// TestHostileTextIsShownNotObeyed renders every page with a run whose
// every sent text carries a bidi override and the other hidden characters,
// and finds none of them obeyed: each is a visible marker.
func TestHostileTextIsShownNotObeyed(t *testing.T) {
	run := hostileRun()
	v := executionView(run)
	orphan := trace.Effect{Provider: spoof("mail-api"), ID: spoof("msg_x"), Target: spoof("someone@else.dev"), At: at(3), IdempotencyKey: spoof("ik_orphan")}
	vUnverified := executionView(run, orphan)
	s := run.Steps[2] // the email step: key, args, error, effects
	attempt := findAttempt(t, run, s.ID, s.Attempts[0].Number)
	effect, ok := execution(run).Effect(run.Effects[1].Ref())
	if !ok {
		t.Fatalf("hostile run has no effect %q", run.Effects[1].ID)
	}
	rows := []views.OutboxRow{{Effect: run.Effects[0], State: trace.MatchDuplicate}, {Effect: orphan, State: trace.MatchOrphan}}
	// The key sent again with other arguments, so that the page warns.
	resent := s.Attempts[0]
	resent.Number, resent.Args = 99, json.RawMessage(`{"to":"`+spoof("x@y.dev")+`"}`)
	key := views.NewKeyView(views.KeyInput{Key: s.Attempts[0].IdempotencyKey, Attempts: []trace.Attempt{s.Attempts[0], resent},
		Runs: map[string]trace.Run{run.Execution.ID: run}, Effects: rows, Findings: execution(run).Findings})
	if !key.ArgsVaries {
		t.Fatal("key page: got no warning of other arguments, want one")
	}
	list := views.ExecutionsView{Rows: []views.ExecutionRow{v.Execution}}
	attemptEvent := trace.Event{Type: trace.EventAttempt, Attempt: &s.Attempts[0]}
	live := views.LiveView{Rows: []views.LiveRowView{views.NewLiveRow(1, attemptEvent)}}
	message := views.MessageView{Provider: spoof("smtp"), EffectID: spoof("msg"), From: spoof("a@b.dev"), Recipients: []string{spoof("c@d.dev")},
		Summary: []views.HeaderField{{Name: "Subject", Value: spoof("Your invoice")}, {Name: "From", Value: spoof("a@b.dev")}},
		Header:  []views.HeaderField{{Name: spoof("X-Name"), Value: spoof("value")}}, Text: spoof("Hello\nthere"), HasText: true,
		Attachments: []views.MessageAttachment{{Name: spoof("invoice.pdf"), ContentType: spoof("application/pdf"), Size: 10}},
		Problems:    []string{spoof("a problem")}, Effect: run.Effects[0], State: trace.MatchMatched, EffectURL: "/outbox"}

	for _, page := range []struct {
		name      string
		c         templ.Component
		fragment  bool
		minMarked int // the page shows at least this many markers
	}{
		{"executions", views.ExecutionsPage(list), false, 2},
		{"execution", views.ExecutionPage(v), false, 10},
		{"execution, unverified with orphans", views.ExecutionPage(vUnverified), false, 10},
		{"attempt detail", views.AttemptDetail(attempt), true, 5},
		{"attempt page", views.AttemptDetailPage(attempt), false, 5},
		{"effect detail", views.EffectDetailPage(effect), false, 5},
		{"outbox", views.OutboxPage(views.OutboxView{Rows: rows}), false, 5},
		{"key", views.KeyPage(key), false, 5},
		{"live", views.LivePage(live), false, 3},
		{"message", views.MessagePage(message), false, 10},
		{"error", views.ErrorPage(views.ErrorView{Status: http.StatusNotFound, Message: "execution " + spoof("x") + ": not found"}), false, 1},
	} {
		t.Run(page.name, func(t *testing.T) {
			var doc *html.Node
			if page.fragment {
				doc = renderFragment(t, page.c)
			} else {
				doc = renderPage(t, page.c)
			}
			markers := checkNoHiddenText(t, page.name, doc)
			if markers < page.minMarked {
				t.Errorf("%s: got %d markers, want at least %d", page.name, markers, page.minMarked)
			}
			if got := rawText(doc); !strings.Contains(got, "<U+202E>gnp.exe") {
				t.Errorf("%s: got text without the override's marker before gnp.exe: %.300q", page.name, got)
			}
		})
	}
}

// BenchmarkText is the cost of showing a text through Text: the common
// case (nothing hidden) is one scan and the escape templ did before.
func BenchmarkText(b *testing.B) {
	for _, tc := range []struct{ name, s string }{
		{"plain id", "exec_01H8ZK3Q9V6W2D4M7N5P8R1T0Y"},
		{"plain name with non-ASCII", "Rechnungsversand für Müller & Söhne"},
		{"bidi override", "invoice\u202egnp.exe"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				if err := views.Text(tc.s).Render(context.Background(), &buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
