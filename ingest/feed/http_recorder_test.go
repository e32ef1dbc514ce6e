package feed_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// startOncetrace serves a real oncetrace server on ln, with a SQLite file
// in dbDir, until the test ends or the returned stop is called.
func startOncetrace(t *testing.T, ln net.Listener, dbDir, token string) (stop func()) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), dbDir+"/oncetrace.db", sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(db, writer.DefaultConfig)
	ts := httptest.NewUnstartedServer(web.New(web.Config{DB: db, Writer: w, Limits: ingest.DefaultLimits,
		Analysis: trace.DefaultConfig, IngestToken: token}))
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		ts.Close()
		w.Close()
		db.Close()
	}
	t.Cleanup(stop)
	return stop
}

func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

type effectList struct {
	Effects []struct {
		Provider       string `json:"provider"`
		EffectID       string `json:"effect_id"`
		IdempotencyKey string `json:"idempotency_key"`
		Target         string `json:"target"`
		TraceID        string `json:"trace_id"`
	} `json:"effects"`
}

func effectsOf(t *testing.T, server, provider string) effectList {
	t.Helper()
	resp, err := http.Get(server + "/api/v1/effects?provider=" + provider)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l effectList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	return l
}

var charge = trace.Effect{Provider: "stripe", ID: "ch_3Pq", IdempotencyKey: "ik_1", Target: "cus_9",
	TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", At: time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC)}

func TestHTTPRecorderPostsToARealServer(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	server := "http://" + ln.Addr().String()
	startOncetrace(t, ln, t.TempDir(), "s3cret")
	ctx := context.Background()

	err := feed.HTTPRecorder{Server: server, Feed: "tap"}.RecordEffect(ctx, charge)
	if err == nil || errors.Is(err, feed.ErrRejected) {
		t.Errorf("without the token: got %v, want a retryable error (401)", err)
	}
	r := feed.HTTPRecorder{Server: server + "/", Token: "s3cret", Feed: "tap"}
	for range 2 { // the second is a harmless duplicate
		if err := r.RecordEffect(ctx, charge); err != nil {
			t.Fatalf("RecordEffect: %v", err)
		}
	}
	l := effectsOf(t, server, "stripe")
	if len(l.Effects) != 1 || l.Effects[0].EffectID != "ch_3Pq" || l.Effects[0].IdempotencyKey != "ik_1" ||
		l.Effects[0].Target != "cus_9" || l.Effects[0].TraceID != charge.TraceID {
		t.Errorf("effects: got %+v, want ch_3Pq once with its key, target and trace", l.Effects)
	}

	bad := charge
	bad.ID = "ch_bad"
	bad.IdempotencyKey = string(make([]byte, 300)) // over the id limit
	if err := r.RecordEffect(ctx, bad); !errors.Is(err, feed.ErrRejected) {
		t.Errorf("an invalid effect: got %v, want ErrRejected", err)
	}
}

// TestQueuedHTTPRecorderDeliversOnceTheServerIsBack records through a
// server that is down: the caller is not failed, and the effect arrives
// when a server listens on the address again.
func TestQueuedHTTPRecorderDeliversOnceTheServerIsBack(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused

	q, err := feed.OpenQueue(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	r := feed.NewQueuedRecorder(feed.HTTPRecorder{Server: "http://" + addr, Feed: "tap"}, q,
		feed.QueuedConfig{Feed: "tap", Timeout: time.Second, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	if out, _ := r.Record(ctx, charge); out != feed.Queued {
		t.Fatalf("Record with the server down: got %s, want queued", out)
	}
	startOncetrace(t, listen(t, addr), t.TempDir(), "")
	deadline := time.Now().Add(10 * time.Second)
	for len(effectsOf(t, "http://"+addr, "stripe").Effects) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("effect not delivered 10 s after the server came back; counts %+v", r.Counts())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c := r.Counts(); c.Recorded != 1 || c.Failed < 1 || c.Queued != 0 {
		t.Errorf("counts: got %+v, want 1 recorded after ≥ 1 failure, none queued", c)
	}
}
