package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// outboxSearchEvents are two invoices to one customer and a welcome email
// to another, as an SMTP sink would record them.
func outboxSearchEvents() []map[string]any {
	at := time.Date(2026, 6, 30, 9, 0, 0, 0, time.UTC)
	mail := func(id, key, to, subject string, sec int) map[string]any {
		return map[string]any{"type": "effect", "provider": "smtp", "effect_id": id, "idempotency_key": key, "target": to,
			"summary": "email to " + to + ", subject '" + subject + "'", "at": at.Add(time.Duration(sec) * time.Second).Format(time.RFC3339Nano)}
	}
	return []map[string]any{
		mail("<inv-1@acme.dev>", "ik_invoice_1", "jordan@acme.dev", "Your June invoice", 1),
		mail("<inv-2@acme.dev>", "ik_invoice_2", "jordan@acme.dev", "Your June invoice", 2),
		mail("<welcome@globex.io>", "ik_welcome", "sam@globex.io", "Welcome aboard", 3),
	}
}

// GET /api/v1/effects?q= and /outbox?q= search as Mailpit does; a bad
// search is a 400 naming the field and the limit.
func TestOutboxSearch(t *testing.T) {
	base := startPagesServer(t)
	postUIEvents(t, base, outboxSearchEvents())
	find := func(q string) []string {
		t.Helper()
		r := fetchPage(t, base+"/api/v1/effects?"+url.Values{"q": {q}}.Encode(), false)
		if r.status != http.StatusOK {
			t.Fatalf("q=%s: got %d %s, want 200", q, r.status, r.body)
		}
		var got struct {
			Effects []struct {
				ID string `json:"effect_id"`
			} `json:"effects"`
		}
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range got.Effects {
			ids = append(ids, e.ID)
		}
		return ids
	}
	invoices := []string{"<inv-1@acme.dev>", "<inv-2@acme.dev>"}
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"to:jordan@acme.dev", invoices},
		{"TO:Jordan", invoices},
		{`subject:"june invoice"`, invoices},
		{"message-id:inv-2@acme.dev", []string{"<inv-2@acme.dev>"}},
		{"key:ik_welcome", []string{"<welcome@globex.io>"}},
		{"welcome", []string{"<welcome@globex.io>"}},
		{"to:jordan subject:welcome", nil},
		{"cc:nobody", nil}, // an unknown field is a word, as in Mailpit
	} {
		if got := find(c.q); !slices.Equal(got, c.want) {
			t.Errorf("q=%s: got %q, want %q", c.q, got, c.want)
		}
	}

	page := fetchPage(t, base+"/outbox?"+url.Values{"q": {"to:jordan@acme.dev"}}.Encode(), false)
	if page.status != http.StatusOK || strings.Count(string(page.body), `data-testid="effect-row"`) != 2 ||
		!strings.Contains(string(page.body), `value="to:jordan@acme.dev"`) {
		t.Errorf("/outbox?q=to:jordan@acme.dev: got %d, want 200 with 2 rows and the search in its box", page.status)
	}

	for _, c := range []struct{ query, want string }{
		{"q=to:", "q: to: needs a value"},
		{"q=to:a+to:b", "q: to: may be given once"},
		{"q=" + url.QueryEscape(`subject:"june`), "q: a double quote is not closed"},
		{"q=a+b+c+d+e+f+g+h+i", "q: must have at most 8 terms"},
		{"q=" + strings.Repeat("x", 513), "q: must be at most 512 bytes"},
		{"target=jordan@acme.dev", "q=to:ADDRESS"},
		{"q=key:ik_a&idempotency_key=ik_b", "q: key: and idempotency_key name two different keys"},
	} {
		for _, path := range []string{"/api/v1/effects?", "/outbox?"} {
			r := fetchPage(t, base+path+c.query, false)
			if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), c.want) {
				t.Errorf("GET %s%s: got %d %.200s, want 400 saying %q", path, c.query, r.status, r.body, c.want)
			}
		}
	}
}

// GET /api/v1/executions?sort=severity lists critical executions first;
// the page keeps the order in its form; an unknown order is a 400.
func TestExecutionsSortBySeverity(t *testing.T) {
	base := startPagesServer(t)
	postUIEvents(t, base, uiEvents())
	r := fetchPage(t, base+"/api/v1/executions?sort=severity", false)
	var got struct {
		Executions []struct {
			ID    string `json:"execution_id"`
			Audit string `json:"audit_state"`
		} `json:"executions"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil || r.status != http.StatusOK {
		t.Fatalf("sort=severity: got %d %s, want 200", r.status, r.body)
	}
	rank := map[string]int{"critical": 0, "unverified": 1}
	var ranks []int
	for _, x := range got.Executions {
		k, ok := rank[x.Audit]
		if !ok {
			k = 2
		}
		ranks = append(ranks, k)
	}
	if len(ranks) < 2 || ranks[0] != 0 || !slices.IsSorted(ranks) || ranks[len(ranks)-1] == 0 {
		t.Errorf("sort=severity: got ranks %v, want critical (0) first, sorted, and some not critical", ranks)
	}
	page := fetchPage(t, base+"/?sort=severity", false)
	if !strings.Contains(string(page.body), `<option value="severity" selected>`) {
		t.Errorf("/?sort=severity: the form does not keep the order")
	}
	if r := fetchPage(t, base+"/api/v1/executions?sort=worst", false); r.status != http.StatusBadRequest ||
		!strings.Contains(string(r.body), "sort: must be newest or severity") {
		t.Errorf("sort=worst: got %d %s, want 400 naming sort", r.status, r.body)
	}
}

// The outbox's one order is severity's (duplicates, orphans, matched), so
// ?sort=severity answers it as the default does; any other sort is a 400
// naming the field.
func TestOutboxSortBySeverity(t *testing.T) {
	base := startPagesServer(t)
	postUIEvents(t, base, outboxSearchEvents())
	for _, path := range []string{"/outbox", "/api/v1/effects"} {
		plain, sorted := fetchPage(t, base+path, false), fetchPage(t, base+path+"?sort=severity", false)
		if plain.status != http.StatusOK || sorted.status != http.StatusOK {
			t.Fatalf("%s: got %d, and %d with sort=severity, want 200", path, plain.status, sorted.status)
		}
		if path == "/api/v1/effects" && string(plain.body) != string(sorted.body) {
			t.Errorf("%s?sort=severity: got %s, want the default order %s", path, sorted.body, plain.body)
		}
		bad := fetchPage(t, base+path+"?sort=newest", false)
		if bad.status != http.StatusBadRequest || !strings.Contains(string(bad.body), "sort") {
			t.Errorf("%s?sort=newest: got %d %s, want 400 naming sort", path, bad.status, bad.body)
		}
	}
}
