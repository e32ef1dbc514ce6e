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

// Outcome is what became of an effect handed to a QueuedRecorder.
type Outcome string

const (
	// Recorded: the server has it.
	Recorded Outcome = "recorded"
	// Queued: recording failed or others wait before it; it is on disk and
	// will be retried.
	Queued Outcome = "queued"
	// Rejected: the effect itself is invalid; it is not retried.
	Rejected Outcome = "rejected"
	// Dropped: it could not be queued (the disk failed, or it is larger
	// than the queue's cap).
	Dropped Outcome = "dropped"
)

// Counts are a QueuedRecorder's counters since it started.
type Counts struct {
	Recorded   int64 `json:"recorded"`    // effects the server has, at once or after retries
	Failed     int64 `json:"failed"`      // attempts to record that failed and will be retried
	Queued     int64 `json:"queued"`      // effects waiting in the queue now
	QueueBytes int64 `json:"queue_bytes"` // their size on disk
	Dropped    int64 `json:"dropped"`     // effects lost: pushed out of a full queue, unreadable, or not queueable
	Rejected   int64 `json:"rejected"`    // effects refused as invalid, never retried
}

// QueuedConfig configures a QueuedRecorder.
type QueuedConfig struct {
	// Feed and Limits check an effect as the server will before it is
	// recorded or queued, so an invalid effect never blocks the queue.
	Feed   string
	Limits ingest.Limits
	// Timeout bounds each attempt to record; 5 s when zero.
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between retries while
	// recording fails; 100 ms and 5 s when zero.
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
}

// QueuedRecorder records an effect at once when it can and otherwise keeps
// it in a Queue, retried in order by Run until the recorder takes it. The
// caller waits at most one Timeout and never sees a retryable failure:
// that is what the queue is for. While the queue holds anything, new
// effects join it behind the older ones instead of trying first, so no
// caller waits on a recorder known to be failing.
type QueuedRecorder struct {
	next  Recorder
	queue *Queue
	cfg   QueuedConfig
	wake  chan struct{}

	recorded, failed, dropped, rejected atomic.Int64
}

// NewQueuedRecorder records through next, keeping what fails in queue.
func NewQueuedRecorder(next Recorder, queue *Queue, cfg QueuedConfig) *QueuedRecorder {
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
	return &QueuedRecorder{next: next, queue: queue, cfg: cfg, wake: make(chan struct{}, 1)}
}

// Record records e, or queues it when recording fails. The error says why
// an effect was rejected or dropped, or why the first attempt failed.
func (r *QueuedRecorder) Record(ctx context.Context, e trace.Effect) (Outcome, error) {
	if err := r.check(e); err != nil {
		r.rejected.Add(1)
		return Rejected, err
	}
	if r.queue.Len() > 0 {
		return r.push(e, nil)
	}
	attempt, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Timeout)
	err := r.next.RecordEffect(attempt, e)
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
	return r.push(e, err)
}

func (r *QueuedRecorder) push(e trace.Effect, cause error) (Outcome, error) {
	// What waits on disk is masked as the server will store it
	// (docs/security.md, "Redaction"), so no secret reaches the disk
	// through the queue; masking is idempotent, so the event stored later
	// is the same.
	e.Target, _ = r.cfg.Limits.Redact.Text(e.Target)
	e.Summary, _ = r.cfg.Limits.Redact.Text(e.Summary)
	n, err := r.queue.Push(e)
	if n > 0 {
		r.cfg.Logger.Warn("feed: the retry queue is full; dropped the oldest effects", "dropped", n, "dir", r.queue.Dir())
	}
	if err != nil {
		r.dropped.Add(1)
		r.cfg.Logger.Error("feed: cannot queue an effect; it is lost", "provider", e.Provider, "effect_id", e.ID, "err", err)
		return Dropped, errors.Join(cause, err)
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return Queued, cause
}

// check validates e as the event the server will receive.
func (r *QueuedRecorder) check(e trace.Effect) error {
	raw, err := json.Marshal(Event(e, EventID(r.cfg.Feed, e)))
	if err == nil {
		_, err = ingest.ParseEvent(raw, r.cfg.Limits)
	}
	if err != nil {
		return fmt.Errorf("feed: %w: %v", ErrRejected, err)
	}
	return nil
}

// Run retries the queued effects, oldest first, until ctx is done. It
// waits MinBackoff after a failure, doubling up to MaxBackoff, and starts
// again at once when an effect is queued.
func (r *QueuedRecorder) Run(ctx context.Context) {
	backoff := r.cfg.MinBackoff
	for ctx.Err() == nil {
		seq, e, ok := r.queue.Oldest()
		if !ok {
			select {
			case <-r.wake:
			case <-ctx.Done():
			}
			continue
		}
		attempt, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
		err := r.next.RecordEffect(attempt, e)
		cancel()
		if err != nil && !errors.Is(err, ErrRejected) {
			if ctx.Err() != nil {
				return
			}
			r.failed.Add(1)
			r.cfg.Logger.Warn("feed: recording a queued effect failed; will retry", "provider", e.Provider, "effect_id", e.ID,
				"queued", r.queue.Len(), "retry_in", backoff, "err", err)
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
			r.cfg.Logger.Error("feed: a queued effect was rejected; dropping it", "provider", e.Provider, "effect_id", e.ID, "err", err)
		} else {
			r.recorded.Add(1)
		}
		if err := r.queue.Remove(seq); err != nil {
			r.cfg.Logger.Error("feed: cannot remove a recorded effect from the queue", "err", err)
			select { // a disk that fails to delete: do not spin on it
			case <-time.After(r.cfg.MaxBackoff):
			case <-ctx.Done():
			}
		}
	}
}

// Counts returns the counters.
func (r *QueuedRecorder) Counts() Counts {
	return Counts{
		Recorded:   r.recorded.Load(),
		Failed:     r.failed.Load(),
		Queued:     int64(r.queue.Len()),
		QueueBytes: r.queue.Bytes(),
		Dropped:    r.dropped.Load() + r.queue.Dropped(),
		Rejected:   r.rejected.Load(),
	}
}
