package web

import (
	"fmt"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/trace"
)

// hubCommit is a commit of attempt events with sequence numbers from..to.
func hubCommit(t *testing.T, from, to int64) writer.Commit {
	t.Helper()
	var c writer.Commit
	for seq := from; seq <= to; seq++ {
		raw := fmt.Sprintf(`{"type":"attempt","execution_id":"exec_hub","step_id":"step-%d","attempt":1,"provider":"mail-api"}`, seq)
		ev, err := ingest.ParseEvent([]byte(raw), ingest.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		c.Events = append(c.Events, writer.Committed{Seq: seq, Event: ev})
	}
	return c
}

// publishWithin runs Publish and fails the test if it does not return
// promptly: Publish runs on the writer's goroutine and must never wait.
// Then it waits for the hub's fan-out to have handed the commit out.
func publishWithin(t *testing.T, h *Hub, c writer.Commit) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		h.Publish(c)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish: still running after 5s, want it never to wait for a subscriber")
	}
	waitFannedOut(t, h)
}

// waitFannedOut waits until the fan-out has handled every published commit.
func waitFannedOut(t *testing.T, h *Hub) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); h.handled.Load() < h.published.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("fan-out: handled %d of %d commits after 5s", h.handled.Load(), h.published.Load())
		}
	}
}

// drain takes what is buffered without waiting; closed reports that the
// channel was closed after it.
func drain(s *Subscription) (seqs []int64, closed bool) {
	batches, open := s.take()
	for _, b := range batches {
		s.written(b.n)
		for _, it := range b.items {
			if s.filter.matches(it.msg) {
				seqs = append(seqs, it.msg.Seq)
			}
		}
	}
	return seqs, !open
}

func TestHubDropsFullSubscriber(t *testing.T) {
	h := NewHub(2)
	slow := h.Subscribe(LiveFilter{})
	fast := h.Subscribe(LiveFilter{})

	publishWithin(t, h, hubCommit(t, 1, 2)) // fills both buffers
	if got, closed := drain(fast); len(got) != 2 || closed {
		t.Fatalf("fast subscriber after seq 1-2: got %v (closed %v), want [1 2] and open", got, closed)
	}
	publishWithin(t, h, hubCommit(t, 3, 3)) // slow has no room: dropped
	if got, closed := drain(fast); len(got) != 1 || got[0] != 3 || closed {
		t.Errorf("fast subscriber after seq 3: got %v (closed %v), want [3] and open", got, closed)
	}
	got, closed := drain(slow)
	if len(got) != 2 || got[0] != 1 || got[1] != 2 || !closed {
		t.Errorf("slow subscriber: got %v (closed %v), want [1 2] then closed", got, closed)
	}
	if slow.Reason() != ReasonTooSlow {
		t.Errorf("slow subscriber's reason: got %q, want %q", slow.Reason(), ReasonTooSlow)
	}
	if n := h.Subscribers(); n != 1 {
		t.Errorf("subscribers after the drop: got %d, want 1", n)
	}
	// Publishing more never touches the dropped subscriber (a send on its
	// closed channel would panic).
	publishWithin(t, h, hubCommit(t, 4, 10))
}

func TestHubUnsubscribeTwice(t *testing.T) {
	h := NewHub(4)
	s := h.Subscribe(LiveFilter{})
	h.Unsubscribe(s)
	h.Unsubscribe(s) // must not close C again
	if batches, open := s.take(); open || len(batches) > 0 {
		t.Errorf("after Unsubscribe: got %d batches (open %v), want none and ended", len(batches), open)
	}
	if n := h.Subscribers(); n != 0 {
		t.Errorf("subscribers: got %d, want 0", n)
	}

	// Unsubscribing one the hub already dropped, or one the hub closed,
	// is as harmless: the feed always unsubscribes when it ends.
	dropped := h.Subscribe(LiveFilter{})
	publishWithin(t, h, hubCommit(t, 1, 5))
	h.Unsubscribe(dropped)
	open := h.Subscribe(LiveFilter{})
	h.Close()
	h.Unsubscribe(open)
	h.Close()
	if open.Reason() != ReasonShutdown {
		t.Errorf("reason after Close: got %q, want %q", open.Reason(), ReasonShutdown)
	}
	if s := h.Subscribe(LiveFilter{}); s != nil {
		t.Error("Subscribe after Close: got a subscription, want nil")
	}
	publishWithin(t, h, hubCommit(t, 6, 6))
}

func TestLiveFilterMatches(t *testing.T) {
	ev := eventMessage(7, hubCommit(t, 7, 7).Events[0].Event)
	finding := LiveMessage{Type: "finding", Seq: 7, ExecutionID: "exec_hub", Finding: &trace.Finding{Rule: trace.RuleDuplicateEffect}}
	changed := LiveMessage{Type: "changed", Seq: 7, ExecutionID: "exec_hub", changed: true}
	tests := []struct {
		name   string
		filter LiveFilter
		m      LiveMessage
		want   bool
	}{
		{"no filter, event", LiveFilter{}, ev, true},
		{"no filter, finding", LiveFilter{}, finding, true},
		{"no filter, changed (only execution pages re-render)", LiveFilter{}, changed, false},
		{"execution, same", LiveFilter{ExecutionID: "exec_hub"}, ev, true},
		{"execution, other", LiveFilter{ExecutionID: "exec_other"}, ev, false},
		{"execution, changed", LiveFilter{ExecutionID: "exec_hub"}, changed, true},
		{"provider, same", LiveFilter{Provider: "mail-api"}, ev, true},
		{"provider, other", LiveFilter{Provider: "pay-api"}, ev, false},
		{"findings only, event", LiveFilter{FindingsOnly: true}, ev, false},
		{"findings only, finding", LiveFilter{FindingsOnly: true}, finding, true},
	}
	for _, tt := range tests {
		if got := tt.filter.matches(tt.m); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
