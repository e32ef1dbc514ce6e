package views

import (
	"encoding/base32"
	"fmt"
	"net/url"
	"strings"

	"github.com/oncetrace/oncetrace/trace"
)

// Every id reaches a URL or an HTML id attribute through this file, and
// any printable id must come back unchanged: Temporal workflow ids look
// like "billing/2026-06;run=3", and ids such as "..", "50%", "q?x=1" or
// "frag#1" are accepted at ingest.
//
// An id travels in a path segment, escaped with url.PathEscape, when the
// segment survives every hop between the user and the server: it is not
// "." or ".." (browsers drop those segments, even written %2E%2E, and so
// do proxies), and it holds none of / \ ; % ? # NUL, whose escapes
// proxies refuse or decode (Traefik answers 400 to %2F %5C %00 %3B %25
// %3F %23 by default; Apache answers 404 to %2F). Any other id travels in
// the query string of a twin route (/execution?execution_id=...,
// /key?idempotency_key=...), which nothing on the way rewrites. The server
// accepts both forms for every id, so a link written by hand with
// url.PathEscape works too when no proxy is in the way.

// PathSafeID reports whether an id travels in a path segment; false means
// the query form.
func PathSafeID(id string) bool {
	return id != "" && id != "." && id != ".." && !strings.ContainsAny(id, "/\\;%?#\x00")
}

// idURL is path+"/"+escaped id+sub, or, for an id a path cannot carry,
// queryPath+sub with the id as the param query parameter; q is appended
// either way.
func idURL(path, queryPath, param, id, sub string, q url.Values) string {
	u := path + "/" + url.PathEscape(id) + sub
	if !PathSafeID(id) {
		u = queryPath + sub
		q = cloneValues(q)
		q.Set(param, id)
	}
	if len(q) == 0 {
		return u
	}
	return u + "?" + q.Encode()
}

func cloneValues(q url.Values) url.Values {
	out := make(url.Values, len(q)+1)
	for k, v := range q {
		out[k] = v
	}
	return out
}

func executionURL(id, sub string, q url.Values) string {
	return idURL("/executions", "/execution", "execution_id", id, sub, q)
}

// ExecutionURL is the permalink of an execution's page.
func ExecutionURL(id string) string { return executionURL(id, "", nil) }

// ExecutionAPIURL is the JSON twin of an execution's page.
func ExecutionAPIURL(id string) string {
	return idURL("/api/v1/executions", "/api/v1/execution", "execution_id", id, "", nil)
}

// AttemptURL is the permalink of an attempt's detail.
func AttemptURL(executionID, stepID string, n int) string {
	return executionURL(executionID, "/attempt", url.Values{"step": {stepID}, "n": {fmt.Sprint(n)}})
}

// EffectURL is the permalink of an effect's detail.
func EffectURL(executionID, provider, id string) string {
	return executionURL(executionID, "/effect", url.Values{"provider": {provider}, "id": {id}})
}

// KeyURL is the page of one idempotency key.
func KeyURL(key string) string { return idURL("/keys", "/key", "idempotency_key", key, "", nil) }

// KeyAPIURL is the JSON twin of a key's page.
func KeyAPIURL(key string) string {
	return idURL("/api/v1/keys", "/api/v1/key", "idempotency_key", key, "", nil)
}

// OutboxURL lists one provider's effects on the outbox page.
func OutboxURL(provider string) string {
	return "/outbox?" + url.Values{"provider": {provider}}.Encode()
}

// NewFindingViewAway is NewFindingView for a page other than the
// execution's (the key page): the links to attempts and effects lead to
// their places on the execution page, or, for an effect of no execution,
// to its provider's orphans.
func NewFindingViewAway(f trace.Finding) FindingView {
	v := NewFindingView(f)
	for i, l := range v.Links {
		if !strings.HasPrefix(l.Href, "#") {
			continue
		}
		if f.ExecutionID != "" {
			v.Links[i].Href = ExecutionURL(f.ExecutionID) + l.Href
			continue
		}
		for _, e := range f.Effects {
			if l.Href == "#"+EffectAnchor(e.Provider, e.ID) {
				v.Links[i].Href = OrphanURL(e.Provider)
			}
		}
	}
	return v
}

// AttemptAnchor is the HTML id of an attempt in the timeline.
func AttemptAnchor(stepID string, n int) string { return domID("a", stepID, fmt.Sprint(n)) }

// EffectAnchor is the HTML id of an effect in the timeline.
func EffectAnchor(provider, id string) string { return domID("e", provider, id) }

// domID turns arbitrary ids into stable, valid and unique HTML ids: each
// part in lowercase unpadded base32 (a-z, 2-7), the parts joined by "-",
// which base32 never writes. Two different inputs never share an id, as
// they could under a hash a hostile client can aim at; the id needs no
// escaping in a fragment, an attribute or a CSS selector.
func domID(prefix string, parts ...string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, p := range parts {
		b.WriteByte('-')
		b.WriteString(strings.ToLower(anchorEncoding.EncodeToString([]byte(p))))
	}
	return b.String()
}

var anchorEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)
