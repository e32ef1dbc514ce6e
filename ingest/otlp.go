package ingest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/oncetrace/oncetrace/trace"
)

// OTLP spans are mapped onto oncetrace's events as docs/otlp.md says. Each
// span first gets one role (docs/otlp.md, "Roles"): the execution root, a
// tool call, a model call, an HTTP client call, or context; oncetrace.*
// attributes always win. Each span then becomes a native event with an id
// made of its trace and span ids, so a re-exported span is a duplicate and
// the same validation, merge rules and audit apply as to native ingest.
// Nothing here depends on which other spans share the export request, except
// inheritance of the execution id: spans of one run arrive in several
// requests.

// OTLPResult is what mapping one export request gave.
type OTLPResult struct {
	Events   []trace.Event
	Rejected int      // spans (and effect span events) that could not be mapped
	Reasons  []string // why, for the first few
}

const maxReasons = 5

// OTLPConfig is what mapping spans needs besides the spans.
type OTLPConfig struct {
	Limits Limits
	// ToolClasses classifies tool calls that carry no oncetrace.effect by
	// their tool name; unmatched tools are class unknown.
	ToolClasses ToolClasses
	// SpanMap recognises each span's role and reads its fields (serve
	// --span-map); nil is the built-in one.
	SpanMap *SpanMap
}

func (cfg OTLPConfig) spanMap() *SpanMap {
	if cfg.SpanMap == nil {
		return BuiltinSpanMap()
	}
	return cfg.SpanMap
}

// Attributes of OpenTelemetry itself, not of any framework's dialect.
const (
	// otlpEffectName names spans and span events that report an effect.
	otlpEffectName = "oncetrace.effect"
	// exceptionStacktrace: the stack trace of an exception attribute or
	// event, whose first line names an error that has no type.
	exceptionStacktrace = "exception.stacktrace"
)

// spanRole is what a span is to oncetrace.
type spanRole int

const (
	roleContext spanRole = iota
	roleRoot
	roleTool
	roleModel
	roleHTTP
	roleEffect
)

type otlpSpan struct {
	spanView // the span, as the span map reads it
	resource *otlpResource
	traceID  string
	spanID   string
	parentID string
	m        *SpanMap
	role     spanRole
	rule     *spanRule // the rule that made it a tool call
	// derived
	ownExecution string // the execution id its own attributes name
	execution    string
}

// otlpResource is a resource's attributes, and what of them every span of
// the resource may inherit.
type otlpResource struct {
	attrs              pcommon.Map
	execution, session string
}

// MapOTLP maps an export request's spans onto events.
func MapOTLP(td ptrace.Traces, cfg OTLPConfig) OTLPResult {
	var res OTLPResult
	reject := func(format string, args ...any) {
		res.Rejected++
		if len(res.Reasons) < maxReasons {
			res.Reasons = append(res.Reasons, fmt.Sprintf(format, args...))
		}
	}
	spans, byID := otlpSpans(td, cfg.spanMap(), reject)
	res.Events = make([]trace.Event, 0, len(spans))
	b := newEventBuilder(cfg.Limits)
	// add keeps an event of span s, or of its span event at index event
	// (-1 for the span's own), or says why not.
	add := func(s *otlpSpan, event int, ev trace.Event, err error) {
		switch {
		case err == nil:
			res.Events = append(res.Events, ev)
		case event < 0:
			reject("span %s (%q): %v", s.spanID, s.span.Name(), err)
		default:
			reject("span %s (%q) event %d: %v", s.spanID, s.span.Name(), event, err)
		}
	}
	for _, s := range spans {
		sp := s.span
		switch s.role {
		case roleEffect:
			ev, err := effectEvent(b, s, byID, sp.Attributes(), sp.StartTimestamp(), "otlp:"+s.traceID+":"+s.spanID)
			add(s, -1, ev, err)
			continue
		case roleRoot:
			ev, err := executionEvent(b, s, byID)
			add(s, -1, ev, err)
		case roleTool:
			ev, err := attemptEvent(b, s, cfg.ToolClasses)
			add(s, -1, ev, err)
		default:
			ev, err := spanEvent(b, s)
			add(s, -1, ev, err)
			// An agent span below the root still names the execution. Model
			// and HTTP calls do not, though OpenLLMetry copies
			// gen_ai.agent.name onto every span.
			if name, source := s.agentName(); name != "" {
				ev, err := nameEvent(b, s, name, source)
				add(s, -1, ev, err)
			}
		}
		for i, e := range sp.Events().All() {
			if e.Name() != otlpEffectName {
				continue
			}
			id := fmt.Sprintf("otlp:%s:%s:effect:%d", s.traceID, s.spanID, i)
			ev, err := effectEvent(b, s, byID, e.Attributes(), e.Timestamp(), id)
			add(s, i, ev, err)
		}
	}
	return res
}

// otlpSpans reads the spans of an export request with their roles and
// executions, rejecting those without ids or a start time, and indexes
// them by trace and span id.
func otlpSpans(td ptrace.Traces, m *SpanMap, reject func(format string, args ...any)) ([]*otlpSpan, map[string]*otlpSpan) {
	spans := make([]*otlpSpan, 0, td.SpanCount())
	byID := make(map[string]*otlpSpan, td.SpanCount())
	// The attributes the map names, of every span: a span of a known
	// dialect has about six.
	arena := make([]foundAttr, 0, 6*td.SpanCount())
	for _, rs := range td.ResourceSpans().All() {
		attrs := rs.Resource().Attributes()
		resource := &otlpResource{attrs: attrs, execution: m.textIn(attrs, fieldExecutionID), session: m.textIn(attrs, fieldSession)}
		for _, ss := range rs.ScopeSpans().All() {
			scope := ss.Scope().Name()
			for _, sp := range ss.Spans().All() {
				s := &otlpSpan{resource: resource, m: m, traceID: hexID(sp.TraceID()),
					spanID: hexID(sp.SpanID()), parentID: hexID(sp.ParentSpanID())}
				if s.traceID == "" || s.spanID == "" {
					reject("span %q: trace_id and span_id are required", sp.Name())
					continue
				}
				if sp.StartTimestamp() == 0 {
					reject("span %s (%q): start_time_unix_nano is required", s.spanID, sp.Name())
					continue
				}
				s.spanView, arena = m.view(sp, scope, arena)
				s.role, s.rule = m.roleOf(&s.spanView, s.parentID == "")
				s.ownExecution = m.text(&s.spanView, fieldExecutionID)
				spans = append(spans, s)
				byID[s.traceID+"/"+s.spanID] = s
			}
		}
	}
	for _, s := range spans {
		s.execution = inherited(s, byID, func(cur *otlpSpan) string { return cur.ownExecution }, s.resource.execution)
		if s.execution == "" {
			s.execution = s.traceID
		}
	}
	return spans, byID
}

// agentName is the name a span gives its execution and where it came
// from, for a span that describes the agent (an invoke_agent span, an
// OpenLLMetry agent...). The root span gives its own name when nothing
// better names it; model and HTTP calls name nothing.
func (s *otlpSpan) agentName() (name, source string) {
	switch s.role {
	case roleRoot:
		if name, source = s.m.executionName(&s.spanView); name == "" {
			name, source = s.span.Name(), "span"
		}
	case roleContext:
		name, source = s.m.executionName(&s.spanView)
	}
	return name, source
}

// recognisedBy names the entry that recognised a tool call, when that
// entry marks its attempts (the generic rule): such a step is shown as
// recognised by that rule.
func (s *otlpSpan) recognisedBy() string {
	if s.rule == nil || !s.rule.dialect.marksAttempts {
		return ""
	}
	return s.rule.dialect.name
}

// spanEventID is the id of a span's event. A span exported before it ended
// and again after gives two events, so that the second completes what the
// first opened instead of being a duplicate.
func spanEventID(s *otlpSpan) string {
	id := "otlp:" + s.traceID + ":" + s.spanID
	if s.span.EndTimestamp() == 0 {
		id += ":running"
	}
	return id
}

func executionEvent(b *eventBuilder, s *otlpSpan, byID map[string]*otlpSpan) (trace.Event, error) {
	sp := s.span
	name, source := s.agentName()
	session := s.session(byID)
	b.start(trace.EventExecution)
	if session != "" && b.shape([]byte(`{"labels":{"session":""}}`)) != nil {
		return b.event(trace.Event{})
	}
	ev := trace.Event{Type: trace.EventExecution, ID: b.id("id", spanEventID(s))}
	x := &trace.Execution{
		ID:         b.id("execution_id", s.execution),
		Name:       b.text("name", name),
		NameSource: b.enum("name_source", source, trace.NameSources[1:]...),
	}
	status := trace.StatusRunning
	if sp.EndTimestamp() != 0 {
		status = trace.StatusCompleted
		if sp.Status().Code() == ptrace.StatusCodeError {
			status = trace.StatusFailed
		}
	}
	x.Status = trace.Status(b.enum("status", string(status), "running", "completed", "failed", "cancelled"))
	x.StartedAt = b.time("started_at", sp.StartTimestamp())
	if sp.EndTimestamp() != 0 {
		x.EndedAt = b.time("ended_at", max(sp.EndTimestamp(), sp.StartTimestamp()))
	}
	if session != "" {
		x.Labels = b.sessionLabel(session)
	}
	b.order("started_at", x.StartedAt, "ended_at", x.EndedAt)
	ev.Execution = x
	return b.event(ev)
}

// session is the session the span inherits (a label of its execution).
func (s *otlpSpan) session(byID map[string]*otlpSpan) string {
	return inherited(s, byID, func(cur *otlpSpan) string { return cur.m.text(&cur.spanView, fieldSession) }, s.resource.session)
}

// nameEvent names the execution after an agent span below its root.
func nameEvent(b *eventBuilder, s *otlpSpan, name, source string) (trace.Event, error) {
	b.start(trace.EventExecution)
	ev := trace.Event{Type: trace.EventExecution, ID: b.id("id", "otlp:"+s.traceID+":"+s.spanID+":name")}
	ev.Execution = &trace.Execution{
		ID:         b.id("execution_id", s.execution),
		Name:       b.text("name", name),
		NameSource: b.enum("name_source", source, trace.NameSources[1:]...),
	}
	return b.event(ev)
}

// modelCall is what a model call's span says of the call.
type modelCall struct {
	model                     string
	inputTokens, outputTokens int64
}

func (s *otlpSpan) modelCall() modelCall {
	return modelCall{model: s.m.text(&s.spanView, fieldModel), inputTokens: s.m.integer(&s.spanView, fieldInputTokens),
		outputTokens: s.m.integer(&s.spanView, fieldOutputTokens)}
}

// httpCall is what an HTTP client span says of the request.
type httpCall struct {
	method, url, idempotencyKey string
	status                      int64
}

func (s *otlpSpan) httpCall() httpCall {
	return httpCall{method: strings.ToUpper(s.m.text(&s.spanView, fieldHTTPMethod)), url: s.m.text(&s.spanView, fieldHTTPURL),
		status: s.m.integer(&s.spanView, fieldHTTPStatus), idempotencyKey: s.m.text(&s.spanView, fieldHTTPIdempotencyKey)}
}

// spanEvent keeps a model call, an HTTP client call or a context span.
func spanEvent(b *eventBuilder, s *otlpSpan) (trace.Event, error) {
	sp := s.span
	role := trace.RoleContext
	switch s.role {
	case roleModel:
		role = trace.RoleModel
	case roleHTTP:
		role = trace.RoleHTTP
	}
	b.start(trace.EventSpan)
	ev := trace.Event{Type: trace.EventSpan, ID: b.id("id", spanEventID(s))}
	x := &trace.Span{ExecutionID: b.id("execution_id", s.execution), TraceID: b.id("trace_id", s.traceID), SpanID: b.id("span_id", s.spanID)}
	if s.parentID != "" {
		x.ParentSpanID = b.id("parent_span_id", s.parentID)
	}
	x.Role = trace.SpanRole(b.str("role", string(role))) // one of trace.SpanRoles
	x.Name = b.text("name", sp.Name())
	x.StartedAt = b.time("started_at", sp.StartTimestamp())
	if sp.EndTimestamp() != 0 {
		x.EndedAt = b.time("ended_at", max(sp.EndTimestamp(), sp.StartTimestamp()))
		if sp.Status().Code() == ptrace.StatusCodeError {
			_, msg := s.spanError()
			x.Error = b.text("error", cmp.Or(msg, "error"))
		}
	}
	switch s.role {
	case roleModel:
		call := s.modelCall()
		if call.model != "" {
			x.Model = b.text("model", call.model)
		}
		if call.inputTokens > 0 {
			x.InputTokens = b.count("input_tokens", call.inputTokens)
		}
		if call.outputTokens > 0 {
			x.OutputTokens = b.count("output_tokens", call.outputTokens)
		}
	case roleHTTP:
		call := s.httpCall()
		x.HTTPMethod = b.id("http_method", call.method)
		if u := call.url; u != "" {
			x.HTTPURL = b.text("http_url", u) // its user info and secret parameters masked
		}
		if n := call.status; n > 0 && n < 1000 {
			x.HTTPStatus = int(b.count("http_status", n))
		}
		if k := call.idempotencyKey; k != "" {
			x.IdempotencyKey = b.id("idempotency_key", k)
		}
	}
	b.order("started_at", x.StartedAt, "ended_at", x.EndedAt)
	ev.Span = x
	return b.event(ev)
}

// toolName is a tool call's tool: the first field source that names it,
// else the span's name.
func (s *otlpSpan) toolName() string {
	return cmp.Or(s.m.text(&s.spanView, fieldTool), s.span.Name())
}

// toolArgs is a tool call's arguments, unwrapped when the source they came
// from says so (OpenLLMetry's).
func (s *otlpSpan) toolArgs() (any, bool) {
	v, ok, unwrap := s.m.jsonField(&s.spanView, fieldArgs)
	if ok && unwrap {
		v = unwrapOpenLLMetryArgs(v)
	}
	return v, ok
}

func (s *otlpSpan) toolResult() (any, bool) {
	v, ok, _ := s.m.jsonField(&s.spanView, fieldResult)
	return v, ok
}

// idempotencyKey is the key the span says it sent.
func (s *otlpSpan) idempotencyKey() string { return s.m.text(&s.spanView, fieldIdempotencyKey) }

func attemptEvent(b *eventBuilder, s *otlpSpan, classes ToolClasses) (trace.Event, error) {
	sp := s.span
	attrs := sp.Attributes()
	tool := s.toolName()
	b.start(trace.EventAttempt)
	args, hasArgs := s.toolArgs()
	var jsonFields []jsonField
	if hasArgs {
		// Redacted before the step id is derived from them: raw JSON by
		// prepareJSON, which decodes it anyway; decoded arguments before
		// they are encoded.
		f := jsonField{key: "args", v: args}
		switch args.(type) {
		case json.RawMessage, map[string]json.RawMessage:
			f.rawRedacted = true
		default:
			f.v = b.lim.Redact.redactArgs(args)
		}
		jsonFields = append(jsonFields, f)
	}
	result, hasResult := s.toolResult()
	if hasResult {
		jsonFields = append(jsonFields, jsonField{key: "result", v: result})
	}
	var argsJSON, resultJSON json.RawMessage
	if len(jsonFields) > 0 {
		canon := b.prepareJSON(jsonFields...)
		if b.err != nil {
			return b.event(trace.Event{})
		}
		if hasArgs {
			argsJSON, canon = canon[0], canon[1:]
		}
		if hasResult {
			resultJSON = canon[0]
		}
	}

	ev := trace.Event{Type: trace.EventAttempt, ID: b.id("id", spanEventID(s))}
	a := &trace.Attempt{
		ExecutionID: b.id("execution_id", s.execution),
		StepID:      b.id("step_id", stepID(s, tool, argsJSON, hasArgs)),
		TraceID:     b.id("trace_id", s.traceID),
		SpanID:      b.id("span_id", s.spanID),
		Tool:        b.text("tool", tool),
		Effect:      trace.EffectClass(b.enum("effect", effectClass(attrs, tool, classes), "read", "write", "unsafe", "unknown")),
	}
	if p := str(attrs, "oncetrace.provider"); p != "" {
		a.Provider = b.id("provider", p)
	}
	a.Args = b.json("args", argsJSON)
	a.Result = b.json("result", resultJSON)
	if k := s.idempotencyKey(); k != "" {
		a.IdempotencyKey = b.id("idempotency_key", k)
	}
	if w := worker(s.resource.attrs); w != "" {
		a.Worker = b.id("worker", w)
	}
	a.StartedAt = b.time("started_at", sp.StartTimestamp())
	if sp.EndTimestamp() != 0 {
		a.EndedAt = b.time("ended_at", max(sp.EndTimestamp(), sp.StartTimestamp()))
		outcome, msg := s.attemptOutcome()
		a.Outcome = trace.Outcome(b.enum("outcome", outcome, "ok", "error", "timeout", "replayed"))
		if msg != "" {
			a.Error = b.text("error", msg)
		}
	} // else still running: a later export completes it
	if v, ok := attrs.Get("oncetrace.deduplicated"); ok && v.Type() == pcommon.ValueTypeBool && v.Bool() {
		a.Deduplicated = true
		b.add("deduplicated", []byte("true"))
	}
	if by := s.recognisedBy(); by != "" {
		a.RecognisedBy = b.id("recognised_by", by)
	}
	switch {
	case intAttr(attrs, "oncetrace.attempt") > 0:
		a.Number = b.attemptNumber("attempt", intAttr(attrs, "oncetrace.attempt"))
	case hasAttr(attrs, "http.request.resend_count"):
		a.Number = b.attemptNumber("attempt", intAttr(attrs, "http.request.resend_count")+1)
	}
	b.order("started_at", a.StartedAt, "ended_at", a.EndedAt)
	ev.Attempt = a
	return b.event(ev)
}

// attemptOutcome is an ended tool call's outcome and error message. A
// rule may say what a call that ended without an error status means
// (ADK exports a failed call without one).
func (s *otlpSpan) attemptOutcome() (outcome, msg string) {
	sp := s.span
	attrs := sp.Attributes()
	outcome = "ok"
	switch {
	case sp.Status().Code() == ptrace.StatusCodeError:
		outcome = "error"
		var errType string
		errType, msg = s.spanError()
		if isTimeout(errType) || messageNamesTimeout(msg) {
			outcome = "timeout"
		}
	case s.rule != nil && s.rule.unreported != nil:
		outcome, msg = s.rule.unreported.outcome, s.rule.unreported.error
	}
	if v, ok := attrs.Get("oncetrace.replayed"); ok && v.Type() == pcommon.ValueTypeBool && v.Bool() {
		outcome = "replayed"
	}
	if o := str(attrs, "oncetrace.outcome"); o != "" {
		outcome = o // validated as any sent outcome
	}
	return outcome, msg
}

// stepID is the step a tool call is an attempt of: the one it names, else
// one per tool name and canonical arguments within the execution (a model
// retries with a new call id and the same arguments), else, with no
// arguments to compare, one of its own named after its span. canonArgs is
// the arguments as the stored event holds them (sorted keys, numbers as
// sent), nil when they could not be.
func stepID(s *otlpSpan, tool string, canonArgs json.RawMessage, hasArgs bool) string {
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
	return ToolStepID(tool, canonArgs) // nil: arguments sent as null
}

// spanError is a failed span's error type (from its attributes, or the
// exception.type of its exception event) and a message for humans.
func (s *otlpSpan) spanError() (errType, msg string) {
	sp := s.span
	attrs := sp.Attributes()
	errType = errorName(s.m.text(&s.spanView, fieldErrorType), str(attrs, exceptionStacktrace))
	excMsg := s.m.text(&s.spanView, fieldErrorMessage)
	for _, e := range sp.Events().All() {
		if e.Name() != "exception" {
			continue
		}
		ea := e.Attributes()
		errType = cmp.Or(errType, errorName(str(ea, "exception.type"), str(ea, exceptionStacktrace)))
		excMsg = cmp.Or(excMsg, str(ea, "exception.message"))
	}
	msg = cmp.Or(sp.Status().Message(), excMsg)
	switch {
	case errType != "" && msg != "" && !strings.Contains(msg, errType):
		msg = errType + ": " + msg
	case msg == "":
		msg = errType
	}
	return errType, msg
}

// domExceptionNames: OpenTelemetry JS records a DOMException's legacy
// numeric code as its exception.type, so a fetch that timed out says "23".
var domExceptionNames = map[string]string{"20": "AbortError", "23": "TimeoutError"}

// errorName is an error's type as a name: a DOMException code by its name,
// and a number nobody knows by the name its stack trace starts with
// ("TimeoutError: The operation was aborted due to timeout").
func errorName(errType, stack string) string {
	if name, ok := domExceptionNames[errType]; ok {
		return name
	}
	if _, err := strconv.Atoi(errType); err == nil || errType == "" {
		first, _, _ := strings.Cut(stack, "\n")
		if name, _, ok := strings.Cut(first, ":"); ok && name != "" && !strings.ContainsAny(name, " \t") {
			return name
		}
	}
	return errType
}

// isTimeout: the caller does not know what happened.
func isTimeout(errType string) bool {
	t := strings.ToLower(errType)
	for _, w := range []string{"timeout", "timedout", "abort", "deadline"} {
		if strings.Contains(t, w) {
			return true
		}
	}
	return false
}

// timeoutWords are what an error message says when the call timed out or
// was aborted: many frameworks lose the error's type on the way to the
// span (LangChain, Mastra and ADK keep only the message), so the message
// is the only evidence left.
var timeoutWords = []string{"timeouterror", "aborterror", "etimedout", "timed out", "timeout after", "deadline exceeded",
	"operation was aborted"}

// messageNamesTimeout reports whether an error message names a timeout or
// an abort, in any case.
func messageNamesTimeout(msg string) bool {
	for _, w := range timeoutWords {
		if containsFold(msg, w) {
			return true
		}
	}
	return false
}

func effectEvent(b *eventBuilder, s *otlpSpan, byID map[string]*otlpSpan, attrs pcommon.Map, at pcommon.Timestamp, id string) (trace.Event, error) {
	provider, effectID := str(attrs, "oncetrace.effect.provider"), str(attrs, "oncetrace.effect.id")
	if provider == "" || effectID == "" {
		return trace.Event{}, fmt.Errorf("an %s needs oncetrace.effect.provider and oncetrace.effect.id", otlpEffectName)
	}
	// The effect came from the span it is an event of, or from the effect
	// span's parent: its trace context joins it to the tool call above.
	from := s.spanID
	if s.role == roleEffect {
		from = s.parentID
	}
	key := s.m.textIn(attrs, fieldIdempotencyKey)
	if owner := byID[s.traceID+"/"+from]; owner != nil && owner.role == roleTool && key == "" {
		key = owner.idempotencyKey()
	}
	b.start(trace.EventEffect)
	ev := trace.Event{Type: trace.EventEffect, ID: b.id("id", id)}
	e := &trace.Effect{Provider: b.id("provider", provider), ID: b.id("effect_id", effectID)}
	if key != "" {
		e.IdempotencyKey = b.id("idempotency_key", key)
	}
	e.ExecutionID = b.id("execution_id", s.execution)
	if t := str(attrs, "oncetrace.effect.target"); t != "" {
		e.Target = b.text("target", t)
	}
	if at != 0 {
		e.At = b.time("at", at)
	}
	e.TraceID = b.id("trace_id", s.traceID)
	if from != "" {
		e.SpanID = b.id("span_id", from)
	}
	ev.Effect = e
	return b.event(ev)
}

// inherited is what own says of the span, else of its nearest ancestor in
// the same export that says anything, else fromResource.
func inherited(s *otlpSpan, byID map[string]*otlpSpan, own func(*otlpSpan) string, fromResource string) string {
	for cur, depth := s, 0; cur != nil && depth < 64; depth++ {
		if v := own(cur); v != "" {
			return v
		}
		if cur.parentID == "" {
			break
		}
		cur = byID[cur.traceID+"/"+cur.parentID]
	}
	return fromResource
}

// effectClass is the tool's class: oncetrace.effect, else the class its
// name is configured with, else unknown (nobody classified it).
func effectClass(attrs pcommon.Map, tool string, classes ToolClasses) string {
	switch c := str(attrs, "oncetrace.effect"); c {
	case "read", "write", "unsafe":
		return c
	}
	if c := classes.Classify(tool); c != "" {
		return string(c)
	}
	return string(trace.EffectUnknown)
}

// worker is the process a span's resource names: service.instance.id,
// else host.name:process.pid. A Temporal worker's default identity
// ("PID@HOST@", which its OpenTelemetry set-up may reuse as the
// service.instance.id) reads as HOST:PID, as the history's does
// (trace.NormaliseWorker), so both name one worker.
func worker(resource pcommon.Map) string {
	if id := str(resource, "service.instance.id"); id != "" {
		return trace.NormaliseWorker(id)
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

// str reads an attribute as a string (valueString), "" when it is absent.
func str(m pcommon.Map, name string) string {
	v, ok := m.Get(name)
	if !ok {
		return ""
	}
	return valueString(v)
}

// valueString is an attribute's value as a string: strings as they are,
// numbers and booleans printed, and the first element of a string array
// (HTTP header attributes are arrays).
func valueString(v pcommon.Value) string {
	if v.Type() == pcommon.ValueTypeSlice {
		if v.Slice().Len() == 0 {
			return ""
		}
		return v.Slice().At(0).AsString()
	}
	return v.AsString()
}

func hasAttr(m pcommon.Map, name string) bool { _, ok := m.Get(name); return ok }

func intAttr(m pcommon.Map, name string) int64 {
	v, ok := m.Get(name)
	if !ok {
		return 0
	}
	return valueInt(v)
}

// valueInt is an attribute's value as an integer, 0 when it is none.
func valueInt(v pcommon.Value) int64 {
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

// jsonValue reads arguments or a result: a map or array as JSON, a string
// holding JSON as that JSON, any other string as a JSON string.
func jsonValue(v pcommon.Value) any {
	switch v.Type() {
	case pcommon.ValueTypeMap:
		return v.Map().AsRaw()
	case pcommon.ValueTypeSlice:
		return v.Slice().AsRaw()
	case pcommon.ValueTypeStr:
		if jsonInAttribute(v.Str()) { // otlplimits.go
			return json.RawMessage(v.Str())
		}
		return v.Str()
	}
	return v.AsRaw()
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
