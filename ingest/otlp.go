package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/oncetrace/oncetrace/trace"
)

// OTLP spans are mapped onto oncetrace's events as docs/otlp.md's table
// says, first match wins. Each span becomes a native event with an id made
// of its trace and span ids, so a re-exported span is a duplicate and the
// same validation, merge rules and audit apply as to native ingest.

// OTLPResult is what mapping one export request gave.
type OTLPResult struct {
	Events   []trace.Event
	Rejected int      // spans (and effect span events) that could not be mapped
	Reasons  []string // why, for the first few
}

const maxReasons = 5

// Attribute names, by role, in order of preference.
var (
	otlpExecutionAttrs = []string{"oncetrace.execution.id", "temporalWorkflowID", "restate.invocation.id", "dbos.operation.workflow_id", "operationUUID"}
	otlpSessionAttrs   = []string{"gen_ai.conversation.id", "session.id"}
	otlpStepAttrs      = []string{"oncetrace.step.id", "gen_ai.tool.call.id", "tool.id", "temporalActivityID"}
	otlpToolAttrs      = []string{"gen_ai.tool.name", "tool.name"}
	otlpArgsAttrs      = []string{"gen_ai.tool.call.arguments", "input.value"}
	otlpResultAttrs    = []string{"gen_ai.tool.call.result", "output.value"}
	otlpKeyAttrs       = []string{"oncetrace.idempotency.key", "http.request.header.idempotency-key"}
)

// otlpEffectName names spans and span events that report an effect.
const otlpEffectName = "oncetrace.effect"

type otlpSpan struct {
	span     ptrace.Span
	resource pcommon.Map
	traceID  string
	spanID   string
	parentID string
	// derived
	execution string
	step      string
	attempt   int
}

// MapOTLP maps an export request's spans onto events.
func MapOTLP(td ptrace.Traces, lim Limits) OTLPResult {
	var res OTLPResult
	reject := func(format string, args ...any) {
		res.Rejected++
		if len(res.Reasons) < maxReasons {
			res.Reasons = append(res.Reasons, fmt.Sprintf(format, args...))
		}
	}
	var spans []*otlpSpan
	byID := map[string]*otlpSpan{}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				s := &otlpSpan{span: sp, resource: rs.Resource().Attributes(), traceID: hexID(sp.TraceID()),
					spanID: hexID(sp.SpanID()), parentID: hexID(sp.ParentSpanID())}
				if s.traceID == "" || s.spanID == "" {
					reject("span %q: trace_id and span_id are required", sp.Name())
					continue
				}
				if sp.StartTimestamp() == 0 {
					reject("span %s (%q): start_time_unix_nano is required", s.spanID, sp.Name())
					continue
				}
				spans = append(spans, s)
				byID[s.traceID+"/"+s.spanID] = s
			}
		}
	}
	for _, s := range spans {
		s.execution = inherited(s, byID, otlpExecutionAttrs)
		if s.execution == "" {
			s.execution = s.traceID
		}
	}
	assignSteps(spans)

	add := func(what string, ev map[string]any) {
		raw, err := json.Marshal(ev)
		if err == nil {
			var parsed trace.Event
			if parsed, err = ParseEvent(raw, lim); err == nil {
				res.Events = append(res.Events, parsed)
				return
			}
		}
		reject("%s: %v", what, err)
	}
	for _, s := range spans {
		sp := s.span
		what := fmt.Sprintf("span %s (%q)", s.spanID, sp.Name())
		switch {
		case sp.Name() == otlpEffectName:
			if ev, err := effectEvent(s, byID, sp.Attributes(), sp.StartTimestamp(), "otlp:"+s.traceID+":"+s.spanID); err != nil {
				reject("%s: %v", what, err)
			} else {
				add(what, ev)
			}
			continue
		case isAgentRoot(s):
			add(what, executionEvent(s, byID))
		default:
			add(what, attemptEvent(s, byID))
		}
		for i, e := range sp.Events().All() {
			if e.Name() != otlpEffectName {
				continue
			}
			id := fmt.Sprintf("otlp:%s:%s:effect:%d", s.traceID, s.spanID, i)
			ev, err := effectEvent(s, byID, e.Attributes(), e.Timestamp(), id)
			if err != nil {
				reject("%s event %d: %v", what, i, err)
				continue
			}
			add(fmt.Sprintf("%s event %d", what, i), ev)
		}
	}
	return res
}

// isAgentRoot: the root invoke_agent or invoke_workflow span of a trace is
// the execution itself, not one of its steps.
func isAgentRoot(s *otlpSpan) bool {
	if s.parentID != "" {
		return false
	}
	op := str(s.span.Attributes(), "gen_ai.operation.name")
	name := s.span.Name()
	for _, root := range []string{"invoke_agent", "invoke_workflow"} {
		if op == root || name == root || strings.HasPrefix(name, root+" ") {
			return true
		}
	}
	return false
}

// spanEventID is the id of a span's execution or attempt event. A span
// exported before it ended and again after gives two events, so that the
// second completes what the first opened instead of being a duplicate.
func spanEventID(s *otlpSpan) string {
	id := "otlp:" + s.traceID + ":" + s.spanID
	if s.span.EndTimestamp() == 0 {
		id += ":running"
	}
	return id
}

func executionEvent(s *otlpSpan, byID map[string]*otlpSpan) map[string]any {
	sp := s.span
	attrs := sp.Attributes()
	name := firstStr(attrs, "gen_ai.agent.name", "gen_ai.workflow.name")
	if name == "" {
		name = sp.Name()
	}
	ev := map[string]any{"type": "execution", "id": spanEventID(s), "execution_id": s.execution,
		"name": name, "started_at": timestamp(sp.StartTimestamp())}
	if sp.EndTimestamp() != 0 {
		ev["ended_at"] = timestamp(sp.EndTimestamp())
		ev["status"] = "completed"
		if sp.Status().Code() == ptrace.StatusCodeError {
			ev["status"] = "failed"
		}
	} else {
		ev["status"] = "running"
	}
	if session := inherited(s, byID, otlpSessionAttrs); session != "" {
		ev["labels"] = map[string]string{"session": session}
	}
	return ev
}

func attemptEvent(s *otlpSpan, byID map[string]*otlpSpan) map[string]any {
	sp := s.span
	attrs := sp.Attributes()
	tool := firstStr(attrs, otlpToolAttrs...)
	if tool == "" {
		tool = sp.Name()
	}
	ev := map[string]any{"type": "attempt", "id": spanEventID(s), "execution_id": s.execution,
		"step_id": s.step, "attempt": s.attempt, "tool": tool, "started_at": timestamp(sp.StartTimestamp())}
	if class := effectClass(attrs); class != "" {
		ev["effect"] = class
	}
	if p := str(attrs, "oncetrace.provider"); p != "" {
		ev["provider"] = p
	}
	if v, ok := jsonAttr(attrs, otlpArgsAttrs...); ok {
		ev["args"] = v
	}
	if v, ok := jsonAttr(attrs, otlpResultAttrs...); ok {
		ev["result"] = v
	}
	if k := firstStr(attrs, otlpKeyAttrs...); k != "" {
		ev["idempotency_key"] = k
	}
	if v, ok := attrs.Get("oncetrace.deduplicated"); ok && v.Type() == pcommon.ValueTypeBool && v.Bool() {
		ev["deduplicated"] = true
	}
	if w := worker(s.resource); w != "" {
		ev["worker"] = w
	}
	if sp.EndTimestamp() == 0 {
		return ev // still running: a later export completes it
	}
	ev["ended_at"] = timestamp(max(sp.EndTimestamp(), sp.StartTimestamp()))
	outcome := "ok"
	if sp.Status().Code() == ptrace.StatusCodeError {
		outcome = "error"
		msg := sp.Status().Message()
		if t := str(attrs, "error.type"); t != "" && msg != "" {
			msg = t + ": " + msg
		} else if t != "" {
			msg = t
		}
		if msg != "" {
			ev["error"] = msg
		}
	}
	if v, ok := attrs.Get("oncetrace.replayed"); ok && v.Type() == pcommon.ValueTypeBool && v.Bool() {
		outcome = "replayed"
	}
	if o := str(attrs, "oncetrace.outcome"); o != "" {
		outcome = o // validated as any sent outcome
	}
	ev["outcome"] = outcome
	return ev
}

func effectEvent(s *otlpSpan, byID map[string]*otlpSpan, attrs pcommon.Map, at pcommon.Timestamp, id string) (map[string]any, error) {
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
	// The step is the one the effect's span belongs to: the span itself
	// for a span event, its parent for an effect span.
	owner := s
	if s.span.Name() == otlpEffectName {
		owner = byID[s.traceID+"/"+s.parentID]
	}
	key := firstStr(attrs, otlpKeyAttrs...)
	if owner != nil && !isAgentRoot(owner) && owner.step != "" {
		ev["step_id"] = owner.step
		if key == "" {
			key = firstStr(owner.span.Attributes(), otlpKeyAttrs...)
		}
	}
	if key != "" {
		ev["idempotency_key"] = key
	}
	return ev, nil
}

// assignSteps gives every span its step and attempt number.
func assignSteps(spans []*otlpSpan) {
	// Siblings of one name under one parent, by start time, give a span
	// without a step id its ordinal.
	siblings := map[string][]*otlpSpan{}
	for _, s := range spans {
		k := s.traceID + "/" + s.parentID + "/" + s.span.Name()
		siblings[k] = append(siblings[k], s)
	}
	for _, group := range siblings {
		sortByStart(group)
		for i, s := range group {
			if s.step = firstStr(s.span.Attributes(), otlpStepAttrs...); s.step == "" {
				sum := sha256.Sum256([]byte(s.parentID + "\x00" + s.span.Name() + "\x00" + strconv.Itoa(i)))
				s.step = "span-" + hex.EncodeToString(sum[:6])
			}
		}
	}
	// Attempts: sent, else resend count + 1, else rank among the spans of
	// the same step by start time.
	steps := map[string][]*otlpSpan{}
	for _, s := range spans {
		if s.span.Name() == otlpEffectName || isAgentRoot(s) {
			continue // not attempts: they must not shift the attempts' ranks
		}
		k := s.execution + "/" + s.step
		steps[k] = append(steps[k], s)
	}
	for _, group := range steps {
		sortByStart(group)
		for i, s := range group {
			attrs := s.span.Attributes()
			switch {
			case intAttr(attrs, "oncetrace.attempt") > 0:
				s.attempt = int(intAttr(attrs, "oncetrace.attempt"))
			case hasAttr(attrs, "http.request.resend_count"):
				s.attempt = int(intAttr(attrs, "http.request.resend_count")) + 1
			default:
				s.attempt = i + 1
			}
		}
	}
}

func sortByStart(group []*otlpSpan) {
	sort.SliceStable(group, func(i, j int) bool {
		a, b := group[i].span.StartTimestamp(), group[j].span.StartTimestamp()
		if a != b {
			return a < b
		}
		return group[i].spanID < group[j].spanID
	})
}

// inherited looks for the attributes on the span, then on its ancestors in
// the same export, then on its resource.
func inherited(s *otlpSpan, byID map[string]*otlpSpan, names []string) string {
	for cur, depth := s, 0; cur != nil && depth < 64; depth++ {
		if v := firstStr(cur.span.Attributes(), names...); v != "" {
			return v
		}
		if cur.parentID == "" {
			break
		}
		cur = byID[cur.traceID+"/"+cur.parentID]
	}
	return firstStr(s.resource, names...)
}

func effectClass(attrs pcommon.Map) string {
	switch c := str(attrs, "oncetrace.effect"); c {
	case "read", "write", "unsafe":
		return c
	}
	switch strings.ToUpper(str(attrs, "http.request.method")) {
	case "GET", "HEAD":
		return "read"
	}
	return ""
}

func worker(resource pcommon.Map) string {
	if id := str(resource, "service.instance.id"); id != "" {
		return id
	}
	host, pid := str(resource, "host.name"), str(resource, "process.pid")
	switch {
	case host != "" && pid != "":
		return host + ":" + pid
	case pid != "":
		return "pid-" + pid
	}
	return host
}

// str reads an attribute as a string: strings as they are, numbers and
// booleans printed, and the first element of a string array (HTTP header
// attributes are arrays).
func str(m pcommon.Map, name string) string {
	v, ok := m.Get(name)
	if !ok {
		return ""
	}
	if v.Type() == pcommon.ValueTypeSlice {
		if v.Slice().Len() == 0 {
			return ""
		}
		return v.Slice().At(0).AsString()
	}
	return v.AsString()
}

func firstStr(m pcommon.Map, names ...string) string {
	for _, n := range names {
		if v := str(m, n); v != "" {
			return v
		}
	}
	return ""
}

func hasAttr(m pcommon.Map, name string) bool { _, ok := m.Get(name); return ok }

func intAttr(m pcommon.Map, name string) int64 {
	v, ok := m.Get(name)
	if !ok {
		return 0
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int()
	case pcommon.ValueTypeDouble:
		return int64(v.Double())
	case pcommon.ValueTypeStr:
		n, _ := strconv.ParseInt(v.Str(), 10, 64)
		return n
	}
	return 0
}

// jsonAttr reads arguments or a result: a map or array as JSON, a string
// holding JSON as that JSON, any other string as a JSON string.
func jsonAttr(m pcommon.Map, names ...string) (any, bool) {
	for _, n := range names {
		v, ok := m.Get(n)
		if !ok {
			continue
		}
		switch v.Type() {
		case pcommon.ValueTypeMap:
			return v.Map().AsRaw(), true
		case pcommon.ValueTypeSlice:
			return v.Slice().AsRaw(), true
		case pcommon.ValueTypeStr:
			var parsed any
			if err := json.Unmarshal([]byte(v.Str()), &parsed); err == nil {
				return json.RawMessage(v.Str()), true
			}
			return v.Str(), true
		default:
			return v.AsRaw(), true
		}
	}
	return nil, false
}

// hexID is an id as lowercase hex, "" when it is all zeros (absent).
func hexID(id interface {
	IsEmpty() bool
	String() string
}) string {
	if id.IsEmpty() {
		return ""
	}
	return id.String()
}

func timestamp(t pcommon.Timestamp) string { return t.AsTime().UTC().Format(time.RFC3339Nano) }
