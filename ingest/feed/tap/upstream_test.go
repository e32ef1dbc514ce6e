package tap_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/tap"
)

// heldUpstream holds every request until release is closed, then answers
// a charge named by the request's "id" field; it counts the requests it
// saw and those whose sender gave up on them (cancelled).
type heldUpstream struct {
	release   chan struct{}
	arrived   atomic.Int64
	cancelled atomic.Int64
}

func (u *heldUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ID string `json:"id"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	u.arrived.Add(1)
	select {
	case <-u.release:
	case <-r.Context().Done():
		u.cancelled.Add(1)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"id": body.ID})
}

// waitStatus polls the tap's status until ok accepts it.
func waitStatus(t *testing.T, tp *tap.Tap, what string, ok func(tap.Status) bool) tap.Status {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := tp.Status()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("status: got %+v, want %s", st, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTapUpstreamTimeout: an upstream that does not answer gets its client
// a 504 at UpstreamTimeout; the upstream request goes on, and the effect
// of its late answer is recorded with that answer's id. A request beyond
// MaxLate is cancelled at its 504 instead, and a safe one always is.
func TestTapUpstreamTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	up := &heldUpstream{release: make(chan struct{})}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	rec := &memRecorder{}
	tp, tapURL := startTap(t, upstream.URL, rec, func(c *tap.Config) {
		c.UpstreamTimeout, c.UpstreamGiveUp, c.MaxLate = timeout, time.Minute, 1
	})
	client := rawClient(10 * time.Second)

	start := time.Now()
	resp, body, err := post(t, client, tapURL+"/v1/charges", "application/json", `{"id":"ch_late"}`, map[string]string{"Idempotency-Key": "k_late"})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), "did not answer within 200ms") {
		t.Errorf("answer: got %d %s, want 504 naming the timeout", resp.StatusCode, body)
	}
	if elapsed < timeout || elapsed > timeout+2*time.Second {
		t.Errorf("504 after %v, want at %v (and well before %v)", elapsed, timeout, timeout+2*time.Second)
	}
	waitStatus(t, tp, "1 late, 1 timeout", func(st tap.Status) bool { return st.Late == 1 && st.Timeouts == 1 })

	// A second unsafe request, and a safe one, while the first waits:
	// both are cancelled at their 504.
	resp, _, err = post(t, client, tapURL+"/v1/charges", "application/json", `{"id":"ch_over"}`, nil)
	if err != nil || resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("second request: got %v %v, want 504", resp, err)
	}
	resp, _, err = do(t, client, "GET", tapURL+"/v1/charges/ch_late", "", "", nil)
	if err != nil || resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("a GET: got %v %v, want 504", resp, err)
	}
	waitStatus(t, tp, "2 requests cancelled upstream, 1 abandoned", func(st tap.Status) bool {
		return up.cancelled.Load() == 2 && st.Abandoned == 1 && st.Timeouts == 3
	})

	close(up.release)
	effects := rec.waitEffects(t, 1)
	if e := effects[0]; e.ID != "ch_late" || e.IdempotencyKey != "k_late" {
		t.Errorf("late effect: got %+v, want ch_late with its key", e)
	}
	st := waitStatus(t, tp, "none late", func(st tap.Status) bool { return st.Late == 0 })
	var late tap.LogEntry
	for _, l := range st.Log {
		if l.EffectID == "ch_late" {
			late = l
		}
	}
	if late.Status != 200 || late.Record != "recorded" || !strings.Contains(late.Late, "504 after 200ms") {
		t.Errorf("log of the late answer: got %+v, want status 200, recorded, and what the client got", late)
	}
	if n := len(rec.all()); n != 1 {
		t.Errorf("effects: got %d, want only the one that waited", n)
	}
}

// TestTapClientLeavesBeforeTheAnswer: an unsafe request whose client gives
// up first still has its effect recorded when the upstream answers.
func TestTapClientLeavesBeforeTheAnswer(t *testing.T) {
	up := &heldUpstream{release: make(chan struct{})}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	rec := &memRecorder{}
	tp, tapURL := startTap(t, upstream.URL, rec, nil)
	if _, _, err := post(t, rawClient(300*time.Millisecond), tapURL+"/v1/charges", "application/json", `{"id":"ch_left"}`, nil); err == nil {
		t.Fatal("the client got an answer; want its own timeout")
	}
	waitStatus(t, tp, "1 late", func(st tap.Status) bool { return st.Late == 1 })
	close(up.release)
	if e := rec.waitEffects(t, 1)[0]; e.ID != "ch_left" {
		t.Errorf("effect: got %+v, want ch_left", e)
	}
	if up.cancelled.Load() != 0 {
		t.Error("the upstream request was cancelled when the client left")
	}
}

// TestTapGivesUpOnTheUpstream: past UpstreamGiveUp the request waiting
// for a late answer is cancelled and logged, no effect recorded; Drain
// cancels those still waiting when the tap stops.
func TestTapGivesUpOnTheUpstream(t *testing.T) {
	up := &heldUpstream{release: make(chan struct{})}
	defer close(up.release)
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	rec := &memRecorder{}
	tp, tapURL := startTap(t, upstream.URL, rec, func(c *tap.Config) {
		c.UpstreamTimeout, c.UpstreamGiveUp = 100*time.Millisecond, 400*time.Millisecond
	})
	client := rawClient(10 * time.Second)
	post(t, client, tapURL+"/v1/charges", "application/json", `{"id":"ch_never"}`, nil)
	st := waitStatus(t, tp, "given up", func(st tap.Status) bool { return st.Late == 0 && up.cancelled.Load() == 1 })
	if got := st.Log[len(st.Log)-1].Error; !strings.Contains(got, "within 400ms; given up") {
		t.Errorf("log: got %q, want the give-up", got)
	}

	tp2, tap2URL := startTap(t, upstream.URL, rec, func(c *tap.Config) { c.UpstreamTimeout = 100 * time.Millisecond })
	post(t, client, tap2URL+"/v1/charges", "application/json", `{"id":"ch_stop"}`, nil)
	waitStatus(t, tp2, "1 late", func(st tap.Status) bool { return st.Late == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := tp2.Drain(ctx); err == nil {
		t.Error("Drain: got nil, want the requests it cancelled reported")
	}
	if st := tp2.Status(); st.Late != 0 || !strings.Contains(st.Log[len(st.Log)-1].Error, "the tap stopped") {
		t.Errorf("after Drain: got %d late, log %+v; want none, and the stop logged", st.Late, st.Log)
	}
	if n := len(rec.all()); n != 0 {
		t.Errorf("effects: got %d, want none", n)
	}
}
