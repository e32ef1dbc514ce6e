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
	effects, traces, err := t.strayCandidateEffects(c)
	if err != nil || len(traces) == 0 {
		return StrayJoins{}, err
	}
	stray, err := t.strayTraces(traces)
	if err != nil {
		return StrayJoins{}, err
	}
	joins, err := t.inferJoins(effects, stray)
	if err != nil {
		return StrayJoins{}, err
	}
	return t.applyStrayJoins(planStrayJoins(effects, traces, stray, joins))
}

// strayCandidateEffects loads the effects of the candidates' traces that
// could be stray (those with a lone HTTP root span, or with an effect
// marked stray) and the stray effects that an attempt of the candidates'
// steps could have sent, with every trace they name, sorted.
func (t *Tx) strayCandidateEffects(c StrayCandidates) ([]trace.Effect, []string, error) {
	from, to, err := t.flightWindow(c.Steps, c.Starts)
	if err != nil {
		return nil, nil, err
	}
	traceSet := setOf(c.LoneTraces)
	if len(c.EffectTraces) > 0 {
		lone, err := t.strings(`SELECT DISTINCT trace_id FROM spans WHERE trace_id IN `+listParam+` AND role = 'http' AND parent_span_id = ''`,
			jsonList(c.EffectTraces))
		if err != nil {
			return nil, nil, fmt.Errorf("store: effects' lone HTTP spans: %w", err)
		}
		addAll(traceSet, lone)
	}
	if len(c.Traces) > 0 {
		strayBefore, err := t.strings(`SELECT DISTINCT trace_id FROM effects WHERE trace_id IN `+listParam+` AND stray = 1`, jsonList(c.Traces))
		if err != nil {
			return nil, nil, fmt.Errorf("store: stray effects' traces: %w", err)
		}
		addAll(traceSet, strayBefore)
	}
	if len(traceSet) == 0 && from.IsZero() {
		return nil, nil, nil
	}
	query := `SELECT ` + effectColumns + ` FROM effects WHERE trace_id IN ` + listParam
	args := []any{jsonList(sortedSet(traceSet))}
	if !from.IsZero() {
		query += ` UNION SELECT ` + effectColumns + ` FROM effects WHERE stray = 1 AND sort_at BETWEEN ? AND ?`
		args = append(args, from.UnixNano(), to.UnixNano())
	}
	rows, err := t.QueryContext(t.ctx, query, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("store: stray candidates: %w", err)
	}
	effects, err := scanEffects(rows)
	if err != nil {
		return nil, nil, fmt.Errorf("store: stray candidates: %w", err)
	}
	for _, f := range effects {
		if f.TraceID != "" {
			traceSet[f.TraceID] = true
		}
	}
	return effects, sortedSet(traceSet), nil
}

// addAll adds each of ids to set.
func addAll(set map[string]bool, ids []string) {
	for _, id := range ids {
		set[id] = true
	}
}

// inferJoins is the execution each effect of a stray trace joined
// (inferJoin), for those that joined one.
func (t *Tx) inferJoins(effects []trace.Effect, stray map[string]bool) (map[trace.EffectRef]string, error) {
	joins := map[trace.EffectRef]string{}
	for _, f := range effects {
		if !stray[f.TraceID] {
			continue
		}
		joined, err := t.inferJoin(f)
		if err != nil {
			return nil, err
		}
		if joined != "" {
			joins[f.Ref()] = joined
		}
	}
	return joins, nil
}

// strayUpdate is the stray mark and join one effect is to store.
type strayUpdate struct {
	effect trace.Effect
	stray  bool
	joined string
}

// strayJoinPlan is what JoinStrayEffects writes, and what it reports
// before the placeholders are dropped.
type strayJoinPlan struct {
	updates []strayUpdate
	// strayTraces are the traces judged stray, whose placeholder
	// execution is dropped when nothing else names it.
	strayTraces []string
	// touched are the executions an effect joined or left, or that one
	// changing its stray mark names.
	touched map[string]bool
	keys    []string
	effects []trace.EffectRef
}

// planStrayJoins compares each effect's stored stray mark and join with
// those decided (its trace stray or not, the execution it joined) and
// plans an update of those that differ. traces are the candidates' traces,
// sorted.
func planStrayJoins(effects []trace.Effect, traces []string, stray map[string]bool, joins map[trace.EffectRef]string) strayJoinPlan {
	plan := strayJoinPlan{touched: map[string]bool{}}
	for _, f := range effects {
		joined := joins[f.Ref()]
		if !stray[f.TraceID] {
			joined = ""
		}
		if stray[f.TraceID] == f.StrayTrace && joined == f.JoinedExecutionID {
			continue
		}
		plan.updates = append(plan.updates, strayUpdate{effect: f, stray: stray[f.TraceID], joined: joined})
		plan.effects = append(plan.effects, f.Ref())
		for _, id := range []string{f.JoinedExecutionID, joined, f.ExecutionID} {
			if id != "" {
				plan.touched[id] = true
			}
		}
		if f.IdempotencyKey != "" && !slices.Contains(plan.keys, f.IdempotencyKey) {
			plan.keys = append(plan.keys, f.IdempotencyKey)
		}
	}
	for _, id := range traces {
		if stray[id] {
			plan.strayTraces = append(plan.strayTraces, id)
		}
	}
	return plan
}

// applyStrayJoins stores the plan's updates and drops the stray traces'
// placeholder executions that nothing else names.
func (t *Tx) applyStrayJoins(plan strayJoinPlan) (StrayJoins, error) {
	out := StrayJoins{Keys: plan.keys, Effects: plan.effects}
	for _, u := range plan.updates {
		f := u.effect
		if err := t.exec(`UPDATE effects SET stray = ?, joined_execution_id = ? WHERE provider = ? AND effect_id = ?`,
			boolInt(u.stray), u.joined, f.Provider, f.ID); err != nil {
			return StrayJoins{}, fmt.Errorf("store: join stray effect %s/%s: %w", f.Provider, f.ID, err)
		}
	}
	for _, id := range plan.strayTraces {
		dropped, err := t.dropStrayPlaceholder(id)
		if err != nil {
			return StrayJoins{}, err
		}
		if dropped {
			out.Dropped = append(out.Dropped, id)
			delete(plan.touched, id)
		}
	}
	out.Executions = sortedSet(plan.touched)
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
			WHERE (execution_id, step_id) IN `+pairsParam+`
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
	rows, err := t.QueryContext(t.ctx, `SELECT `+executionColumns+` FROM executions WHERE execution_id IN `+listParam, jsonList(traces))
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
