package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// TestFollowStatusInHealthAndMetrics: a followed cluster's status, as the
// follower says it now, is in /healthz (which stays 200 while the cluster
// is unreachable) and in /metrics.
func TestFollowStatusInHealthAndMetrics(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(db, writer.DefaultConfig)
	lastPoll := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	status := web.FollowStatus{Feed: "temporal", Target: "127.0.0.1:7233/default", State: "following", LastPoll: lastPoll,
		Lag: 1500 * time.Millisecond, RunsFollowed: 3, RunsPolled: 1, EventsWritten: 42, Errors: 0}
	metrics := web.NewMetrics()
	srv := web.New(web.Config{DB: db, Writer: w, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig, Metrics: metrics,
		FollowStatus: func() []web.FollowStatus { mu.Lock(); defer mu.Unlock(); return []web.FollowStatus{status} }})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); ts.Close(); w.Close(); db.Close() })
	ms := &metricsServer{ts: ts, db: db, metrics: metrics}

	health := func() (int, map[string]any) {
		resp, err := http.Get(ts.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Follow []map[string]any `json:"follow"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		if len(body.Follow) != 1 {
			t.Fatalf("/healthz follow: got %v, want one target", body.Follow)
		}
		return resp.StatusCode, body.Follow[0]
	}
	code, got := health()
	want := map[string]any{"feed": "temporal", "target": "127.0.0.1:7233/default", "state": "following", "lag_seconds": 1.5,
		"last_poll": "2026-12-01T10:00:00Z", "runs_followed": 3.0, "runs_polled": 1.0, "events_written": 42.0, "errors": 0.0}
	if code != http.StatusOK || len(got) != len(want) {
		t.Errorf("/healthz: got %d %v, want 200 %v", code, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("/healthz follow %s: got %v, want %v", k, got[k], v)
		}
	}
	series := ms.scrape(t)
	labels := `{feed="temporal",target="127.0.0.1:7233/default"}`
	for name, v := range map[string]float64{
		"oncetrace_follow_up" + labels:                                                              1,
		"oncetrace_follow_lag_seconds" + labels:                                                     1.5,
		"oncetrace_follow_last_poll_timestamp_seconds" + labels:                                     float64(lastPoll.Unix()),
		"oncetrace_follow_events_total" + labels:                                                    42,
		"oncetrace_follow_errors_total" + labels:                                                    0,
		`oncetrace_follow_runs{feed="temporal",read="long_polled",target="127.0.0.1:7233/default"}`: 3,
		`oncetrace_follow_runs{feed="temporal",read="polled",target="127.0.0.1:7233/default"}`:      1,
	} {
		if got, ok := series[name]; !ok || got != v {
			t.Errorf("/metrics %s: got %v (present %v), want %v", name, got, ok, v)
		}
	}

	// Unreachable: the server is still healthy; the entry says why not the
	// feed.
	mu.Lock()
	status.State, status.Lag, status.Errors = "unreachable", 95*time.Second, 4
	mu.Unlock()
	code, got = health()
	if code != http.StatusOK || got["state"] != "unreachable" || got["lag_seconds"] != 95.0 || got["errors"] != 4.0 {
		t.Errorf("/healthz with the cluster away: got %d %v, want 200, unreachable, lag 95, 4 errors", code, got)
	}
	if up := ms.scrape(t)["oncetrace_follow_up"+labels]; up != 0 {
		t.Errorf("oncetrace_follow_up with the cluster away: got %v, want 0", up)
	}
}
