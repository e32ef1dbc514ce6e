package tap_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/ingest/feed/tap"
)

// TestTapStrikeDecidesPerRequest: Strike sees every unsafe request in
// order (never a safe one), and what it returns strikes that request only,
// instead of the standing faults; a fault header still wins.
func TestTapStrikeDecidesPerRequest(t *testing.T) {
	up := &countingUpstream{}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	rec := &memRecorder{}
	var mu sync.Mutex
	var seen []string
	_, tapURL := startTap(t, upstream.URL, rec, func(c *tap.Config) {
		// A standing fault that must never apply while Strike decides.
		c.Faults = []sandbox.Fault{{Kind: sandbox.FailBefore, Probability: 1}}
		c.Strike = func(r *http.Request) []sandbox.Fault {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, r.Method+" "+r.URL.Path)
			if len(seen) == 2 {
				return []sandbox.Fault{{Kind: sandbox.FailBefore, Probability: 1}}
			}
			return nil
		}
	})
	client := rawClient(10 * time.Second)
	status := func(method, path string, header map[string]string) int {
		t.Helper()
		resp, _, err := do(t, client, method, tapURL+path, "application/json", `{"to":"a@b.c"}`, header)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp.StatusCode
	}
	got := []int{
		status("POST", "/v1/one", nil),
		status("GET", "/v1/read", nil), // safe: Strike is not asked
		status("POST", "/v1/two", nil),
		status("PUT", "/v1/three", nil),
		status("POST", "/v1/four", map[string]string{sandbox.HeaderFault: "fail-before"}),
	}
	want := []int{200, 200, 503, 200, 503}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d: got status %d, want %d (all: %v)", i+1, got[i], want[i], got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	wantSeen := []string{"POST /v1/one", "POST /v1/two", "PUT /v1/three", "POST /v1/four"}
	if len(seen) != len(wantSeen) {
		t.Fatalf("Strike saw %v, want %v", seen, wantSeen)
	}
	for i := range wantSeen {
		if seen[i] != wantSeen[i] {
			t.Errorf("Strike call %d: got %q, want %q", i+1, seen[i], wantSeen[i])
		}
	}
	if n := up.hits.Load(); n != 3 {
		t.Errorf("upstream hits: got %d, want 3 (the struck and the header's fail-before not forwarded)", n)
	}
	if effects := rec.waitEffects(t, 2); len(effects) != 2 {
		t.Errorf("effects: got %d, want 2 (the two unsafe requests that passed)", len(effects))
	}
}
