package htmlcheck_test

import (
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/views/htmlcheck"
)

const validPage = `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"/><title>a &lt;b&gt;</title><link rel="stylesheet" href="/s.css"/></head>
<body>
<p id="one">text<br/>more</p>
<svg width="100%"><defs><marker id="m"><path d="M 0 0"/></marker></defs>
<a href="/x" id="two"><title>svg title: 1 &lt; 2</title><rect x="1" y="2"></rect></a></svg>
<img src="/i.png" alt="">
</body>
</html>
`

// TestDocument checks that a well-formed page passes and that each broken
// case is reported with what is wrong.
func TestDocument(t *testing.T) {
	if ps := htmlcheck.Document([]byte(validPage)); len(ps) > 0 {
		t.Fatalf("valid page: got problems\n%s\nwant none", ps)
	}
	page := func(body string) string {
		return "<!DOCTYPE html>\n<html lang=\"en\"><head><title>t</title></head><body>" + body + "</body></html>"
	}
	tests := []struct {
		name, src string
		want      []string // substrings of the problems, in order
	}{
		{"no doctype", `<html lang="en"><body></body></html>`, []string{"no <!DOCTYPE html>"}},
		{"no lang", "<!DOCTYPE html><html><body></body></html>", []string{"<html> has no lang"}},
		{"empty lang", `<!DOCTYPE html><html lang=""><body></body></html>`, []string{"<html lang> is empty"}},
		{"not html first", "<!DOCTYPE html><div></div>", []string{"first element is <div>"}},
		{"unclosed", page("<div><p>text</div>"), []string{"</div> closes <div> (line 2) while <p> from line 2 is still open"}},
		{"never closed", `<!DOCTYPE html><html lang="en"><body><section>`, []string{"<section> is never closed", "<body> is never closed", "<html> is never closed"}},
		{"stray end tag", page("<p>a</p></span>"), []string{"stray end tag </span>"}},
		{"stray after html", page("") + "</div>", []string{"stray end tag </div>: nothing is open"}},
		{"void end tag", page("<br></br>"), []string{"</br> closes a void element"}},
		{"self-closing div", page("<div/>"), []string{"<div/> does not close a non-void HTML element", "while <div> from line 2 is still open"}},
		{"duplicate attribute", page(`<a href="/a" class="x" href='/b'>a</a>`), []string{`<a> has the attribute "href" more than once`}},
		{"duplicate attribute unquoted", page(`<input type=text name=q type=search>`), []string{`"type" more than once`}},
		{"duplicate id", page("<p id=\"x\">a</p>\n<span id=\"x\">b</span>"), []string{`repeats the id "x", first used on line 2`}},
		{"duplicate id in svg", page(`<svg><rect id="r"/><rect id="r"/></svg>`), []string{`repeats the id "r"`}},
		{"id with space", page(`<p id="a b">a</p>`), []string{`the id "a b"`}},
		{"two doctypes", page("") + "<!DOCTYPE html>", []string{"<!DOCTYPE> after the document started"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := htmlcheck.Document([]byte(tc.src)).String()
			rest := got
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("got problems\n%s\nwant one containing %q (in this order: %q)", got, w, tc.want)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

// TestFragment checks that a fragment needs no doctype but is held to the
// same nesting and id rules.
func TestFragment(t *testing.T) {
	if ps := htmlcheck.Fragment([]byte(`<article id="a"><h3>x</h3><dl><dt>k</dt><dd>v</dd></dl></article>`)); len(ps) > 0 {
		t.Errorf("valid fragment: got problems\n%s\nwant none", ps)
	}
	got := htmlcheck.Fragment([]byte(`<article id="a"><p id="a">x</article>`)).String()
	for _, w := range []string{`repeats the id "a"`, "while <p> from line 1 is still open"} {
		if !strings.Contains(got, w) {
			t.Errorf("broken fragment: got problems\n%s\nwant one containing %q", got, w)
		}
	}
}

// TestInlineCode checks that what a strict Content-Security-Policy blocks is
// reported, and that an external script is not.
func TestInlineCode(t *testing.T) {
	if ps := htmlcheck.InlineCode([]byte(validPage + `<script src="/app.js" defer></script>`)); len(ps) > 0 {
		t.Errorf("page with an external script: got problems\n%s\nwant none", ps)
	}
	src := `<script>alert(1)</script><style>p{}</style><p style="color:red" onclick="x()"><a href=" JavaScript:go()">a</a></p>`
	got := htmlcheck.InlineCode([]byte(src)).String()
	for _, w := range []string{"<script> without src", `inline content "alert(1)"`, "<style> element", "style attribute", "onclick", "javascript: URL"} {
		if !strings.Contains(got, w) {
			t.Errorf("got problems\n%s\nwant one containing %q", got, w)
		}
	}
}
