package tap_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/tap"
	"github.com/oncetrace/oncetrace/trace"
)

// memRecorder keeps the effects a tap records, in memory.
type memRecorder struct {
	mu      sync.Mutex
	effects []trace.Effect
}

func (m *memRecorder) Record(_ context.Context, e trace.Effect) (feed.Outcome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.effects = append(m.effects, e)
	return feed.Recorded, nil
}

func (m *memRecorder) Counts() feed.Counts {
	m.mu.Lock()
	defer m.mu.Unlock()
	return feed.Counts{Recorded: int64(len(m.effects))}
}

func (m *memRecorder) all() []trace.Effect {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]trace.Effect(nil), m.effects...)
}

// waitEffects waits until n effects are recorded and returns them.
func (m *memRecorder) waitEffects(t *testing.T, n int) []trace.Effect {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := m.all()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("effects: got %d (%+v), want %d", len(got), got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startTap serves a tap in front of upstream on 127.0.0.1; change edits
// its config before it starts.
func startTap(t *testing.T, upstream string, rec tap.Recorder, change func(*tap.Config)) (*tap.Tap, string) {
	t.Helper()
	cfg := tap.Config{Upstream: upstream, Provider: "test-api", Recorder: rec, Logger: slog.New(slog.DiscardHandler)}
	if change != nil {
		change(&cfg)
	}
	tp, err := tap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(tp)
	t.Cleanup(func() {
		tp.Close()
		ts.Close()
	})
	return tp, ts.URL
}

// rawClient sees the bytes on the wire: it asks for no compression of
// its own and follows no redirects.
func rawClient(timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableCompression = true
	return &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
