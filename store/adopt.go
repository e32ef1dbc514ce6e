package store

import (
	"fmt"
	"slices"
)

// TraceAdoptions is what AdoptTraceSpans changed.
type TraceAdoptions struct {
	// Executions whose spans changed: each adopted span's old and new
	// execution.
	Executions []string
	// Dropped are the traces' placeholder executions removed.
	Dropped []string
}

// AdoptTraceSpans gives the spans of each trace that name no execution
// but their trace (their events say execution_id = trace id: the span
// mapping's fallback, for a span whose ancestors were exported in another
// request or never: a Temporal worker killed mid-activity exports the HTTP
// span of its attempt without the RunActivity span above it, a traced
// client's StartWorkflow span has no run id) to the one execution that the
// trace's other spans and attempts name, and back to their trace when
// they name none or several. The trace's placeholder execution goes once
// nothing names it. The result is a function of what is stored, whatever
// order the spans came in: the owner is decided from the spans and
// attempts that name their execution, never from adopted ones.
func (t *Tx) AdoptTraceSpans(traces []string) (TraceAdoptions, error) {
	var out TraceAdoptions
	if len(traces) == 0 {
		return out, nil
	}
	traceNamed := `EXISTS (SELECT 1 FROM events v WHERE v.entity = ` + t.entitySQL("'s'", "s.trace_id", "s.span_id") +
		` AND v.execution_id = s.trace_id)`
	rows, err := t.QueryContext(t.ctx, `SELECT trace_id, execution_id FROM attempts WHERE trace_id IN `+listParam+` AND execution_id != trace_id
		UNION SELECT s.trace_id, s.execution_id FROM spans s WHERE s.trace_id IN `+listParam+` AND s.execution_id != s.trace_id AND NOT `+traceNamed+`
		ORDER BY 1, 2`, jsonList(traces), jsonList(traces))
	if err != nil {
		return out, fmt.Errorf("store: owners of traces: %w", err)
	}
	named := map[string][]string{}
	for rows.Next() {
		var traceID, executionID string
		if err := rows.Scan(&traceID, &executionID); err != nil {
			rows.Close()
			return out, fmt.Errorf("store: owners of traces: %w", err)
		}
		named[traceID] = append(named[traceID], executionID)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("store: owners of traces: %w", err)
	}
	// Where each trace's spans that name only their trace are now: one
	// query for the commit's traces, not one a trace.
	held, err := t.QueryContext(t.ctx, `SELECT DISTINCT s.trace_id, s.execution_id FROM spans s WHERE s.trace_id IN `+listParam+` AND `+traceNamed+`
		ORDER BY 1, 2`, jsonList(traces))
	if err != nil {
		return out, fmt.Errorf("store: spans of traces: %w", err)
	}
	holders := map[string][]string{}
	for held.Next() {
		var traceID, executionID string
		if err := held.Scan(&traceID, &executionID); err != nil {
			held.Close()
			return out, fmt.Errorf("store: spans of traces: %w", err)
		}
		holders[traceID] = append(holders[traceID], executionID)
	}
	held.Close()
	if err := held.Err(); err != nil {
		return out, fmt.Errorf("store: spans of traces: %w", err)
	}
	changed := map[string]bool{}
	for _, traceID := range sortedSet(setOf(traces)) {
		owner := traceID
		if len(named[traceID]) == 1 {
			owner = named[traceID][0]
		}
		from := slices.DeleteFunc(slices.Clone(holders[traceID]), func(x string) bool { return x == owner })
		if len(from) == 0 {
			continue // nothing to move, and nothing moved that would leave a placeholder behind
		}
		if err := t.exec(`UPDATE spans SET execution_id = ? WHERE trace_id = ? AND execution_id != ? AND EXISTS (SELECT 1 FROM events v
			WHERE v.entity = `+t.entitySQL("'s'", "spans.trace_id", "spans.span_id")+` AND v.execution_id = spans.trace_id)`,
			owner, traceID, owner); err != nil {
			return out, fmt.Errorf("store: adopt the spans of trace %s: %w", traceID, err)
		}
		changed[owner] = true
		for _, x := range from {
			changed[x] = true
		}
		if owner == traceID {
			continue
		}
		dropped, err := t.dropAdoptedTrace(traceID)
		if err != nil {
			return out, err
		}
		if dropped {
			out.Dropped = append(out.Dropped, traceID)
			delete(changed, traceID)
		}
	}
	out.Executions = sortedSet(changed)
	out.Executions = slices.DeleteFunc(out.Executions, func(x string) bool { return slices.Contains(out.Dropped, x) })
	return out, nil
}

// dropAdoptedTrace deletes the execution named after a trace whose spans
// another execution adopted, when nothing else names it: no execution
// event, attempt, span or effect.
func (t *Tx) dropAdoptedTrace(traceID string) (bool, error) {
	var placeholder bool
	err := t.QueryRowContext(t.ctx, `SELECT EXISTS (SELECT 1 FROM executions WHERE execution_id = ?)
		AND NOT EXISTS (SELECT 1 FROM events WHERE execution_id = ? AND type = 'execution')
		AND NOT EXISTS (SELECT 1 FROM attempts WHERE execution_id = ?)
		AND NOT EXISTS (SELECT 1 FROM spans WHERE execution_id = ?)
		AND NOT EXISTS (SELECT 1 FROM effects WHERE execution_id = ?)`, traceID, traceID, traceID, traceID, traceID).Scan(&placeholder)
	if err != nil {
		return false, fmt.Errorf("store: drop trace placeholder %s: %w", traceID, err)
	}
	if !placeholder {
		return false, nil
	}
	return true, t.deletePlaceholder(traceID)
}
