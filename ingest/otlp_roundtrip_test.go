package ingest

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/oncetrace/oncetrace/trace"
)

// The mapping as it was before spans became events directly: each span
// to a map, to JSON, and through ParseEvent. Kept to prove that the direct
// mapping gives the same events, bodies and rejections
// (TestMapOTLPDirectIsTheRoundTrip, FuzzMapOTLPDirect), and to measure it.
// What a span is and says (its role, tool, arguments, model...) comes from
// the span map as for the direct mapping: this path checks how events are
// built, not how spans are recognised.

// MapOTLPRoundTrip maps spans the old way, through JSON and ParseEvent.
var MapOTLPRoundTrip = mapOTLPRoundTrip

func mapOTLPRoundTrip(td ptrace.Traces, cfg OTLPConfig) OTLPResult {
	var res OTLPResult
	reject := func(format string, args ...any) {
		res.Rejected++
		if len(res.Reasons) < maxReasons {
			res.Reasons = append(res.Reasons, fmt.Sprintf(format, args...))
		}
	}
	spans, byID := otlpSpans(td, cfg.spanMap(), reject)
	add := func(what string, ev map[string]any) {
		raw, err := json.Marshal(ev)
		if err == nil {
			var parsed trace.Event
			if parsed, err = ParseEvent(raw, cfg.Limits); err == nil {
				res.Events = append(res.Events, parsed)
				return
			}
		}
		reject("%s: %v", what, err)
	}
	for _, s := range spans {
		sp := s.span
		what := fmt.Sprintf("span %s (%q)", s.spanID, sp.Name())
		switch s.role {
		case roleEffect:
			if ev, err := effectEventJSON(s, byID, sp.Attributes(), sp.StartTimestamp(), "otlp:"+s.traceID+":"+s.spanID); err != nil {
				reject("%s: %v", what, err)
			} else {
				add(what, ev)
			}
			continue
		case roleRoot:
			add(what, executionEventJSON(s, byID))
		case roleTool:
			add(what, attemptEventJSON(s, cfg.ToolClasses, cfg.Limits.Redact))
		default:
			add(what, spanEventJSON(s))
			// An agent span below the root still names the execution. Model
			// and HTTP calls do not, though OpenLLMetry copies
			// gen_ai.agent.name onto every span.
			if name, source := s.agentName(); name != "" {
				add(what, map[string]any{"type": "execution", "id": "otlp:" + s.traceID + ":" + s.spanID + ":name",
					"execution_id": s.execution, "name": name, "name_source": source})
			}
		}
		for i, e := range sp.Events().All() {
			if e.Name() != otlpEffectName {
				continue
			}
			id := fmt.Sprintf("otlp:%s:%s:effect:%d", s.traceID, s.spanID, i)
			ev, err := effectEventJSON(s, byID, e.Attributes(), e.Timestamp(), id)
			if err != nil {
				reject("%s event %d: %v", what, i, err)
				continue
			}
			add(fmt.Sprintf("%s event %d", what, i), ev)
		}
	}
	return res
}

func executionEventJSON(s *otlpSpan, byID map[string]*otlpSpan) map[string]any {
	sp := s.span
	name, source := s.agentName()
	ev := map[string]any{"type": "execution", "id": spanEventID(s), "execution_id": s.execution,
		"name": name, "name_source": source, "started_at": timestamp(sp.StartTimestamp())}
	if sp.EndTimestamp() != 0 {
		ev["ended_at"] = timestamp(max(sp.EndTimestamp(), sp.StartTimestamp()))
		ev["status"] = "completed"
		if sp.Status().Code() == ptrace.StatusCodeError {
			ev["status"] = "failed"
		}
	} else {
		ev["status"] = "running"
	}
	if session := s.session(byID); session != "" {
		ev["labels"] = map[string]string{"session": session}
	}
	return ev
}

// spanEventJSON keeps a model call, an HTTP client call or a context span.
func spanEventJSON(s *otlpSpan) map[string]any {
	sp := s.span
	role := map[spanRole]string{roleModel: "model", roleHTTP: "http"}[s.role]
	if role == "" {
		role = "context"
	}
	ev := map[string]any{"type": "span", "id": spanEventID(s), "execution_id": s.execution, "trace_id": s.traceID,
		"span_id": s.spanID, "role": role, "name": sp.Name(), "started_at": timestamp(sp.StartTimestamp())}
	if s.parentID != "" {
		ev["parent_span_id"] = s.parentID
	}
	if sp.EndTimestamp() != 0 {
		ev["ended_at"] = timestamp(max(sp.EndTimestamp(), sp.StartTimestamp()))
		if sp.Status().Code() == ptrace.StatusCodeError {
			_, msg := s.spanError()
			ev["error"] = cmp.Or(msg, "error")
		}
	}
	switch s.role {
	case roleModel:
		call := s.modelCall()
		if call.model != "" {
			ev["model"] = call.model
		}
		if call.inputTokens > 0 {
			ev["input_tokens"] = call.inputTokens
		}
		if call.outputTokens > 0 {
			ev["output_tokens"] = call.outputTokens
		}
	case roleHTTP:
		call := s.httpCall()
		ev["http_method"] = call.method
		if call.url != "" {
			ev["http_url"] = call.url
		}
		if call.status > 0 && call.status < 1000 {
			ev["http_status"] = call.status
		}
		if call.idempotencyKey != "" {
			ev["idempotency_key"] = call.idempotencyKey
		}
	}
	return ev
}

func attemptEventJSON(s *otlpSpan, classes ToolClasses, redact *Redactor) map[string]any {
	sp := s.span
	attrs := sp.Attributes()
	tool := s.toolName()
	args, hasArgs := s.toolArgs()
	args = redact.redactArgs(args) // before the step id is derived from them
	ev := map[string]any{"type": "attempt", "id": spanEventID(s), "execution_id": s.execution,
		"step_id": stepIDJSON(s, tool, args, hasArgs), "tool": tool, "trace_id": s.traceID, "span_id": s.spanID,
		"started_at": timestamp(sp.StartTimestamp())}
	switch {
	case intAttr(attrs, "oncetrace.attempt") > 0:
		ev["attempt"] = intAttr(attrs, "oncetrace.attempt")
	case hasAttr(attrs, "http.request.resend_count"):
		ev["attempt"] = intAttr(attrs, "http.request.resend_count") + 1
	}
	if class := effectClass(attrs, tool, classes); class != "" {
		ev["effect"] = class
	}
	if p := str(attrs, "oncetrace.provider"); p != "" {
		ev["provider"] = p
	}
	if hasArgs {
		ev["args"] = args
	}
	if v, ok := s.toolResult(); ok {
		ev["result"] = v
	}
	if k := s.idempotencyKey(); k != "" {
		ev["idempotency_key"] = k
	}
	if by := s.recognisedBy(); by != "" {
		ev["recognised_by"] = by
	}
	if v, ok := attrs.Get("oncetrace.deduplicated"); ok && v.Type() == pcommon.ValueTypeBool && v.Bool() {
		ev["deduplicated"] = true
	}
	if w := worker(s.resource.attrs); w != "" {
		ev["worker"] = w
	}
	if sp.EndTimestamp() == 0 {
		return ev // still running: a later export completes it
	}
	ev["ended_at"] = timestamp(max(sp.EndTimestamp(), sp.StartTimestamp()))
	outcome, msg := s.attemptOutcome()
	if msg != "" {
		ev["error"] = msg
	}
	ev["outcome"] = outcome
	return ev
}

func stepIDJSON(s *otlpSpan, tool string, args any, hasArgs bool) string {
	if id := s.m.text(&s.spanView, fieldStepID); id != "" {
		return id
	}
	if !hasArgs {
		// With no arguments to compare, a call id the framework reused is
		// the only evidence that two spans are one call.
		if callID := s.m.text(&s.spanView, fieldCallID); callID != "" {
			return "call-" + callID
		}
		return "span-" + s.spanID
	}
	canon, err := canonicalArgs(args)
	if err != nil {
		return "span-" + s.spanID
	}
	sum := sha256.Sum256(append([]byte(tool+"\x00"), canon...))
	return "tool-" + hex.EncodeToString(sum[:8])
}

// canonicalArgs is the arguments as the stored event holds them.
func canonicalArgs(args any) (json.RawMessage, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return canonicalJSON(v)
}

func effectEventJSON(s *otlpSpan, byID map[string]*otlpSpan, attrs pcommon.Map, at pcommon.Timestamp, id string) (map[string]any, error) {
	provider, effectID := str(attrs, "oncetrace.effect.provider"), str(attrs, "oncetrace.effect.id")
	if provider == "" || effectID == "" {
		return nil, fmt.Errorf("an %s needs oncetrace.effect.provider and oncetrace.effect.id", otlpEffectName)
	}
	ev := map[string]any{"type": "effect", "id": id, "provider": provider, "effect_id": effectID, "execution_id": s.execution}
	if t := str(attrs, "oncetrace.effect.target"); t != "" {
		ev["target"] = t
	}
	if at != 0 {
		ev["at"] = timestamp(at)
	}
	// The effect came from the span it is an event of, or from the effect
	// span's parent: its trace context joins it to the tool call above.
	ev["trace_id"] = s.traceID
	from := s.spanID
	if s.role == roleEffect {
		from = s.parentID
	}
	if from != "" {
		ev["span_id"] = from
	}
	key := s.m.textIn(attrs, fieldIdempotencyKey)
	if owner := byID[s.traceID+"/"+from]; owner != nil && owner.role == roleTool && key == "" {
		key = owner.idempotencyKey()
	}
	if key != "" {
		ev["idempotency_key"] = key
	}
	return ev, nil
}
