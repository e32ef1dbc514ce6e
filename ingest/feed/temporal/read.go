package temporal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
)

// Limits of a history read from JSON (docs/temporal.md, "Limits").
const (
	// MaxHistoryBytes bounds the JSON of one history: above Temporal's own
	// default limit of a history's size (50 MiB), with room for JSON's
	// base64 payloads and field names.
	MaxHistoryBytes = 128 << 20
	// MaxHistoryEvents is Temporal's own default limit of events in one
	// workflow run's history (51,200, the server's
	// limit.historyCount.error), so no history a server kept is refused.
	MaxHistoryEvents = 51_200
)

// ReadHistoryJSON reads a workflow history as `temporal workflow show
// --output json` prints it: the JSON form of the history (an object with
// "events"), or of a whole GetWorkflowExecutionHistory response (the
// history under "history"). Enums may be spelt either way Temporal writes
// them (EVENT_TYPE_ACTIVITY_TASK_STARTED or ActivityTaskStarted), and
// fields this version does not know are ignored, so a newer CLI's output
// reads. Errors name the field and the limit.
func ReadHistoryJSON(r io.Reader) (*historypb.History, error) {
	raw, err := io.ReadAll(io.LimitReader(r, MaxHistoryBytes+1))
	if err != nil {
		return nil, fmt.Errorf("temporal: read history: %w", err)
	}
	if len(raw) > MaxHistoryBytes {
		return nil, fmt.Errorf("history: more than %d bytes of JSON (the limit, MaxHistoryBytes)", MaxHistoryBytes)
	}
	raw = bytes.TrimSpace(raw)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("history: not a JSON object: %v", err)
	}
	if inner, ok := top["history"]; ok && top["events"] == nil {
		raw = inner // a GetWorkflowExecutionHistoryResponse
	}
	var h historypb.History
	// Shorthand payloads (a JSON payload as its value alone) are read too:
	// the CLI prints them unless told not to in some commands, and a
	// payload in the long form reads the same either way.
	opts := temporalproto.CustomJSONUnmarshalOptions{DiscardUnknown: true,
		Metadata: map[string]any{commonpb.EnablePayloadShorthandMetadataKey: true}}
	if err := opts.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("history: not a Temporal workflow history: %v", err)
	}
	if err := checkHistory(&h); err != nil {
		return nil, err
	}
	return &h, nil
}

// checkHistory is what MapHistory needs of a history: events, in order,
// from the start of the run, within the limits.
func checkHistory(h *historypb.History) error {
	events := h.GetEvents()
	switch {
	case len(events) == 0:
		return errors.New("history.events: none; want the events of one workflow run, from its WorkflowExecutionStarted")
	case len(events) > MaxHistoryEvents:
		return fmt.Errorf("history.events: %d events, over the limit of %d (MaxHistoryEvents)", len(events), MaxHistoryEvents)
	case events[0].GetWorkflowExecutionStartedEventAttributes() == nil:
		return fmt.Errorf("history.events[0]: event %d is %s; want WorkflowExecutionStarted, the run's first event",
			events[0].GetEventId(), eventName(events[0]))
	}
	for i, ev := range events {
		if ev.GetEventId() != int64(i)+events[0].GetEventId() {
			return fmt.Errorf("history.events[%d].eventId: %d; want %d (event ids count up by one from the first)",
				i, ev.GetEventId(), int64(i)+events[0].GetEventId())
		}
		if ev.GetAttributes() == nil {
			return fmt.Errorf("history.events[%d]: event %d (%s) has no attributes", i, ev.GetEventId(), eventName(ev))
		}
	}
	return nil
}
