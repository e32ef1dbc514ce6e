package views

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/a-h/templ"
)

// Text that clients send is stored as sent, but some characters in it
// would lie on screen: a right-to-left override turns
// "invoice\u202egnp.exe" into "invoiceexe.png", a zero-width space makes
// two different ids look alike, a control character is invisible or breaks
// the line. Wherever a page shows such text (ids, names, tools, targets,
// errors, keys, labels, arguments), these characters are drawn as a visible
// marker instead, "<U+202E>", in an element of class "ctl" whose title
// names the character. Nothing is stripped, so the reader sees exactly
// what was sent, and copying the marker never copies a live override.

// hiddenRune reports whether r is shown as a marker: every control
// character (C0, DEL, C1), every invisible format character (bidi marks,
// embeddings, overrides and isolates, zero-width space, word joiner, BOM,
// Unicode tags) but the zero-width joiners that emoji and many scripts
// need, and the line and paragraph separators. keepLayout keeps newline
// and tab, for blocks shown as preformatted text.
func hiddenRune(r rune, keepLayout bool) bool {
	switch {
	case r < 0x20:
		return !keepLayout || (r != '\n' && r != '\t')
	case r < 0x7f:
		return false
	case r == '\u200c' || r == '\u200d': // zero-width non-joiner and joiner
		return false
	case r == '\u2028' || r == '\u2029':
		return true
	}
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r)
}

// hasHidden reports whether s holds a character hiddenRune marks.
func hasHidden(s string, keepLayout bool) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b < 0x20 || b == 0x7f {
			if hiddenRune(rune(b), keepLayout) {
				return true
			}
			continue
		}
		if b < utf8.RuneSelf {
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if hiddenRune(r, keepLayout) {
			return true
		}
		i += size - 1
	}
	return false
}

// runeNames name the characters an attack uses, for the marker's title.
var runeNames = map[rune]string{
	'\u0000': "NULL", '\u0007': "BELL", '\u0008': "BACKSPACE", '\u0009': "TAB", '\u000a': "LINE FEED",
	'\u000d': "CARRIAGE RETURN", '\u001b': "ESCAPE", '\u007f': "DELETE",
	'\u00ad': "SOFT HYPHEN", '\u061c': "ARABIC LETTER MARK",
	'\u200b': "ZERO WIDTH SPACE", '\u200e': "LEFT-TO-RIGHT MARK", '\u200f': "RIGHT-TO-LEFT MARK",
	'\u2028': "LINE SEPARATOR", '\u2029': "PARAGRAPH SEPARATOR",
	'\u202a': "LEFT-TO-RIGHT EMBEDDING", '\u202b': "RIGHT-TO-LEFT EMBEDDING", '\u202c': "POP DIRECTIONAL FORMATTING",
	'\u202d': "LEFT-TO-RIGHT OVERRIDE", '\u202e': "RIGHT-TO-LEFT OVERRIDE",
	'\u2060': "WORD JOINER", '\u2066': "LEFT-TO-RIGHT ISOLATE", '\u2067': "RIGHT-TO-LEFT ISOLATE",
	'\u2068': "FIRST STRONG ISOLATE", '\u2069': "POP DIRECTIONAL ISOLATE", '\ufeff': "ZERO WIDTH NO-BREAK SPACE",
}

// marker is the visible form of a hidden character: <U+202E>.
func marker(r rune) string { return fmt.Sprintf("<U+%04X>", r) }

// runeTitle is the marker's hover text: "U+202E RIGHT-TO-LEFT OVERRIDE".
func runeTitle(r rune) string {
	name, ok := runeNames[r]
	switch {
	case ok:
	case unicode.Is(unicode.Cc, r):
		name = "control character"
	default:
		name = "invisible format character"
	}
	return fmt.Sprintf("U+%04X %s, sent as part of this text", r, name)
}

// Visible is s with every hidden character written as its marker, as
// plain text: for attributes (title, aria-label), the page title and SVG
// <title>, where no element can go. Text without one is returned as is.
func Visible(s string) string {
	if !hasHidden(s, false) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if hiddenRune(r, false) {
			b.WriteString(marker(r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Text shows s in HTML with each hidden character as a marker element
// <span class="ctl">. Newlines and tabs are markers too: inline text (an
// id, a name) never holds one legitimately.
func Text(s string) templ.Component { return markedText(s, false, "span") }

// TextBlock is Text for preformatted blocks (arguments, results, a mail's
// text): newlines and tabs stay as they are.
func TextBlock(s string) templ.Component { return markedText(s, true, "span") }

// SVGText is Text inside an SVG <text>, where the marker is a <tspan>.
func SVGText(s string) templ.Component { return markedText(s, false, "tspan") }

func markedText(s string, keepLayout bool, element string) templ.Component {
	return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		if !hasHidden(s, keepLayout) {
			_, err := io.WriteString(w, templ.EscapeString(s))
			return err
		}
		var b strings.Builder
		start := 0
		for i, r := range s {
			if !hiddenRune(r, keepLayout) {
				continue
			}
			b.WriteString(templ.EscapeString(s[start:i]))
			fmt.Fprintf(&b, `<%s class="ctl" title="%s">%s</%s>`, element, templ.EscapeString(runeTitle(r)),
				templ.EscapeString(marker(r)), element)
			start = i + utf8.RuneLen(r)
		}
		b.WriteString(templ.EscapeString(s[start:]))
		_, err := io.WriteString(w, b.String())
		return err
	})
}
