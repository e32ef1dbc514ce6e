package web

import (
	"cmp"
	"context"
	"maps"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sync"
	"time"

	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/views"
)

// The page of a big execution is mostly the read of it from the store
// (ReadExecution: 10,000 attempts take 60–80 ms) and the model built from
// it; the drawing of its bounded first answer is cheap. The cache
// (execution_cache.go) keeps a model only while the store is unchanged, so
// the first load after any commit pays the read. The warmer pays it ahead,
// once ingest has gone quiet: for the big executions the last commits
// changed (the page an on-call engineer opens next), for the big pages
// readers had open when a commit made their models stale, and, at start,
// for the newest big executions. It builds exactly what a request would
// (readExecution, at the store's token then), so a warmed model answers
// only a request that sees that same state: it can make a page faster,
// never older. Under steady ingest the store never goes quiet and nothing
// is built ahead: requests read as they did, and ingest keeps the CPU.
const (
	// warmQuiet is how long no commit must have come before the warmer
	// builds: longer than the gaps inside a client's burst of batches.
	warmQuiet = 250 * time.Millisecond
	// warmMinItems is the smallest model built ahead, in attempts,
	// effects and findings: below it a read costs a few milliseconds.
	warmMinItems = 2_000
	// warmPerPass is how many models one quiet spell builds: what the
	// cache (maxCachedItems) holds of the biggest.
	warmPerPass = 2
	// warmReadWithin is how recently a request must have read a stale
	// model for it to be built again.
	warmReadWithin = 15 * time.Minute
	// warmNewest is how many of the newest executions the start looks at.
	warmNewest = 100
	// warmIdleShare: after a pass that took d, the warmer rests at least
	// warmIdleShare × d, so it never takes more than a fifth of a core.
	warmIdleShare = 4
	// warmMaxChanged bounds the changed executions remembered between
	// passes (a bulk import changes millions without a pause); past it the
	// pass looks at the newest warmNewest instead of the rest.
	warmMaxChanged = 10_000
)

// modelWarmer builds the models of big executions ahead of requests.
type modelWarmer struct {
	s *Server

	mu       sync.Mutex
	changed  map[string]bool // executions changed since the last pass
	overflow bool            // more changed than warmMaxChanged
	lastSeen time.Time       // the last commit heard of

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func newModelWarmer(s *Server) *modelWarmer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &modelWarmer{s: s, changed: map[string]bool{}, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	s.hub.watchCommits(w.noteCommits)
	go w.run()
	return w
}

// noteCommits is the hub's report of a round of commits; it never blocks.
func (w *modelWarmer) noteCommits(commits []writer.Commit) {
	w.mu.Lock()
	w.lastSeen = time.Now()
	for _, c := range commits {
		for _, id := range c.Executions {
			if len(w.changed) >= warmMaxChanged && !w.changed[id] {
				w.overflow = true
				continue
			}
			w.changed[id] = true
		}
	}
	w.mu.Unlock()
	w.signal()
}

func (w *modelWarmer) signal() {
	select {
	case w.wake <- struct{}{}:
	default: // already woken
	}
}

// close stops the warmer and waits for it: nothing touches the database
// after it.
func (w *modelWarmer) close() {
	w.cancel()
	<-w.done
}

func (w *modelWarmer) run() {
	defer close(w.done)
	if !w.sleep(warmQuiet) {
		return
	}
	w.pass(w.newest())
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.wake:
		}
		if !w.untilQuiet() {
			return
		}
		w.mu.Lock()
		changed := make([]string, 0, len(w.changed))
		for id := range w.changed {
			changed = append(changed, id)
		}
		clear(w.changed)
		overflow := w.overflow
		w.overflow = false
		w.mu.Unlock()
		start := time.Now()
		big := w.bigOf(changed)
		if overflow {
			big = append(big, w.newest()...)
		}
		w.pass(big)
		if !w.sleep(warmIdleShare * time.Since(start)) {
			return
		}
	}
}

// untilQuiet waits until no commit has been heard of for warmQuiet and
// no ingest request is being read or written (none holds the decode
// budget: a client sending batches one after the other is still
// sending); false when the warmer is closing.
func (w *modelWarmer) untilQuiet() bool {
	for {
		if w.s.budget.InUse() > 0 {
			w.mu.Lock()
			w.lastSeen = time.Now()
			w.mu.Unlock()
		}
		w.mu.Lock()
		wait := time.Until(w.lastSeen.Add(warmQuiet))
		w.mu.Unlock()
		if wait <= 0 {
			return true
		}
		if !w.sleep(wait) {
			return false
		}
	}
}

func (w *modelWarmer) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// newest returns those of the newest executions whose models are worth
// building ahead, biggest first.
func (w *modelWarmer) newest() []sizedExecution {
	sizes, err := w.s.cfg.DB.NewestExecutionSizes(w.ctx, warmNewest)
	if err != nil {
		return nil
	}
	return biggest(sizes)
}

// bigOf returns those of the changed executions whose models are worth
// building ahead, biggest first.
func (w *modelWarmer) bigOf(changed []string) []sizedExecution {
	sizes := map[string]int{}
	// In pieces: a commit of a bulk import can change thousands.
	for piece := range slices.Chunk(changed, 500) {
		got, err := w.s.cfg.DB.ExecutionSizes(w.ctx, piece)
		if err != nil {
			return nil
		}
		maps.Copy(sizes, got)
	}
	return biggest(sizes)
}

// biggest returns the executions of sizes of at least warmMinItems, the
// biggest first (then by id, for one order).
func biggest(sizes map[string]int) []sizedExecution {
	var out []sizedExecution
	for id, n := range sizes {
		if n >= warmMinItems {
			out = append(out, sizedExecution{id, n})
		}
	}
	slices.SortFunc(out, func(a, b sizedExecution) int {
		if a.items != b.items {
			return b.items - a.items
		}
		return cmp.Compare(a.id, b.id)
	})
	return out
}

// memoryRoom reports whether the process may take need more bytes and stay
// under its soft memory limit (runtime/debug.SetMemoryLimit), counting
// what the Go runtime holds from the system and has not given back.
func memoryRoom(need int64) bool {
	limit := debug.SetMemoryLimit(-1)
	if limit == math.MaxInt64 {
		return true
	}
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(sample)
	held := int64(sample[0].Value.Uint64() - sample[1].Value.Uint64())
	return held+need <= limit
}

// warmBytesPerItem is the memory a model's build is taken to hold at its
// peak for each of its items (the rows read, what they are parsed into,
// the model): a model keeps 0.75 KiB an item (execution_cache.go), its
// build about twice that, more with big arguments.
const warmBytesPerItem = 4 << 10

// pass builds, at the store's state now, the stale models readers read
// lately, then those of changed, up to warmPerPass. Each build takes its
// memory from the decode budget first, so that it never adds to what
// ingest may hold: when ingest holds it, or a request waits for it, the
// pass stops and tries again once ingest is quiet. It stops too when a
// commit comes meanwhile: the models would be stale at once, and the
// next quiet spell builds them. And it builds nothing that would take the
// process past its soft memory limit (serve sets one: docs/performance.md
// § Memory under attack): after a burst of big batches the memory ingest
// used is still held, and a model built then would raise the peak.
func (w *modelWarmer) pass(changed []sizedExecution) {
	if len(changed) == 0 && !w.s.executions.anyBig(warmMinItems) {
		return // nothing to build: no query
	}
	token, err := w.s.cfg.DB.ChangeToken(w.ctx)
	if err != nil {
		return
	}
	order := w.s.executions.staleRead(token, warmMinItems, time.Now().Add(-warmReadWithin))
	for _, c := range changed {
		if !slices.ContainsFunc(order, func(o sizedExecution) bool { return o.id == c.id }) {
			order = append(order, c)
		}
	}
	order = order[:min(len(order), warmPerPass)]
	w.mu.Lock()
	heard := w.lastSeen
	w.mu.Unlock()
	collected := false
	for i, c := range order {
		key := executionKey{id: c.id, nearby: true}
		if w.s.executions.has(key, token) {
			continue
		}
		need := int64(c.items) * warmBytesPerItem
		if need > w.s.budget.Capacity() {
			continue // never: it would take the whole budget
		}
		if !memoryRoom(need) {
			return // near the soft memory limit: requests read as before
		}
		held := w.s.budget.TryReserve(need)
		w.mu.Lock()
		interrupted := w.lastSeen != heard || held == nil
		if interrupted {
			for _, left := range order[i:] {
				w.changed[left.id] = true
			}
			if held == nil {
				// Ingest holds the memory: after another quiet spell.
				w.lastSeen = time.Now()
				w.signal()
			}
		}
		w.mu.Unlock()
		if interrupted || w.ctx.Err() != nil {
			held.Release()
			return
		}
		if !collected {
			// What ingest left behind is garbage now: collected first, the
			// build reuses its memory instead of growing the heap past the
			// peak ingest reached.
			runtime.GC()
			collected = true
		}
		_, err := w.s.executions.build(w.ctx, key, token, true, false, func() (views.Execution, store.ChangeToken, error) {
			return w.s.readExecution(w.ctx, c.id, true)
		})
		held.Release()
		if err == nil {
			w.s.metrics.models.WithLabelValues("warmed").Inc()
		}
	}
}
