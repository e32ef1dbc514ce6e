package web

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/oncetrace/oncetrace/ingest/writer"
)

// TestHubQueueDropsOldestAndMarksTheGap: when the fan-out falls more than
// its queue behind the writer, Publish drops the oldest commits rather
// than wait or grow; the next batch says so, and the hub's recent
// messages no longer claim to cover what was lost.
func TestHubQueueDropsOldestAndMarksTheGap(t *testing.T) {
	h := NewHub(1000)
	defer h.Close()
	h.inMu.Lock()
	h.queueLimit = 10
	h.inMu.Unlock()
	s := h.Subscribe(LiveFilter{})

	release := holdFanOut(h)
	defer release()
	for from := int64(1); from <= 30; from += 5 {
		publishWithinOnly(t, h, hubCommit(t, from, from+4))
	}
	release()
	waitFannedOut(t, h)

	var seqs []int64
	gaps := 0
	batches, _ := s.take()
	for _, b := range batches {
		if b.gap {
			gaps++
		}
		for _, it := range b.items {
			seqs = append(seqs, it.msg.Seq)
		}
	}
	if gaps != 1 {
		t.Errorf("batches marking a gap: got %d, want 1", gaps)
	}
	if !slices.IsSorted(seqs) || len(seqs) == 0 || seqs[len(seqs)-1] != 30 {
		t.Fatalf("seqs handed out: got %v, want increasing and ending at 30", seqs)
	}
	if len(seqs) >= 30 || len(seqs) < 10 {
		t.Errorf("seqs handed out: got %d, want fewer than the 30 published (some lost) and at least the queue's 10", len(seqs))
	}
	// The history restarts after the loss: reading back from before it
	// must go to the store.
	if _, covered := h.recentAfter(0); covered {
		t.Error("recentAfter(0) after a loss: covered, want not (the lost events are not in memory)")
	}
	if recent, covered := h.recentAfter(25); !covered || len(recent) != 5 {
		t.Errorf("recentAfter(25): got %d items (covered %v), want 5 and covered", len(recent), covered)
	}
}

// publishWithinOnly runs Publish and fails if it does not return promptly,
// without waiting for the fan-out (which the caller may be holding).
func publishWithinOnly(t *testing.T, h *Hub, c writer.Commit) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		h.Publish(c)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish: still running after 5s with the fan-out held, want it never to wait")
	}
}

// TestLiveGapReadBackFromTheStore: a client whose hub lost commits (the
// fan-out held while more than its queue was committed) still gets every
// event, in order and once: the gap sends it to the store.
func TestLiveGapReadBackFromTheStore(t *testing.T) {
	fs := startFanOutServer(t, 4096)
	fs.hub.inMu.Lock()
	fs.hub.queueLimit = 20
	fs.hub.inMu.Unlock()
	conn, _, err := websocket.DefaultDialer.Dial(fs.wsURL("after=0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for deadline := time.Now().Add(10 * time.Second); fs.hub.Subscribers() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the client did not subscribe")
		}
	}
	release := holdFanOut(fs.hub)
	defer release()
	for b := range 8 {
		fs.postBatch(t, b, 10)
	}
	release()
	got, err := readSeqs(conn, 80)
	if err != nil {
		t.Fatalf("after %d events: %v", len(got), err)
	}
	want := make([]int64, 80)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(got, want) {
		t.Errorf("seqs: got %v, want 1..80 in order, once each", got)
	}
	// It did take the gap path: commits were lost between writer and fan-out.
	waitFannedOut(t, fs.hub)
	if _, covered := fs.hub.recentAfter(0); covered {
		t.Error("recentAfter(0): covered, want not: the test meant to lose commits in the hub")
	}
}

// TestStorePagesShared: resuming clients that ask for the same page at
// once read it once; a page at the end of the log (not full) is not kept,
// nor is a failed read; the oldest pages are forgotten beyond the limit.
func TestStorePagesShared(t *testing.T) {
	var p storePages
	var loads atomic.Int64
	full := func(ctx context.Context, after int64) ([]*liveItem, error) {
		loads.Add(1)
		time.Sleep(20 * time.Millisecond) // long enough for the others to find it being read
		items := make([]*liveItem, storePageSize)
		for i := range items {
			items[i] = newItem(LiveMessage{Type: "event", Seq: after + int64(i) + 1})
		}
		return items, nil
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			items, err := p.get(context.Background(), 0, full)
			if err != nil || len(items) != storePageSize || items[0].msg.Seq != 1 {
				t.Errorf("get(0): got %d items, %v", len(items), err)
			}
		})
	}
	wg.Wait()
	if n := loads.Load(); n != 1 {
		t.Errorf("loads for 50 clients asking for one page: got %d, want 1", n)
	}

	short := func(ctx context.Context, after int64) ([]*liveItem, error) {
		loads.Add(1)
		return []*liveItem{newItem(LiveMessage{Type: "event", Seq: after + 1})}, nil
	}
	failing := func(ctx context.Context, after int64) ([]*liveItem, error) {
		loads.Add(1)
		return nil, errors.New("disk on fire")
	}
	loads.Store(0)
	for range 2 {
		_, _ = p.get(context.Background(), storePageSize, short)
		_, _ = p.get(context.Background(), 2*storePageSize, failing)
	}
	if n := loads.Load(); n != 4 {
		t.Errorf("loads of an unfilled page and a failing one, twice each: got %d, want 4 (neither kept)", n)
	}

	for i := range storePagesKept + 5 {
		_, _ = p.get(context.Background(), int64(i+10)*storePageSize, full)
	}
	if len(p.pages) != storePagesKept || len(p.order) != storePagesKept {
		t.Errorf("pages kept: got %d (order %d), want %d", len(p.pages), len(p.order), storePagesKept)
	}
	if _, ok := p.pages[0]; ok {
		t.Error("the oldest page is still kept beyond the limit")
	}
}

// TestDeliveryGateGivesWayToABusyWriter: delivery is charged and held to
// its share only while the writer has been committing most of the time.
func TestDeliveryGateGivesWayToABusyWriter(t *testing.T) {
	g := newDeliveryGate()
	if start := g.enter(); !start.IsZero() {
		t.Error("enter with an idle writer: charged, want not")
	}
	g.leave()

	g.committed(liveBusyWindow) // a writer committing all the time
	if !g.throttling.Load() {
		t.Fatal("after a window's worth of commits: not throttling, want throttling")
	}
	g.charge(liveBurst) // delivery owes its whole burst
	before := time.Now()
	start := g.enter()
	g.leave()
	if start.IsZero() {
		t.Error("enter with a busy writer: not charged, want charged")
	}
	if waited, least := time.Since(before), time.Duration(float64(liveBurst)/g.share); waited < least/2 {
		t.Errorf("enter owing %v at a share of %.2f: waited %v, want about %v", liveBurst, g.share, waited, least)
	}

	g.refresh(time.Now().Add(10 * liveBusyWindow)) // the writer has been quiet since
	if g.throttling.Load() {
		t.Error("after ten quiet windows: throttling, want not")
	}
}
