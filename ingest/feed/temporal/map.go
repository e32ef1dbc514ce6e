package temporal

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/trace"
)

// MaxEarlierAttempts bounds the attempts MapHistory makes of a retried
// activity's count alone (those before the one whose failure the history
// keeps): an activity retried without limit may be at attempt 10,000. The
// ones just before the known ones are made; older ones are counted only
// by the last attempt's number.
const MaxEarlierAttempts = 100

// textBytes bounds an error text or a label made of a failure's message.
const textBytes = 1000

// MapOptions says what a history alone does not.
type MapOptions struct {
	// Namespace is the run's Temporal namespace, when known: the
	// execution gets the label "namespace". May be empty.
	Namespace string
	// WorkflowID and RunID name the run when set. Otherwise the workflow
	// id is WorkflowExecutionStarted's workflowId (servers since 1.24 or so
	// write it) and the run id the new run id of the history's last reset,
	// else WorkflowExecutionStarted's originalExecutionRunId (the run's own
	// id unless the run was reset). A follower that knows both passes them.
	WorkflowID string
	RunID      string
	// ToolClasses classify activity and child workflow types, as serve
	// --tool-class classifies tool calls; unclassified ones are unknown.
	ToolClasses ingest.ToolClasses
	// Limits are the ingest limits the events are checked against (and
	// secrets masked by); the zero value means ingest.DefaultLimits.
	Limits ingest.Limits
}

// MapHistory maps one workflow run's history, from its first event to any
// later one, onto oncetrace events (docs/temporal.md). The same history
// always gives the same events with the same ids, and a longer prefix of
// it gives those events and more: each event is made from the Temporal
// events up to the one that produced it and named after that one.
func MapHistory(h *historypb.History, opts MapOptions) ([]trace.Event, error) {
	if err := checkHistory(h); err != nil {
		return nil, err
	}
	m, err := newMapper(h, opts)
	if err != nil {
		return nil, err
	}
	for _, ev := range h.GetEvents() {
		m.event(ev)
		if m.err != nil {
			return nil, fmt.Errorf("history event %d (%s): %w", ev.GetEventId(), eventName(ev), m.err)
		}
	}
	return m.out, nil
}

// mapper holds what one run's earlier events said that later ones need.
type mapper struct {
	opts      MapOptions
	lim       ingest.Limits
	wf, run   string
	exec      string // WORKFLOW_ID/RUN_ID
	traceID   string // the workflow's trace, from its start's _tracer-data header
	spanTrace string // the trace its context spans go in: the workflow's, else one of the run's own

	activities map[int64]*activity // by ActivityTaskScheduled's event id
	children   map[int64]*child    // by StartChildWorkflowExecutionInitiated's event id
	timers     map[string]int64    // timer id -> TimerStarted's event id
	taskWorker map[int64]string    // WorkflowTaskCompleted's event id -> its worker

	out []trace.Event
	err error
}

type activity struct {
	id, typ string
	args    any // as attempt events carry them; nil when not JSON
	traceID string
	attempt int // the attempt ActivityTaskStarted says; 0 before it
}

type child struct {
	id, typ string
	args    any
	exec    string // WORKFLOW_ID/RUN_ID once started
}

func newMapper(h *historypb.History, opts MapOptions) (*mapper, error) {
	lim := opts.Limits
	if lim.IDBytes == 0 {
		lim = ingest.DefaultLimits
	}
	start := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
	wf := opts.WorkflowID
	if wf == "" {
		wf = start.GetWorkflowId()
	}
	run := opts.RunID
	if run == "" {
		run = start.GetOriginalExecutionRunId()
		for _, ev := range h.GetEvents() {
			if r := ev.GetWorkflowTaskFailedEventAttributes().GetNewRunId(); r != "" {
				run = r // a reset: this history is the reset's new run
			}
		}
	}
	switch {
	case wf == "":
		return nil, errors.New("history.events[0].workflowExecutionStartedEventAttributes.workflowId: missing (a server older than 1.24?); name the workflow id (MapOptions.WorkflowID, oncetrace import --workflow-id)")
	case run == "":
		return nil, errors.New("history.events[0].workflowExecutionStartedEventAttributes.originalExecutionRunId: missing; name the run id (MapOptions.RunID, oncetrace import --run-id)")
	}
	m := &mapper{opts: opts, lim: lim, wf: wf, run: run, exec: wf + "/" + run,
		activities: map[int64]*activity{}, children: map[int64]*child{}, timers: map[string]int64{}, taskWorker: map[int64]string{}}
	m.traceID, _ = headerTrace(start.GetHeader())
	m.spanTrace = m.traceID
	if m.spanTrace == "" {
		sum := sha256.Sum256([]byte("temporal run\x00" + wf + "\x00" + run))
		m.spanTrace = hex.EncodeToString(sum[:16])
	}
	return m, nil
}

// id is the id of the event made of the run's Temporal event n, as what:
// the same in every mapping of any prefix of the history that holds n.
func (m *mapper) id(n int64, what string) string {
	sum := sha256.Sum256([]byte(m.wf + "\x00" + m.run + "\x00" + strconv.FormatInt(n, 10) + "\x00" + what))
	return "temporal:" + hex.EncodeToString(sum[:16])
}

// emit validates ev as POST /api/v1/events would and keeps it. Arguments
// or a result the limits refuse are replaced by a note saying so, rather
// than losing the attempt.
func (m *mapper) emit(n int64, what string, ev map[string]any) {
	if m.err != nil {
		return
	}
	ev["id"] = m.id(n, what)
	parsed, err := m.parse(ev)
	if err != nil && (ev["args"] != nil || ev["result"] != nil) {
		for _, k := range []string{"args", "result"} {
			if ev[k] != nil {
				ev[k] = map[string]string{"oncetrace": k + " not kept: " + feed.OneLine(err.Error(), 300)}
			}
		}
		if parsed, err = m.parse(ev); err != nil {
			delete(ev, "args")
			delete(ev, "result")
			parsed, err = m.parse(ev)
		}
	}
	if err != nil {
		m.err = err
		return
	}
	m.out = append(m.out, parsed)
}

func (m *mapper) parse(ev map[string]any) (trace.Event, error) {
	raw, err := json.Marshal(ev)
	if err != nil {
		return trace.Event{}, err
	}
	return ingest.ParseEvent(raw, m.lim)
}

func stamp(ts interface{ AsTime() time.Time }) string {
	return ts.AsTime().UTC().Format(time.RFC3339Nano)
}

func (m *mapper) event(ev *historypb.HistoryEvent) {
	n := ev.GetEventId()
	switch a := ev.GetAttributes().(type) {
	case *historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes:
		m.started(n, ev, a.WorkflowExecutionStartedEventAttributes)
	case *historypb.HistoryEvent_WorkflowExecutionCompletedEventAttributes:
		m.closed(n, ev, trace.StatusCompleted, "")
	case *historypb.HistoryEvent_WorkflowExecutionFailedEventAttributes:
		m.closed(n, ev, trace.StatusFailed, failureText(a.WorkflowExecutionFailedEventAttributes.GetFailure()))
	case *historypb.HistoryEvent_WorkflowExecutionTimedOutEventAttributes:
		m.closed(n, ev, trace.StatusFailed, "workflow timed out")
	case *historypb.HistoryEvent_WorkflowExecutionTerminatedEventAttributes:
		m.closed(n, ev, trace.StatusFailed, strings.TrimSuffix("terminated: "+a.WorkflowExecutionTerminatedEventAttributes.GetReason(), ": "))
	case *historypb.HistoryEvent_WorkflowExecutionCanceledEventAttributes:
		m.closed(n, ev, trace.StatusCancelled, "")
	case *historypb.HistoryEvent_WorkflowExecutionContinuedAsNewEventAttributes:
		m.closed(n, ev, trace.StatusCompleted, "")
		if r := a.WorkflowExecutionContinuedAsNewEventAttributes.GetNewExecutionRunId(); r != "" {
			m.emit(n, "continued", map[string]any{"type": "execution", "execution_id": m.exec,
				"labels": map[string]string{"continued_as_new": m.wf + "/" + r}})
		}
	case *historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes:
		m.taskWorker[n] = trace.NormaliseWorker(a.WorkflowTaskCompletedEventAttributes.GetIdentity())

	case *historypb.HistoryEvent_ActivityTaskScheduledEventAttributes:
		m.activityScheduled(n, a.ActivityTaskScheduledEventAttributes)
	case *historypb.HistoryEvent_ActivityTaskStartedEventAttributes:
		m.activityStarted(n, ev, a.ActivityTaskStartedEventAttributes)
	case *historypb.HistoryEvent_ActivityTaskCompletedEventAttributes:
		at := a.ActivityTaskCompletedEventAttributes
		m.activityClosed(n, ev, at.GetScheduledEventId(), at.GetStartedEventId(), trace.OutcomeOK, "", at.GetResult())
	case *historypb.HistoryEvent_ActivityTaskFailedEventAttributes:
		at := a.ActivityTaskFailedEventAttributes
		outcome, text := describeFailure(at.GetFailure())
		m.activityClosed(n, ev, at.GetScheduledEventId(), at.GetStartedEventId(), outcome, text, nil)
	case *historypb.HistoryEvent_ActivityTaskTimedOutEventAttributes:
		at := a.ActivityTaskTimedOutEventAttributes
		_, text := describeFailure(at.GetFailure())
		m.activityClosed(n, ev, at.GetScheduledEventId(), at.GetStartedEventId(), trace.OutcomeTimeout, text, nil)
	case *historypb.HistoryEvent_ActivityTaskCanceledEventAttributes:
		at := a.ActivityTaskCanceledEventAttributes
		m.activityClosed(n, ev, at.GetScheduledEventId(), at.GetStartedEventId(), trace.OutcomeError, "canceled", nil)

	case *historypb.HistoryEvent_MarkerRecordedEventAttributes:
		m.marker(n, ev, a.MarkerRecordedEventAttributes)

	case *historypb.HistoryEvent_StartChildWorkflowExecutionInitiatedEventAttributes:
		m.childInitiated(n, a.StartChildWorkflowExecutionInitiatedEventAttributes)
	case *historypb.HistoryEvent_StartChildWorkflowExecutionFailedEventAttributes:
		m.childStartFailed(n, a.StartChildWorkflowExecutionFailedEventAttributes)
	case *historypb.HistoryEvent_ChildWorkflowExecutionStartedEventAttributes:
		m.childStarted(n, ev, a.ChildWorkflowExecutionStartedEventAttributes)
	case *historypb.HistoryEvent_ChildWorkflowExecutionCompletedEventAttributes:
		at := a.ChildWorkflowExecutionCompletedEventAttributes
		m.childClosed(n, ev, at.GetInitiatedEventId(), trace.StatusCompleted, trace.OutcomeOK, "", at.GetResult())
	case *historypb.HistoryEvent_ChildWorkflowExecutionFailedEventAttributes:
		at := a.ChildWorkflowExecutionFailedEventAttributes
		m.childClosed(n, ev, at.GetInitiatedEventId(), trace.StatusFailed, trace.OutcomeError, failureText(at.GetFailure()), nil)
	case *historypb.HistoryEvent_ChildWorkflowExecutionTimedOutEventAttributes:
		at := a.ChildWorkflowExecutionTimedOutEventAttributes
		m.childClosed(n, ev, at.GetInitiatedEventId(), trace.StatusFailed, trace.OutcomeTimeout, "the child workflow timed out", nil)
	case *historypb.HistoryEvent_ChildWorkflowExecutionTerminatedEventAttributes:
		at := a.ChildWorkflowExecutionTerminatedEventAttributes
		m.childClosed(n, ev, at.GetInitiatedEventId(), trace.StatusFailed, trace.OutcomeError, "the child workflow was terminated", nil)
	case *historypb.HistoryEvent_ChildWorkflowExecutionCanceledEventAttributes:
		at := a.ChildWorkflowExecutionCanceledEventAttributes
		m.childClosed(n, ev, at.GetInitiatedEventId(), trace.StatusCancelled, trace.OutcomeError, "the child workflow was canceled", nil)

	case *historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes:
		m.contextSpan(n, ev, "signal "+a.WorkflowExecutionSignaledEventAttributes.GetSignalName(), true)
	case *historypb.HistoryEvent_WorkflowExecutionCancelRequestedEventAttributes:
		m.contextSpan(n, ev, "cancel requested", true)
	case *historypb.HistoryEvent_TimerStartedEventAttributes:
		at := a.TimerStartedEventAttributes
		m.timers[at.GetTimerId()] = n
		name := "timer " + at.GetTimerId()
		if d := at.GetStartToFireTimeout(); d != nil {
			name += " (" + d.AsDuration().String() + ")"
		}
		m.contextSpan(n, ev, name, false)
	case *historypb.HistoryEvent_TimerFiredEventAttributes:
		m.timerEnded(n, ev, a.TimerFiredEventAttributes.GetTimerId())
	case *historypb.HistoryEvent_TimerCanceledEventAttributes:
		m.timerEnded(n, ev, a.TimerCanceledEventAttributes.GetTimerId())
	}
}

// started is the execution: named after the workflow type, its trace,
// its parent (for a child workflow) and the run it continues as labels.
func (m *mapper) started(n int64, ev *historypb.HistoryEvent, a *historypb.WorkflowExecutionStartedEventAttributes) {
	labels := map[string]string{}
	if m.traceID != "" {
		labels["trace_id"] = m.traceID
	}
	if p := a.GetParentWorkflowExecution(); p.GetWorkflowId() != "" && p.GetRunId() != "" {
		labels["parent"] = p.GetWorkflowId() + "/" + p.GetRunId()
	}
	if prev := a.GetContinuedExecutionRunId(); prev != "" {
		labels["continued_from"] = m.wf + "/" + prev // continued as new, retried or a cron's next run
	}
	x := map[string]any{"type": "execution", "execution_id": m.exec, "name": a.GetWorkflowType().GetName(),
		"status": "running", "started_at": stamp(ev.GetEventTime())}
	if len(labels) > 0 {
		x["labels"] = labels
	}
	m.emit(n, "execution", x)
	if m.opts.Namespace != "" {
		// An event of its own, named after the namespace, so that a
		// mapping without it and one with it never send two bodies under
		// one id.
		m.emit(n, "namespace "+m.opts.Namespace, map[string]any{"type": "execution", "execution_id": m.exec,
			"labels": map[string]string{"namespace": m.opts.Namespace}})
	}
}

func (m *mapper) closed(n int64, ev *historypb.HistoryEvent, status trace.Status, failure string) {
	x := map[string]any{"type": "execution", "execution_id": m.exec, "status": string(status), "ended_at": stamp(ev.GetEventTime())}
	if failure != "" {
		x["labels"] = map[string]string{"failure": feed.OneLine(failure, textBytes)}
	}
	m.emit(n, "closed", x)
}

// attempt is an attempt event of step with what every event of it
// carries: its tool and class, its arguments (the same for every attempt
// of a step: Temporal retries with the same input), its trace.
// RecognisedBy marks the attempts of Temporal activities, child workflows
// and local activities, from a history or the interceptors' spans: the
// page tells them as Temporal has them (views: "Temporal retried it").
const RecognisedBy = "temporal"

func (m *mapper) attempt(step, tool string, number int, traceID string, args any) map[string]any {
	class := m.opts.ToolClasses.Classify(tool)
	if class == "" {
		class = trace.EffectUnknown
	}
	ev := map[string]any{"type": "attempt", "execution_id": m.exec, "step_id": step, "attempt": number,
		"tool": tool, "effect": string(class), "recognised_by": RecognisedBy}
	if traceID != "" {
		ev["trace_id"] = traceID
	}
	if args != nil {
		ev["args"] = args
	}
	return ev
}

// args is the input payloads as attempt events carry them, nil when they
// are not JSON.
func (m *mapper) args(input *commonpb.Payloads) any {
	if raw, ok := payloadsJSON(input); ok {
		if kept := m.keep("args", raw); kept != nil {
			return kept
		}
	}
	return nil
}

// keep is raw JSON to put in an event, or a note when it is over the
// limit an attempt's args or result may be.
func (m *mapper) keep(field string, raw json.RawMessage) any {
	canon, err := ingest.CanonicalArgs(raw, nil)
	if err != nil {
		return map[string]string{"oncetrace": field + " not kept: " + feed.OneLine(err.Error(), 300)}
	}
	if len(canon) > m.lim.JSONBytes {
		note := fmt.Sprintf(`{"oncetrace":"%s of %d bytes, over the %d an attempt keeps"}`, field, len(canon), m.lim.JSONBytes)
		if len(note) > m.lim.JSONBytes {
			return nil // a limit too small for the note itself
		}
		return json.RawMessage(note)
	}
	return json.RawMessage(canon)
}

// activityScheduled makes the step known as soon as it is scheduled: its
// attempt 1 exists whatever happens next, and every later event of the
// activity says the same tool and arguments.
func (m *mapper) activityScheduled(n int64, a *historypb.ActivityTaskScheduledEventAttributes) {
	act := &activity{id: a.GetActivityId(), typ: a.GetActivityType().GetName(), args: m.args(a.GetInput()), traceID: m.traceID}
	if t, _ := headerTrace(a.GetHeader()); t != "" {
		act.traceID = t
	}
	m.activities[n] = act
	m.emit(n, "scheduled", m.attempt(act.id, act.typ, 1, act.traceID, act.args))
}

// activityStarted is the last attempt, with its worker and start, and what
// the history says of the ones before it: the previous one's failure, the
// earlier ones' count.
func (m *mapper) activityStarted(n int64, ev *historypb.HistoryEvent, a *historypb.ActivityTaskStartedEventAttributes) {
	act := m.activity(a.GetScheduledEventId())
	if act == nil {
		return
	}
	act.attempt = max(int(a.GetAttempt()), 1)
	last := m.attempt(act.id, act.typ, act.attempt, act.traceID, act.args)
	last["started_at"] = stamp(ev.GetEventTime())
	if w := trace.NormaliseWorker(a.GetIdentity()); w != "" {
		last["worker"] = w
	}
	m.emit(n, "started", last)
	m.earlier(n, act.id, act.typ, act.attempt, act.traceID, act.args, a.GetLastFailure())
}

// earlier makes the attempts before attempt last that a history knows of
// only by count, and the one before last by lastFailure when it has one.
func (m *mapper) earlier(n int64, step, tool string, last int, traceID string, args any, lastFailure *failurepb.Failure) {
	first := 1
	if lastFailure != nil && last > 1 {
		outcome, text := describeFailure(lastFailure)
		prev := m.attempt(step, tool, last-1, traceID, args)
		prev["outcome"] = string(outcome)
		// Said so that it stays true when spans fill in the attempt's
		// times and worker: the error text of the first terminal event of
		// an attempt is the one kept.
		prev["error"] = feed.OneLine(fmt.Sprintf("%s (recorded by Temporal as attempt %d's last failure)", text, last), textBytes)
		m.emit(n, "previous", prev)
		last--
	}
	first = max(first, last-MaxEarlierAttempts)
	for k := first; k < last; k++ {
		e := m.attempt(step, tool, k, traceID, args)
		e["outcome"] = string(trace.OutcomeError)
		e["error"] = fmt.Sprintf("failed before attempt %d; how is not recorded (Temporal keeps only the last attempt's failure)", last)
		m.emit(n, "earlier "+strconv.Itoa(k), e)
	}
}

// activityClosed ends the attempt that started (attempt 1 when none did:
// the activity closed before any worker took it).
func (m *mapper) activityClosed(n int64, ev *historypb.HistoryEvent, scheduled, startedEvent int64, outcome trace.Outcome, text string, result *commonpb.Payloads) {
	act := m.activity(scheduled)
	if act == nil {
		return
	}
	number := 1
	if startedEvent != 0 && act.attempt > 0 {
		number = act.attempt
	}
	e := m.attempt(act.id, act.typ, number, act.traceID, act.args)
	e["outcome"] = string(outcome)
	if startedEvent != 0 {
		e["ended_at"] = stamp(ev.GetEventTime())
	} else if text != "" {
		text += " (no worker had started it)"
	}
	if text != "" {
		e["error"] = feed.OneLine(text, textBytes)
	}
	if raw, ok := payloadsJSON(result); ok {
		e["result"] = m.keep("result", raw)
	}
	m.emit(n, "closed", e)
}

func (m *mapper) activity(scheduled int64) *activity {
	act := m.activities[scheduled]
	if act == nil {
		m.err = fmt.Errorf("scheduledEventId: %d names no ActivityTaskScheduled event before it", scheduled)
	}
	return act
}

func (m *mapper) child(initiated int64) *child {
	c := m.children[initiated]
	if c == nil {
		m.err = fmt.Errorf("initiatedEventId: %d names no StartChildWorkflowExecutionInitiated event before it", initiated)
	}
	return c
}

// childInitiated is a child workflow's step: its first attempt, as the
// parent asked for it.
func (m *mapper) childInitiated(n int64, at *historypb.StartChildWorkflowExecutionInitiatedEventAttributes) {
	c := &child{id: at.GetWorkflowId(), typ: at.GetWorkflowType().GetName(), args: m.args(at.GetInput())}
	m.children[n] = c
	m.emit(n, "child initiated", m.attempt(c.id, c.typ, 1, m.traceID, c.args))
}

// childStartFailed ends the child's attempt: it never started.
func (m *mapper) childStartFailed(n int64, at *historypb.StartChildWorkflowExecutionFailedEventAttributes) {
	c := m.child(at.GetInitiatedEventId())
	if c == nil {
		return
	}
	ev := m.attempt(c.id, c.typ, 1, m.traceID, c.args)
	ev["outcome"], ev["error"] = "error", "the child workflow did not start: "+enumWords(at.GetCause().String(), "START_CHILD_WORKFLOW_EXECUTION_FAILED_CAUSE_")
	m.emit(n, "child start failed", ev)
}

// childStarted times the child's attempt and names its own execution,
// linked back to this one; its own history, when imported, says the rest.
func (m *mapper) childStarted(n int64, ev *historypb.HistoryEvent, at *historypb.ChildWorkflowExecutionStartedEventAttributes) {
	c := m.child(at.GetInitiatedEventId())
	if c == nil {
		return
	}
	c.exec = at.GetWorkflowExecution().GetWorkflowId() + "/" + at.GetWorkflowExecution().GetRunId()
	att := m.attempt(c.id, c.typ, 1, m.traceID, c.args)
	att["started_at"] = stamp(ev.GetEventTime())
	m.emit(n, "child started", att)
	m.emit(n, "child execution", map[string]any{"type": "execution", "execution_id": c.exec, "name": c.typ,
		"labels": map[string]string{"parent": m.exec}})
}

// childClosed ends the child workflow's step, and says its status on its
// own execution (without an end: the child's own history has its time).
func (m *mapper) childClosed(n int64, ev *historypb.HistoryEvent, initiated int64, status trace.Status, outcome trace.Outcome, text string, result *commonpb.Payloads) {
	c := m.child(initiated)
	if c == nil {
		return
	}
	e := m.attempt(c.id, c.typ, 1, m.traceID, c.args)
	e["outcome"], e["ended_at"] = string(outcome), stamp(ev.GetEventTime())
	if text != "" {
		e["error"] = feed.OneLine(text, textBytes)
	}
	if raw, ok := payloadsJSON(result); ok {
		e["result"] = m.keep("result", raw)
	}
	m.emit(n, "child closed", e)
	if c.exec != "" {
		m.emit(n, "child execution closed", map[string]any{"type": "execution", "execution_id": c.exec, "status": string(status)})
	}
}

// localActivity is what the Go SDK's LocalActivity marker says of the
// attempt that ended: its number, its result or failure, and the worker
// whose workflow task ran it. A marker of another shape (another SDK's)
// is a context span like any other marker.
func (m *mapper) marker(n int64, ev *historypb.HistoryEvent, a *historypb.MarkerRecordedEventAttributes) {
	var data struct {
		ActivityID   string
		ActivityType string
		Attempt      int
	}
	if a.GetMarkerName() == "LocalActivity" {
		if raw, ok := payloadsJSON(a.GetDetails()["data"]); ok {
			_ = json.Unmarshal(raw, &data)
		}
	}
	if data.ActivityID == "" || data.ActivityType == "" {
		m.contextSpan(n, ev, "marker "+a.GetMarkerName(), true)
		return
	}
	number := max(data.Attempt, 1)
	e := m.attempt(data.ActivityID, data.ActivityType, number, m.traceID, nil)
	if w := m.taskWorker[a.GetWorkflowTaskCompletedEventId()]; w != "" {
		e["worker"] = w
	}
	if f := a.GetFailure(); f != nil {
		outcome, text := describeFailure(f)
		e["outcome"], e["error"] = string(outcome), feed.OneLine(text, textBytes)
	} else {
		e["outcome"] = string(trace.OutcomeOK)
		if raw, ok := payloadsJSON(a.GetDetails()["result"]); ok {
			e["result"] = m.keep("result", raw)
		}
	}
	m.emit(n, "local activity", e)
	m.earlier(n, data.ActivityID, data.ActivityType, number, m.traceID, nil, nil)
}

// contextSpan puts a signal, a timer or a marker on the run's timeline: a
// context span of the workflow's trace (or of one of the run's own when
// the workflow carries none), ended at once when instant.
func (m *mapper) contextSpan(n int64, ev *historypb.HistoryEvent, name string, instant bool) {
	s := map[string]any{"type": "span", "execution_id": m.exec, "trace_id": m.spanTrace, "span_id": m.spanID(n),
		"role": string(trace.RoleContext), "name": feed.OneLine(name, textBytes), "started_at": stamp(ev.GetEventTime())}
	if instant {
		s["ended_at"] = s["started_at"]
	}
	m.emit(n, "span", s)
}

// timerEnded ends the timer's span (fired or canceled).
func (m *mapper) timerEnded(n int64, ev *historypb.HistoryEvent, timerID string) {
	startedBy, ok := m.timers[timerID]
	if !ok {
		return // its start is not in this history: nothing to end
	}
	m.emit(n, "timer ended", map[string]any{"type": "span", "execution_id": m.exec, "trace_id": m.spanTrace,
		"span_id": m.spanID(startedBy), "role": string(trace.RoleContext), "ended_at": stamp(ev.GetEventTime())})
}

// spanID is the span id of the context span made of Temporal event n.
func (m *mapper) spanID(n int64) string {
	sum := sha256.Sum256([]byte("temporal span\x00" + m.wf + "\x00" + m.run + "\x00" + strconv.FormatInt(n, 10)))
	return hex.EncodeToString(sum[:8])
}

// describeFailure is a failure's outcome and its text: a timeout by its
// kind ("start-to-close timeout"), anything else an error with its message,
// its type and its causes.
func describeFailure(f *failurepb.Failure) (trace.Outcome, string) {
	if f == nil {
		return trace.OutcomeError, "failed (Temporal recorded no failure)"
	}
	if t := f.GetTimeoutFailureInfo(); t != nil {
		return trace.OutcomeTimeout, enumWords(t.GetTimeoutType().String(), "TIMEOUT_TYPE_") + " timeout"
	}
	return trace.OutcomeError, failureText(f)
}

// failureText is a failure's message and its causes' ("activity error:
// card declined (Declined, non-retryable)").
func failureText(f *failurepb.Failure) string {
	var parts []string
	for depth := 0; f != nil && depth < 4; depth++ {
		msg := f.GetMessage()
		if t := f.GetTimeoutFailureInfo(); t != nil {
			msg = enumWords(t.GetTimeoutType().String(), "TIMEOUT_TYPE_") + " timeout"
		}
		if app := f.GetApplicationFailureInfo(); app != nil {
			var tags []string
			if app.GetType() != "" {
				tags = append(tags, app.GetType())
			}
			if app.GetNonRetryable() {
				tags = append(tags, "non-retryable")
			}
			if len(tags) > 0 {
				msg += " (" + strings.Join(tags, ", ") + ")"
			}
		}
		if msg != "" {
			parts = append(parts, msg)
		}
		f = f.GetCause()
	}
	if len(parts) == 0 {
		return "failed"
	}
	return strings.Join(parts, ": ")
}

// enumWords is an enum value in words, however the enum spells it
// (TIMEOUT_TYPE_START_TO_CLOSE or StartToClose): "start-to-close", as
// Temporal's docs hyphenate the timeouts; other values with spaces.
func enumWords(s, prefix string) string {
	s = strings.TrimPrefix(s, prefix)
	var words []string
	if strings.Contains(s, "_") || strings.ToUpper(s) == s {
		words = strings.Split(strings.ToLower(s), "_")
	} else {
		start := 0
		for i := 1; i < len(s); i++ {
			if s[i] >= 'A' && s[i] <= 'Z' {
				words = append(words, strings.ToLower(s[start:i]))
				start = i
			}
		}
		words = append(words, strings.ToLower(s[start:]))
	}
	if slices.Contains(words, "to") {
		return strings.Join(words, "-")
	}
	return strings.Join(words, " ")
}
