package web_test

import (
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/views"
)

// A 404 names what is missing, on pages and in JSON; a key nothing
// carried is a 404, not an empty key page.
func TestNotFoundNamesTheMissingID(t *testing.T) {
	base := startPagesServer(t)
	postUIEvents(t, base, outboxSearchEvents())
	for _, c := range []struct {
		path   string
		status int
		want   string
	}{
		{views.ExecutionURL("exec_missing"), http.StatusNotFound, `execution: no execution "exec_missing"`},
		{"/api/v1/executions/exec_missing", http.StatusNotFound, `{"error":"execution: no execution \"exec_missing\""}`},
		{views.AttemptURL("exec_missing", "step-1", 1), http.StatusNotFound, `execution: no execution "exec_missing"`},
		{views.KeyURL("ik_unknown"), http.StatusNotFound, `idempotency_key: nothing carried the key "ik_unknown"`},
		{"/api/v1/keys/ik_unknown", http.StatusNotFound, `{"error":"idempotency_key: nothing carried the key \"ik_unknown\""}`},
		{"/key?idempotency_key=ik_unknown", http.StatusNotFound, `nothing carried the key "ik_unknown"`},
		{views.KeyURL("ik_welcome"), http.StatusOK, "ik_welcome"}, // carried by an effect only
		{"/api/v1/keys/ik_welcome", http.StatusOK, `"idempotency_key":"ik_welcome"`},
	} {
		r := fetchPage(t, base+c.path, false)
		body := string(r.body)
		if !strings.HasPrefix(c.path, "/api/") {
			body = html.UnescapeString(body)
		}
		if r.status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("GET %s: got %d %.300s, want %d with %s", c.path, r.status, body, c.status, c.want)
		}
	}
}
