package writer

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/oncetrace/oncetrace/ingest/derive"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// ErrOverloaded means the writer's queue stayed full for the whole wait:
// the client should retry later (HTTP 503 with Retry-After).
var ErrOverloaded = errors.New("ingest: writer queue full")

// ErrClosed means the writer has stopped accepting requests.
var ErrClosed = errors.New("ingest: writer closed")

// errSavepointLost means a request's savepoint could not be rolled back:
// the group's transaction is no longer what the writer thinks it is.
var errSavepointLost = errors.New("ingest: the request's savepoint could not be rolled back")

// Config tunes the writer.
type Config struct {
	// Analysis thresholds for the audit run after each commit.
	Analysis trace.Config
	// GroupCommit commits every request waiting in the queue in one
	// transaction. Off, each request gets its own (for comparison).
	GroupCommit bool
	// MaxGroupEvents bounds the events of one group commit.
	MaxGroupEvents int
	// QueueLength is how many requests may wait for the writer.
	QueueLength int
	// QueueWait is how long a request waits for room in a full queue
	// before it is refused with ErrOverloaded.
	QueueWait time.Duration
	// RetryFor is how long the writer goes on retrying a commit that met
	// a cause which usually passes (store.UnwritableError.Transient: a lost
	// connection, another process's lock) before it answers the group's
	// requests with the error (a 503). Retrying is safe: event ids make a
	// commit whose answer was lost a no-op the second time.
	RetryFor time.Duration
	// OnCommit, if set, is called after each commit with what it stored
	// and what the audit concluded anew. It runs on the writer goroutine,
	// so it must not block (the live hub drops slow readers instead).
	// stored, in sequence order. It must not block.
	OnCommit func(Commit)
	// OnBatch, if set, is told about every transaction the writer ran,
	// successful or not (for metrics; see stats.go). It runs on the
	// writer goroutine and must not block.
	OnBatch func(BatchStats)
	// Now is the clock for received_at; time.Now when nil.
	Now func() time.Time
}

// DefaultConfig is what serve uses unless told otherwise.
var DefaultConfig = Config{
	Analysis:       trace.DefaultConfig,
	GroupCommit:    true,
	MaxGroupEvents: 20000,
	QueueLength:    4096,
	QueueWait:      5 * time.Second,
	RetryFor:       2 * time.Second,
}

// The waits between retries of a commit: doubling from the first, at
// most the last, so that a database back after an outage takes writes
// within a second.
const (
	retryFirstWait = 50 * time.Millisecond
	retryMaxWait   = time.Second
)

// Committed is one event as stored: its sequence number and the event.
type Committed struct {
	Seq   int64
	Event trace.Event
}

// Commit is what one transaction changed.
type Commit struct {
	Events []Committed // in sequence order
	// Executions are those re-audited: the ones the events name, and every
	// one whose findings the events can change (a shared key, an effect).
	Executions []string
	// NewCritical are critical findings that did not exist before it.
	NewCritical []trace.Finding
	// Took is how long the transaction ran: the live hub gives way to
	// ingest while the writer is busy.
	Took time.Duration
}

// Result is what a request's events did.
type Result struct {
	Accepted   int // newly stored
	Duplicates int // already stored, changed nothing
}

type request struct {
	events []trace.Event
	done   chan requestDone
}

type requestDone struct {
	result Result
	err    error
}

// Writer is the single writer of the store. Requests from any number of
// goroutines queue up; the writer commits all those waiting in one
// transaction (group commit) and answers each only after the commit.
type Writer struct {
	db    *store.DB
	cfg   Config
	queue chan *request
	// derive derives the rows of each commit; the writer goroutine alone
	// uses it.
	derive *derive.Deriver
	mu     sync.RWMutex // guards closed against sends on a closed queue
	closed bool
	done   chan struct{}
}

// New starts the writer goroutine; Close stops it.
func New(db *store.DB, cfg Config) *Writer {
	if cfg.MaxGroupEvents <= 0 {
		cfg.MaxGroupEvents = DefaultConfig.MaxGroupEvents
	}
	if cfg.QueueLength <= 0 {
		cfg.QueueLength = DefaultConfig.QueueLength
	}
	if cfg.QueueWait <= 0 {
		cfg.QueueWait = DefaultConfig.QueueWait
	}
	if cfg.RetryFor < 0 {
		cfg.RetryFor = 0
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	w := &Writer{db: db, cfg: cfg, queue: make(chan *request, cfg.QueueLength), done: make(chan struct{}),
		derive: derive.New(db, cfg.Analysis)}
	go w.run()
	return w
}

// Write stores events and returns once they are committed.
func (w *Writer) Write(ctx context.Context, events []trace.Event) (Result, error) {
	if len(events) == 0 {
		return Result{}, nil
	}
	req := &request{events: events, done: make(chan requestDone, 1)}
	if err := w.enqueue(ctx, req); err != nil {
		return Result{}, err
	}
	// Once queued the request will be committed or failed; wait for that
	// even if the client has gone, so the answer matches the store.
	d := <-req.done
	return d.result, d.err
}

func (w *Writer) enqueue(ctx context.Context, req *request) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	select {
	case w.queue <- req:
		return nil
	default:
	}
	timer := time.NewTimer(w.cfg.QueueWait)
	defer timer.Stop()
	select {
	case w.queue <- req:
		return nil
	case <-timer.C:
		return ErrOverloaded
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops accepting requests, commits those already queued, and waits
// for the writer to finish.
func (w *Writer) Close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	<-w.done
}

func (w *Writer) run() {
	defer close(w.done)
	for first := range w.queue {
		group := []*request{first}
		n := len(first.events)
	gather:
		for w.cfg.GroupCommit && n < w.cfg.MaxGroupEvents {
			select {
			case req, ok := <-w.queue:
				if !ok {
					break gather
				}
				group = append(group, req)
				n += len(req.events)
			default:
				break gather
			}
		}
		w.commit(group)
	}
}

// commit stores a group of requests in one transaction, each inside its own
// savepoint, then derives the rows of what they touched (ingest/derive).
func (w *Writer) commit(group []*request) {
	results := make([]requestDone, len(group))
	var committed []Committed
	var derived derive.Derived
	var lastSeq int64
	received := w.cfg.Now()
	start := time.Now()
	err := w.retry(func() error {
		return w.db.UpdateKeys(context.Background(), commitKeys(group), func(tx *store.Tx) error {
			committed, derived = committed[:0], derive.Derived{}
			touched := map[string][]trace.Event{} // entity -> its new events
			for i, req := range group {
				results[i] = requestDone{}
				reqTouched, reqCommitted, res, err := insertRequest(tx, req.events, received)
				if err != nil {
					// A full disk fails the whole group, as does a savepoint
					// that could not be rolled back: SQLite may have rolled the
					// transaction back already, and what follows would commit
					// statement by statement outside it.
					if _, unwritable := store.Unwritable(err); unwritable || errors.Is(err, errSavepointLost) {
						return err
					}
					results[i].err = err
					continue
				}
				results[i].result = res
				for k, v := range reqTouched {
					touched[k] = append(touched[k], v...)
				}
				committed = append(committed, reqCommitted...)
			}
			if len(touched) == 0 {
				return nil
			}
			// Stored in parallel with other instances' commits; derived
			// one after the other.
			if err := tx.LockDerivation(); err != nil {
				return err
			}
			var err error
			if lastSeq, err = w.derive.Check(tx, firstSeq(committed)); err != nil {
				return err
			}
			derived, err = w.derive.Derive(tx, touched)
			// Other instances sharing the database learn of the commit from
			// its notice (store.Notice), with what only this writer knows.
			tx.Announce(derived.Executions, derived.NewCritical)
			return err
		})
	})
	if err == nil && len(committed) > 0 {
		for _, c := range committed {
			lastSeq = max(lastSeq, c.Seq)
		}
		w.derive.Committed(lastSeq, derived)
	}
	if w.cfg.OnBatch != nil {
		w.cfg.OnBatch(batchStats(group, results, time.Since(start), err))
	}
	for i, req := range group {
		if err != nil {
			results[i] = requestDone{err: err}
		}
		req.done <- results[i]
	}
	if err == nil && w.cfg.OnCommit != nil && len(committed) > 0 {
		w.cfg.OnCommit(Commit{Events: committed, Executions: derived.Executions, NewCritical: derived.NewCritical,
			Took: time.Since(start)})
	}
}

// retry runs update until it succeeds, fails for a cause that does not
// pass by itself, or RetryFor has gone by. What a failed update patched
// into the deriver's cache was rolled back, so it is told after each.
func (w *Writer) retry(update func() error) error {
	deadline := time.Now().Add(w.cfg.RetryFor)
	for wait := retryFirstWait; ; wait = min(2*wait, retryMaxWait) {
		err := update()
		if err == nil {
			return nil
		}
		w.derive.RolledBack()
		ue, ok := store.Unwritable(err)
		if !ok || !ue.Transient() || time.Now().Add(wait).After(deadline) {
			return err
		}
		time.Sleep(wait)
	}
}

// firstSeq is the lowest sequence number of what a commit stored.
func firstSeq(committed []Committed) int64 {
	first := int64(math.MaxInt64)
	for _, c := range committed {
		first = min(first, c.Seq)
	}
	return first
}

// commitKeys are what a group's commit writes, for the store's commit
// locks: the executions its events name, and the entity of an event that
// names none (an effect from a feed), so that the commits of one
// execution never run in parallel.
func commitKeys(group []*request) []string {
	var keys []string
	for _, req := range group {
		for _, ev := range req.events {
			if id := ev.ExecutionID(); id != "" {
				keys = append(keys, "x:"+id)
			} else {
				keys = append(keys, "n:"+ev.Entity())
			}
		}
	}
	return keys
}

func insertRequest(tx *store.Tx, events []trace.Event, received time.Time) (map[string][]trace.Event, []Committed, Result, error) {
	var res Result
	touched := map[string][]trace.Event{}
	var committed []Committed
	if err := tx.Savepoint(); err != nil {
		return nil, nil, res, err
	}
	seqs, err := tx.InsertEvents(events, received)
	if err != nil {
		if rbErr := tx.RollbackTo(); rbErr != nil {
			return nil, nil, res, errors.Join(err, errSavepointLost, rbErr)
		}
		return nil, nil, Result{}, err
	}
	for i, ev := range events {
		seq := seqs[i]
		if seq == 0 {
			res.Duplicates++
			continue
		}
		res.Accepted++
		touched[ev.Entity()] = append(touched[ev.Entity()], ev)
		committed = append(committed, Committed{Seq: seq, Event: ev})
	}
	return touched, committed, res, tx.Release()
}
