package web

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/views"
)

// maxCachedItems bounds the execution models kept (attempts, effects,
// spans and findings, summed over the models): two executions of 10,000
// attempts, or many small ones. A model of 10,000 attempts, 2,500 effects
// and 1,000 findings holds 10.7 MiB (0.75 KiB an item), so the bound is
// about 22 MiB.
const maxCachedItems = 30_000

// executionCache keeps the models of the executions read last, each with
// the store's change token of the snapshot it was built from. A request
// reads the token now (one query on two rows); while it is unchanged the
// model answers as a new read would, so the page's reloads, its
// fragments ("show more", the detail panels) and several readers of one
// link cost one query and the rendering, not a read of the whole
// execution. Any commit anywhere changes the token, so under steady
// ingest the cache saves little and every answer is read afresh.
//
// Concurrent misses for one execution share one read (the first
// request's) when it turns out to be of the state they asked at.
type executionCache struct {
	mu       sync.Mutex
	entries  map[executionKey]*cachedExecution
	inflight map[executionKey]*executionBuild
	items    int
	clock    uint64
	maxItems int
	carryMin int // the smallest model carried over commits (execution_carry.go)
	// sharing reads what a model's dependencies need from the store.
	sharing func(ctx context.Context, keys, traces []string) ([]string, error)
}

// executionKey is what a model depends on besides the stored rows: the
// nearby orphans are read only when asked for.
type executionKey struct {
	id     string
	nearby bool
}

type cachedExecution struct {
	token store.ChangeToken
	x     views.Execution
	items int
	used  uint64
	// readAt is when a request last took or read it; zero for a model
	// only ever built ahead (execution_warm.go).
	readAt time.Time
	// deps say which commits cannot change it (execution_carry.go); nil
	// for a model never carried.
	deps *modelDeps
}

// executionBuild is one read in flight; done closes when x, token and err
// are set.
type executionBuild struct {
	done  chan struct{}
	x     views.Execution
	token store.ChangeToken
	err   error
}

func newExecutionCache(maxItems int) *executionCache {
	return &executionCache{entries: map[executionKey]*cachedExecution{}, inflight: map[executionKey]*executionBuild{}, maxItems: maxItems,
		carryMin: carryMinItems}
}

// known says whether a model of key is kept or being read, whatever its
// token: only then is the token worth a query.
func (c *executionCache) known(key executionKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[key] != nil || c.inflight[key] != nil || !key.nearby && c.entries[executionKey{id: key.id, nearby: true}] != nil
}

// get returns the model of key built at token, for a request. A model
// with the nearby orphans answers for one without: they are only an
// addition.
func (c *executionCache) get(key executionKey, token store.ChangeToken) (views.Execution, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if (e == nil || e.token != token) && !key.nearby {
		e = c.entries[executionKey{id: key.id, nearby: true}]
	}
	if e == nil || e.token != token {
		return views.Execution{}, false
	}
	c.clock++
	e.used, e.readAt = c.clock, time.Now()
	return e.x, true
}

// has reports whether key's model is kept at token, without using it.
func (c *executionCache) has(key executionKey, token store.ChangeToken) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	return e != nil && e.token == token
}

// staleRead lists the executions whose page models (with the nearby
// orphans) are kept at another token than token, hold at least minItems
// and were read by a request since since: the pages someone is reading
// that the next request would read from the store again. Most recently
// read first, with their items.
func (c *executionCache) staleRead(token store.ChangeToken, minItems int, since time.Time) []sizedExecution {
	c.mu.Lock()
	defer c.mu.Unlock()
	type stale struct {
		sizedExecution
		readAt time.Time
	}
	var found []stale
	for k, e := range c.entries {
		if k.nearby && e.token != token && e.items >= minItems && e.readAt.After(since) {
			found = append(found, stale{sizedExecution{k.id, e.items}, e.readAt})
		}
	}
	slices.SortFunc(found, func(a, b stale) int { return b.readAt.Compare(a.readAt) })
	out := make([]sizedExecution, len(found))
	for i, f := range found {
		out[i] = f.sizedExecution
	}
	return out
}

// anyBig reports whether a model of at least minItems is kept.
func (c *executionCache) anyBig(minItems int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.items >= minItems {
			return true
		}
	}
	return false
}

// sizedExecution is an execution and what its model holds or would
// (modelItems; store.ExecutionSizes).
type sizedExecution struct {
	id    string
	items int
}

// build reads and builds key's model with read, unless a read of it is in
// flight already and the caller saw a token (want, when saw): then it
// waits for that read and takes its model if it is of want, else reads
// its own. A request never gets a state older than the one it saw.
// Every model read is kept; request says whether a request asked for it
// (rather than the warmer, ahead of one).
func (c *executionCache) build(ctx context.Context, key executionKey, want store.ChangeToken, saw, request bool,
	read func() (views.Execution, store.ChangeToken, error)) (views.Execution, error) {
	c.mu.Lock()
	if b := c.inflight[key]; b != nil && saw {
		c.mu.Unlock()
		select {
		case <-b.done:
			if b.err == nil && b.token == want {
				return b.x, nil
			}
		case <-ctx.Done():
			return views.Execution{}, ctx.Err()
		}
		c.mu.Lock()
	}
	b := &executionBuild{done: make(chan struct{})}
	if c.inflight[key] == nil {
		c.inflight[key] = b
	}
	c.mu.Unlock()

	b.x, b.token, b.err = read()
	var deps *modelDeps
	c.mu.Lock()
	carryMin := c.carryMin
	c.mu.Unlock()
	if b.err == nil && c.sharing != nil {
		deps = dependencies(b.x, carryMin, func(keys, traces []string) ([]string, error) { return c.sharing(ctx, keys, traces) })
	}
	c.mu.Lock()
	if c.inflight[key] == b {
		delete(c.inflight, key)
	}
	if b.err == nil {
		c.put(key, b.x, b.token, request, deps)
	}
	c.mu.Unlock()
	close(b.done)
	return b.x, b.err
}

// put keeps x under key, then drops the least recently used models until
// the items kept are within the bound (the newest is kept even when it
// alone is over it: the next request for it is the likeliest). A model
// built ahead keeps the time its predecessor was last read. c.mu is held.
func (c *executionCache) put(key executionKey, x views.Execution, token store.ChangeToken, request bool, deps *modelDeps) {
	var readAt time.Time
	if old := c.entries[key]; old != nil {
		c.items -= old.items
		readAt = old.readAt
	}
	if request {
		readAt = time.Now()
	}
	c.clock++
	e := &cachedExecution{token: token, x: x, items: modelItems(x), used: c.clock, readAt: readAt, deps: deps}
	c.entries[key] = e
	c.items += e.items
	for c.items > c.maxItems && len(c.entries) > 1 {
		var oldest executionKey
		var found *cachedExecution
		for k, v := range c.entries {
			if v != e && (found == nil || v.used < found.used) {
				oldest, found = k, v
			}
		}
		delete(c.entries, oldest)
		c.items -= found.items
	}
}

// modelItems is what a model's size grows with.
func modelItems(x views.Execution) int {
	n := len(x.Run.Effects) + len(x.Run.Spans) + len(x.Run.Peers) + len(x.Findings) + 1
	for _, s := range x.Run.Steps {
		n += len(s.Attempts)
	}
	return n
}
