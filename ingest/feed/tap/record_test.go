package tap_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/tap"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// serveOncetrace serves a real oncetrace server on ln until the test ends.
func serveOncetrace(t *testing.T, ln net.Listener) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), t.TempDir()+"/oncetrace.db", sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(db, writer.DefaultConfig)
	ts := httptest.NewUnstartedServer(web.New(web.Config{DB: db, Writer: w, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig}))
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		w.Close()
		db.Close()
	})
}

// TestTapRecordingFailureNeverFailsTheRequest puts the tap in front of an
// upstream with the oncetrace server down: the proxied request succeeds,
// the effect waits in the on-disk queue, and it arrives once a server
// listens again.
func TestTapRecordingFailureNeverFailsTheRequest(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the server is down: connection refused

	q, err := feed.OpenQueue(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	rec := feed.NewQueuedRecorder(feed.HTTPRecorder{Server: "http://" + addr, Feed: tap.Feed}, q,
		feed.QueuedConfig{Feed: tap.Feed, Timeout: time.Second, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rec.Run(ctx) }()
	defer func() { cancel(); <-done }()

	upstream := httptest.NewServer(&countingUpstream{})
	defer upstream.Close()
	tp, tapURL := startTap(t, upstream.URL, rec, nil)

	resp, body, err := post(t, rawClient(10*time.Second), tapURL+"/v1/send", "application/json", `{"to":"jordan@acme.dev"}`,
		map[string]string{"Idempotency-Key": "ik_1"})
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != `{"id":"msg_1"}` {
		t.Fatalf("proxied request with the server down: got %v %s %v, want the upstream's 200", resp, body, err)
	}
	if st := tp.Status(); st.Queued != 1 || st.Failed < 1 || st.Recorded != 0 || len(st.Log) != 1 || st.Log[0].Record != "queued" {
		t.Errorf("status with the server down: got %+v, want 1 queued after ≥ 1 failure", st)
	}

	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	serveOncetrace(t, ln)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var l struct {
			Effects []struct {
				EffectID       string `json:"effect_id"`
				IdempotencyKey string `json:"idempotency_key"`
				Target         string `json:"target"`
			} `json:"effects"`
		}
		r, err := http.Get("http://" + addr + "/api/v1/effects?provider=test-api")
		if err == nil {
			json.NewDecoder(r.Body).Decode(&l)
			r.Body.Close()
		}
		if len(l.Effects) == 1 {
			if e := l.Effects[0]; e.EffectID != "msg_1" || e.IdempotencyKey != "ik_1" || e.Target != "jordan@acme.dev" {
				t.Errorf("effect: got %+v, want msg_1 with its key and target", e)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("effect not at the server 10 s after it came back; status %+v", tp.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The server commits before it answers, so the effect can be read
	// there a moment before the recorder hears the answer and counts it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st := tp.Status()
		if st.Recorded == 1 && st.Queued == 0 && st.Dropped == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status after: got recorded %d queued %d dropped %d, want 1, 0, 0", st.Recorded, st.Queued, st.Dropped)
		}
	}
}
