package feed

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/oncetrace/oncetrace/ingest"
)

// Fingerprints (docs/outbox.md § "Fingerprints"). Every feed records with
// each effect what was asked of the provider, without what differs between
// two sends of one intent: two effects of one run at one provider with one
// fingerprint asked for the same thing twice. A fingerprint is
// KIND:HEX, 32 lowercase hex digits of a SHA-256 over a canonical encoding
// of what was asked, so that the same intent gives the same string on any
// instance; every feed computes it here, so that they cannot drift apart.

// Kinds of fingerprint: what the feed saw of the request.
const (
	KindMail    = "mail"    // recipients, subject, body (the sandbox, the SMTP sink)
	KindHTTP    = "http"    // method, path, query, body (the recording proxy)
	KindWebhook = "webhook" // the payload fields a webhook mapping names
)

// MaxSummaryBytes bounds an effect's summary: a line on a page, not a copy
// of the request.
const MaxSummaryBytes = 200

// fingerprintVersion is hashed first: a change of the canonical encoding
// must change every fingerprint rather than let old and new ones meet.
const fingerprintVersion = "oncetrace-fingerprint-v1"

// MaxFingerprintDepth bounds how deep a body's JSON is walked. A body
// nested deeper is fingerprinted by its raw bytes (with nothing left out),
// and a webhook value nested deeper gives no fingerprint.
const MaxFingerprintDepth = 64

// maxFormParts bounds the parts of a multipart body read for a
// fingerprint; a body with more is fingerprinted by its raw bytes.
const maxFormParts = 1000

// summaryFields is how many of a request's fields an HTTP summary shows,
// and summaryValueBytes how much of each value.
const (
	summaryFields     = 4
	summaryValueBytes = 40
)

var errTooDeep = fmt.Errorf("nested deeper than %d levels", MaxFingerprintDepth)

// canonicalDepth is how deep writeCanonical goes: a value of
// MaxFingerprintDepth levels and the few levels a feed wraps it in.
const canonicalDepth = MaxFingerprintDepth + 4

// fingerprintOf hashes kind and the canonical encoding of v.
func fingerprintOf(kind string, v any) (string, error) {
	h := sha256.New()
	io.WriteString(h, fingerprintVersion+"\n"+kind+"\n")
	if err := writeCanonical(h, v, 0); err != nil {
		return "", err
	}
	return kind + ":" + hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// writeCanonical writes a decoded JSON value (or a tree of maps, slices and
// strings built like one) so that two values give the same bytes exactly
// when they are equal: every value is tagged with its type and every
// variable-length part is prefixed by its length, so no two trees meet by
// concatenation ("ab"+"c" is never "a"+"bc"); object keys are sorted.
// Numbers are kept as written: 2000 and 2e3 are two intents' worth of
// bytes, and one client sends one intent the same way twice.
func writeCanonical(h hash.Hash, v any, depth int) error {
	if depth > canonicalDepth {
		return errTooDeep
	}
	switch x := v.(type) {
	case nil:
		io.WriteString(h, "n")
	case bool:
		if x {
			io.WriteString(h, "t")
		} else {
			io.WriteString(h, "f")
		}
	case json.Number:
		writeTagged(h, 'd', string(x))
	case string:
		writeTagged(h, 's', x)
	case []string:
		fmt.Fprintf(h, "a%d:", len(x))
		for _, s := range x {
			writeTagged(h, 's', s)
		}
	case []any:
		fmt.Fprintf(h, "a%d:", len(x))
		for _, e := range x {
			if err := writeCanonical(h, e, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		fmt.Fprintf(h, "o%d:", len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			writeTagged(h, 's', k)
			if err := writeCanonical(h, x[k], depth+1); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("feed: fingerprint: a %T is not a JSON value", v)
	}
	return nil
}

func writeTagged(h hash.Hash, tag byte, s string) {
	fmt.Fprintf(h, "%c%d:", tag, len(s))
	io.WriteString(h, s)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ClipSummary makes s a summary: OneLine(s, MaxSummaryBytes).
func ClipSummary(s string) string { return OneLine(s, MaxSummaryBytes) }

// OneLine makes s one line of valid, printable UTF-8 (line breaks and
// other control characters become spaces, runs of spaces one) of at most
// maxBytes, cut on a character with "…" when longer: a value a summary
// shows.
func OneLine(s string, maxBytes int) string { return clipText(oneLine(s), maxBytes) }

// oneLine turns control characters into spaces and collapses runs of
// white space, so that a value cannot break a summary's line.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// clipText shortens s to at most n bytes on a character boundary, ending
// in "…" when it was cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// --- What differs between two sends of one intent ---

// DefaultFingerprintIgnore are the body and query fields left out of every
// HTTP fingerprint: fields that clients fill afresh on each send of one
// intent (keys, times, nonces, request and trace ids). Names match
// whatever their case and their '_' and '-' (idempotency_key matches
// idempotencyKey and Idempotency-Key), at any depth of the body.
var DefaultFingerprintIgnore = []string{
	"idempotency_key", "request_id", "client_request_id", "correlation_id",
	"nonce", "timestamp", "ts", "created", "created_at", "sent_at",
	"traceparent", "tracestate",
}

// IgnoredFields are the field names left out of a fingerprint. The zero
// value leaves out nothing.
type IgnoredFields struct {
	folded map[string]bool
}

// NewIgnoredFields returns DefaultFingerprintIgnore and extra.
func NewIgnoredFields(extra ...string) IgnoredFields {
	f := IgnoredFields{folded: map[string]bool{}}
	for _, n := range slices.Concat(DefaultFingerprintIgnore, extra) {
		if n = foldFieldName(n); n != "" {
			f.folded[n] = true
		}
	}
	return f
}

// Ignores reports whether a field of this name is left out.
func (f IgnoredFields) Ignores(name string) bool { return f.folded[foldFieldName(name)] }

// foldFieldName lowercases a name and drops its '_' and '-', so that one
// entry covers every spelling clients use.
func foldFieldName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		return unicode.ToLower(r)
	}, strings.TrimSpace(s))
}

// ParseFingerprintIgnore reads a --fingerprint-ignore value: PROVIDER=
// field1,field2, several separated by ';' (as the environment variable
// holds them). It returns the fields by provider.
func ParseFingerprintIgnore(v string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, entry := range strings.Split(v, ";") {
		if strings.TrimSpace(entry) == "" {
			continue
		}
		provider, list, ok := strings.Cut(entry, "=")
		provider = strings.TrimSpace(provider)
		if !ok || provider == "" {
			return nil, fmt.Errorf("%q: want PROVIDER=field1,field2, e.g. stripe=expand,metadata", strings.TrimSpace(entry))
		}
		var fields []string
		for _, f := range strings.Split(list, ",") {
			if f = strings.TrimSpace(f); f != "" {
				fields = append(fields, f)
			}
		}
		if len(fields) == 0 {
			return nil, fmt.Errorf("%q: name at least one field after %s=", strings.TrimSpace(entry), provider)
		}
		out[provider] = append(out[provider], fields...)
	}
	return out, nil
}

// --- Mail ---

// Mail is what was asked of a mail API or an SMTP server: whom, what
// subject, what content.
type Mail struct {
	// Recipients are addresses or address lists as sent ("Jordan
	// <Jordan@Acme.dev>, b@y"); NormaliseRecipients reads them.
	Recipients []string
	Subject    string
	// Body are the message's contents in order: its text, its HTML, one
	// string per attachment (a digest of it). Line endings and white
	// space at the ends of lines do not count.
	Body []string
}

// Fingerprint returns the mail's fingerprint and summary. Two sends of one
// message match although their ids, dates, keys, MIME boundaries, line
// endings, recipients' order, case or display names differ.
func (m Mail) Fingerprint() (fingerprint, summary string) {
	to := NormaliseRecipients(m.Recipients...)
	subject := strings.Join(strings.Fields(m.Subject), " ")
	bodies := make([]string, len(m.Body))
	for i, b := range m.Body {
		bodies[i] = sha256Hex([]byte(normaliseBody(b)))
	}
	fp, _ := fingerprintOf(KindMail, map[string]any{"to": to, "subject": subject, "body": bodies}) // flat: cannot be too deep
	return fp, mailSummary(to, subject)
}

// mailSummary says "email to jordan@acme.dev, subject 'Your June
// invoice'", with two recipients at most and how many more.
func mailSummary(to []string, subject string) string {
	var b strings.Builder
	b.WriteString("email")
	if len(to) > 0 {
		shown := to[:min(len(to), 2)]
		clipped := make([]string, len(shown))
		for i, a := range shown {
			clipped[i] = clipText(a, 60)
		}
		b.WriteString(" to " + strings.Join(clipped, ", "))
		if more := len(to) - len(shown); more > 0 {
			fmt.Fprintf(&b, " (+%d more)", more)
		}
	}
	if subject != "" {
		b.WriteString(", subject '" + clipText(oneLine(subject), 100) + "'")
	}
	return ClipSummary(b.String())
}

// NormaliseRecipients reads addresses and address lists as one set:
// display names dropped, lowercased, sorted, each once. An entry that is
// not an address list is split at commas and semicolons as it is.
func NormaliseRecipients(lists ...string) []string {
	out := []string{}
	for _, list := range lists {
		if addrs, err := mail.ParseAddressList(list); err == nil {
			for _, a := range addrs {
				out = append(out, strings.ToLower(a.Address))
			}
			continue
		}
		for _, a := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ';' }) {
			if a = strings.ToLower(strings.Trim(strings.TrimSpace(a), "<>")); a != "" {
				out = append(out, a)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// normaliseBody gives one text for the ways one message body is sent: LF
// line endings, no white space at the end of a line or blank lines at the
// end (mail transports and templates add and drop them).
func normaliseBody(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// --- HTTP ---

// HTTPRequest is what was asked of an HTTP API. Headers are not part of
// it: they carry the key, the trace context, dates and credentials, which
// differ between two sends of one intent (or between two callers of it).
type HTTPRequest struct {
	Method string
	// Path is the request's path, decoded; RawQuery its query as sent.
	Path, RawQuery string
	// ContentType is the request's Content-Type header: it says how the
	// body is read.
	ContentType string
	// Body is the whole body, its Content-Encoding undone.
	Body []byte
}

// Fingerprint returns the request's fingerprint and summary, leaving out
// the query parameters and body fields ignore names. A JSON body is read
// with its keys sorted, a form body (application/x-www-form-urlencoded,
// multipart/form-data) as its fields sorted by name, any other body as its
// bytes. redact names the fields whose values the summary hides.
func (r HTTPRequest) Fingerprint(ignore IgnoredFields, redact *ingest.Redactor) (fingerprint, summary string) {
	req := map[string]any{"method": strings.ToUpper(r.Method), "path": r.Path}
	if r.RawQuery != "" {
		if q, err := url.ParseQuery(r.RawQuery); err == nil {
			req["query"] = formTree(q, ignore)
		} else {
			req["query"] = r.RawQuery // not a query Go reads: compared as sent
		}
	}
	body, fields := readBody(r.ContentType, r.Body, ignore)
	if body != nil {
		req["body"] = body
	}
	// readBody bounded the body's depth, so this cannot fail; were it to,
	// the effect would rather have no fingerprint than a wrong one.
	fp, _ := fingerprintOf(KindHTTP, req)
	return fp, httpSummary(strings.ToUpper(r.Method), r.Path, fields, redact)
}

// summaryField is a field of a request as its summary shows it.
type summaryField struct{ name, value string }

// readBody is a body's canonical tree and its first fields for the
// summary (fields is nil for a body read as bytes; a describing field
// then says its type and size).
func readBody(contentType string, body []byte, ignore IgnoredFields) (tree any, fields []summaryField) {
	if len(body) == 0 {
		return nil, nil
	}
	mt, params, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		if v, err := decodeSingleJSON(body); err == nil {
			if stripped, err := withoutIgnored(v, ignore, 0); err == nil {
				return map[string]any{"json": stripped}, jsonFields(stripped)
			}
		}
	case mt == "application/x-www-form-urlencoded":
		if q, err := url.ParseQuery(string(body)); err == nil {
			t := formTree(q, ignore)
			return map[string]any{"form": t}, formFields(t)
		}
	case mt == "multipart/form-data":
		if t, ok := multipartTree(body, params["boundary"], ignore); ok {
			return map[string]any{"form": t}, formFields(t)
		}
	}
	size := strconv.Itoa(len(body)) + " bytes"
	if mt != "" {
		size = mt + ", " + size
	}
	return map[string]any{"type": mt, "sha256": sha256Hex(body)}, []summaryField{{value: "(" + size + ")"}}
}

func decodeSingleJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// withoutIgnored copies a decoded JSON value without the object members
// ignore names, at any depth.
func withoutIgnored(v any, ignore IgnoredFields, depth int) (any, error) {
	if depth > MaxFingerprintDepth {
		return nil, errTooDeep
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if ignore.Ignores(k) {
				continue
			}
			c, err := withoutIgnored(e, ignore, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := withoutIgnored(e, ignore, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	return v, nil
}

// formTree is a form's (or a query's) fields without those ignore names.
// A bracketed name (Stripe's metadata[request_id], items[0][price]) is
// left out when any of its parts is ignored, as a JSON member at any
// depth is. Values keep their order: expand[]=a&expand[]=b is a list.
func formTree(form map[string][]string, ignore IgnoredFields) map[string]any {
	out := make(map[string]any, len(form))
	for k, vs := range form {
		if slices.ContainsFunc(formNameParts(k), ignore.Ignores) {
			continue
		}
		out[k] = slices.Clone(vs)
	}
	return out
}

// formNameParts splits "metadata[order][id]" into metadata, order, id.
func formNameParts(name string) []string {
	return strings.FieldsFunc(name, func(r rune) bool { return r == '[' || r == ']' })
}

// multipartTree reads a multipart/form-data body as form fields: a file
// as its name and a digest of its content. The boundary, random on each
// send, is not part of it.
func multipartTree(body []byte, boundary string, ignore IgnoredFields) (map[string]any, bool) {
	if boundary == "" {
		return nil, false
	}
	form := map[string][]string{}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for n := 0; ; n++ {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || n >= maxFormParts {
			return nil, false
		}
		content, err := io.ReadAll(p) // within body, already in memory
		if err != nil {
			return nil, false
		}
		v := string(content)
		if p.FileName() != "" {
			v = "file " + p.FileName() + " sha256:" + sha256Hex(content)
		}
		form[p.FormName()] = append(form[p.FormName()], v)
	}
	return formTree(form, ignore), true
}

// jsonFields are a JSON body's scalar fields by dotted path, in the
// canonical order (keys sorted, arrays in order), the first
// summaryFields+1 of them: one more says there are more.
func jsonFields(v any) []summaryField {
	var out []summaryField
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if len(out) > summaryFields {
			return
		}
		join := func(k string) string {
			if prefix == "" {
				return k
			}
			return prefix + "." + k
		}
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(join(k), x[k])
			}
		case []any:
			for i, e := range x {
				walk(join(strconv.Itoa(i)), e)
			}
		case nil:
			out = append(out, summaryField{prefix, "null"})
		case string:
			out = append(out, summaryField{prefix, x})
		default:
			out = append(out, summaryField{prefix, fmt.Sprint(x)})
		}
	}
	walk("", v)
	return out
}

// formFields are a form's fields sorted by name, repeated values joined
// by commas, the first summaryFields+1 of them.
func formFields(form map[string]any) []summaryField {
	var out []summaryField
	for _, k := range slices.Sorted(maps.Keys(form)) {
		if len(out) > summaryFields {
			break
		}
		out = append(out, summaryField{k, strings.Join(form[k].([]string), ",")})
	}
	return out
}

// httpSummary says "POST /v1/charges amount=2000 currency=usd
// customer=cus_123": the first fields in the canonical order, secrets
// hidden, values clipped, "…" when there are more.
func httpSummary(method, path string, fields []summaryField, redact *ingest.Redactor) string {
	parts := []string{method, clipText(oneLine(path), 80)}
	for i, f := range fields {
		if i == summaryFields {
			parts = append(parts, "…")
			break
		}
		if f.name == "" {
			parts = append(parts, f.value)
			continue
		}
		v := f.value
		if redact.Matches(f.name) {
			v = ingest.RedactedValue
		}
		v = clipText(oneLine(v), summaryValueBytes)
		if v == "" || strings.ContainsAny(v, ` '"=`) {
			v = strconv.Quote(v)
		}
		parts = append(parts, clipText(oneLine(f.name), summaryValueBytes)+"="+v)
	}
	return ClipSummary(strings.Join(parts, " "))
}

// --- Webhooks ---

// WebhookFingerprint is the fingerprint of the values a webhook mapping
// names, by the payload path each was read at. ok is false when a value
// is nested deeper than MaxFingerprintDepth: then there is none.
func WebhookFingerprint(values map[string]any) (fingerprint string, ok bool) {
	for _, v := range values {
		if tooDeep(v, 0) {
			return "", false
		}
	}
	fp, err := fingerprintOf(KindWebhook, values)
	return fp, err == nil
}

// tooDeep reports whether v nests deeper than MaxFingerprintDepth.
func tooDeep(v any, depth int) bool {
	if depth > MaxFingerprintDepth {
		return true
	}
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if tooDeep(e, depth+1) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if tooDeep(e, depth+1) {
				return true
			}
		}
	}
	return false
}
