package views_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/views"
)

var urlTestIDs = []string{
	"exec_01H8", "step-4", ".", "..", "...", ".%2e", "%2E%2E", "a/b", "/x", "x/", `a\b`, "billing/2026-06;run=3",
	"a;b", "50%", "%2F", "q?x=1", "frag#1", "a b", "ünïcødé", "a+b", "a&b=c", `"quote'`, "<b>x</b>", "~x",
	"invoice\u202egnp.exe", "a,b", "a:b@c", "=", "-", "execution_id=x",
	strings.Repeat("ü/;%?#", 256/8),
}

// routeID reads a URL back as the server does: the id from the path
// segment after prefix, or from the query parameter param of the twin
// route.
func routeID(t *testing.T, u, prefix, sub, twin, param string) (id string, q url.Values) {
	t.Helper()
	ref, err := url.Parse(u)
	if err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	q = ref.Query()
	path := ref.EscapedPath()
	switch {
	case path == twin+sub:
		vs := q[param]
		if len(vs) != 1 {
			t.Fatalf("%s: got %d %s parameters, want 1", u, len(vs), param)
		}
		return vs[0], q
	case strings.HasPrefix(path, prefix+"/") && strings.HasSuffix(path, sub):
		seg := strings.TrimSuffix(strings.TrimPrefix(path, prefix+"/"), sub)
		if strings.Contains(seg, "/") {
			t.Fatalf("%s: the id spans more than one path segment", u)
		}
		id, err := url.PathUnescape(seg)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		return id, q
	}
	t.Fatalf("%s: want %s/{id}%s or %s%s?%s=", u, prefix, sub, twin, sub, param)
	return "", nil
}

// proxySafe: no dot segment (browsers and proxies remove them, %2E too)
// and none of the escapes proxies refuse by default.
func proxySafe(t *testing.T, u string) {
	t.Helper()
	ref, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	path := strings.ToLower(ref.EscapedPath())
	for _, seg := range strings.Split(path, "/") {
		switch seg {
		case ".", "..", "%2e", ".%2e", "%2e.", "%2e%2e":
			t.Errorf("%s: dot segment %q", u, seg)
		}
	}
	for _, esc := range []string{"%2f", "%5c", "%00", "%3b", "%25", "%3f", "%23"} {
		if strings.Contains(path, esc) {
			t.Errorf("%s: %s in the path", u, esc)
		}
	}
	if strings.ContainsAny(ref.RawQuery, "#; ") || ref.Fragment != "" {
		t.Errorf("%s: an unescaped # ; or space in the query", u)
	}
}

func TestURLsRoundTripAnyID(t *testing.T) {
	for _, id := range urlTestIDs {
		other := "other " + id // a second id, so a mix-up of the two shows
		for _, c := range []struct {
			u                        string
			prefix, sub, twin, param string
			want                     map[string]string
		}{
			{u: views.ExecutionURL(id), prefix: "/executions", twin: "/execution", param: "execution_id"},
			{u: views.StepsURL(id, "attempts", "desc"), prefix: "/executions", twin: "/execution", param: "execution_id", want: map[string]string{"view": "steps", "sort": "attempts", "dir": "desc"}},
			{u: views.ExecutionAPIURL(id), prefix: "/api/v1/executions", twin: "/api/v1/execution", param: "execution_id"},
			{u: views.AttemptURL(id, other, 3), prefix: "/executions", sub: "/attempt", twin: "/execution", param: "execution_id",
				want: map[string]string{"step": other, "n": "3"}},
			{u: views.EffectURL(id, other, other+"!"), prefix: "/executions", sub: "/effect", twin: "/execution", param: "execution_id",
				want: map[string]string{"provider": other, "id": other + "!"}},
			{u: views.KeyURL(id), prefix: "/keys", twin: "/key", param: "idempotency_key"},
			{u: views.KeyAPIURL(id), prefix: "/api/v1/keys", twin: "/api/v1/key", param: "idempotency_key"},
		} {
			proxySafe(t, c.u)
			got, q := routeID(t, c.u, c.prefix, c.sub, c.twin, c.param)
			if got != id {
				t.Errorf("%s: got id %q, want %q", c.u, got, id)
			}
			for k, v := range c.want {
				if q.Get(k) != v {
					t.Errorf("%s: got %s=%q, want %q", c.u, k, q.Get(k), v)
				}
			}
			if views.PathSafeID(id) != strings.HasPrefix(c.u, c.prefix+"/") {
				t.Errorf("%s: PathSafeID(%q) = %v, but the URL uses the other form", c.u, id, views.PathSafeID(id))
			}
		}
		if u := views.OutboxURL(id); mustQuery(t, u).Get("provider") != id {
			t.Errorf("OutboxURL(%q) = %s: the provider does not come back", id, u)
		}
	}
	// An ordinary id keeps its readable path.
	if got, want := views.ExecutionURL("exec_01H8"), "/executions/exec_01H8"; got != want {
		t.Errorf("ExecutionURL: got %s, want %s", got, want)
	}
	if got, want := views.ExecutionURL("ünïcødé a+b"), "/executions/%C3%BCn%C3%AFc%C3%B8d%C3%A9%20a+b"; got != want {
		t.Errorf("ExecutionURL: got %s, want %s", got, want)
	}
}

func mustQuery(t *testing.T, u string) url.Values {
	t.Helper()
	ref, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return ref.Query()
}

// Anchors are valid HTML ids and CSS identifiers, and two different
// inputs never share one: not even the pairs a separator or a hash could
// confuse.
func TestAnchorsAreUniqueAndPlain(t *testing.T) {
	plain := regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	seen := map[string]string{}
	add := func(anchor, what string) {
		if !plain.MatchString(anchor) {
			t.Errorf("%s: anchor %q, want [a-z][a-z0-9-]*", what, anchor)
		}
		if prev, ok := seen[anchor]; ok && prev != what {
			t.Errorf("anchor %q of %s is also the anchor of %s", anchor, what, prev)
		}
		seen[anchor] = what
	}
	for _, id := range append(urlTestIDs, "", "a-1", "a", "1", "a\x00", "a\x001") {
		for n := 1; n <= 12; n++ {
			add(views.AttemptAnchor(id, n), "attempt "+id+" #"+string(rune('0'+n)))
		}
		add(views.EffectAnchor(id, "x"), "effect "+id+"/x")
		add(views.EffectAnchor("x", id), "effect x/"+id)
		add(views.EffectAnchor(id, id), "effect "+id+"/"+id)
	}
	if got, again := views.AttemptAnchor("step-4", 2), views.AttemptAnchor("step-4", 2); got != again {
		t.Errorf("AttemptAnchor is not stable: %s then %s", got, again)
	}
}
