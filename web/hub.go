package web

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncetrace/oncetrace/ingest/writer"
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

// selectsAllButChanged reports that f lets through every message but the
// re-render notices, which only execution pages take.
func (f LiveFilter) selectsAllButChanged() bool {
	return f.ExecutionID == "" && f.Provider == "" && !f.FindingsOnly
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

// liveItem is one message as every subscriber shares it: the hub builds it
// once, and the first connection that writes it encodes it once for all
// the others — as a WebSocket text frame whose payload is the JSON a
// stream writes as its line, and, for the /live page's sockets, with its
// row's HTML.
type liveItem struct {
	msg LiveMessage

	once  sync.Once
	frame []byte // the WebSocket frame: its header, then json
	json  []byte // the message as JSON, without a newline
	err   error

	rowOnce  sync.Once
	rowFrame []byte
	rowErr   error
}

func newItem(m LiveMessage) *liveItem { return &liveItem{msg: m} }

// encoded is the message as JSON (without a newline) and as a frame.
func (it *liveItem) encoded() (json, frame []byte, err error) {
	it.once.Do(func() {
		var at int
		if it.frame, at, it.err = encodeFrame(it.msg); it.err == nil {
			it.json = it.frame[at:]
		}
	})
	return it.json, it.frame, it.err
}

// wsFrame is the WebSocket frame to send; withRowHTML adds the /live
// page's rendering of the row (view=live).
func (it *liveItem) wsFrame(withRowHTML bool) ([]byte, error) {
	if !withRowHTML || (it.msg.Type != "event" && it.msg.Type != "finding") {
		_, frame, err := it.encoded()
		return frame, err
	}
	it.rowOnce.Do(func() {
		it.rowFrame, _, it.rowErr = encodeFrame(withRow(context.Background(), it.msg))
	})
	return it.rowFrame, it.rowErr
}

// encodeFrame encodes m as JSON in an unmasked, unfragmented WebSocket
// text frame (RFC 6455 §5.2), as a server sends it, and says where the
// JSON starts. gorilla/websocket's PreparedMessage does the same, but
// looks its frame up under a lock on every write, and gorilla's write path
// takes two more locks a frame: the profile of a thousand clients spent
// more there than in the copies.
func encodeFrame(m LiveMessage) (frame []byte, payloadAt int, err error) {
	liveEncodings.Add(1)
	data, err := json.Marshal(m)
	if err != nil {
		return nil, 0, err
	}
	n := len(data)
	var header []byte
	switch {
	case n < 126:
		header = []byte{0x81, byte(n)} // FIN, text; the length
	case n <= 0xffff:
		header = binary.BigEndian.AppendUint16([]byte{0x81, 126}, uint16(n))
	default:
		header = binary.BigEndian.AppendUint64([]byte{0x81, 127}, uint64(n))
	}
	return append(header, data...), len(header), nil
}

// size is about what the item holds once encoded: the event's body, its
// JSON and its frame.
func (it *liveItem) size() int { return 3*len(it.msg.Event) + 256 }

// liveEncodings counts the live messages encoded, in every hub: each
// shared message is encoded once, however many connections write it.
var liveEncodings atomic.Int64

// liveBatch is what one round of the fan-out hands a subscriber: the items
// of the commits published since the last round, shared by every
// subscriber, and how many of them match its filter (what counts against
// its buffer).
type liveBatch struct {
	items []*liveItem
	n     int64
	gap   bool // the hub lost commits before these: read them from the store
}

// Hub fans committed events out to live subscribers, off the writer's
// path. Publish, the writer's OnCommit, only queues the commit and returns;
// the hub's own goroutine builds each message once, keeps the recent ones
// for clients that resume, and hands every subscriber one batch a round,
// never waiting for any: a subscriber that has fallen more than its buffer
// behind is dropped, told why, and may resume from the last sequence number
// it saw. Each connection writes on its own goroutine.
type Hub struct {
	buffer       int64
	historyBytes int

	// From Publish to the fan-out goroutine.
	inMu       sync.Mutex
	in         []writer.Commit
	inEvents   int
	lostSeq    int64 // the highest sequence of commits dropped from in since the last round
	lostCount  int64
	inClosed   bool
	wake       chan struct{}
	quit, done chan struct{}
	closeOnce  sync.Once
	published  atomic.Int64 // commits Publish took
	handled    atomic.Int64 // commits the fan-out has delivered or lost

	// Subscribers and the recent messages; mu.
	mu         sync.Mutex
	subs       map[*Subscription]struct{}
	closed     bool
	history    []*liveItem // event messages in sequence order, from histStart
	histStart  int
	histBytes  int
	histAfter  int64 // history holds every event published after it; -1 before the first
	slowDrops  atomic.Int64
	queueLimit int

	gate  *deliveryGate // what the connections pass to write
	pages storePages    // pages of the store, for clients resuming from it

	// commitWatch are told each round's commits (watchCommits); mu.
	commitWatch []func(commits []writer.Commit)
}

// Subscription is one subscriber's bounded buffer: the batches handed to
// it and not yet taken. (A queue rather than a channel: a thousand
// subscribers' channels sized for the buffer would hold tens of megabytes
// empty.)
type Subscription struct {
	filter LiveFilter
	ready  chan struct{} // signalled when a batch is queued or the subscription ends

	qmu    sync.Mutex
	queue  []liveBatch
	closed bool // no more batches; set with reason

	// pending counts the matching messages handed to the subscriber and
	// not yet written to its connection: what it is behind.
	pending   atomic.Int64
	overSince time.Time // since when pending has been over the buffer; h.mu
	// writeSince is when the write the connection is blocked in began, in
	// Unix nanoseconds; 0 when it is not writing.
	writeSince atomic.Int64
	reason     string      // why the subscription ended; set before closed
	ended      atomic.Bool // set with reason: the connection stops at once
}

// put queues a batch and signals the subscriber.
func (s *Subscription) put(b liveBatch) {
	s.qmu.Lock()
	s.queue = append(s.queue, b)
	s.qmu.Unlock()
	s.signal()
}

func (s *Subscription) signal() {
	select {
	case s.ready <- struct{}{}:
	default: // already signalled
	}
}

// take returns the batches queued, oldest first; open is false once the
// subscription has ended and nothing more will come.
func (s *Subscription) take() (batches []liveBatch, open bool) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	batches, s.queue = s.queue, nil
	return batches, !s.closed
}

// queued reports that batches wait to be taken.
func (s *Subscription) queued() bool {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return len(s.queue) > 0
}

// end closes the subscription for reason.
func (s *Subscription) end(reason string) {
	s.reason = reason
	s.ended.Store(true)
	s.qmu.Lock()
	s.closed = true
	s.qmu.Unlock()
	s.signal()
}

// beginWrite and endWrite bracket a write to the subscriber's connection
// that may block, for dropStalled.
func (s *Subscription) beginWrite() { s.writeSince.Store(time.Now().UnixNano()) }
func (s *Subscription) endWrite()   { s.writeSince.Store(0) }

// Reason says why the subscription ended; valid once it has.
func (s *Subscription) Reason() string { return s.reason }

// written accounts for n messages the subscriber has written (or taken
// for good).
func (s *Subscription) written(n int64) { s.pending.Add(-n) }

// Dropped reasons.
const (
	ReasonTooSlow  = "too slow — reconnecting"
	ReasonShutdown = "server shutting down"
)

const (
	// liveHistoryBytes bounds the recent messages the hub keeps so that a
	// client resuming a moment after it was dropped reads them from memory
	// instead of the store.
	liveHistoryBytes = 32 << 20
	// liveQueueEvents bounds the events waiting for the fan-out; beyond it
	// the oldest commits are dropped and subscribers read them from the
	// store instead.
	liveQueueEvents = 1 << 16
	// A subscriber may be more than its buffer behind after taking one
	// large commit, but not for longer than liveStallAfter; and one whose
	// connection has not taken a write for as long, with messages waiting,
	// is dropped too, even when nothing more is published.
	liveStallAfter = time.Second
	liveStallCheck = liveStallAfter / 4
	// liveRoundPerSubscriber spaces the fan-out's rounds: with 1,000
	// subscribers at most one round every 10 ms, that is at most about
	// 100,000 connection wake-ups a second however often the writer
	// commits; with 10, one every 0.1 ms.
	liveRoundPerSubscriber = 10 * time.Microsecond
)

// NewHub makes a hub whose subscribers each buffer up to buffer messages,
// and starts its fan-out goroutine, which Close stops.
func NewHub(buffer int) *Hub {
	if buffer <= 0 {
		buffer = 1024
	}
	h := &Hub{
		buffer: int64(buffer), historyBytes: liveHistoryBytes, queueLimit: liveQueueEvents,
		subs: map[*Subscription]struct{}{}, histAfter: -1,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		gate: newDeliveryGate(),
	}
	go h.run()
	return h
}

// Subscribe registers a subscriber; it receives what is published from now
// on. It returns nil once the hub is closed.
func (h *Hub) Subscribe(f LiveFilter) *Subscription {
	s, _, _ := h.subscribeAfter(f, -1)
	return s
}

// subscribeAfter registers a subscriber and, in the same step, returns the
// recent events after seq when the hub still holds all of them (covered):
// together with what the subscription then receives, nothing is missed.
func (h *Hub) subscribeAfter(f LiveFilter, after int64) (s *Subscription, recent []*liveItem, covered bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, false
	}
	s = &Subscription{filter: f, ready: make(chan struct{}, 1)}
	h.subs[s] = struct{}{}
	if after >= 0 {
		recent, covered = h.recentLocked(after)
	}
	return s, recent, covered
}

// recentAfter returns the recent events after seq, when the hub holds all
// of them.
func (h *Hub) recentAfter(after int64) ([]*liveItem, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.recentLocked(after)
}

func (h *Hub) recentLocked(after int64) ([]*liveItem, bool) {
	if h.histAfter < 0 || after < h.histAfter {
		return nil, false
	}
	hist := h.history[h.histStart:]
	i := sort.Search(len(hist), func(i int) bool { return hist[i].msg.Seq > after })
	// The history is only appended to and replaced, never changed in place,
	// so the caller may read this slice without the lock.
	return hist[i:len(hist):len(hist)], true
}

// Unsubscribe removes a subscriber; it is safe to call twice.
func (h *Hub) Unsubscribe(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		s.end("")
	}
}

// Publish is the writer's OnCommit: it runs after the commit, on the
// writer's goroutine, and only queues the commit for the fan-out, which it
// wakes. If the fan-out has fallen liveQueueEvents behind, the oldest
// commits are dropped; subscribers then read their events from the store.
func (h *Hub) Publish(c writer.Commit) {
	if len(c.Events) == 0 {
		return
	}
	h.inMu.Lock()
	if h.inClosed {
		h.inMu.Unlock()
		return
	}
	h.in = append(h.in, c)
	h.inEvents += len(c.Events)
	for h.inEvents > h.queueLimit && len(h.in) > 1 {
		old := h.in[0]
		h.in[0] = writer.Commit{}
		h.in = h.in[1:]
		h.inEvents -= len(old.Events)
		h.lostSeq = old.Events[len(old.Events)-1].Seq
		h.lostCount++
	}
	h.inMu.Unlock()
	h.published.Add(1)
	h.gate.committed(c.Took)
	select {
	case h.wake <- struct{}{}:
	default: // already woken
	}
}

// run is the fan-out goroutine: one round per wake-up, over every commit
// published since the last.
func (h *Hub) run() {
	defer close(h.done)
	stall := time.NewTicker(liveStallCheck)
	defer stall.Stop()
	var lastRound time.Time
	for {
		select {
		case <-h.quit:
			return
		case now := <-stall.C:
			h.dropStalled(now)
			h.gate.refresh(now)
			continue
		case <-h.wake:
		}
		// Rounds at most every liveRoundPerSubscriber × subscribers: with
		// many subscribers, commits close together go out in one round
		// rather than wake every connection for each.
		if gap := time.Duration(h.Subscribers())*liveRoundPerSubscriber - time.Since(lastRound); gap > 0 {
			select {
			case <-h.quit:
				return
			case <-time.After(gap):
			}
		}
		lastRound = time.Now()
		h.inMu.Lock()
		commits, lostSeq, lostCount := h.in, h.lostSeq, h.lostCount
		h.in, h.inEvents, h.lostSeq, h.lostCount = nil, 0, 0, 0
		h.inMu.Unlock()
		h.fanOut(commits, lostSeq)
		h.tellCommits(commits)
		h.handled.Add(int64(len(commits)) + lostCount)
	}
}

// watchCommits has fn told, after each round of the fan-out, the round's
// commits, in order (none when all were dropped: the fan-out fell behind;
// a watcher that needs every commit sees the gap in their sequence
// numbers). fn runs on the fan-out's goroutine: it must not block.
func (h *Hub) watchCommits(fn func(commits []writer.Commit)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.commitWatch = append(h.commitWatch, fn)
}

func (h *Hub) tellCommits(commits []writer.Commit) {
	h.mu.Lock()
	watch := h.commitWatch
	h.mu.Unlock()
	for _, fn := range watch {
		fn(commits)
	}
}

// fanOut builds the messages of commits once and hands them to every
// subscriber in one batch; lostSeq > 0 says commits up to it were dropped
// before.
func (h *Hub) fanOut(commits []writer.Commit, lostSeq int64) {
	var items, events []*liveItem
	bounds := make([]int, len(commits)+1) // commit i's items are items[bounds[i]:bounds[i+1]]
	allButChanged := make([]int64, len(commits))
	for i, c := range commits {
		for _, e := range c.Events {
			it := newItem(eventMessage(e.Seq, e.Event))
			items = append(items, it)
			events = append(events, it)
		}
		last := c.Events[len(c.Events)-1].Seq
		for j := range c.NewCritical {
			f := c.NewCritical[j]
			items = append(items, newItem(LiveMessage{Type: "finding", Seq: last, ExecutionID: f.ExecutionID, Finding: &f}))
		}
		allButChanged[i] = int64(len(c.Events) + len(c.NewCritical))
		for _, id := range c.Executions {
			items = append(items, newItem(LiveMessage{Type: "changed", Seq: last, ExecutionID: id, changed: true}))
		}
		bounds[i+1] = len(items)
	}
	gap := lostSeq > 0

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.remember(events, lostSeq)
	for s := range h.subs {
		// Commit by commit, as if each were published alone: a subscriber
		// that has written all it was given may take a commit of any size
		// (dropStalled sees that it writes it); one that has not is
		// dropped when a commit would put it more than its buffer behind.
		p, n, slow := s.pending.Load(), int64(0), false
		for i := range commits {
			k := allButChanged[i]
			if !s.filter.selectsAllButChanged() {
				k = 0
				for _, it := range items[bounds[i]:bounds[i+1]] {
					if s.filter.matches(it.msg) {
						k++
					}
				}
			}
			if k > 0 && p+n > 0 && p+n+k > h.buffer {
				slow = true
				break
			}
			n += k
		}
		if slow {
			h.drop(s, ReasonTooSlow)
			continue
		}
		if n == 0 && !gap {
			continue
		}
		s.pending.Add(n)
		s.put(liveBatch{items: items, n: n, gap: gap})
	}
}

// dropStalled drops the subscribers that have been more than their buffer
// behind, or blocked in a write with messages waiting, for liveStallAfter.
func (h *Hub) dropStalled(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		p := s.pending.Load()
		if since := s.writeSince.Load(); since != 0 && p > 0 && now.Sub(time.Unix(0, since)) >= liveStallAfter {
			h.drop(s, ReasonTooSlow)
			continue
		}
		switch {
		case p <= h.buffer:
			s.overSince = time.Time{}
		case s.overSince.IsZero():
			s.overSince = now
		case now.Sub(s.overSince) >= liveStallAfter:
			h.drop(s, ReasonTooSlow)
		}
	}
}

// remember appends a round's events to the history and forgets the oldest
// beyond its budget; h.mu is held.
func (h *Hub) remember(events []*liveItem, lostSeq int64) {
	if lostSeq > 0 {
		// The history must hold every event after histAfter: start again.
		h.history, h.histStart, h.histBytes, h.histAfter = nil, 0, 0, lostSeq
	}
	if len(events) == 0 {
		return
	}
	if h.histAfter < 0 {
		// Events before the first this hub saw are older than it.
		h.histAfter = events[0].msg.Seq - 1
	}
	for _, it := range events {
		h.history = append(h.history, it)
		h.histBytes += it.size()
	}
	for h.histBytes > h.historyBytes && h.histStart < len(h.history)-1 {
		old := h.history[h.histStart]
		h.histStart++
		h.histBytes -= old.size()
		h.histAfter = old.msg.Seq
	}
	// Forgotten items stay reachable through the slice until it is
	// replaced; replace it (never compact in place: readers may hold it).
	if h.histStart >= 1024 && h.histStart*4 >= len(h.history) {
		h.history = append([]*liveItem(nil), h.history[h.histStart:]...)
		h.histStart = 0
	}
}

// drop ends a subscription; h.mu is held.
func (h *Hub) drop(s *Subscription, reason string) {
	if reason == ReasonTooSlow {
		h.slowDrops.Add(1)
	}
	delete(h.subs, s)
	s.end(reason)
}

// Close ends every subscription (the connections then close cleanly) and
// stops the fan-out; what is published afterwards is ignored.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	for s := range h.subs {
		h.drop(s, ReasonShutdown)
	}
	h.history = nil
	h.mu.Unlock()
	h.closeOnce.Do(func() {
		h.inMu.Lock()
		h.inClosed, h.in = true, nil
		h.inMu.Unlock()
		close(h.quit)
		<-h.done
	})
}

// Subscribers counts the live subscribers.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// SlowDrops counts the subscribers dropped so far for falling behind.
func (h *Hub) SlowDrops() int64 { return h.slowDrops.Load() }
