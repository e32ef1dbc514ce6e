package store

import (
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// strayLookback bounds how long before a stray effect an attempt in flight
// at its time may have started: the index on attempts' start serves the
// search, and a tool call running for more than a day is no longer taken
// for the one that sent it.
const strayLookback = 24 * time.Hour

// StrayJoins is what JoinStrayEffects changed.
type StrayJoins struct {
	// Executions whose effects changed: an effect joined or left them, or
	// one it names changed its stray mark.
	Executions []string
	// Keys of the effects whose stray mark or join changed: the
	// executions that sent them see those effects change owner (an effect
	// a stray trace no longer claims is theirs by its key).
	Keys []string
	// Effects whose stray mark or join changed: their orphan state is
	// judged again.
	Effects []trace.EffectRef
	// Dropped are the stray traces' placeholder executions removed.
	Dropped []string
}

// StrayCandidates is what a commit stored that could make a trace stray
// or not, or change where a stray trace's effect belongs.
type StrayCandidates struct {
	// LoneTraces are the traces of lone HTTP client root spans stored.
	LoneTraces []string
	// EffectTraces are the traces of the effects stored: an effect of a
	// trace with a lone HTTP root span is a candidate, whichever span of
	// the trace it names.
	EffectTraces []string
	// Traces are the traces of the other spans and of the attempts stored,
	// and the ids of the executions stored (one named after a trace): a
	// stray trace that gains one is stray no more.
	Traces []string
	// Steps are those whose attempts the commit stored, Starts the start
	// times its attempt events carried (an earlier fold of an attempt may
	// have had one of them). Whichever attempt of such a step changed, in
	// its times, its arguments or its step's class, the stray effects it
	// was or is a candidate for happened within strayLookback of one of
	// those starts: an attempt still running is in flight until then,
	// however long ago it started.
	Steps  []StepRef
	Starts []time.Time
}

// JoinStrayEffects decides again, for the candidates a commit stored,
// whether their traces are stray (trace.StrayTraces) and which execution
// each of their effects joined (trace.InferAttempt: exactly one execution
// must have a matching attempt in flight), and drops the placeholder
// execution a stray trace's effect or span made. The result is a function
// of what is stored, whatever order it came in. A commit with nothing
// stray about it costs two index lookups.
func (t *Tx) JoinStrayEffects(c StrayCandidates) (StrayJoins, error) {
	var out StrayJoins
	from, to, err := t.flightWindow(c.Steps, c.Starts)
	if err != nil {
		return out, err
	}
	traceSet := setOf(c.LoneTraces)
	if len(c.EffectTraces) > 0 {
		lone, err := t.strings(`SELECT DISTINCT trace_id FROM spans WHERE trace_id IN `+inList+` AND role = 'http' AND parent_span_id = ''`,
			jsonList(c.EffectTraces))
		if err != nil {
			return out, fmt.Errorf("store: effects' lone HTTP spans: %w", err)
		}
		for _, id := range lone {
			traceSet[id] = true
		}
	}
	if len(c.Traces) > 0 {
		strayBefore, err := t.strings(`SELECT DISTINCT trace_id FROM effects WHERE trace_id IN `+inList+` AND stray = 1`, jsonList(c.Traces))
		if err != nil {
			return out, fmt.Errorf("store: stray effects' traces: %w", err)
		}
		for _, id := range strayBefore {
			traceSet[id] = true
		}
	}
	if len(traceSet) == 0 && from.IsZero() {
		return out, nil
	}
	query := `SELECT ` + effectColumns + ` FROM effects WHERE trace_id IN ` + inList
	args := []any{jsonList(sortedSet(traceSet))}
	if !from.IsZero() {
		query += ` UNION SELECT ` + effectColumns + ` FROM effects WHERE stray = 1 AND sort_at BETWEEN ? AND ?`
		args = append(args, from.UnixNano(), to.UnixNano())
	}
	rows, err := t.QueryContext(t.ctx, query, args...)
	if err != nil {
		return out, fmt.Errorf("store: stray candidates: %w", err)
	}
	effects, err := scanEffects(rows)
	if err != nil {
		return out, fmt.Errorf("store: stray candidates: %w", err)
	}
	for _, f := range effects {
		if f.TraceID != "" {
			traceSet[f.TraceID] = true
		}
	}
	all := sortedSet(traceSet)
	if len(all) == 0 {
		return out, nil
	}
	stray, err := t.strayTraces(all)
	if err != nil {
		return out, err
	}

	touched := map[string]bool{}
	for _, f := range effects {
		joined := ""
		if stray[f.TraceID] {
			if joined, err = t.inferJoin(f); err != nil {
				return out, err
			}
		}
		if stray[f.TraceID] == f.StrayTrace && joined == f.JoinedExecutionID {
			continue
		}
		if err := t.exec(`UPDATE effects SET stray = ?, joined_execution_id = ? WHERE provider = ? AND effect_id = ?`,
			boolInt(stray[f.TraceID]), joined, f.Provider, f.ID); err != nil {
			return out, fmt.Errorf("store: join stray effect %s/%s: %w", f.Provider, f.ID, err)
		}
		out.Effects = append(out.Effects, f.Ref())
		for _, id := range []string{f.JoinedExecutionID, joined, f.ExecutionID} {
			if id != "" {
				touched[id] = true
			}
		}
		if f.IdempotencyKey != "" && !slices.Contains(out.Keys, f.IdempotencyKey) {
			out.Keys = append(out.Keys, f.IdempotencyKey)
		}
	}
	for _, id := range all {
		if !stray[id] {
			continue
		}
		dropped, err := t.dropStrayPlaceholder(id)
		if err != nil {
			return out, err
		}
		if dropped {
			out.Dropped = append(out.Dropped, id)
			delete(touched, id)
		}
	}
	out.Executions = sortedSet(touched)
	return out, nil
}

// flightWindow is when stray effects that an attempt of the steps could
// have sent happened: from the earliest start among the steps' attempts
// and starts to strayLookback after the latest. Both are zero when there
// is no start.
func (t *Tx) flightWindow(steps []StepRef, starts []time.Time) (from, to time.Time, err error) {
	if len(steps) > 0 {
		pairs := make([][2]string, len(steps))
		for i, s := range steps {
			pairs[i] = [2]string{s.ExecutionID, s.StepID}
		}
		var first, last sql.NullInt64
		// Without a stray effect anywhere there is nothing to look for
		// (one index lookup).
		err := t.QueryRowContext(t.ctx, `SELECT min(started_at), max(started_at) FROM attempts
			WHERE (execution_id, step_id) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))
			AND EXISTS (SELECT 1 FROM effects WHERE stray = 1)`,
			jsonPairs(pairs)).Scan(&first, &last)
		if err != nil {
			return from, to, fmt.Errorf("store: steps' attempts in flight: %w", err)
		}
		starts = append(starts, fromNanos(first), fromNanos(last))
	}
	for _, s := range starts {
		if s.IsZero() {
			continue
		}
		if from.IsZero() || s.Before(from) {
			from = s
		}
		if s.After(to) {
			to = s
		}
	}
	if !to.IsZero() {
		to = to.Add(strayLookback)
	}
	return from, to, nil
}

// strayTraces says which of the traces are stray: only lone HTTP client
// root spans, no attempt, and no execution event behind an execution named
// after them. Each is asked with a few existence checks, so that a big
// agent trace costs no more than a small one.
func (t *Tx) strayTraces(traces []string) (map[string]bool, error) {
	var spans []trace.Span // one stand-in per kind of span each trace has
	var traced []string
	for _, id := range traces {
		var lone, other, attempts bool
		err := t.QueryRowContext(t.ctx, `SELECT
			EXISTS (SELECT 1 FROM spans WHERE trace_id = ? AND role = 'http' AND parent_span_id = ''),
			EXISTS (SELECT 1 FROM spans WHERE trace_id = ? AND NOT (role = 'http' AND parent_span_id = '')),
			EXISTS (SELECT 1 FROM attempts WHERE trace_id = ?)`, id, id, id).Scan(&lone, &other, &attempts)
		if err != nil {
			return nil, fmt.Errorf("store: stray trace %s: %w", id, err)
		}
		if lone {
			spans = append(spans, trace.Span{TraceID: id, Role: trace.RoleHTTP})
		}
		if other {
			spans = append(spans, trace.Span{TraceID: id, Role: trace.RoleContext})
		}
		if attempts {
			traced = append(traced, id)
		}
	}
	if len(spans) == 0 {
		return map[string]bool{}, nil
	}
	rows, err := t.QueryContext(t.ctx, `SELECT `+executionColumns+` FROM executions WHERE execution_id IN `+inList, jsonList(traces))
	if err != nil {
		return nil, fmt.Errorf("store: stray traces' executions: %w", err)
	}
	named := map[string]bool{}
	for rows.Next() {
		x, err := scanExecution(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: stray traces' executions: %w", err)
		}
		named[x.ID] = !x.Placeholder()
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: stray traces' executions: %w", err)
	}
	return trace.StrayTraces(spans, func(id string) bool { return slices.Contains(traced, id) }, func(id string) bool { return named[id] }), nil
}

// inferJoin is the one execution with an attempt that InferAttempt takes
// for the stray effect f's, or "".
func (t *Tx) inferJoin(f trace.Effect) (string, error) {
	if f.Target == "" || f.At.IsZero() {
		return "", nil
	}
	at := f.At.UnixNano()
	candidates, err := t.strings(`SELECT DISTINCT execution_id FROM attempts
		WHERE started_at BETWEEN ? AND ? AND (ended_at IS NULL OR ended_at >= ?) ORDER BY execution_id`,
		f.At.Add(-strayLookback).UnixNano(), at, at)
	if err != nil {
		return "", fmt.Errorf("store: attempts in flight at %s/%s: %w", f.Provider, f.ID, err)
	}
	if len(candidates) == 0 {
		return "", nil
	}
	runs, err := loadRuns(t.ctx, t, candidates, nil)
	if err != nil {
		return "", err
	}
	joined := ""
	for _, id := range candidates {
		run, ok := runs[id]
		if !ok {
			continue
		}
		if _, _, ok := trace.InferAttempt(f, run); ok {
			if joined != "" {
				return "", nil // two executions could have sent it: no guess
			}
			joined = id
		}
	}
	return joined, nil
}

// dropStrayPlaceholder removes the execution a stray trace's effect or
// span made under the trace's id, when nothing but those names it.
func (t *Tx) dropStrayPlaceholder(traceID string) (bool, error) {
	var placeholder bool
	err := t.QueryRowContext(t.ctx, `SELECT EXISTS (SELECT 1 FROM executions WHERE execution_id = ?)
		AND NOT EXISTS (SELECT 1 FROM attempts WHERE execution_id = ?)
		AND NOT EXISTS (SELECT 1 FROM effects WHERE execution_id = ?)`, traceID, traceID, traceID).Scan(&placeholder)
	if err != nil || !placeholder {
		return false, err
	}
	for _, q := range []string{`DELETE FROM findings WHERE execution_id = ? AND source = 'run'`,
		`DELETE FROM executions WHERE execution_id = ?`, `DELETE FROM search_terms WHERE execution_id = ?`} {
		if err := t.exec(q, traceID); err != nil {
			return false, fmt.Errorf("store: drop stray trace %s: %w", traceID, err)
		}
	}
	return true, nil
}
