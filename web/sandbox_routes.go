package web

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// effectRecorder feeds the sandbox's deliveries into ingest, the same path
// as every other event: the effect is committed before the sandbox answers.
type effectRecorder struct {
	writer *ingest.Writer
	limits ingest.Limits
}

func (r effectRecorder) RecordEffect(ctx context.Context, e trace.Effect) error {
	ev := map[string]any{"type": "effect", "id": "sandbox:" + e.Provider + ":" + e.ID, "provider": e.Provider,
		"effect_id": e.ID, "target": e.Target, "at": e.At.Format(time.RFC3339Nano)}
	for k, v := range map[string]string{"idempotency_key": e.IdempotencyKey, "execution_id": e.ExecutionID, "step_id": e.StepID,
		"trace_id": e.TraceID, "span_id": e.SpanID} {
		if v != "" {
			ev[k] = v
		}
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	parsed, err := ingest.ParseEvent(raw, r.limits)
	if err != nil {
		return fmt.Errorf("sandbox effect: %w", err)
	}
	_, err = r.writer.Write(ctx, []trace.Event{parsed})
	return err
}
