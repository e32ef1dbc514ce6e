package follow

import (
	"encoding/json"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// ExecutionsOnly is a Mapper that gives each run its execution and
// nothing else: id WORKFLOW_ID/RUN_ID, named after the workflow type,
// running until its close event, then completed, failed or cancelled. It
// stands in for package temporal's MapHistory (steps, attempts, failures)
// until that is wired, and lets the follower's tests run without it.
func ExecutionsOnly(lim ingest.Limits) Mapper {
	return func(h *historypb.History, run Run) ([]trace.Event, error) {
		events := h.GetEvents()
		if len(events) == 0 {
			return nil, nil
		}
		first := events[0]
		started := first.GetWorkflowExecutionStartedEventAttributes()
		if first.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED || started == nil {
			return nil, fmt.Errorf("history: event 1 is %s, want WorkflowExecutionStarted", first.GetEventType())
		}
		wf := started.GetWorkflowId()
		if wf == "" {
			return nil, fmt.Errorf("history: WorkflowExecutionStarted has no workflowId (a history from before server 1.25?)")
		}
		id := wf + "/" + started.GetOriginalExecutionRunId()
		base := map[string]any{"type": "execution", "execution_id": id, "name": started.GetWorkflowType().GetName()}
		open := clone(base)
		open["id"], open["status"], open["started_at"] = "temporal:"+id+":started", "running", stamp(first.GetEventTime().AsTime())
		out := []map[string]any{open}
		last := events[len(events)-1]
		if status := closedStatus(last.GetEventType()); status != "" {
			closed := clone(base)
			closed["id"], closed["status"], closed["ended_at"] = "temporal:"+id+":closed", status, stamp(last.GetEventTime().AsTime())
			out = append(out, closed)
		}
		parsed := make([]trace.Event, 0, len(out))
		for _, ev := range out {
			raw, err := json.Marshal(ev)
			if err != nil {
				return nil, err
			}
			p, err := ingest.ParseEvent(raw, lim)
			if err != nil {
				return nil, fmt.Errorf("history of %s: %w", id, err)
			}
			parsed = append(parsed, p)
		}
		return parsed, nil
	}
}

func closedStatus(t enumspb.EventType) string {
	switch t {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		return string(trace.StatusCompleted)
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
		return string(trace.StatusFailed)
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
		return string(trace.StatusCancelled)
	}
	return ""
}

func clone(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
