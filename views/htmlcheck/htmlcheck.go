// Package htmlcheck checks the HTML oncetrace serves, for the tests of views
// and web: a browser repairs broken markup silently, so a missing end tag or
// a repeated id would otherwise only show as a subtly wrong page.
//
// The checks are stricter than HTML itself, on purpose: every non-void
// element must be closed explicitly and in order (no optional end tags),
// which is what oncetrace's templates promise. The package only reads
// markup; it is imported by tests and by nothing that ships.
package htmlcheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/net/html"
)

// Problem is one rule a document breaks, with the line it starts on.
type Problem struct {
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("line %d: %s", p.Line, p.Msg) }

// Problems is what a check found; empty when the markup is valid.
type Problems []Problem

func (ps Problems) String() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// voidElements have no end tag (HTML's "void elements").
var voidElements = map[string]bool{
	"area": true, "base": true, "br": true, "col": true, "embed": true, "hr": true, "img": true,
	"input": true, "link": true, "meta": true, "source": true, "track": true, "wbr": true,
}

// Document checks a whole page: a doctype before anything else, an <html>
// with a lang, and everything Fragment checks.
func Document(src []byte) Problems { return check(src, true) }

// Fragment checks a piece of markup, such as the detail panel's fragment:
// well-formed nesting, no stray end tags, no duplicate attributes, unique
// ids.
func Fragment(src []byte) Problems { return check(src, false) }

type open struct {
	name string
	line int
}

func check(src []byte, document bool) Problems {
	var ps Problems
	z := html.NewTokenizer(bytes.NewReader(src))
	line := 1
	var stack []open
	ids := map[string]int{} // id -> the line it was first used on
	sawDoctype, sawElement := false, false
	foreign := 0 // depth of <svg>/<math>, where self-closing tags are allowed

	add := func(format string, args ...any) {
		ps = append(ps, Problem{Line: line, Msg: fmt.Sprintf(format, args...)})
	}
	for {
		tt := z.Next()
		raw := z.Raw()
		if tt == html.ErrorToken {
			if err := z.Err(); !errors.Is(err, io.EOF) {
				add("tokenizer: %v", err)
			}
			break
		}
		tok := z.Token()
		switch tt {
		case html.DoctypeToken:
			if sawElement || sawDoctype {
				add("<!DOCTYPE> after the document started")
			}
			if !strings.EqualFold(strings.TrimSpace(tok.Data), "html") {
				add("doctype %q, want <!DOCTYPE html>", tok.Data)
			}
			sawDoctype = true
		case html.StartTagToken, html.SelfClosingTagToken:
			if !sawElement && document {
				if !sawDoctype {
					add("no <!DOCTYPE html> before the first element <%s>", tok.Data)
				}
				if tok.Data != "html" {
					add("the first element is <%s>, want <html lang=...>", tok.Data)
				}
			}
			sawElement = true
			for _, name := range duplicateAttributes(raw) {
				add("<%s> has the attribute %q more than once", tok.Data, name)
			}
			for _, a := range tok.Attr {
				switch a.Key {
				case "id":
					switch {
					case a.Val == "" || strings.ContainsAny(a.Val, " \t\n\f\r"):
						add("<%s> has the id %q, want a non-empty id without spaces", tok.Data, a.Val)
					case ids[a.Val] != 0:
						add("<%s> repeats the id %q, first used on line %d", tok.Data, a.Val, ids[a.Val])
					default:
						ids[a.Val] = line
					}
				case "lang":
					if tok.Data == "html" && strings.TrimSpace(a.Val) == "" {
						add("<html lang> is empty")
					}
				}
			}
			if tok.Data == "html" && !hasAttr(tok, "lang") {
				add("<html> has no lang attribute")
			}
			if foreign > 0 {
				// Inside SVG, <title> and <style> hold markup, not raw text.
				z.NextIsNotRawText()
			}
			switch {
			case voidElements[tok.Data]:
			case tt == html.SelfClosingTagToken && foreign > 0:
			case tt == html.SelfClosingTagToken:
				add("<%s/> does not close a non-void HTML element; write <%s></%s>", tok.Data, tok.Data, tok.Data)
				stack = append(stack, open{tok.Data, line})
			default:
				stack = append(stack, open{tok.Data, line})
				if tok.Data == "svg" || tok.Data == "math" {
					foreign++
				}
			}
		case html.EndTagToken:
			switch {
			case voidElements[tok.Data]:
				add("</%s> closes a void element, which has no end tag", tok.Data)
			case len(stack) == 0:
				add("stray end tag </%s>: nothing is open", tok.Data)
			case stack[len(stack)-1].name == tok.Data:
				stack = pop(stack, &foreign)
			default:
				i := len(stack) - 1
				for i >= 0 && stack[i].name != tok.Data {
					i--
				}
				if i < 0 {
					top := stack[len(stack)-1]
					add("stray end tag </%s>: the open element is <%s> from line %d", tok.Data, top.name, top.line)
					break
				}
				// Report each element the end tag skips, then resynchronise.
				for len(stack)-1 > i {
					top := stack[len(stack)-1]
					add("</%s> closes <%s> (line %d) while <%s> from line %d is still open", tok.Data, tok.Data, stack[i].line, top.name, top.line)
					stack = pop(stack, &foreign)
				}
				stack = pop(stack, &foreign)
			}
		}
		line += bytes.Count(raw, []byte("\n"))
	}
	for i := len(stack) - 1; i >= 0; i-- {
		ps = append(ps, Problem{Line: stack[i].line, Msg: fmt.Sprintf("<%s> is never closed", stack[i].name)})
	}
	if document && !sawDoctype && !sawElement {
		ps = append(ps, Problem{Line: 1, Msg: "empty document: no <!DOCTYPE html> and no <html>"})
	}
	return ps
}

func pop(stack []open, foreign *int) []open {
	if n := stack[len(stack)-1].name; n == "svg" || n == "math" {
		*foreign--
	}
	return stack[:len(stack)-1]
}

func hasAttr(t html.Token, key string) bool {
	for _, a := range t.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// duplicateAttributes scans a raw start tag for repeated attribute names.
// The tokenizer keeps only the first of a repeated attribute, as browsers
// do, so the repeat is only visible in the raw bytes.
func duplicateAttributes(raw []byte) []string {
	s := string(raw)
	s = strings.TrimPrefix(s, "<")
	s = strings.TrimSuffix(s, ">")
	i := 0
	for i < len(s) && !isSpace(s[i]) && s[i] != '/' {
		i++ // the tag name
	}
	seen := map[string]bool{}
	var dups []string
	for i < len(s) {
		for i < len(s) && (isSpace(s[i]) || s[i] == '/') {
			i++
		}
		start := i
		// An attribute name may start with '=' (the tokenizer allows it), so
		// read at least one byte.
		for i < len(s) && (i == start || (!isSpace(s[i]) && s[i] != '/' && s[i] != '=')) {
			i++
		}
		name := strings.ToLower(s[start:i])
		if name == "" {
			break
		}
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i < len(s) && s[i] == '=' {
			i++
			for i < len(s) && isSpace(s[i]) {
				i++
			}
			if i < len(s) && (s[i] == '"' || s[i] == '\'') {
				q := s[i]
				i++
				for i < len(s) && s[i] != q {
					i++
				}
				i++
			} else {
				for i < len(s) && !isSpace(s[i]) {
					i++
				}
			}
		}
		if seen[name] {
			dups = append(dups, name)
		}
		seen[name] = true
	}
	return dups
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }

// InlineCode reports what a strict Content-Security-Policy (no
// 'unsafe-inline') would block or what would need it: <script> elements
// with content or without src, <style> elements, style attributes, on*
// event handler attributes and javascript: URLs.
func InlineCode(src []byte) Problems {
	var ps Problems
	z := html.NewTokenizer(bytes.NewReader(src))
	line := 1
	inScript := false
	add := func(format string, args ...any) {
		ps = append(ps, Problem{Line: line, Msg: fmt.Sprintf(format, args...)})
	}
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		raw := z.Raw()
		tok := z.Token()
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken:
			switch tok.Data {
			case "script":
				if !hasAttr(tok, "src") {
					add("<script> without src: inline script")
				}
				inScript = tt == html.StartTagToken
			case "style":
				add("<style> element: inline style")
			}
			for _, a := range tok.Attr {
				switch {
				case a.Key == "style":
					add("<%s style=%q>: style attribute", tok.Data, a.Val)
				case strings.HasPrefix(a.Key, "on"):
					add("<%s %s=...>: inline event handler", tok.Data, a.Key)
				case (a.Key == "href" || a.Key == "src" || a.Key == "action") &&
					strings.HasPrefix(strings.ToLower(strings.TrimSpace(a.Val)), "javascript:"):
					add("<%s %s=%q>: javascript: URL", tok.Data, a.Key, a.Val)
				}
			}
		case html.TextToken:
			if inScript && strings.TrimSpace(tok.Data) != "" {
				add("<script> with inline content %q", truncate(tok.Data, 60))
			}
		case html.EndTagToken:
			if tok.Data == "script" {
				inScript = false
			}
		}
		line += bytes.Count(raw, []byte("\n"))
	}
	return ps
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
