package smtpsink_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/ingest/feed/smtpsink"
)

func crlf(lines ...string) string { return strings.Join(lines, "\r\n") }

func TestReadMessage(t *testing.T) {
	pdf := strings.Repeat("%PDF", 250) // 1000 bytes
	raw := crlf(
		"From: =?UTF-8?Q?Facturaci=C3=B3n?= <billing@acme.dev>",
		"To: jordan@acme.dev",
		"Subject: =?UTF-8?Q?Your_June_invoice_=E2=80=94_ACME?=",
		"X-Folded: one",
		" two",
		"MIME-Version: 1.0",
		`Content-Type: multipart/mixed; boundary="outer"`,
		"",
		"--outer",
		`Content-Type: multipart/alternative; boundary="alt"`,
		"",
		"--alt",
		"Content-Type: text/plain; charset=utf-8",
		"Content-Transfer-Encoding: quoted-printable",
		"",
		"Hello Jordan, the total is 42 =E2=82=AC.",
		"--alt",
		"Content-Type: text/html; charset=iso-8859-1",
		"Content-Transfer-Encoding: base64",
		"",
		base64.StdEncoding.EncodeToString([]byte("<p>Caf\xe9</p>")),
		"--alt--",
		"--outer",
		`Content-Type: application/pdf; name="invoice-june.pdf"`,
		`Content-Disposition: attachment; filename="invoice-june.pdf"`,
		"Content-Transfer-Encoding: base64",
		"",
		base64.StdEncoding.EncodeToString([]byte(pdf)),
		"--outer--",
		"")
	m := smtpsink.ReadMessage([]byte(raw))
	if len(m.Problems) > 0 {
		t.Errorf("problems: got %q, want none", m.Problems)
	}
	var names []string
	for _, f := range m.Header {
		names = append(names, f.Name)
	}
	if got, want := strings.Join(names, ","), "From,To,Subject,X-Folded,MIME-Version,Content-Type"; got != want {
		t.Errorf("header fields in order: got %s, want %s", got, want)
	}
	if got, want := m.Get("subject"), "Your June invoice — ACME"; got != want {
		t.Errorf("Subject: got %q, want %q", got, want)
	}
	if got, want := m.Get("From"), "Facturación <billing@acme.dev>"; got != want {
		t.Errorf("From: got %q, want %q", got, want)
	}
	if got, want := m.Get("X-Folded"), "one two"; got != want {
		t.Errorf("a folded field: got %q, want %q", got, want)
	}
	if !m.HasText || m.Text != "Hello Jordan, the total is 42 €." {
		t.Errorf("text: got %v %q, want the quoted-printable part decoded", m.HasText, m.Text)
	}
	if !m.HasHTML || m.HTML != "<p>Café</p>" {
		t.Errorf("HTML: got %v %q, want the base64 ISO-8859-1 part decoded to UTF-8", m.HasHTML, m.HTML)
	}
	if len(m.Attachments) != 1 || m.Attachments[0] != (smtpsink.Attachment{Name: "invoice-june.pdf", ContentType: "application/pdf", Size: 1000}) {
		t.Errorf("attachments: got %+v, want invoice-june.pdf, application/pdf, 1000 bytes", m.Attachments)
	}
}

func TestReadMessageOddities(t *testing.T) {
	tests := []struct {
		name, raw   string
		text        string
		html        bool
		problem     string // a substring of a problem, "" for none
		attachments int
	}{
		{name: "no content type", raw: crlf("Subject: plain", "", "just text"), text: "just text"},
		{name: "bare LF line ends", raw: "Subject: lf\n\nline one\nline two\n", text: "line one\nline two\n"},
		{name: "no body", raw: crlf("Subject: header only", ""), text: ""},
		{name: "unknown charset", raw: crlf("Content-Type: text/plain; charset=x-klingon", "", "qapla'"), text: "qapla'", problem: "charset"},
		{name: "bad base64", raw: crlf("Content-Transfer-Encoding: base64", "", "!!!not base64"), text: "!!!not base64", problem: "base64"},
		{name: "multipart without boundary", raw: crlf("Content-Type: multipart/mixed", "", "x"), problem: "boundary"},
		{name: "nested too deep", raw: nested(20), problem: "deeper"},
		{name: "malformed header", raw: crlf("Subject: ok", "no colon here", "", "body"), problem: "header"},
		{name: "second HTML part is an attachment", raw: crlf(`Content-Type: multipart/mixed; boundary=b`, "", "--b",
			"Content-Type: text/html", "", "<p>one</p>", "--b", "Content-Type: text/html", "", "<p>two</p>", "--b--", ""),
			html: true, attachments: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := smtpsink.ReadMessage([]byte(tt.raw))
			if tt.text != "" && m.Text != tt.text {
				t.Errorf("text: got %q, want %q", m.Text, tt.text)
			}
			if m.HasHTML != tt.html {
				t.Errorf("has HTML: got %v, want %v", m.HasHTML, tt.html)
			}
			problems := strings.Join(m.Problems, "; ")
			if (tt.problem == "") != (problems == "") || !strings.Contains(problems, tt.problem) {
				t.Errorf("problems: got %q, want one about %q", problems, tt.problem)
			}
			if len(m.Attachments) != tt.attachments {
				t.Errorf("attachments: got %+v, want %d", m.Attachments, tt.attachments)
			}
		})
	}
}

// nested is a message of depth multiparts, one inside the other.
func nested(depth int) string {
	body := crlf("Content-Type: text/plain", "", "deep", "")
	for i := range depth {
		b := "b" + strings.Repeat("x", i)
		body = crlf("Content-Type: multipart/mixed; boundary="+b, "", "--"+b, body, "--"+b+"--", "")
	}
	return body
}

// FuzzReadMessage: reading never panics, whatever a sender sends.
func FuzzReadMessage(f *testing.F) {
	f.Add([]byte(crlf("Subject: x", "", "body")))
	f.Add([]byte(nested(3)))
	f.Add([]byte(crlf(`Content-Type: multipart/alternative; boundary="a"`, "", "--a", "Content-Type: text/html; charset=koi8-r",
		"Content-Transfer-Encoding: quoted-printable", "", "=F0=D2=C9", "--a--")))
	f.Fuzz(func(t *testing.T, raw []byte) {
		smtpsink.ReadMessage(raw)
	})
}

// manyParts is a multipart/mixed message of n one-byte attachments, with
// the lines given before the first.
func manyParts(boundary string, n int, first ...string) string {
	var b strings.Builder
	b.WriteString(crlf("Subject: many parts", "Content-Type: multipart/mixed; boundary="+boundary, "", ""))
	for _, part := range first {
		b.WriteString("--" + boundary + "\r\n" + part + "\r\n")
	}
	for range n {
		b.WriteString("--" + boundary + "\r\nContent-Type: application/octet-stream\r\n\r\nx\r\n")
	}
	b.WriteString("--" + boundary + "--\r\n")
	return b.String()
}

// TestReadMessagePartsCap: only the first MaxParts parts are read; the
// rest are counted, at every level the cap stops.
func TestReadMessagePartsCap(t *testing.T) {
	inner := strings.TrimPrefix(manyParts("inner", 300), "Subject: many parts\r\n")
	tests := []struct {
		name          string
		raw           string
		attachments   int
		partsNotShown int
	}{
		{"at the cap", manyParts("b", smtpsink.MaxParts), smtpsink.MaxParts, 0},
		{"100,000 parts", manyParts("b", 100_000), smtpsink.MaxParts, 100_000 - smtpsink.MaxParts},
		// The nested multipart is part 1; 199 of its 300 are read.
		{"nested", manyParts("outer", 50, inner), smtpsink.MaxParts - 1, 300 - (smtpsink.MaxParts - 1) + 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := smtpsink.ReadMessage([]byte(tt.raw))
			if len(m.Attachments) != tt.attachments || m.PartsNotShown != tt.partsNotShown {
				t.Errorf("got %d attachments, %d parts not shown; want %d and %d", len(m.Attachments), m.PartsNotShown, tt.attachments, tt.partsNotShown)
			}
		})
	}
}
