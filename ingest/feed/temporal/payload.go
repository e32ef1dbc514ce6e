package temporal

import (
	"encoding/json"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/oncetrace/oncetrace/trace"
)

// payloadsJSON is the JSON of payloads whose encoding is JSON (json/plain,
// json/protobuf; binary/null is null): one payload as its value, several
// as an array of them. ok is false when there are none, or one is not
// JSON (encrypted, binary/protobuf, a codec's): nothing is shown rather
// than bytes nobody can read.
func payloadsJSON(ps *commonpb.Payloads) (json.RawMessage, bool) {
	list := ps.GetPayloads()
	if len(list) == 0 {
		return nil, false
	}
	values := make([]json.RawMessage, len(list))
	for i, p := range list {
		v, ok := payloadJSON(p)
		if !ok {
			return nil, false
		}
		values[i] = v
	}
	if len(values) == 1 {
		return values[0], true
	}
	out, err := json.Marshal(values)
	return out, err == nil
}

func payloadJSON(p *commonpb.Payload) (json.RawMessage, bool) {
	switch string(p.GetMetadata()["encoding"]) {
	case "json/plain", "json/protobuf":
		if !json.Valid(p.GetData()) {
			return nil, false
		}
		return json.RawMessage(p.GetData()), true
	case "binary/null":
		return json.RawMessage("null"), true
	}
	return nil, false
}

// headerTrace is the W3C trace context in a header's _tracer-data field,
// where Temporal's OpenTelemetry interceptors put it ({"traceparent":
// "00-TRACE-SPAN-01"}): on WorkflowExecutionStarted the client's
// StartWorkflow span, on ActivityTaskScheduled the workflow's
// StartActivity span (the parent of every RunActivity span of the
// activity). A header without one, or with a malformed one, gives none.
func headerTrace(h *commonpb.Header) (traceID, spanID string) {
	p := h.GetFields()["_tracer-data"]
	if p == nil {
		return "", ""
	}
	raw, ok := payloadJSON(p)
	if !ok {
		return "", ""
	}
	var carrier struct {
		Traceparent string `json:"traceparent"`
	}
	if json.Unmarshal(raw, &carrier) != nil {
		return "", ""
	}
	traceID, spanID, ok = trace.ParseTraceparent(carrier.Traceparent)
	if !ok {
		return "", ""
	}
	return traceID, spanID
}

// eventName is the event's type as Temporal's docs and UI name it:
// ActivityTaskStarted.
func eventName(ev *historypb.HistoryEvent) string {
	s := ev.GetEventType().String()
	if !strings.Contains(s, "_") {
		return s // the API's enums print themselves so already
	}
	var b strings.Builder
	for _, word := range strings.Split(strings.ToLower(strings.TrimPrefix(s, "EVENT_TYPE_")), "_") {
		if word != "" {
			b.WriteString(strings.ToUpper(word[:1]) + word[1:])
		}
	}
	return b.String()
}
