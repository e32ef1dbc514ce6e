package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Redaction (docs/security.md, "Redaction"): values of keys that name
// secrets are replaced by RedactedValue before an event is stored, in
// attempt arguments and results at any depth, in execution labels, and in
// the query string and user info of HTTP URLs. The raw event log holds the
// redacted form only, and an event's derived id is computed from it.

// RedactedValue replaces a secret.
const RedactedValue = "[redacted]"

// DefaultRedactKeys are the keys redacted unless told otherwise.
var DefaultRedactKeys = []string{"password", "secret", "token", "authorization", "api_key", "apikey", "cookie"}

// Redactor decides which keys name secrets. A key matches a term when the
// term's words appear, in order and next to each other, among the key's
// words: keys and terms are split into lowercase words at every character
// that is not a letter or a digit and where camelCase changes case. So
// "token" matches access_token, X-Auth-Token and refreshToken but not
// max_tokens or tokenizer; "api_key" matches x-api-key and apiKey. A nil
// Redactor redacts nothing.
type Redactor struct {
	terms []string   // as configured
	words [][]string // each term's words
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

// Matches reports whether a key names a secret.
func (r *Redactor) Matches(key string) bool {
	if r == nil {
		return false
	}
	// Most keys contain no term's words even as substrings: they need no
	// splitting (which allocates).
	lower := strings.ToLower(key)
	candidate := false
	for _, term := range r.words {
		if strings.Contains(lower, term[0]) {
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
			if slices.Equal(words[i:i+len(term)], term) {
				return true
			}
		}
	}
	return false
}

// keyWords splits a key into lowercase words (see Redactor).
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
		if unicode.IsUpper(r) && len(cur) > 0 {
			prev := runes[i-1]
			nextLower := i+1 < len(runes) && unicode.IsLower(runes[i+1])
			// fooBar splits before B; HTTPServer splits before the S.
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

// Value returns v with the values of matching keys replaced at any depth,
// and whether anything was. It copies only what it changes; v is a decoded
// JSON value (maps, slices, strings, json.Number, bools, nil), or one of
// the shapes OTLP attributes decode to. A null is left as it is: it hides
// nothing.
func (r *Redactor) Value(v any) (any, bool) {
	if r == nil {
		return v, false
	}
	// Unchanged values are returned as the interface they came in, so
	// that nothing is copied or boxed again.
	switch x := v.(type) {
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			var ne any
			var changed bool
			if e != nil && e != RedactedValue && r.Matches(k) {
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

// URL returns u with the values of matching query parameters and its
// user info replaced. A string that does not parse as a
// URL is returned as it is.
func (r *Redactor) URL(u string) (string, bool) {
	if r == nil || u == "" {
		return u, false
	}
	changed := false
	// Credentials in the authority (user:password@, or a token as the
	// user name) go whole, as OpenTelemetry's url.full asks.
	if scheme, rest, ok := strings.Cut(u, "://"); ok {
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
			masked := RedactedValue
			if strings.Contains(rest[:at], ":") {
				masked += ":" + RedactedValue
			}
			if rest[:at] != masked {
				u = scheme + "://" + masked + rest[at:]
				changed = true
			}
		}
	}
	base, query, hasQuery := strings.Cut(u, "?")
	if !hasQuery {
		return u, changed
	}
	query, fragment, hasFragment := strings.Cut(query, "#")
	params := strings.Split(query, "&")
	for i, p := range params {
		k, v, hasValue := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		if hasValue && v != RedactedValue && r.Matches(name) {
			params[i] = k + "=" + RedactedValue
			changed = true
		}
	}
	if !changed {
		return u, false
	}
	out := base + "?" + strings.Join(params, "&")
	if hasFragment {
		out += "#" + fragment
	}
	return out, true
}

// redactEvent redacts, in place, the fields of a decoded event that may
// carry secrets: args, result, labels and http_url.
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
			if s, isString := v.(string); isString && s != RedactedValue && r.Matches(k) {
				if out == nil {
					out = maps.Clone(labels)
				}
				out[k] = RedactedValue
			}
		}
		if out != nil {
			obj["labels"] = out
		}
	}
	if s, ok := obj["http_url"].(string); ok && utf8.ValidString(s) {
		if out, changed := r.URL(s); changed {
			obj["http_url"] = out
		}
	}
}

// redactArgs redacts a tool call's arguments before its step identity is
// derived from them, so that the step id is no hash of a secret.
func (r *Redactor) redactArgs(args any) any {
	out, _ := r.Value(args)
	return out
}
