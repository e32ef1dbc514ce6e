package web

import (
	"context"
	"fmt"
	"sync"

	"github.com/oncetrace/oncetrace/ingest"
)

// After a burst, many clients resume from the store at once, each from its
// own last sequence but over the same events. Read one by one, each event
// would be parsed and encoded once a client; storePages reads the log in
// pages aligned on sequence numbers and shares each page's messages, so
// that a thousand resuming clients cost one read, one parse and one
// encoding an event, plus their copies.

const (
	storePageSize  = 256 // events a page
	storePagesKept = 32  // pages kept, the oldest read forgotten first
)

type storePages struct {
	mu    sync.Mutex
	pages map[int64]*storePage // by the sequence the page follows, a multiple of storePageSize
	order []int64              // the keys, oldest first
}

type storePage struct {
	done  chan struct{} // closed once items or err is set
	items []*liveItem
	err   error
}

// get returns the page of up to storePageSize events after seq after (a
// multiple of storePageSize), reading it with load unless it is kept or
// being read. A page that is not full is the log's end at the time of
// reading: it is shared with those already waiting for it, not kept.
func (p *storePages) get(ctx context.Context, after int64, load func(ctx context.Context, after int64) ([]*liveItem, error)) ([]*liveItem, error) {
	p.mu.Lock()
	if p.pages == nil {
		p.pages = map[int64]*storePage{}
	}
	pg, ok := p.pages[after]
	if !ok {
		pg = &storePage{done: make(chan struct{})}
		p.pages[after] = pg
		p.order = append(p.order, after)
	}
	p.mu.Unlock()
	if ok {
		select {
		case <-pg.done:
			return pg.items, pg.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	pg.items, pg.err = load(ctx, after)
	close(pg.done)
	p.mu.Lock()
	defer p.mu.Unlock()
	if pg.err != nil || len(pg.items) < storePageSize {
		p.forget(after, pg)
	}
	for len(p.order) > storePagesKept {
		delete(p.pages, p.order[0])
		p.order = p.order[1:]
	}
	return pg.items, pg.err
}

// forget drops the page kept under key if it is pg; p.mu is held.
func (p *storePages) forget(key int64, pg *storePage) {
	if p.pages[key] != pg {
		return
	}
	delete(p.pages, key)
	for i, k := range p.order {
		if k == key {
			p.order = append(p.order[:i:i], p.order[i+1:]...)
			break
		}
	}
}

// loadStorePage reads the events after seq after from the store as
// messages.
func (s *Server) loadStorePage(ctx context.Context, after int64) ([]*liveItem, error) {
	events, err := s.cfg.DB.EventsAfter(ctx, after, "", storePageSize)
	if err != nil {
		return nil, err
	}
	items := make([]*liveItem, len(events))
	for i, e := range events {
		ev, err := ingest.ParseStored(e.Body)
		if err != nil {
			return nil, fmt.Errorf("live: stored event %d: %w", e.Seq, err)
		}
		items[i] = newItem(eventMessage(e.Seq, ev))
	}
	return items, nil
}
