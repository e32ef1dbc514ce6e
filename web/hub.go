package web

import (
	"encoding/json"
	"sync"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// LiveMessage is what a live client receives, as JSON.
type LiveMessage struct {
	// Type is "event" (a committed event), "finding" (a new critical
	// finding), "html" (re-rendered fragments of an execution page),
	// "dropped" (the server gave up on this client) or "end" (the
	// execution ended; the page stops listening).
	Type        string            `json:"type"`
	Seq         int64             `json:"seq,omitempty"`
	ExecutionID string            `json:"execution_id,omitempty"`
	EventType   trace.EventType   `json:"event_type,omitempty"`
	Event       json.RawMessage   `json:"event,omitempty"`
	Finding     *trace.Finding    `json:"finding,omitempty"`
	Fragments   map[string]string `json:"fragments,omitempty"`
	Reason      string            `json:"reason,omitempty"`

	provider string // for the provider filter
	name     string // the execution's name, when the event carries it
	changed  bool   // internal: the execution was re-audited
}

// LiveFilter selects what a subscriber receives. Zero values select all.
type LiveFilter struct {
	ExecutionID  string
	Name         string // matched by the feed, which can look names up
	Provider     string
	FindingsOnly bool
}

func (f LiveFilter) matches(m LiveMessage) bool {
	if f.ExecutionID != "" && m.ExecutionID != f.ExecutionID {
		return false
	}
	if m.changed {
		return f.ExecutionID != "" // only execution pages re-render
	}
	if f.FindingsOnly && m.Type != "finding" {
		return false
	}
	if f.Provider != "" && m.Type == "event" && m.provider != f.Provider {
		return false
	}
	return true
}

// eventMessage turns a stored event into what clients receive.
func eventMessage(seq int64, ev trace.Event) LiveMessage {
	m := LiveMessage{Type: "event", Seq: seq, ExecutionID: ev.ExecutionID(), EventType: ev.Type, Event: ev.Body}
	switch ev.Type {
	case trace.EventAttempt:
		m.provider = ev.Attempt.Provider
	case trace.EventEffect:
		m.provider = ev.Effect.Provider
	case trace.EventExecution:
		m.name = ev.Execution.Name
	}
	return m
}

// Hub fans committed events out to live subscribers. Publish never waits:
// a subscriber whose buffer is full is dropped, told why, and may resume
// from the last sequence number it saw.
type Hub struct {
	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	closed bool
	buffer int
}

// Subscription is one subscriber's bounded buffer.
type Subscription struct {
	C      chan LiveMessage // closed when the hub drops the subscriber or closes
	filter LiveFilter
	reason string // why C was closed; set before the close
}

// Reason says why the subscription ended; valid once C is closed.
func (s *Subscription) Reason() string { return s.reason }

// Dropped reasons.
const (
	ReasonTooSlow  = "too slow — reconnecting"
	ReasonShutdown = "server shutting down"
)

// NewHub makes a hub whose subscribers each buffer up to buffer messages.
func NewHub(buffer int) *Hub {
	if buffer <= 0 {
		buffer = 1024
	}
	return &Hub{subs: map[*Subscription]struct{}{}, buffer: buffer}
}

// Subscribe registers a subscriber; it receives what is published from now
// on. It returns nil once the hub is closed.
func (h *Hub) Subscribe(f LiveFilter) *Subscription {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	s := &Subscription{C: make(chan LiveMessage, h.buffer), filter: f}
	h.subs[s] = struct{}{}
	return s
}

// Unsubscribe removes a subscriber; it is safe to call twice.
func (h *Hub) Unsubscribe(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.C)
	}
}

// Publish is the writer's OnCommit: it runs after the commit, on the
// writer's goroutine, and never blocks.
func (h *Hub) Publish(c ingest.Commit) {
	msgs := make([]LiveMessage, 0, len(c.Events)+len(c.NewCritical)+len(c.Executions))
	for _, e := range c.Events {
		msgs = append(msgs, eventMessage(e.Seq, e.Event))
	}
	last := c.Events[len(c.Events)-1].Seq
	for i := range c.NewCritical {
		f := c.NewCritical[i]
		msgs = append(msgs, LiveMessage{Type: "finding", Seq: last, ExecutionID: f.ExecutionID, Finding: &f})
	}
	for _, id := range c.Executions {
		msgs = append(msgs, LiveMessage{Type: "changed", Seq: last, ExecutionID: id, changed: true})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		for _, m := range msgs {
			if !s.filter.matches(m) {
				continue
			}
			select {
			case s.C <- m:
			default:
				h.drop(s, ReasonTooSlow)
			}
			if _, live := h.subs[s]; !live {
				break
			}
		}
	}
}

// drop ends a subscription; h.mu is held.
func (h *Hub) drop(s *Subscription, reason string) {
	s.reason = reason
	delete(h.subs, s)
	close(s.C)
}

// Close ends every subscription; the connections then close cleanly.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		h.drop(s, ReasonShutdown)
	}
}

// Subscribers counts the live subscribers.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}
