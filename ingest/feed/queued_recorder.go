package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// Outcome is what became of an item (an effect, or a batch of events)
// handed to a RetryingRecorder.
type Outcome string

const (
	// Recorded: the server has it.
	Recorded Outcome = "recorded"
	// Queued: recording failed or others wait before it; it is on disk and
	// will be retried.
	Queued Outcome = "queued"
	// Rejected: the item itself is invalid; it is not retried.
	Rejected Outcome = "rejected"
	// Dropped: it could not be queued (the disk failed, or it is larger
	// than the queue's cap).
	Dropped Outcome = "dropped"
)

// Counts are a RetryingRecorder's counters since it started, in items:
// effects for a QueuedRecorder, batches (Record calls) for a
// QueuedEventRecorder.
type Counts struct {
	Recorded   int64 `json:"recorded"`    // items the server has, at once or after retries
	Failed     int64 `json:"failed"`      // attempts to record that failed and will be retried
	Queued     int64 `json:"queued"`      // items waiting in the queue now
	QueueBytes int64 `json:"queue_bytes"` // their size on disk
	Dropped    int64 `json:"dropped"`     // items lost: pushed out of a full queue, unreadable, or not queueable
	Rejected   int64 `json:"rejected"`    // items refused as invalid, never retried
}

// QueuedConfig configures a RetryingRecorder.
type QueuedConfig struct {
	// Feed and Limits check an item as the server will before it is
	// recorded or queued, so an invalid item never blocks the queue. Feed
	// names the feed in effect event ids; events carry their own.
	Feed   string
	Limits ingest.Limits
	// Timeout bounds each attempt to record; 5 s when zero.
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between retries while
	// recording fails; 100 ms and 5 s when zero.
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
}

func (cfg QueuedConfig) withDefaults() QueuedConfig {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(5*time.Second, cfg.MinBackoff)
	}
	if cfg.Limits == (ingest.Limits{}) {
		cfg.Limits = ingest.DefaultLimits
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// QueuedRecorder records effects; NewQueuedRecorder makes one.
type QueuedRecorder = RetryingRecorder[trace.Effect]

// QueuedEventRecorder records batches of native events, each batch in one
// request, so a call's attempt and its effect land together;
// NewQueuedEventRecorder makes one.
type QueuedEventRecorder = RetryingRecorder[EventBatch]

// RetryingRecorder records an item at once when it can and otherwise
// keeps it in a DiskQueue, retried in order by Run until the recorder
// takes it. The caller waits at most one Timeout and never sees a
// retryable failure: that is what the queue is for. While the queue holds
// anything, new items join it behind the older ones instead of trying
// first, so no caller waits on a recorder known to be failing.
type RetryingRecorder[T any] struct {
	kind  itemKind[T]
	queue *DiskQueue[T]
	cfg   QueuedConfig
	wake  chan struct{}

	recorded, failed, dropped, rejected atomic.Int64
}

// itemKind is what a RetryingRecorder knows of the items it records: the
// one difference between recording effects and recording events.
type itemKind[T any] struct {
	// check validates an item as the server will and returns it as it is
	// to be sent; its error wraps ErrRejected.
	check func(T) (T, error)
	// record sends one item through the next recorder.
	record func(context.Context, T) error
	// masked is the item as it may wait on disk: with no secret in it.
	masked func(T) T
	// attrs name an item in a log line.
	attrs func(T) []any
}

// NewQueuedRecorder records effects through next, keeping what fails in
// queue.
func NewQueuedRecorder(next Recorder, queue *Queue, cfg QueuedConfig) *QueuedRecorder {
	cfg = cfg.withDefaults()
	return newRetryingRecorder(itemKind[trace.Effect]{
		check: func(e trace.Effect) (trace.Effect, error) {
			raw, err := json.Marshal(Event(e, EventID(cfg.Feed, e)))
			if err == nil {
				_, err = ingest.ParseEvent(raw, cfg.Limits)
			}
			if err != nil {
				return e, fmt.Errorf("feed: %w: %v", ErrRejected, err)
			}
			return e, nil
		},
		record: next.RecordEffect,
		// What waits on disk is masked as the server will store it
		// (docs/security.md, "Redaction"), so no secret reaches the disk
		// through the queue; masking is idempotent, so the event stored
		// later is the same.
		masked: func(e trace.Effect) trace.Effect {
			e.Target, _ = cfg.Limits.Redact.Text(e.Target)
			e.Summary, _ = cfg.Limits.Redact.Text(e.Summary)
			return e
		},
		attrs: func(e trace.Effect) []any { return []any{"provider", e.Provider, "effect_id", e.ID} },
	}, queue, cfg)
}

func newRetryingRecorder[T any](kind itemKind[T], queue *DiskQueue[T], cfg QueuedConfig) *RetryingRecorder[T] {
	return &RetryingRecorder[T]{kind: kind, queue: queue, cfg: cfg, wake: make(chan struct{}, 1)}
}

// Record records item, or queues it when recording fails. The error says
// why an item was rejected or dropped, or why the first attempt failed.
func (r *RetryingRecorder[T]) Record(ctx context.Context, item T) (Outcome, error) {
	item, err := r.kind.check(item)
	if err != nil {
		r.rejected.Add(1)
		return Rejected, err
	}
	if r.queue.Len() > 0 {
		return r.push(item, nil)
	}
	attempt, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Timeout)
	err = r.kind.record(attempt, item)
	cancel()
	switch {
	case err == nil:
		r.recorded.Add(1)
		return Recorded, nil
	case errors.Is(err, ErrRejected):
		r.rejected.Add(1)
		return Rejected, err
	}
	r.failed.Add(1)
	return r.push(item, err)
}

func (r *RetryingRecorder[T]) push(item T, cause error) (Outcome, error) {
	item = r.kind.masked(item)
	n, err := r.queue.Push(item)
	if n > 0 {
		r.cfg.Logger.Warn("feed: the retry queue is full; dropped the oldest items", "dropped", n, "dir", r.queue.Dir())
	}
	if err != nil {
		r.dropped.Add(1)
		r.cfg.Logger.Error("feed: cannot queue what failed to record; it is lost", append(r.kind.attrs(item), "err", err)...)
		return Dropped, errors.Join(cause, err)
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return Queued, cause
}

// Run retries the queued items, oldest first, until ctx is done. It waits
// MinBackoff after a failure, doubling up to MaxBackoff, and starts again
// at once when an item is queued.
func (r *RetryingRecorder[T]) Run(ctx context.Context) {
	backoff := r.cfg.MinBackoff
	for ctx.Err() == nil {
		seq, item, ok := r.queue.Oldest()
		if !ok {
			select {
			case <-r.wake:
			case <-ctx.Done():
			}
			continue
		}
		attempt, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
		err := r.kind.record(attempt, item)
		cancel()
		if err != nil && !errors.Is(err, ErrRejected) {
			if ctx.Err() != nil {
				return
			}
			r.failed.Add(1)
			r.cfg.Logger.Warn("feed: recording a queued item failed; will retry", append(r.kind.attrs(item),
				"queued", r.queue.Len(), "retry_in", backoff, "err", err)...)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(2*backoff, r.cfg.MaxBackoff)
			continue
		}
		backoff = r.cfg.MinBackoff
		if err != nil {
			r.rejected.Add(1)
			r.cfg.Logger.Error("feed: a queued item was rejected; dropping it", append(r.kind.attrs(item), "err", err)...)
		} else {
			r.recorded.Add(1)
		}
		if err := r.queue.Remove(seq); err != nil {
			r.cfg.Logger.Error("feed: cannot remove a recorded item from the queue", "err", err)
			select { // a disk that fails to delete: do not spin on it
			case <-time.After(r.cfg.MaxBackoff):
			case <-ctx.Done():
			}
		}
	}
}

// Counts returns the counters.
func (r *RetryingRecorder[T]) Counts() Counts {
	return Counts{
		Recorded:   r.recorded.Load(),
		Failed:     r.failed.Load(),
		Queued:     int64(r.queue.Len()),
		QueueBytes: r.queue.Bytes(),
		Dropped:    r.dropped.Load() + r.queue.Dropped(),
		Rejected:   r.rejected.Load(),
	}
}
