package tap_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/tap"
	"github.com/oncetrace/oncetrace/store"
)

// stripeLike answers a form-encoded POST /v1/charges as Stripe does: a new
// charge (ch_N) for every request it did not see the key of.
type stripeLike struct{ charges atomic.Int64 }

func (s *stripeLike) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("amount") == "" {
		http.Error(w, `{"error":{"type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"ch_%d","object":"charge","amount":%s,"currency":%q}`, s.charges.Add(1), r.PostForm.Get("amount"), r.PostForm.Get("currency"))
}

// TestTapFingerprint sends a Stripe-like form-encoded charge through the
// tap twice, each time with a fresh random Idempotency-Key as stripe-node
// does, fields in another order and a per-send metadata field the
// provider's --fingerprint-ignore names: two charges, one fingerprint, at
// a real oncetrace server. Another amount is another fingerprint.
func TestTapFingerprint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := "http://" + ln.Addr().String()
	serveOncetrace(t, ln)
	q, err := feed.OpenQueue(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	rec := feed.NewQueuedRecorder(feed.HTTPRecorder{Server: server, Feed: tap.Feed}, q, feed.QueuedConfig{Feed: tap.Feed, Timeout: 5 * time.Second})
	upstream := httptest.NewServer(&stripeLike{})
	defer upstream.Close()
	tp, tapURL := startTap(t, upstream.URL, rec, func(c *tap.Config) {
		c.Provider = "stripe"
		c.TargetField = "customer"
		c.FingerprintIgnore = []string{"attempt"}
	})

	client := rawClient(10 * time.Second)
	for i, body := range []string{
		"amount=2000&currency=usd&customer=cus_123&description=June+invoice&metadata[order]=42&metadata[attempt]=1",
		"metadata[attempt]=2&metadata[order]=42&description=June+invoice&customer=cus_123&currency=usd&amount=2000",
		"amount=2100&currency=usd&customer=cus_123&description=June+invoice&metadata[order]=42&metadata[attempt]=1",
	} {
		key := fmt.Sprintf("%x", time.Now().UnixNano()+int64(i)) // a fresh key each time, as stripe-node sends
		resp, got, err := post(t, client, tapURL+"/v1/charges", "application/x-www-form-urlencoded", body, map[string]string{"Idempotency-Key": key})
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("charge %d through the tap: got %v %s %v", i+1, resp, got, err)
		}
	}
	if st := tp.Status(); st.Recorded != 3 || len(st.Log) != 3 || st.Log[0].Fingerprint == "" || st.Log[0].Summary == "" {
		t.Fatalf("tap status: got %+v, want 3 effects recorded, logged with their fingerprints", st)
	}

	resp, err := http.Get(server + "/api/v1/effects?provider=stripe")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Effects []store.EffectRow `json:"effects"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	fp := map[string]string{}
	summary := map[string]string{}
	for _, e := range page.Effects {
		fp[e.ID], summary[e.ID] = e.Fingerprint, e.Summary
	}
	if len(fp) != 3 || !strings.HasPrefix(fp["ch_1"], "http:") {
		t.Fatalf("effects at the server: got %+v, want ch_1, ch_2, ch_3 with http: fingerprints", page.Effects)
	}
	if fp["ch_1"] != fp["ch_2"] {
		t.Errorf("one charge sent twice with fresh keys: got fingerprints %s and %s, want one", fp["ch_1"], fp["ch_2"])
	}
	if fp["ch_3"] == fp["ch_1"] {
		t.Errorf("another amount: got the same fingerprint %s", fp["ch_3"])
	}
	if want := `POST /v1/charges amount=2000 currency=usd customer=cus_123 description="June invoice" …`; summary["ch_1"] != want {
		t.Errorf("summary: got %q, want %q", summary["ch_1"], want)
	}
}

// TestTapFingerprintOfABodyNotRead: a body past MaxPeekBytes was not read
// whole, so its effect gets no fingerprint (a prefix could make two
// different requests look alike), and a summary that says why.
func TestTapFingerprintOfABodyNotRead(t *testing.T) {
	upstream := httptest.NewServer(&countingUpstream{})
	defer upstream.Close()
	rec := &memRecorder{}
	_, tapURL := startTap(t, upstream.URL, rec, func(c *tap.Config) { c.MaxPeekBytes = 64 })
	body := `{"to":"jordan@acme.dev","body":"` + strings.Repeat("x", 100) + `"}`
	if resp, _, err := post(t, rawClient(10*time.Second), tapURL+"/v1/send", "application/json", body, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("send: got %v %v", resp, err)
	}
	e := rec.waitEffects(t, 1)[0]
	if e.Fingerprint != "" || e.Summary != "POST /v1/send (a body over 64 bytes, not read)" {
		t.Errorf("effect of a body not read: got fingerprint %q summary %q, want none and the reason", e.Fingerprint, e.Summary)
	}
}

// TestTapFingerprintOfACompressedBody: a gzip request body is read as
// what it says, so it matches the same request sent plain.
func TestTapFingerprintOfACompressedBody(t *testing.T) {
	upstream := httptest.NewServer(&countingUpstream{})
	defer upstream.Close()
	rec := &memRecorder{}
	_, tapURL := startTap(t, upstream.URL, rec, nil)
	client := rawClient(10 * time.Second)
	body := `{"to":"jordan@acme.dev","subject":"Invoice"}`
	if resp, _, err := post(t, client, tapURL+"/v1/send", "application/json", body, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("plain send: got %v %v", resp, err)
	}
	if resp, _, err := post(t, client, tapURL+"/v1/send", "application/json", gzipped(t, body), map[string]string{"Content-Encoding": "gzip"}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("gzip send: got %v %v", resp, err)
	}
	got := rec.waitEffects(t, 2)
	if got[0].Fingerprint == "" || got[0].Fingerprint != got[1].Fingerprint {
		t.Errorf("plain and gzip: got fingerprints %q and %q, want one", got[0].Fingerprint, got[1].Fingerprint)
	}
}

func gzipped(t *testing.T, s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return b.String()
}
