package smtpsink

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/textproto"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/htmlindex"
)

// Message is a received mail message read for showing: its header fields
// in order, its first text and HTML parts decoded to UTF-8, and every other
// part as an attachment known by name and size. Reading never fails: what
// could not be read faithfully is listed in Problems, and the raw message
// is always there to look at.
type Message struct {
	Header      []HeaderField
	Text        string
	HasText     bool
	HTML        string
	HasHTML     bool
	Attachments []Attachment
	Problems    []string
	// PartsNotShown counts the parts past MaxParts, which are not read:
	// the raw message keeps them. Parts inside a part not read are not
	// counted.
	PartsNotShown int
	// attachmentDigests are the SHA-256 of each attachment's decoded
	// content, in the order of Attachments: a message's fingerprint covers
	// what it attached, which is never shown.
	attachmentDigests []string
}

// HeaderField is one header field as the message carries it, unfolded,
// its encoded words (RFC 2047) decoded.
type HeaderField struct {
	Name, Value string
}

// Attachment is a part of a message that is neither its text nor its
// HTML: only its name, type and decoded size are shown, never its content.
type Attachment struct {
	Name        string // "" when the part names none
	ContentType string
	Size        int
}

// Get returns the value of the first header field named name (any case).
func (m Message) Get(name string) string {
	for _, f := range m.Header {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// A message's MIME structure is walked this deep, and its first MaxParts
// parts (at any depth, multiparts included) are read; a message built to
// be deeper or wider is shown in part, and says so. Past MaxParts the
// parts are only counted, by their delimiter lines, so that a message of
// 100,000 parts takes no longer to show than one of MaxParts.
const (
	maxPartDepth = 10
	MaxParts     = 200
)

// ReadMessage reads a raw message (RFC 5322 with MIME) for showing.
func ReadMessage(raw []byte) Message {
	var m Message
	section, body := splitMessage(raw)
	fields, err := parseHeader(section)
	if err != nil {
		m.Problems = append(m.Problems, "header: "+err.Error())
	}
	h := textproto.MIMEHeader{}
	for _, f := range fields {
		h.Add(textproto.CanonicalMIMEHeaderKey(f.Name), f.Value)
		m.Header = append(m.Header, HeaderField{Name: f.Name, Value: decodeWords(f.Value)})
	}
	w := walker{m: &m}
	w.part(h, body, 0)
	return m
}

// splitMessage separates the header section from the body at the first
// empty line (CRLF or a bare LF: both arrive).
func splitMessage(raw []byte) (header, body []byte) {
	for i := 0; i < len(raw); {
		j := bytes.IndexByte(raw[i:], '\n')
		if j < 0 {
			return raw, nil
		}
		if line := raw[i : i+j]; len(line) == 0 || (len(line) == 1 && line[0] == '\r') {
			return raw[:i], raw[i+j+1:]
		}
		i += j + 1
	}
	return raw, nil
}

// parseHeader reads a header section's fields in order, continuation
// lines unfolded, values not decoded.
func parseHeader(section []byte) ([]HeaderField, error) {
	r := textproto.NewReader(bufio.NewReader(io.MultiReader(bytes.NewReader(section), strings.NewReader("\r\n"))))
	var fields []HeaderField
	for {
		line, err := r.ReadContinuedLine()
		if errors.Is(err, io.EOF) || (err == nil && line == "") {
			return fields, nil
		}
		if err != nil {
			return fields, err
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.TrimRight(name, " \t")
		if !ok || !fieldName(name) {
			return fields, fmt.Errorf("malformed header line %+q", clip(line, 80))
		}
		fields = append(fields, HeaderField{Name: name, Value: strings.TrimSpace(value)})
	}
}

// fieldName reports whether s is a header field name: printable ASCII
// other than the colon (RFC 5322 § 2.2).
func fieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 33 || s[i] > 126 {
			return false
		}
	}
	return true
}

var wordDecoder = mime.WordDecoder{CharsetReader: func(charset string, input io.Reader) (io.Reader, error) {
	enc, err := htmlindex.Get(charset)
	if err != nil {
		return nil, err
	}
	return enc.NewDecoder().Reader(input), nil
}}

// decodeWords decodes a header value's encoded words ("=?UTF-8?B?...?="),
// or leaves it as it came when they do not decode.
func decodeWords(v string) string {
	if d, err := wordDecoder.DecodeHeader(v); err == nil {
		return strings.ToValidUTF8(d, "\uFFFD")
	}
	return strings.ToValidUTF8(v, "\uFFFD")
}

type walker struct {
	m     *Message
	parts int
}

func (w *walker) problem(format string, args ...any) {
	w.m.Problems = append(w.m.Problems, fmt.Sprintf(format, args...))
}

// part reads one MIME entity: a multipart is walked into, the first inline
// text/plain and text/html become the text and the HTML, anything else
// is an attachment.
func (w *walker) part(h textproto.MIMEHeader, body []byte, depth int) {
	mediaType, params := "text/plain", map[string]string{}
	if ct := h.Get("Content-Type"); ct != "" {
		mt, p, err := mime.ParseMediaType(ct)
		switch {
		case mt != "":
			mediaType, params = mt, p
			if err != nil {
				w.problem("Content-Type %q: %v", clip(ct, 80), err)
			}
		default:
			w.problem("Content-Type %q: %v; read as text/plain", clip(ct, 80), err)
		}
	}
	disposition, dparams, _ := mime.ParseMediaType(h.Get("Content-Disposition"))

	if strings.HasPrefix(mediaType, "multipart/") {
		if depth >= maxPartDepth {
			w.problem("parts nested deeper than %d are not shown", maxPartDepth)
			return
		}
		w.multipart(params["boundary"], body, depth)
		return
	}
	content, err := decodeTransfer(h.Get("Content-Transfer-Encoding"), body)
	if err != nil {
		w.problem("a %s part: %v; shown as it came", mediaType, err)
		content = body
	}
	name := decodeWords(cmp.Or(dparams["filename"], params["name"]))
	inline := disposition != "attachment" && name == ""
	switch {
	case inline && mediaType == "text/plain" && !w.m.HasText:
		w.m.Text, w.m.HasText = w.text(content, params["charset"], "text"), true
	case inline && mediaType == "text/html" && !w.m.HasHTML:
		w.m.HTML, w.m.HasHTML = w.text(content, params["charset"], "HTML"), true
	default:
		w.m.Attachments = append(w.m.Attachments, Attachment{Name: name, ContentType: mediaType, Size: len(content)})
		sum := sha256.Sum256(content)
		w.m.attachmentDigests = append(w.m.attachmentDigests, hex.EncodeToString(sum[:]))
	}
}

func (w *walker) multipart(boundary string, body []byte, depth int) {
	if boundary == "" {
		w.problem("a multipart without a boundary is not shown")
		return
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for read := 0; ; read++ {
		if w.parts >= MaxParts {
			w.m.PartsNotShown += max(0, countParts(body, boundary)-read)
			return
		}
		// Raw, so that every transfer encoding is decoded in one place.
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			w.problem("multipart: %v; the parts after it are not shown", err)
			return
		}
		content, err := io.ReadAll(p)
		if err != nil {
			w.problem("multipart: %v; the parts after it are not shown", err)
			return
		}
		w.parts++
		w.part(p.Header, content, depth+1)
	}
}

// countParts counts a multipart body's parts without reading them: its
// delimiter lines up to the closing one (RFC 2046 § 5.1.1).
func countParts(body []byte, boundary string) int {
	delimiter := []byte("--" + boundary)
	n := 0
	for i := 0; ; {
		j := bytes.Index(body[i:], delimiter)
		if j < 0 {
			return n
		}
		at := i + j
		i = at + len(delimiter)
		switch {
		case at > 0 && body[at-1] != '\n': // not at the start of a line
		case bytes.HasPrefix(body[i:], []byte("--")):
			return n
		default:
			n++
		}
	}
}

// text decodes a text part's charset to UTF-8.
func (w *walker) text(content []byte, charset, what string) string {
	switch strings.ToLower(strings.TrimSpace(charset)) {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
		return strings.ToValidUTF8(string(content), "\uFFFD")
	}
	enc, err := htmlindex.Get(charset)
	if err != nil {
		w.problem("the %s part's charset %q is not known; it is shown as UTF-8", what, clip(charset, 40))
		return strings.ToValidUTF8(string(content), "\uFFFD")
	}
	out, err := enc.NewDecoder().Bytes(content)
	if err != nil {
		w.problem("the %s part does not decode as %s: %v", what, charset, err)
		return strings.ToValidUTF8(string(content), "\uFFFD")
	}
	return strings.ToValidUTF8(string(out), "\uFFFD")
}

// decodeTransfer undoes a Content-Transfer-Encoding.
func decodeTransfer(encoding string, body []byte) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "", "7bit", "8bit", "binary":
		return body, nil
	case "base64":
		// Line breaks are ignored by the decoder; other white space is not.
		clean := bytes.Map(func(r rune) rune {
			if r == ' ' || r == '\t' {
				return -1
			}
			return r
		}, body)
		out := make([]byte, base64.StdEncoding.DecodedLen(len(clean)))
		n, err := base64.StdEncoding.Decode(out, clean)
		if err != nil {
			return nil, fmt.Errorf("base64: %w", err)
		}
		return out[:n], nil
	case "quoted-printable":
		out, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(body)))
		if err != nil {
			return nil, fmt.Errorf("quoted-printable: %w", err)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("unknown Content-Transfer-Encoding %q", clip(encoding, 40))
	}
}

// clip shortens s to at most n bytes, on a rune boundary, for messages.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
