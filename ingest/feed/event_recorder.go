package feed

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// EventRecorder stores native events of any type (docs/api.md) in one
// request, as a feed that records more than effects does: a proxy records
// a tool call's attempt and its effect together. Events carry their own
// ids, so sending a batch again is harmless: the server counts each event
// a duplicate. An error wrapping ErrRejected means a batch that cannot
// pass however often it is sent; any other error may pass when tried
// again. WriterRecorder and HTTPRecorder are EventRecorders.
type EventRecorder interface {
	RecordEvents(ctx context.Context, events []json.RawMessage) error
}

// EventBatch is the events of one RecordEvents call, each a native event's
// JSON object: the item of a QueuedEventRecorder and of its EventQueue.
type EventBatch []json.RawMessage

// EventQueue is the disk queue of event batches (QueuedEventRecorder's):
// each file is a batch's JSON array. It must have a directory of its own: a
// file of a queue of effects does not decode as a batch, and would be
// dropped and counted as unreadable.
type EventQueue = DiskQueue[EventBatch]

// OpenEventQueue opens the queue of event batches in dir; see
// OpenDiskQueue.
func OpenEventQueue(dir string, maxBytes int64) (*EventQueue, error) {
	return OpenDiskQueue[EventBatch](dir, maxBytes)
}

// NewQueuedEventRecorder records batches of events through next, keeping
// what fails in queue. Each batch is validated with cfg.Limits first (an
// invalid event rejects the batch, naming the event and the field), and
// what is sent and queued is the events as the server will store them:
// canonical, their secrets masked, their ids derived when not given.
func NewQueuedEventRecorder(next EventRecorder, queue *EventQueue, cfg QueuedConfig) *QueuedEventRecorder {
	cfg = cfg.withDefaults()
	return newRetryingRecorder(itemKind[EventBatch]{
		check: func(b EventBatch) (EventBatch, error) {
			events, err := checkEvents(b, cfg.Limits)
			if err != nil {
				return nil, err
			}
			stored := make(EventBatch, len(events))
			for i, ev := range events {
				stored[i] = ev.Body
			}
			return stored, nil
		},
		record: func(ctx context.Context, b EventBatch) error { return next.RecordEvents(ctx, b) },
		masked: func(b EventBatch) EventBatch { return b }, // check masked them
		attrs:  batchAttrs,
	}, queue, cfg)
}

// checkEvents validates events as POST /api/v1/events will, with the
// same limits: each event, their number, and the size of the request
// they make. An error wraps ErrRejected and names the event (its index)
// and the field. An empty batch is an error too: a caller that records
// nothing has lost what it meant to record.
func checkEvents(events []json.RawMessage, lim ingest.Limits) ([]trace.Event, error) {
	if len(events) == 0 {
		return nil, fmt.Errorf("feed: %w: events: none in the batch", ErrRejected)
	}
	if lim.Events > 0 && len(events) > lim.Events {
		return nil, fmt.Errorf("feed: %w: events: %d in one batch, over the limit of %d", ErrRejected, len(events), lim.Events)
	}
	parsed := make([]trace.Event, len(events))
	size := int64(len("[]"))
	for i, raw := range events {
		ev, err := ingest.ParseEvent(raw, lim)
		if err != nil {
			return nil, fmt.Errorf("feed: %w: event %d: %v", ErrRejected, i, err)
		}
		parsed[i] = ev
		size += int64(len(ev.Body)) + 1 // and a comma
	}
	if lim.BodyBytes > 0 && size > lim.BodyBytes {
		return nil, fmt.Errorf("feed: %w: events: %d bytes in one batch, over the limit of %d", ErrRejected, size, lim.BodyBytes)
	}
	return parsed, nil
}

// batchAttrs name a batch in a log line: how many events, and the first's id.
func batchAttrs(b EventBatch) []any {
	var first struct {
		ID string `json:"id"`
	}
	if len(b) > 0 {
		json.Unmarshal(b[0], &first) // a name for the log; nothing to do when it has none
	}
	return []any{"events", len(b), "event_id", first.ID}
}

// RecordEvents validates the events (an invalid one is an error wrapping
// ErrRejected) and commits them in one write: all of them or none.
func (r WriterRecorder) RecordEvents(ctx context.Context, events []json.RawMessage) error {
	parsed, err := checkEvents(events, r.Limits)
	if err != nil {
		return err
	}
	_, err = r.Writer.Write(ctx, parsed)
	return err
}

// QueuedEvents is a QueuedEventRecorder seen as an EventRecorder, which is
// what an mcp.Observer records through: a batch the server cannot take now
// is queued and retried, which is no failure of the caller's; only a batch
// rejected or dropped is an error.
type QueuedEvents struct{ Recorder *QueuedEventRecorder }

// RecordEvents records the batch or queues it.
func (q QueuedEvents) RecordEvents(ctx context.Context, events []json.RawMessage) error {
	outcome, err := q.Recorder.Record(ctx, EventBatch(events))
	if outcome == Queued {
		return nil
	}
	return err
}
