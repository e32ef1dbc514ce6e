package feed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// flakyRecorder fails while down is set and keeps what it recorded.
type flakyRecorder struct {
	mu       sync.Mutex
	down     bool
	reject   string // an effect id it refuses as invalid
	recorded []string
	calls    int
}

func (f *flakyRecorder) RecordEffect(ctx context.Context, e trace.Effect) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if e.ID == f.reject {
		return fmt.Errorf("test: %w", ErrRejected)
	}
	if f.down {
		return errors.New("test: connection refused")
	}
	f.recorded = append(f.recorded, e.ID)
	return nil
}

func (f *flakyRecorder) set(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *flakyRecorder) got() ([]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.recorded...), f.calls
}

func newTestQueued(t *testing.T, next Recorder) *QueuedRecorder {
	t.Helper()
	q, err := OpenQueue(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return NewQueuedRecorder(next, q, QueuedConfig{Feed: "tap", Timeout: time.Second, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
}

func TestQueuedRecorderRetriesInOrderOnceTheRecorderIsBack(t *testing.T) {
	next := &flakyRecorder{down: true}
	r := newTestQueued(t, next)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	if out, err := r.Record(ctx, queuedEffect(1)); out != Queued || err == nil {
		t.Errorf("Record while down: got %s, %v; want queued with the failure", out, err)
	}
	_, callsBefore := next.got()
	// With something queued, a new effect joins the queue without trying:
	// nobody waits on a recorder known to fail.
	if out, _ := r.Record(ctx, queuedEffect(2)); out != Queued {
		t.Errorf("Record behind a queued effect: got %s, want queued", out)
	}
	if c := r.Counts(); c.Queued != 2 || c.Recorded != 0 || c.Failed < 1 {
		t.Errorf("counts while down: got %+v, want 2 queued, 0 recorded, ≥ 1 failed", c)
	}
	// A few retries fail meanwhile (the backoff is 10 to 50 ms).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, calls := next.got()
		if calls >= callsBefore+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls while down: got %d after 5s, want retries after %d", calls, callsBefore)
		}
	}
	if c := r.Counts(); c.Queued != 2 || c.Recorded != 0 {
		t.Errorf("counts after failed retries: got %+v, want still 2 queued, 0 recorded", c)
	}

	next.set(false)
	deadline := time.Now().Add(5 * time.Second)
	for r.Counts().Queued > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	got, _ := next.got()
	if fmt.Sprint(got) != "[ch_001 ch_002]" {
		t.Errorf("recorded after the recorder came back: got %v, want [ch_001 ch_002] in order", got)
	}
	if c := r.Counts(); c.Recorded != 2 || c.Queued != 0 || c.Dropped != 0 {
		t.Errorf("counts after: got %+v, want 2 recorded, nothing queued or dropped", c)
	}
	// The queue is empty again: the next effect is recorded at once.
	if out, err := r.Record(ctx, queuedEffect(3)); out != Recorded || err != nil {
		t.Errorf("Record with an empty queue: got %s, %v; want recorded", out, err)
	}
}

func TestQueuedRecorderNeverQueuesARejectedEffect(t *testing.T) {
	next := &flakyRecorder{reject: "ch_001"}
	r := newTestQueued(t, next)
	if out, err := r.Record(context.Background(), queuedEffect(1)); out != Rejected || !errors.Is(err, ErrRejected) {
		t.Errorf("refused by the recorder: got %s, %v; want rejected", out, err)
	}
	bad := queuedEffect(2)
	bad.ID = "has\x00a control character"
	if out, err := r.Record(context.Background(), bad); out != Rejected || !errors.Is(err, ErrRejected) {
		t.Errorf("invalid as an event: got %s, %v; want rejected before trying", out, err)
	}
	if _, calls := next.got(); calls != 1 {
		t.Errorf("recorder calls: got %d, want 1 (the invalid event is never sent)", calls)
	}
	if c := r.Counts(); c.Rejected != 2 || c.Queued != 0 {
		t.Errorf("counts: got %+v, want 2 rejected, none queued", c)
	}
}

func TestQueuedRecorderCountsWhatAFullQueueDrops(t *testing.T) {
	next := &flakyRecorder{down: true}
	q, err := OpenQueue(t.TempDir(), 2*effectSize(t, queuedEffect(0)))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	r := NewQueuedRecorder(next, q, QueuedConfig{Feed: "tap", Timeout: time.Second})
	for i := range 5 {
		r.Record(context.Background(), queuedEffect(i))
	}
	if c := r.Counts(); c.Queued != 2 || c.Dropped != 3 {
		t.Errorf("counts: got %+v, want 2 queued and 3 dropped", c)
	}
}

// TestQueuedRecorderQueuesTheRedactedEffect: an effect queued on disk
// while the server is down holds no secret of its target or summary, and
// what is recorded later is masked the same way.
func TestQueuedRecorderQueuesTheRedactedEffect(t *testing.T) {
	next := &flakyRecorder{down: true}
	q, err := OpenQueue(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	r := NewQueuedRecorder(next, q, QueuedConfig{Feed: "tap", Timeout: time.Second})
	e := queuedEffect(1)
	e.Target = "https://bob:pw_q1@hooks.acme.dev/in?sig=sig_q2&team=7"
	e.Summary = "POST /v1/charges?api_key=sk_q3 amount=5"
	if out, _ := r.Record(context.Background(), e); out != Queued {
		t.Fatalf("Record while down: got %s, want queued", out)
	}
	var disk strings.Builder
	entries, err := os.ReadDir(q.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range entries {
		b, _ := os.ReadFile(filepath.Join(q.Dir(), f.Name()))
		disk.Write(b)
	}
	for _, secret := range []string{"pw_q1", "sig_q2", "sk_q3"} {
		if strings.Contains(disk.String(), secret) {
			t.Errorf("queue files hold %q: %s", secret, disk.String())
		}
	}
	_, queued, ok := q.Oldest()
	if want := "https://[redacted]:[redacted]@hooks.acme.dev/in?sig=[redacted]&team=7"; !ok || queued.Target != want {
		t.Errorf("queued target: got %q, want %q", queued.Target, want)
	}
	if want := "POST /v1/charges?api_key=[redacted] amount=5"; queued.Summary != want {
		t.Errorf("queued summary: got %q, want %q", queued.Summary, want)
	}
}
