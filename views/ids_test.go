package views_test

import (
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/oncetrace/oncetrace/views"
	"github.com/oncetrace/oncetrace/views/htmlcheck"
)

func TestShortID(t *testing.T) {
	tests := []struct{ id, want string }{
		{"ik_1", "ik_1"},
		{"msg_1234567890", "msg_1234567890"}, // 14: whole
		{"ik_cus_00000001", "ik_cus_…00001"},
		{"ik_cus_00000002", "ik_cus_…00002"},
		{"msg_6899cb1b2902", "msg_689…b2902"},
		{"ünïcødé-ünïcødé-1", "ünïcødé…ødé-1"}, // runes, not bytes
	}
	for _, tt := range tests {
		if got := views.ShortID(tt.id); got != tt.want {
			t.Errorf("ShortID(%q): got %q, want %q", tt.id, got, tt.want)
		}
	}
}

// seenText is an element's text as drawn before anything is focused: a cut
// id's whole form (sid-full) and the buttons the script shows are left out.
func seenText(n *html.Node) string {
	var parts []string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && (n.Data == "button" || strings.Contains(" "+attr(n, "class")+" ", " sid-full ")) {
			return
		}
		if n.Type == html.TextNode {
			parts = append(parts, n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
}

// TestIncidentIDsCutInTheMiddle: the sentence shows each id cut in the
// middle, keeps the whole id beside it and in a copy button, and offers a
// link to the page with the incident's culprit selected.
func TestIncidentIDsCutInTheMiddle(t *testing.T) {
	run := demoNaive()
	v := executionView(run)
	doc := renderChecked(t, views.ExecutionHeader(v), htmlcheck.Fragment)
	sentence := one(t, doc, "incident-sentence")
	var cut, full, copies []string
	for _, sid := range byTestID(sentence, "short-id") {
		for d := range sid.Descendants() {
			switch attr(d, "class") {
			case "sid-cut":
				cut = append(cut, text(d))
			case "sid-full":
				full = append(full, text(d))
			}
		}
	}
	for _, b := range byTestID(sentence, "copy") {
		copies = append(copies, attr(b, "data-copy"))
	}
	if want := []string{"msg_689…b2902", "msg_663…d4d38"}; !slicesEqual(cut, want) {
		t.Errorf("cut ids: got %q, want %q", cut, want)
	}
	if want := []string{"msg_6899cb1b2902", "msg_66395ddd4d38"}; !slicesEqual(full, want) || !slicesEqual(copies, want) {
		t.Errorf("whole ids: got %q and copy buttons %q, want %q", full, copies, want)
	}
	link := one(t, doc, "copy-link")
	if got, want := attr(link, "data-copy-url"), views.SelectAttemptURL(run.Execution.ID, "step-1", 2); got != want {
		t.Errorf("copy link: got %q, want the culprit selected, %q", got, want)
	}
}
