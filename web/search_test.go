package web_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// searchEvents: an invoice run that emailed jordan@acme.dev twice, its
// emails joined to it only by their key, and a payment run for another
// customer.
func searchEvents() []map[string]any {
	at := func(s int) string { return uiBase.Add(time.Duration(s) * time.Second).Format(time.RFC3339Nano) }
	return []map[string]any{
		{"type": "effect", "provider": "mail-api", "effect_id": "msg_6a0799cc07", "idempotency_key": "ik_inv42",
			"target": "jordan@acme.dev", "at": at(1)},
		{"type": "effect", "provider": "mail-api", "effect_id": "msg_6a07ff0001", "idempotency_key": "ik_inv42",
			"target": "jordan@acme.dev", "at": at(11)},
		{"type": "execution", "execution_id": "exec_inv", "name": "billing-agent", "status": "completed",
			"started_at": at(0), "ended_at": at(12), "labels": map[string]any{"customer": "acme"}},
		{"type": "attempt", "execution_id": "exec_inv", "step_id": "step-4", "attempt": 1, "tool": "send_invoice_email", "effect": "write",
			"provider": "mail-api", "idempotency_key": "ik_inv42", "worker": "pid-4121", "started_at": at(0), "ended_at": at(10), "outcome": "timeout"},
		{"type": "attempt", "execution_id": "exec_inv", "step_id": "step-4", "attempt": 2, "tool": "send_invoice_email", "effect": "write",
			"provider": "mail-api", "idempotency_key": "ik_inv42", "worker": "pid-4121", "started_at": at(10), "ended_at": at(11), "outcome": "ok"},

		{"type": "execution", "execution_id": "exec_pay", "name": "payments", "status": "completed",
			"started_at": at(60), "ended_at": at(62), "labels": map[string]any{"customer": "globex"}},
		{"type": "attempt", "execution_id": "exec_pay", "step_id": "charge", "attempt": 1, "tool": "charge_card", "effect": "write",
			"provider": "stripe", "worker": "pid-77", "started_at": at(60), "ended_at": at(61), "outcome": "ok"},
		{"type": "effect", "provider": "stripe", "effect_id": "ch_3Pq9", "execution_id": "exec_pay", "step_id": "charge",
			"target": "cus_globex", "at": at(61)},
	}
}

var webSearchCases = []struct{ q, want string }{
	{"jordan@acme.dev", "exec_inv"},
	{"acme", "exec_inv"},
	{"msg_6a0799cc07", "exec_inv"},
	{"msg_6a0799", "exec_inv"},
	{"customer:acme", "exec_inv"},
	{"customer:globex", "exec_pay"},
	{"globex", "exec_pay"},
	{"send_invoice_email", "exec_inv"},
	{"charge_card", "exec_pay"},
	{"pid-4121", "exec_inv"},
	{"acme send_invoice_email", "exec_inv"},
	{"acme charge_card", ""},
	{"exec_", "exec_pay exec_inv"}, // newest first
}

var rowLink = regexp.MustCompile(`data-testid="execution-row"[\s\S]*?href="/executions/([^"]+)"`)

func TestSearchThroughAPIAndPage(t *testing.T) {
	base := startPagesServer(t)
	postUIEvents(t, base, searchEvents())
	for _, tt := range webSearchCases {
		t.Run(tt.q, func(t *testing.T) {
			want := strings.Fields(tt.want)
			path := "/api/v1/executions?q=" + url.QueryEscape(tt.q)
			r := fetchPage(t, base+path, false)
			var list struct {
				Executions []struct {
					ID string `json:"execution_id"`
				} `json:"executions"`
			}
			if err := json.Unmarshal(r.body, &list); err != nil || r.status != http.StatusOK {
				t.Fatalf("GET %s: got %d %s, want 200 with a list", path, r.status, r.body)
			}
			got := []string{}
			for _, x := range list.Executions {
				got = append(got, x.ID)
			}
			if !slices.Equal(got, want) {
				t.Errorf("GET %s: got %v, want %v", path, got, want)
			}

			path = "/?q=" + url.QueryEscape(tt.q)
			page := fetchPage(t, base+path, false)
			checkHTMLResponse(t, path, page, http.StatusOK, false)
			got = []string{}
			for _, m := range rowLink.FindAllSubmatch(page.body, -1) {
				got = append(got, string(m[1]))
			}
			if !slices.Equal(got, want) {
				t.Errorf("GET %s: got rows %v, want %v", path, got, want)
			}
		})
	}
}

// knownListParams is every parameter the executions list takes.
var knownListParams = []string{"status", "audit", "name", "has_findings", "q", "from", "to", "sort", "cursor", "limit"}

func TestExecutionListRejectsUnknownFilters(t *testing.T) {
	base := startPagesServer(t)
	postUIEvents(t, base, searchEvents())

	for _, tt := range []struct{ path, unknown string }{
		{"/api/v1/executions?foo=1", "foo"},
		{"/api/v1/executions?q=acme&foo=1", "foo"},
		{"/api/v1/executions?recipient=jordan%40acme.dev", "recipient"},
	} {
		path, unknown := tt.path, tt.unknown
		r := fetchPage(t, base+path, false)
		var body struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil || r.status != http.StatusBadRequest {
			t.Errorf("GET %s: got %d %s, want 400 JSON", path, r.status, r.body)
			continue
		}
		if !strings.Contains(body.Error, `"`+unknown+`"`) {
			t.Errorf("GET %s: got error %q, want it to name %q", path, body.Error, unknown)
		}
		for _, name := range knownListParams {
			if !strings.Contains(body.Error, name) {
				t.Errorf("GET %s: got error %q, want it to list %q", path, body.Error, name)
			}
		}
	}

	// Every known parameter together is still accepted.
	all := url.Values{"status": {"completed"}, "audit": {"critical"}, "name": {"billing-agent"}, "has_findings": {"true"}, "q": {"acme"},
		"from": {uiBase.Add(-time.Hour).Format(time.RFC3339)}, "to": {uiBase.Add(time.Hour).Format(time.RFC3339)}, "limit": {"5"}}
	if r := fetchPage(t, base+"/api/v1/executions?"+all.Encode(), false); r.status != http.StatusOK || !bytes.Contains(r.body, []byte(`"exec_inv"`)) {
		t.Errorf("GET /api/v1/executions with every known filter: got %d %s, want 200 listing exec_inv", r.status, r.body)
	}
	if r := fetchPage(t, base+"/?"+all.Encode(), false); r.status != http.StatusOK || bytes.Contains(r.body, []byte(`data-testid="filter-error"`)) {
		t.Errorf("GET / with every known filter: got %d with a filter error, want 200 without", r.status)
	}

	// The page shows the form again with the message, as an alert.
	path := "/?q=acme&sattus=failed"
	page := fetchPage(t, base+path, false)
	checkHTMLResponse(t, path, page, http.StatusBadRequest, false)
	alert := regexp.MustCompile(`<p[^>]*role="alert"[^>]*data-testid="filter-error"[^>]*>([\s\S]*?)</p>`).FindSubmatch(page.body)
	if alert == nil {
		t.Fatalf("GET %s: got no alert, want one naming the unknown filter:\n%s", path, page.body)
	}
	text := string(alert[1])
	if !strings.Contains(text, "sattus") {
		t.Errorf("GET %s: got alert %q, want it to name sattus", path, text)
	}
	for _, name := range knownListParams {
		if !strings.Contains(text, name) {
			t.Errorf("GET %s: got alert %q, want it to list %q", path, text, name)
		}
	}
	if !bytes.Contains(page.body, []byte(`data-testid="filters"`)) || !bytes.Contains(page.body, []byte(`name="q" value="acme"`)) {
		t.Errorf("GET %s: got no filter form keeping q=acme, want it", path)
	}
	if bytes.Contains(page.body, []byte(`data-testid="execution-row"`)) {
		t.Errorf("GET %s: got rows, want none until the filter is fixed", path)
	}

	// Other pages keep their own parameters.
	for _, path := range []string{"/executions/exec_inv?lanes=all", "/outbox?provider=stripe", "/api/v1/effects?provider=stripe"} {
		if r := fetchPage(t, base+path, false); r.status != http.StatusOK {
			t.Errorf("GET %s: got %d, want 200", path, r.status)
		}
	}
}

// TestOtherListsRejectUnknownFilters checks that the outbox (page and
// JSON) and the findings list refuse a parameter they do not take, naming
// it and the ones they do, as the executions list does, and still take
// all of theirs.
func TestOtherListsRejectUnknownFilters(t *testing.T) {
	base := startPagesServer(t)
	postUIEvents(t, base, searchEvents())
	for _, tt := range []struct {
		path, unknown string
		known         []string
	}{
		{"/api/v1/effects?recipient=jordan%40acme.dev", "recipient", []string{"provider", "state", "execution_id", "idempotency_key", "cursor", "limit"}},
		{"/outbox?provider=mail&stat=orphan", "stat", []string{"provider", "state"}},
		{"/api/v1/findings?rules=duplicate_effect", "rules", []string{"execution_id", "rule", "severity", "limit", "cursor"}},
	} {
		r := fetchPage(t, base+tt.path, false)
		if r.status != http.StatusBadRequest {
			t.Errorf("GET %s: got %d, want 400", tt.path, r.status)
			continue
		}
		if !bytes.Contains(r.body, []byte(tt.unknown)) {
			t.Errorf("GET %s: got %s, want it to name %q", tt.path, r.body, tt.unknown)
		}
		for _, name := range tt.known {
			if !bytes.Contains(r.body, []byte(name)) {
				t.Errorf("GET %s: got %s, want it to list %q", tt.path, r.body, name)
			}
		}
	}
	for _, path := range []string{
		"/api/v1/effects?provider=mail&state=orphan&execution_id=exec_inv&idempotency_key=k&limit=5",
		"/outbox?provider=mail&state=duplicate",
		"/api/v1/findings?execution_id=exec_inv&rule=duplicate_effect&severity=critical&limit=5",
	} {
		if r := fetchPage(t, base+path, false); r.status != http.StatusOK {
			t.Errorf("GET %s: got %d %s, want 200", path, r.status, r.body)
		}
	}
}
