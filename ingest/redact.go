package ingest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Redaction (docs/security.md, "Redaction"): values of names that name
// secrets are replaced by RedactedValue before an event is stored, in
// attempt arguments and results at any depth, in execution labels, and,
// inside any stored string (those values, and the text fields name, error,
// target, summary and http_url), the user info of URLs, the values of
// secret-named query parameters and name=value pairs, of quoted
// "name": "value" pairs, of "Name: value" header lines and the credential
// after "Bearer". The raw event log holds the redacted form only, and an
// event's derived id is computed from it.

// RedactedValue replaces a secret.
const RedactedValue = "[redacted]"

// DefaultRedactKeys are the names redacted unless told otherwise; each
// matches as the Redactor's rule says (so "token" masks access_token and
// X-Amz-Security-Token). docs/security.md lists them with examples.
var DefaultRedactKeys = []string{
	"password", "passwords", "passwd", "pwd", "passphrase",
	"secret", "secrets", "token", "bearer", "jwt",
	"authorization", "auth", "credential", "credentials",
	"api_key", "apikey", "access_key", "private_key", "signing_key", "encryption_key",
	"cookie", "cookies", "session_id", "sessionid", "session_key", "jsessionid", "phpsessid",
	"signature", "sig", "otp", "totp", "cvv", "cvc",
}

// qualifierWords name a property of a secret, not the secret: a name in
// which one of them follows the secret's words (token_count,
// llm.token_count.prompt, password_length, auth_type, token_url,
// session_id_expires_at) holds a count, a kind, a place or a time.
var qualifierWords = map[string]bool{
	"count": true, "counts": true, "limit": true, "limits": true, "length": true, "len": true, "size": true,
	"usage": true, "used": true, "type": true, "method": true, "algorithm": true, "version": true, "name": true,
	"url": true, "uri": true, "endpoint": true, "expiry": true, "expires": true, "expiration": true, "ttl": true, "at": true,
}

// Redactor decides which names name secrets. Names and terms are split
// into lowercase parts at every character that is not a letter or a
// digit, where camelCase changes case, and between letters and digits. A
// name matches a term when the term's parts appear among the name's parts
// in order and next to each other, and no part after them is one of
// qualifierWords. So "token" matches access_token, X-Auth-Token and
// refreshToken but not max_tokens, tokenizer or token_count; "api_key"
// matches x-api-key and apiKey. A nil Redactor redacts nothing.
type Redactor struct {
	terms []string   // as configured
	words [][]string // each term's parts
}

// NewRedactor returns a Redactor for the terms, or nil when there are none.
func NewRedactor(terms []string) *Redactor {
	r := &Redactor{}
	for _, term := range terms {
		w := keyWords(term)
		if len(w) == 0 || slices.ContainsFunc(r.words, func(x []string) bool { return slices.Equal(x, w) }) {
			continue
		}
		r.terms = append(r.terms, strings.TrimSpace(term))
		r.words = append(r.words, w)
	}
	if len(r.words) == 0 {
		return nil
	}
	return r
}

// ParseRedactKeys reads a --redact value: comma-separated terms; "" for
// none; a value starting with "+" adds its terms to DefaultRedactKeys.
func ParseRedactKeys(s string) ([]string, error) {
	terms := []string{}
	if rest, ok := strings.CutPrefix(strings.TrimSpace(s), "+"); ok {
		terms, s = slices.Clone(DefaultRedactKeys), rest
	}
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if len(keyWords(t)) == 0 {
			return nil, fmt.Errorf("%q: a key needs a letter or a digit", t)
		}
		terms = append(terms, t)
	}
	return terms, nil
}

// Terms returns the configured terms.
func (r *Redactor) Terms() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.terms)
}

// Matches reports whether a name names a secret.
func (r *Redactor) Matches(key string) bool {
	if r == nil || key == "" {
		return false
	}
	// Most names contain no term's first part even as a substring: they
	// need no splitting (which allocates).
	candidate := false
	for _, term := range r.words {
		if containsFold(key, term[0]) || !isASCII(term[0]) {
			candidate = true
			break
		}
	}
	if !candidate {
		return false
	}
	words := keyWords(key)
	for _, term := range r.words {
		for i := 0; i+len(term) <= len(words); i++ {
			if slices.Equal(words[i:i+len(term)], term) && !slices.ContainsFunc(words[i+len(term):], func(w string) bool { return qualifierWords[w] }) {
				return true
			}
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// keyWords splits a name into lowercase parts (see Redactor).
func keyWords(key string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	runes := []rune(key)
	for i, r := range runes {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if len(cur) > 0 {
			prev := runes[i-1]
			nextLower := i+1 < len(runes) && unicode.IsLower(runes[i+1])
			switch {
			case unicode.IsDigit(r) != unicode.IsDigit(prev):
				flush() // password2, s3_key, oauth2Token
			case unicode.IsUpper(r) && (unicode.IsLower(prev) || (unicode.IsUpper(prev) && nextLower)):
				flush() // fooBar splits before B; HTTPServer before the S
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

// Value returns v with the values of matching names replaced at any depth,
// and the secrets inside its strings (Text), and whether anything was. It
// copies only what it changes; v is a decoded JSON value (maps, slices,
// strings, json.Number, bools, nil), or one of the shapes OTLP attributes
// decode to. A null or a boolean under a matching name is left as it is:
// it hides nothing (signature_required: true).
func (r *Redactor) Value(v any) (any, bool) {
	if r == nil {
		return v, false
	}
	// Unchanged values are returned as the interface they came in, so
	// that nothing is copied or boxed again.
	switch x := v.(type) {
	case string:
		if out, changed := r.Text(x); changed {
			return out, true
		}
		return v, false
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			var ne any
			var changed bool
			if hidesSomething(e) && r.Matches(k) {
				ne, changed = RedactedValue, true
			} else {
				ne, changed = r.Value(e)
			}
			if !changed {
				continue
			}
			if out == nil {
				out = maps.Clone(x)
			}
			out[k] = ne
		}
		if out == nil {
			return v, false
		}
		return out, true
	case []any:
		var out []any
		for i, e := range x {
			ne, changed := r.Value(e)
			if !changed {
				continue
			}
			if out == nil {
				out = slices.Clone(x)
			}
			out[i] = ne
		}
		if out == nil {
			return v, false
		}
		return out, true
	case map[string]json.RawMessage, json.RawMessage:
		// Raw JSON (OTLP string attributes holding JSON): decoded, redacted,
		// and returned decoded when anything was.
		raw, err := json.Marshal(x)
		if err != nil {
			return v, false
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var decoded any
		if dec.Decode(&decoded) != nil {
			return v, false
		}
		out, changed := r.Value(decoded)
		if !changed {
			return v, false
		}
		return out, true
	}
	return v, false
}

// hidesSomething reports whether a value under a secret's name is worth
// masking: not a null, a boolean, or a value masked already.
func hidesSomething(v any) bool {
	switch v.(type) {
	case nil, bool:
		return false
	}
	return v != RedactedValue
}

// Text returns s with the secrets it carries replaced, and whether any
// were; everything else stays byte for byte. It masks
//
//   - the user info of a URL (scheme://user:pass@host): user and password
//     each, or a lone user name (often a token) whole;
//   - the value of a name=value pair whose name matches, where the name
//     starts s or follows ?, &, ;, a space, a quote, ( , or {: query
//     parameters in URLs, relative URLs and query strings, form bodies,
//     cookies, and such pairs in prose; the name is URL-unescaped first;
//   - the value of a "name": value or 'name': value pair whose name
//     matches (JSON or a Python dict inside a string), a string or a
//     number, not an object, an array or a literal;
//   - the value of a "Name: value" line whose name matches (HTTP and mail
//     headers), to the end of the line;
//   - the credential after "Bearer " (any case): eight or more token
//     characters, at least one of them not a letter.
func (r *Redactor) Text(s string) (string, bool) {
	if r == nil || len(s) < 3 || (!strings.ContainsAny(s, "=:@") && !containsFold(s, "bearer")) {
		return s, false
	}
	var spans []textSpan
	spans = r.userInfoSpans(s, spans)
	spans = r.pairSpans(s, spans)
	spans = r.headerLineSpans(s, spans)
	spans = bearerSpans(s, spans)
	if len(spans) == 0 {
		return s, false
	}
	slices.SortFunc(spans, func(a, b textSpan) int { return cmp.Compare(a.start, b.start) })
	var out strings.Builder
	last, changed := 0, false
	for i := 0; i < len(spans); i++ {
		sp := spans[i]
		for i+1 < len(spans) && spans[i+1].start <= sp.end { // overlapping spans are one
			sp.end = max(sp.end, spans[i+1].end)
			i++
		}
		if sp.start < last || sp.start == sp.end || s[sp.start:sp.end] == RedactedValue {
			continue
		}
		out.WriteString(s[last:sp.start])
		out.WriteString(RedactedValue)
		last, changed = sp.end, true
	}
	if !changed {
		return s, false
	}
	out.WriteString(s[last:])
	return out.String(), true
}

// textSpan is a secret's bytes s[start:end] in a string Text masks.
type textSpan struct{ start, end int }

// userInfoSpans finds the user info of every scheme://user:pass@host.
func (r *Redactor) userInfoSpans(s string, spans []textSpan) []textSpan {
	for off := 0; ; {
		i := strings.Index(s[off:], "://")
		if i < 0 {
			return spans
		}
		i += off
		off = i + 3
		if i == 0 || !isSchemeByte(s[i-1]) {
			continue
		}
		start := off
		end := start
		for end < len(s) && !strings.ContainsRune("/?#\"'<> \t\r\n", rune(s[end])) {
			end++
		}
		at := strings.LastIndexByte(s[start:end], '@')
		if at < 0 {
			continue
		}
		at += start
		if colon := strings.IndexByte(s[start:at], ':'); colon >= 0 {
			spans = append(spans, textSpan{start, start + colon}, textSpan{start + colon + 1, at})
		} else {
			spans = append(spans, textSpan{start, at})
		}
	}
}

func isSchemeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

// isNameByte: what a parameter's or a key's name may be made of (percent
// escapes and brackets included: access%5Ftoken, auth[token]).
func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '%' || c == '[' || c == ']'
}

// pairSpans finds the values of name=value pairs, and of quoted
// "name": value pairs, whose name matches.
func (r *Redactor) pairSpans(s string, spans []textSpan) []textSpan {
	for i := 0; i < len(s); i++ {
		c := s[i]
		quote := byte(0)
		if c == '"' || c == '\'' {
			quote = c
		} else if !isNameByte(c) || (i > 0 && !strings.ContainsRune("?&; \t\r\n\"'({,", rune(s[i-1]))) {
			continue
		}
		start := i
		if quote != 0 {
			start++
		}
		end := start
		for end < len(s) && isNameByte(s[end]) {
			end++
		}
		if end == start || end == len(s) {
			i = max(i, end-1)
			continue
		}
		valueAt := -1
		switch {
		case quote == 0 && s[end] == '=':
			valueAt = end + 1
		case quote != 0 && s[end] == quote:
			j := end + 1
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
				j++
			}
			if j < len(s) && (s[j] == ':' || s[j] == '=') {
				valueAt = j + 1
				for valueAt < len(s) && (s[valueAt] == ' ' || s[valueAt] == '\t') {
					valueAt++
				}
			}
		}
		if valueAt < 0 {
			i = max(i, end-1)
			continue
		}
		name := s[start:end]
		if strings.IndexByte(name, '%') >= 0 {
			if unescaped, err := url.QueryUnescape(name); err == nil {
				name = unescaped
			}
		}
		vs, ve := pairValue(s, valueAt, quote != 0)
		if vs < ve && r.Matches(name) {
			spans = append(spans, textSpan{vs, ve})
		}
		i = max(i, valueAt-1)
	}
	return spans
}

// pairValue is the value that starts at i: a quoted string's contents, or
// a bare value up to the next separator. A bare value of a name=value
// pair ends where a URL's or a cookie's next parameter starts, or at a
// space or a quote; one of a quoted pair ("name": value) is a number,
// ending as JSON's do, and not a literal (true, false, null), an object
// or an array, whose own names are checked one by one.
func pairValue(s string, i int, quotedPair bool) (start, end int) {
	if i >= len(s) {
		return i, i
	}
	if strings.HasPrefix(s[i:], RedactedValue) {
		return i, i + len(RedactedValue) // masked already
	}
	if q := s[i]; q == '"' || q == '\'' {
		j := i + 1
		for j < len(s) && s[j] != q {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		return i + 1, min(j, len(s))
	}
	separators := "&#; \t\r\n\"'<>"
	if quotedPair {
		separators = ",}] \t\r\n"
	}
	j := i
	for j < len(s) && !strings.ContainsRune(separators, rune(s[j])) {
		j++
	}
	if quotedPair {
		switch v := s[i:j]; {
		case v == "true" || v == "false" || v == "null", strings.HasPrefix(v, "{"), strings.HasPrefix(v, "["):
			return i, i
		}
	}
	return i, j
}

// headerLineSpans finds the values of "Name: value" lines whose name
// matches.
func (r *Redactor) headerLineSpans(s string, spans []textSpan) []textSpan {
	for line := 0; line < len(s); {
		next := strings.IndexByte(s[line:], '\n')
		end := len(s)
		if next >= 0 {
			end = line + next
		}
		l := s[line:end]
		n := 0
		for n < len(l) && (isNameByte(l[n]) && l[n] != '%') {
			n++
		}
		if n > 0 && n+1 < len(l) && l[n] == ':' && (l[n+1] == ' ' || l[n+1] == '\t') && r.Matches(l[:n]) {
			vs := n + 1
			for vs < len(l) && (l[vs] == ' ' || l[vs] == '\t') {
				vs++
			}
			ve := len(strings.TrimRight(l, "\r"))
			if vs < ve {
				spans = append(spans, textSpan{line + vs, line + ve})
			}
		}
		if next < 0 {
			break
		}
		line = end + 1
	}
	return spans
}

// bearerSpans finds the credentials after "Bearer ".
func bearerSpans(s string, spans []textSpan) []textSpan {
	for i := 0; i+7 < len(s); i++ {
		if s[i]|0x20 != 'b' || !strings.EqualFold(s[i:i+6], "bearer") || (i > 0 && isNameByte(s[i-1])) || (s[i+6] != ' ' && s[i+6] != '\t') {
			continue
		}
		start := i + 7
		for start < len(s) && (s[start] == ' ' || s[start] == '\t') {
			start++
		}
		end, notLetter := start, false
		for end < len(s) && isToken68Byte(s[end]) {
			if c := s[end] | 0x20; c < 'a' || c > 'z' {
				notLetter = true
			}
			end++
		}
		if end-start >= 8 && notLetter {
			spans = append(spans, textSpan{start, end})
		}
		i = end - 1
	}
	return spans
}

func isToken68Byte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/=", c) >= 0
}

// textFields are the free-text fields of an event that Text masks: they
// may quote a URL or a request (an error message that names the URL that
// failed, with its api_key).
var textFields = []string{"name", "error", "target", "summary", "http_url"}

// redactEvent redacts, in place, the fields of a decoded event that may
// carry secrets: args, result, labels and the text fields.
func (r *Redactor) redactEvent(obj map[string]any) {
	if r == nil {
		return
	}
	for _, name := range []string{"args", "result"} {
		if v, ok := obj[name]; ok {
			if out, changed := r.Value(v); changed {
				obj[name] = out
			}
		}
	}
	// Labels are strings: a value that is not stays, so that validation
	// refuses it whatever its key.
	if labels, ok := obj["labels"].(map[string]any); ok {
		var out map[string]any
		for k, v := range labels {
			s, isString := v.(string)
			if !isString {
				continue
			}
			masked, changed := RedactedValue, s != RedactedValue && r.Matches(k)
			if !changed {
				masked, changed = r.Text(s)
			}
			if changed {
				if out == nil {
					out = maps.Clone(labels)
				}
				out[k] = masked
			}
		}
		if out != nil {
			obj["labels"] = out
		}
	}
	for _, name := range textFields {
		if s, ok := obj[name].(string); ok {
			if out, changed := r.Text(s); changed {
				obj[name] = out
			}
		}
	}
}

// redactArgs redacts a tool call's arguments before its step identity is
// derived from them, so that the step id is no hash of a secret.
func (r *Redactor) redactArgs(args any) any {
	out, _ := r.Value(args)
	return out
}
