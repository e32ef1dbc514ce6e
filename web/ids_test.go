package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"

	"github.com/oncetrace/oncetrace/views"
)

// nastyID is an id that a URL, a browser, a proxy or an HTML attribute
// could mangle. mayRefuse marks an id ingest may refuse (by index, naming
// the field): then nothing of it may be stored, rather than stored and
// unreachable.
type nastyID struct {
	name      string
	id        string
	mayRefuse bool
}

func nastyIDs() []nastyID {
	// 256 bytes, the limit: reserved characters, escapes and non-ASCII.
	long := "long/" + strings.Repeat("ü;%2F?#.. ", 30)
	for len(long) > 254 { // room for two ASCII bytes, see dupEffectID
		_, size := utf8.DecodeLastRuneInString(long)
		long = long[:len(long)-size]
	}
	long += strings.Repeat("x", 256-len(long))
	return []nastyID{
		{name: "dotdot", id: ".."},
		{name: "dot", id: "."},
		{name: "three dots", id: "..."},
		{name: "escaped dotdot", id: ".%2e"},
		{name: "slash", id: "a/b"},
		{name: "leading slash", id: "/x"},
		{name: "trailing slash", id: "x/"},
		{name: "backslash", id: `a\b`},
		{name: "temporal workflow id", id: "billing/2026-06;run=3"},
		{name: "semicolon", id: "a;b"},
		{name: "percent", id: "50%"},
		{name: "escape", id: "%2F"},
		{name: "question mark", id: "q?x=1"},
		{name: "hash", id: "frag#1"},
		{name: "space", id: "a b"},
		{name: "non-ASCII", id: "ünïcødé"},
		{name: "plus", id: "a+b"},
		{name: "ampersand", id: "a&b=c"},
		{name: "quotes", id: `"quote'`},
		{name: "markup", id: "<b>x</b>"},
		{name: "tilde", id: "~x"},
		{name: "right-to-left override", id: "invoice\u202egnp.exe", mayRefuse: true},
		{name: "256 bytes", id: long},
	}
}

// dupEffectID is the id of the second effect: id+"#2", within 256 bytes.
func dupEffectID(id string) string {
	if len(id)+2 > 256 {
		id = id[:254]
	}
	return id + "#2"
}

// idEvents are one execution whose every id is id: a step that timed out
// and was retried, both attempts sending key id to provider id, and two
// effects (id and dupEffectID(id)) under that key, a duplicate, so the
// page has findings, attempts, effects and key links to follow.
func idEvents(id string) []map[string]any {
	at := func(ms int) string {
		return time.Date(2026, 6, 30, 14, 2, 11, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano)
	}
	attempt := func(n int, start, end int, outcome string) map[string]any {
		return map[string]any{"type": "attempt", "execution_id": id, "step_id": id, "attempt": n,
			"tool": "send_invoice_email", "effect": "write", "provider": id, "idempotency_key": id, "worker": "pid-1",
			"args": map[string]any{"to": "jordan@acme.dev"}, "started_at": at(start), "ended_at": at(end), "outcome": outcome}
	}
	effect := func(effectID string, ms int) map[string]any {
		return map[string]any{"type": "effect", "provider": id, "effect_id": effectID, "idempotency_key": id,
			"execution_id": id, "step_id": id, "target": "jordan@acme.dev", "at": at(ms)}
	}
	return []map[string]any{
		{"type": "execution", "execution_id": id, "name": "ids-test", "status": "completed", "started_at": at(0), "ended_at": at(5000)},
		attempt(1, 100, 1100, "timeout"),
		attempt(2, 1200, 1300, "ok"),
		effect(id, 200),
		effect(dupEffectID(id), 1250),
	}
}

// postIDEvents posts the events of one id; it reports whether they were
// stored (all of them), or refused (all of them, each naming its field).
func postIDEvents(t *testing.T, base string, c nastyID) bool {
	t.Helper()
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	events := idEvents(c.id)
	for _, ev := range events {
		if err := enc.Encode(ev); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Post(base+"/api/v1/events", "application/x-ndjson", &body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var got struct {
		Accepted int `json:"accepted"`
		Rejected []struct {
			Index int    `json:"index"`
			Error string `json:"error"`
		} `json:"rejected"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("POST /api/v1/events: got %d %s, want JSON", resp.StatusCode, data)
	}
	if resp.StatusCode == http.StatusOK && got.Accepted == len(events) {
		return true
	}
	if !c.mayRefuse {
		t.Fatalf("POST /api/v1/events: got %d %s, want 200 with %d accepted", resp.StatusCode, data, len(events))
	}
	if got.Accepted != 0 || len(got.Rejected) != len(events) {
		t.Fatalf("POST /api/v1/events: got %d %s, want all %d events refused or all accepted, never some", resp.StatusCode, data, len(events))
	}
	for _, r := range got.Rejected {
		if !strings.Contains(r.Error, "_id") && !strings.Contains(r.Error, "provider") && !strings.Contains(r.Error, "key") {
			t.Errorf("refused event %d: got error %q, want it to name the id field", r.Index, r.Error)
		}
	}
	return false
}

// TestAnyPrintableID posts an execution, attempts, effects and a key
// named by each nasty id through a real server, then follows every link
// of the list, execution, key, outbox and live pages: each must answer
// 200 and show the id, no link may hold a segment a browser or a proxy
// rewrites, every fragment must name an element of its page, and every
// page's HTML ids must be unique. The JSON API and the live stream's
// filters must find the id too.
func TestAnyPrintableID(t *testing.T) {
	base := startPagesServer(t)
	var stored []nastyID
	for _, c := range nastyIDs() {
		if postIDEvents(t, base, c) {
			stored = append(stored, c)
			continue
		}
		t.Logf("%s: refused at ingest", c.name)
		if st := getStatus(t, base+views.ExecutionURL(c.id)); st != http.StatusNotFound {
			t.Errorf("%s: refused at ingest, then GET its page: got %d, want 404", c.name, st)
		}
	}
	for _, c := range stored {
		t.Run(c.name, func(t *testing.T) {
			cr := &idCrawler{t: t, base: base, id: c.id, pages: map[string]*crawledPage{}}
			cr.crawl(
				"/?"+url.Values{"q": {c.id}}.Encode(),
				views.ExecutionURL(c.id),
				views.KeyURL(c.id),
				views.OutboxURL(c.id),
				"/live?"+url.Values{"execution_id": {c.id}}.Encode(),
				"/live?"+url.Values{"provider": {c.id}}.Encode(),
			)
			cr.checkFragments()
			cr.checkReached(c.id)

			exec := cr.page(views.ExecutionURL(c.id))
			checkCount(t, exec, "attempt", 2)
			checkCount(t, exec, "effect", 2)
			checkCount(t, exec, "finding", -1)
			key := cr.page(views.KeyURL(c.id))
			checkCount(t, key, "key-attempt", 2)
			checkCount(t, key, "effect-row", 2)
			checkCount(t, cr.page(views.OutboxURL(c.id)), "effect-row", 2)

			// Links written by hand, the id escaped with url.PathEscape,
			// work too from a client that sends the path as it is.
			for _, u := range []string{
				"/executions/" + url.PathEscape(c.id),
				"/executions/" + url.PathEscape(c.id) + "/attempt?" + url.Values{"step": {c.id}, "n": {"2"}}.Encode(),
				"/executions/" + url.PathEscape(c.id) + "/effect?" + url.Values{"provider": {c.id}, "id": {c.id}}.Encode(),
				"/keys/" + url.PathEscape(c.id),
			} {
				p := cr.fetch(u)
				if p.status != http.StatusOK {
					t.Errorf("GET %s: got %d, want 200", u, p.status)
				} else {
					cr.checkVisible(u, p)
				}
			}

			checkIDAPI(t, base, c.id)
			checkIDStream(t, base, c.id)
		})
	}
}

type crawledPage struct {
	status int
	body   []byte
	doc    *html.Node // nil unless HTML
	ids    map[string]bool
}

// idCrawler follows links from pages about one id. A link that names the
// id (a path segment or a query value equal to it) is followed and its
// page checked and crawled in turn; any other link (navigation, filters)
// must only answer 200.
type idCrawler struct {
	t         *testing.T
	base, id  string
	pages     map[string]*crawledPage
	fragments [][2]string // page URL, fragment
}

func (cr *idCrawler) crawl(starts ...string) {
	queue := slices.Clone(starts)
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		if _, seen := cr.pages[u]; seen {
			continue
		}
		p := cr.fetch(u)
		if p.status != http.StatusOK {
			cr.t.Errorf("GET %s: got %d, want 200: %.300s", u, p.status, p.body)
			continue
		}
		if !namesID(u, cr.id) {
			continue
		}
		cr.checkVisible(u, p)
		if p.doc == nil {
			continue
		}
		for _, href := range hrefs(p.doc) {
			next := cr.resolve(u, href)
			if next != "" {
				queue = append(queue, next)
			}
		}
	}
}

func (cr *idCrawler) fetch(u string) *crawledPage {
	cr.t.Helper()
	resp, err := http.Get(cr.base + u)
	if err != nil {
		cr.t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		cr.t.Fatalf("GET %s: %v", u, err)
	}
	p := &crawledPage{status: resp.StatusCode, body: body}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		if p.doc, err = html.Parse(bytes.NewReader(body)); err != nil {
			cr.t.Fatalf("GET %s: parse HTML: %v", u, err)
		}
		p.ids = map[string]bool{}
		walk(p.doc, func(n *html.Node) {
			for _, a := range n.Attr {
				if a.Key != "id" {
					continue
				}
				if a.Val == "" || strings.ContainsAny(a.Val, " \t\n\f\r") {
					cr.t.Errorf("GET %s: got id attribute %q, want no whitespace and not empty", u, a.Val)
				}
				if p.ids[a.Val] {
					cr.t.Errorf("GET %s: id %q appears twice, want every id unique", u, a.Val)
				}
				p.ids[a.Val] = true
			}
		})
	}
	cr.pages[u] = p
	return p
}

// resolve checks an href as a browser and a proxy would read it and
// returns the path and query to fetch, or "" for one already known.
func (cr *idCrawler) resolve(pageURL, href string) string {
	t := cr.t
	if strings.HasPrefix(href, "#") {
		cr.fragments = append(cr.fragments, [2]string{pageURL, href[1:]})
		return ""
	}
	ref, err := url.Parse(href)
	if err != nil {
		t.Errorf("%s: href %q: %v", pageURL, href, err)
		return ""
	}
	if ref.IsAbs() || ref.Host != "" || !strings.HasPrefix(ref.EscapedPath(), "/") {
		t.Errorf("%s: href %q: want a path on this server", pageURL, href)
		return ""
	}
	for _, seg := range strings.Split(ref.EscapedPath(), "/") {
		switch strings.ToLower(seg) {
		case ".", "..", "%2e", ".%2e", "%2e.", "%2e%2e":
			t.Errorf("%s: href %q has the dot segment %q, which browsers and proxies remove", pageURL, href, seg)
		}
	}
	for _, esc := range []string{"%2f", "%5c", "%00", "%3b", "%25", "%3f", "%23"} {
		if strings.Contains(strings.ToLower(ref.EscapedPath()), esc) {
			t.Errorf("%s: href %q has %s in its path, which proxies refuse by default (Traefik: 400)", pageURL, href, esc)
		}
	}
	next := ref.EscapedPath()
	if ref.RawQuery != "" {
		next += "?" + ref.RawQuery
	}
	if ref.Fragment != "" {
		cr.fragments = append(cr.fragments, [2]string{next, ref.Fragment})
	}
	return next
}

// namesID reports whether a URL names the id in a path segment or a query
// value.
func namesID(u, id string) bool {
	ref, err := url.Parse(u)
	if err != nil {
		return false
	}
	for _, seg := range strings.Split(ref.EscapedPath(), "/") {
		if s, err := url.PathUnescape(seg); err == nil && s == id {
			return true
		}
	}
	for _, vs := range ref.Query() {
		if slices.Contains(vs, id) {
			return true
		}
	}
	return false
}

// checkVisible requires the id in the page's text (HTML) or in one of its
// string values (JSON).
func (cr *idCrawler) checkVisible(u string, p *crawledPage) {
	t := cr.t
	if p.doc != nil {
		text := visibleText(p.doc)
		if !strings.Contains(text, cr.id) && !strings.Contains(text, markedID(cr.id)) {
			t.Errorf("GET %s: got a page without the id %q in its text", u, cr.id)
		}
		return
	}
	var v any
	if err := json.Unmarshal(p.body, &v); err != nil {
		t.Errorf("GET %s: got neither HTML nor JSON: %v", u, err)
		return
	}
	if !jsonHasString(v, cr.id) {
		t.Errorf("GET %s: got JSON without the id %q", u, cr.id)
	}
}

func (cr *idCrawler) checkFragments() {
	for _, f := range cr.fragments {
		p := cr.pages[f[0]]
		if p == nil {
			p = cr.fetch(f[0])
		}
		if frag, err := url.PathUnescape(f[1]); err != nil || !p.ids[frag] {
			cr.t.Errorf("link %s#%s: no element with id %q on that page", f[0], f[1], f[1])
		}
	}
}

// checkReached requires the crawl to have reached every kind of page
// about the id from the start pages: both attempts, both effects, the
// JSON twins.
func (cr *idCrawler) checkReached(id string) {
	for _, u := range []string{
		views.AttemptURL(id, id, 1), views.AttemptURL(id, id, 2),
		views.EffectURL(id, id, id), views.EffectURL(id, id, dupEffectID(id)),
		views.ExecutionAPIURL(id), views.KeyAPIURL(id),
	} {
		if _, ok := cr.pages[u]; !ok {
			cr.t.Errorf("crawl: never reached %s by a link", u)
		}
	}
}

func (cr *idCrawler) page(u string) *crawledPage {
	p := cr.pages[u]
	if p == nil || p.doc == nil {
		cr.t.Fatalf("crawl: no HTML page %s", u)
	}
	return p
}

// checkCount requires want elements of data-testid testID, or at least
// one when want is -1.
func checkCount(t *testing.T, p *crawledPage, testID string, want int) {
	t.Helper()
	n := 0
	walk(p.doc, func(n2 *html.Node) {
		if v, ok := attr(n2, "data-testid"); ok && v == testID {
			n++
		}
	})
	if (want < 0 && n == 0) || (want >= 0 && n != want) {
		t.Errorf("data-testid=%s: got %d, want %d (-1: at least one)", testID, n, want)
	}
}

// checkIDAPI reads the id back through the JSON API: by the links the
// views write, and by a path escaped with url.PathEscape as a client
// writes it by hand.
func checkIDAPI(t *testing.T, base, id string) {
	t.Helper()
	for _, u := range []string{views.ExecutionAPIURL(id), "/api/v1/executions/" + url.PathEscape(id)} {
		var x struct {
			Execution struct {
				ID string `json:"execution_id"`
			} `json:"execution"`
			Steps []struct {
				StepID   string `json:"step_id"`
				Attempts []struct {
					Key string `json:"idempotency_key"`
				} `json:"attempts"`
			} `json:"steps"`
			Effects []struct {
				Provider string `json:"provider"`
				ID       string `json:"effect_id"`
			} `json:"effects"`
		}
		getJSON(t, base+u, &x)
		if x.Execution.ID != id || len(x.Steps) != 1 || x.Steps[0].StepID != id || len(x.Steps[0].Attempts) != 2 ||
			x.Steps[0].Attempts[0].Key != id || len(x.Effects) != 2 || x.Effects[0].Provider != id {
			t.Errorf("GET %s: got %+v, want execution, step, key and provider %q with 2 attempts and 2 effects", u, x, id)
		}
	}
	for _, u := range []string{views.KeyAPIURL(id), "/api/v1/keys/" + url.PathEscape(id)} {
		var k struct {
			Key      string `json:"idempotency_key"`
			Attempts []any  `json:"attempts"`
			Effects  []any  `json:"effects"`
		}
		getJSON(t, base+u, &k)
		if k.Key != id || len(k.Attempts) != 2 || len(k.Effects) != 2 {
			t.Errorf("GET %s: got key %q with %d attempts and %d effects, want %q with 2 and 2", u, k.Key, len(k.Attempts), len(k.Effects), id)
		}
	}
	for _, q := range []struct {
		path  string
		param string
		want  int
	}{
		{"/api/v1/effects", "provider", 2},
		{"/api/v1/effects", "idempotency_key", 2},
		{"/api/v1/effects", "execution_id", 2},
		{"/api/v1/findings", "execution_id", -1},
	} {
		u := q.path + "?" + url.Values{q.param: {id}}.Encode()
		var list map[string]json.RawMessage
		getJSON(t, base+u, &list)
		n := 0
		for _, raw := range list {
			var items []map[string]any
			if json.Unmarshal(raw, &items) == nil {
				n = len(items)
				for _, it := range items {
					if it[q.param] != id {
						t.Errorf("GET %s: got an item with %s %v, want %q", u, q.param, it[q.param], id)
					}
				}
			}
		}
		if (q.want < 0 && n == 0) || (q.want >= 0 && n != q.want) {
			t.Errorf("GET %s: got %d items, want %d (-1: at least one)", u, n, q.want)
		}
	}
}

// checkIDStream reads the live stream filtered by the id from the start:
// the five events of the id, and nothing of another execution.
func checkIDStream(t *testing.T, base, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := base + "/api/v1/stream?" + url.Values{"execution_id": {id}, "after": {"0"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: got %d, want 200", u, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	events := 0
	for events < len(idEvents(id)) && sc.Scan() {
		var m struct {
			Type        string `json:"type"`
			ExecutionID string `json:"execution_id"`
		}
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("stream line %q: %v", sc.Bytes(), err)
		}
		if m.ExecutionID != id {
			t.Errorf("stream filtered by %q: got a message of execution %q", id, m.ExecutionID)
		}
		if m.Type == "event" {
			events++
		}
	}
	if events != len(idEvents(id)) {
		t.Errorf("stream filtered by %q: got %d events (%v), want %d", id, events, sc.Err(), len(idEvents(id)))
	}
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: got %d %.300s, want 200", u, resp.StatusCode, data)
		return
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Errorf("GET %s: %v", u, err)
	}
}

func getStatus(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, f)
	}
}

func hrefs(doc *html.Node) []string {
	var out []string
	walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "a" {
			if h, ok := attr(n, "href"); ok {
				out = append(out, h)
			}
		}
	})
	return out
}

// visibleText is the page's text outside scripts and styles, as a
// browser's textContent joins it.
func visibleText(doc *html.Node) string {
	var b strings.Builder
	walk(doc, func(n *html.Node) {
		if n.Type == html.TextNode && (n.Parent == nil || (n.Parent.Data != "script" && n.Parent.Data != "style")) {
			b.WriteString(n.Data)
		}
	})
	return b.String()
}

// markedID is the id as the UI shows text holding invisible characters
// (a bidi override): each as a visible marker, "<U+202E>".
func markedID(id string) string {
	var b strings.Builder
	for _, r := range id {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) {
			fmt.Fprintf(&b, "<U+%04X>", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func jsonHasString(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return x == s
	case []any:
		return slices.ContainsFunc(x, func(e any) bool { return jsonHasString(e, s) })
	case map[string]any:
		for _, e := range x {
			if jsonHasString(e, s) {
				return true
			}
		}
	}
	return false
}

// TestIDQueryRoutesNeedTheirID: a query-form route without its id is a
// 400 naming the parameter (JSON under /api/, a page elsewhere), and an id
// that does not exist is a 404 in either form.
func TestIDQueryRoutesNeedTheirID(t *testing.T) {
	base := startPagesServer(t)
	for _, c := range []struct {
		path   string
		status int
		want   string
	}{
		{"/execution", 400, "execution_id: required"},
		{"/execution/attempt?step=s&n=1", 400, "execution_id: required"},
		{"/execution/effect?provider=p&id=e", 400, "execution_id: required"},
		{"/key", 400, "idempotency_key: required"},
		{"/api/v1/execution", 400, `{"error":"execution_id: required"}`},
		{"/api/v1/key?key=x", 400, `{"error":"idempotency_key: required"}`},
		{"/execution?execution_id=..", 404, ""},
		{"/api/v1/execution?execution_id=a%2Fb", 404, `{"error":"execution: no execution \"a/b\""}`},
		{"/api/v1/executions/a%2Fb", 404, `{"error":"execution: no execution \"a/b\""}`},
	} {
		resp, err := http.Get(base + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("GET %s: got %d %.200s, want %d with %s", c.path, resp.StatusCode, body, c.status, c.want)
		}
	}
}
