package web

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// followBatch is how many events one read of the store takes, and
// followPoll how often the follower reads it without a notice: a notice
// lost while the listener reconnected is then caught up within it.
const (
	followBatch = 1000
	followPoll  = 2 * time.Second
)

// Follower feeds a hub from the store rather than from this process's
// writer, for a database several instances share: every instance's live
// tail sees the commits of all of them, in sequence order (which is
// commit order: the engine serialises writers), each event once. Notices
// (store.Notice, from the engine's LISTEN) say how far to read and what
// the committing writer re-audited; the events come from the store.
type Follower struct {
	hub    *Hub
	db     *store.DB
	logger *slog.Logger
	wake   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	notices []store.Notice // not yet published, any order
	target  int64          // the highest sequence number a notice named
	last    int64          // the last sequence number published
}

// FollowStore starts a follower publishing every commit after sequence
// number from to the hub, until ctx ends.
func (h *Hub) FollowStore(ctx context.Context, db *store.DB, from int64, logger *slog.Logger) *Follower {
	f := &Follower{hub: h, db: db, logger: logger, wake: make(chan struct{}, 1), done: make(chan struct{}), last: from, target: from}
	go f.run(ctx)
	return f
}

// Notice queues a commit's notice; it never blocks, so the listener never
// waits for the store or the hub.
func (f *Follower) Notice(n store.Notice) {
	f.mu.Lock()
	if n.Seq > 0 {
		f.notices = append(f.notices, n)
		f.target = max(f.target, n.Seq)
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Done is closed when the follower has stopped.
func (f *Follower) Done() <-chan struct{} { return f.done }

func (f *Follower) run(ctx context.Context) {
	defer close(f.done)
	poll := time.NewTicker(followPoll)
	defer poll.Stop()
	for {
		polled := false
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-poll.C:
			polled = true
		}
		if err := f.catchUp(ctx, polled); err != nil && ctx.Err() == nil {
			f.logger.Warn("live: reading the store for other instances' commits", "err", err)
		}
	}
}

// catchUp publishes every stored event up to the highest notice (or, when
// polled, up to the newest stored event), one commit per notice.
func (f *Follower) catchUp(ctx context.Context, polled bool) error {
	f.mu.Lock()
	target := f.target
	f.mu.Unlock()
	if polled {
		newest, err := f.db.LastSeq(ctx)
		if err != nil {
			return err
		}
		target = max(target, newest)
	}
	for f.last < target {
		stored, err := f.db.EventsAfter(ctx, f.last, "", followBatch)
		if err != nil {
			return err
		}
		if len(stored) == 0 {
			return nil
		}
		var events []writer.Committed
		for _, s := range stored {
			if s.Seq > target {
				break
			}
			ev, err := ingest.ParseStored(s.Body)
			if err != nil {
				return err
			}
			events = append(events, writer.Committed{Seq: s.Seq, Event: ev})
		}
		if len(events) == 0 {
			return nil
		}
		for _, c := range f.commits(events) {
			f.hub.Publish(c)
		}
		f.last = events[len(events)-1].Seq
	}
	return nil
}

// commits cuts events into one commit per notice that covers them, with
// the notice's executions and findings; events no complete notice
// covers yet (a longer commit read in two batches, or found by a poll)
// form one commit naming the executions its events name.
func (f *Follower) commits(events []writer.Committed) []writer.Commit {
	f.mu.Lock()
	sort.Slice(f.notices, func(i, j int) bool { return f.notices[i].Seq < f.notices[j].Seq })
	lastSeq := events[len(events)-1].Seq
	var use []store.Notice
	keep := f.notices[:0]
	for _, n := range f.notices {
		switch {
		case n.Seq <= f.last:
			// Already published, by a poll that ran ahead of it.
		case n.Seq <= lastSeq:
			use = append(use, n)
		default:
			keep = append(keep, n)
		}
	}
	f.notices = keep
	f.mu.Unlock()

	var out []writer.Commit
	rest := events
	for _, n := range use {
		i := sort.Search(len(rest), func(i int) bool { return rest[i].Seq > n.Seq })
		if i == 0 {
			continue
		}
		c := writer.Commit{Events: rest[:i], Executions: n.Executions, NewCritical: n.Critical}
		if n.Partial || len(n.Executions) == 0 {
			c.Executions = executionsNamed(rest[:i])
		}
		out = append(out, c)
		rest = rest[i:]
	}
	if len(rest) > 0 {
		out = append(out, writer.Commit{Events: rest, Executions: executionsNamed(rest)})
	}
	return out
}

// executionsNamed are the executions a commit's events name, for a commit
// whose notice did not say which it re-audited.
func executionsNamed(events []writer.Committed) []string {
	seen := map[string]bool{}
	var out []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, e := range events {
		add(e.Event.ExecutionID())
		if e.Event.Type == trace.EventEffect {
			add(e.Event.Effect.ExecutionID)
		}
	}
	sort.Strings(out)
	return out
}
