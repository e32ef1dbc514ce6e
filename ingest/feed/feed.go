package feed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/trace"
)

// Recorder stores an effect; a feed answers its caller only after it
// returns, or counts and retries what it could not record.
type Recorder interface {
	RecordEffect(ctx context.Context, e trace.Effect) error
}

// TraceContext reads the request's W3C traceparent: the trace that names
// the execution and the span that made the request. A header that breaks
// the format gives none, never a wrong one.
func TraceContext(h http.Header) (traceID, spanID string) {
	return ParseTraceContext(h.Get("traceparent"))
}

// EventID is the id of the effect event a feed records: the same effect
// reported twice (a re-delivered webhook, a retried record) is one event.
func EventID(feed string, e trace.Effect) string {
	return feed + ":" + e.Provider + ":" + e.ID
}

// Event is the native effect event for e, with the given event id.
func Event(e trace.Effect, id string) map[string]any {
	ev := map[string]any{"type": "effect", "id": id, "provider": e.Provider, "effect_id": e.ID}
	if !e.At.IsZero() {
		ev["at"] = e.At.UTC().Format(time.RFC3339Nano)
	}
	for k, v := range map[string]string{"target": e.Target, "idempotency_key": e.IdempotencyKey, "execution_id": e.ExecutionID,
		"step_id": e.StepID, "trace_id": e.TraceID, "span_id": e.SpanID, "fingerprint": e.Fingerprint, "summary": e.Summary} {
		if v != "" {
			ev[k] = v
		}
	}
	return ev
}

// WriterRecorder records effects (RecordEffect) or events of any type
// (RecordEvents) through the server's own writer: they are committed when
// the call returns.
type WriterRecorder struct {
	Writer *writer.Writer
	Limits ingest.Limits
	// Feed names the feed in effect event ids: sandbox, tap, webhook,
	// smtp. Events given to RecordEvents carry their own.
	Feed string
}

// RecordEffect validates the effect as a native event and commits it. An
// effect that is not a valid event (a header over the id limit) is an
// error wrapping ErrRejected: trying again cannot pass.
func (r WriterRecorder) RecordEffect(ctx context.Context, e trace.Effect) error {
	parsed, err := EffectEvent(r.Feed, e, r.Limits)
	if err != nil {
		return fmt.Errorf("%s effect: %w: %w", r.Feed, ErrRejected, err)
	}
	_, err = r.Writer.Write(ctx, []trace.Event{parsed})
	return err
}

// EffectEvent is the native event a feed records for e, validated with the
// same checks and limits as POST /api/v1/events; errors read "field:
// problem". A feed that commits several effects in one write (a batched
// webhook) builds each with it.
func EffectEvent(feed string, e trace.Effect, lim ingest.Limits) (trace.Event, error) {
	id := EventID(feed, e)
	if len(id) > lim.IDBytes {
		// A long effect id (up to the limit itself) still gets an event id
		// within the limit, and still the same one each time it is reported.
		sum := sha256.Sum256([]byte(e.Provider + "\n" + e.ID))
		id = feed + ":" + hex.EncodeToString(sum[:16])
	}
	raw, err := json.Marshal(Event(e, id))
	if err != nil {
		return trace.Event{}, err
	}
	return ingest.ParseEvent(raw, lim)
}
