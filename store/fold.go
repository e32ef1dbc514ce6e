package store

import (
	"cmp"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/oncetrace/oncetrace/trace"
)

// The reads below let the writer bring a run it analysed before up to
// date with the rows one commit changed, instead of reading the whole run
// again (LoadRun): each reads a handful of rows by an index, so a commit
// costs the same however long its execution already is. Together with the
// run they patch, they give what loadRuns gives.

// LastEventSeq is the highest sequence number in the event log below
// before (the transaction's own first), 0 when there is none, and the
// derived generation (BumpGeneration): the writer compares both with what
// it saw at its own last commit to tell whether anyone else has written
// since.
func (t *Tx) LastEventSeq(before int64) (seq, generation int64, err error) {
	err = t.QueryRowContext(t.ctx, `SELECT coalesce((SELECT max(seq) FROM events WHERE seq < ?), 0),
		coalesce((SELECT generation FROM derived_generation WHERE id = 1), 0)`, before).Scan(&seq, &generation)
	if err != nil {
		return 0, 0, fmt.Errorf("store: last event: %w", err)
	}
	return seq, generation, nil
}

// BumpGeneration records, in the transaction, that derived rows changed
// other than by a writer's commit of new events (a prune, a re-derivation):
// every writer's cache of derived state is then out of date.
func (t *Tx) BumpGeneration() error {
	if err := t.exec(`UPDATE derived_generation SET generation = generation + 1 WHERE id = 1`); err != nil {
		return fmt.Errorf("store: derived generation: %w", err)
	}
	return nil
}

// ExecutionRow reads one execution's own fields; ErrNotFound when there is
// no such execution.
func (t *Tx) ExecutionRow(id string) (trace.Execution, error) {
	x, err := scanExecution(t.QueryRowContext(t.ctx, `SELECT `+executionColumns+` FROM executions WHERE execution_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return x, ErrNotFound
	}
	if err != nil {
		return x, fmt.Errorf("store: execution %s: %w", id, err)
	}
	return x, nil
}

// StepAttempts reads the attempts of one step by number.
func (t *Tx) StepAttempts(executionID, stepID string) ([]trace.Attempt, error) {
	as, err := readAttempts(t.ctx, t, 0, `SELECT `+attemptsRead+` FROM attempts WHERE execution_id = ? AND step_id = ? ORDER BY attempt`,
		executionID, stepID)
	if err != nil {
		return nil, fmt.Errorf("store: attempts of %s/%s: %w", executionID, stepID, err)
	}
	return as, nil
}

// AttemptsWithKey reads the attempts of executions other than one that
// carry a key: the peers that key gives a run. An empty key is no key
// and finds none (keyed).
func (t *Tx) AttemptsWithKey(key, notExecution string) ([]trace.Attempt, error) {
	as, err := readAttempts(t.ctx, t, 0, `SELECT `+attemptsRead+` FROM attempts WHERE idempotency_key = ? AND `+keyed+` AND execution_id != ?
		ORDER BY execution_id, step_id, attempt`, key, notExecution)
	if err != nil {
		return nil, fmt.Errorf("store: attempts with key %s: %w", key, err)
	}
	return as, nil
}

// EffectRow reads one effect; ok is false when there is none.
func (t *Tx) EffectRow(ref trace.EffectRef) (f trace.Effect, ok bool, err error) {
	f, err = scanEffect(t.QueryRowContext(t.ctx, `SELECT `+effectColumns+` FROM effects WHERE provider = ? AND effect_id = ?`, ref.Provider, ref.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return f, false, nil
	}
	if err != nil {
		return f, false, fmt.Errorf("store: effect %s/%s: %w", ref.Provider, ref.ID, err)
	}
	return f, true, nil
}

// EffectsWithKey reads the effects carrying a key.
func (t *Tx) EffectsWithKey(key string) ([]trace.Effect, error) {
	rows, err := t.QueryContext(t.ctx, `SELECT `+effectColumns+` FROM effects WHERE idempotency_key = ?`, key)
	if err != nil {
		return nil, fmt.Errorf("store: effects with key %s: %w", key, err)
	}
	fs, err := scanEffects(rows)
	if err != nil {
		return nil, fmt.Errorf("store: effects with key %s: %w", key, err)
	}
	return fs, nil
}

// EffectsOfTrace reads the effects whose trace context is a trace.
func (t *Tx) EffectsOfTrace(traceID string) ([]trace.Effect, error) {
	rows, err := t.QueryContext(t.ctx, `SELECT `+effectColumns+` FROM effects WHERE trace_id = ?`, traceID)
	if err != nil {
		return nil, fmt.Errorf("store: effects of trace %s: %w", traceID, err)
	}
	fs, err := scanEffects(rows)
	if err != nil {
		return nil, fmt.Errorf("store: effects of trace %s: %w", traceID, err)
	}
	return fs, nil
}

// SpanRow reads one span; ok is false when there is none.
func (t *Tx) SpanRow(traceID, spanID string) (s trace.Span, ok bool, err error) {
	rows, err := t.QueryContext(t.ctx, `SELECT `+spanColumns+` FROM spans WHERE trace_id = ? AND span_id = ?`, traceID, spanID)
	if err != nil {
		return s, false, fmt.Errorf("store: span %s/%s: %w", traceID, spanID, err)
	}
	ss, err := scanSpans(rows)
	if err != nil || len(ss) == 0 {
		return s, false, err
	}
	return ss[0], true, nil
}

// RunKeysAndTraces are what loadRuns reads a run's effects and peers by:
// the keys its attempts sent (attemptKeys, before FoldHTTPCalls gives
// attempts the keys of their HTTP calls), and its traces (runTraces: its
// attempts' and spans' trace ids and its own id).
func RunKeysAndTraces(run trace.Run) (keys, traces map[string]bool) {
	keys, traces = map[string]bool{}, map[string]bool{run.Execution.ID: true}
	for _, s := range run.Steps {
		for _, a := range s.Attempts {
			if a.IdempotencyKey != "" {
				keys[a.IdempotencyKey] = true
			}
			if a.TraceID != "" {
				traces[a.TraceID] = true
			}
		}
	}
	for _, s := range run.Spans {
		traces[s.TraceID] = true
	}
	return keys, traces
}

// ReplaceSteps returns steps with the attempts of each step in changed (by
// number, as StepAttempts reads them) in place of the step's, a step left
// without attempts gone, in the order loadRuns gives steps.
func ReplaceSteps(steps []trace.Step, changed map[string][]trace.Attempt) []trace.Step {
	out := make([]trace.Step, 0, len(steps)+len(changed))
	for _, s := range steps {
		if _, ok := changed[s.ID]; !ok {
			out = append(out, s)
		}
	}
	// (first start, id) orders steps totally: each new one goes where a
	// sort would put it.
	order := func(a, b trace.Step) int {
		return cmp.Or(firstStart(a).Compare(firstStart(b)), trace.CompareNatural(a.ID, b.ID))
	}
	for _, as := range changed {
		// A copy: the steps' attempts are parts of what groupSteps groups,
		// and the caller keeps changed.
		for _, s := range groupSteps(slices.Clone(as)) {
			at, _ := slices.BinarySearchFunc(out, s, order)
			out = slices.Insert(out, at, s)
		}
	}
	return out
}

// SortRunSpans orders spans as loadRuns does: by start, unknown first, then
// span id.
func SortRunSpans(spans []trace.Span) {
	slices.SortStableFunc(spans, func(a, b trace.Span) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), cmp.Compare(a.SpanID, b.SpanID), cmp.Compare(a.TraceID, b.TraceID))
	})
}

// SortRunEffects orders effects as loadRuns does: by time, unknown first,
// then provider and id.
func SortRunEffects(effects []trace.Effect) {
	slices.SortStableFunc(effects, func(a, b trace.Effect) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.ID, b.ID))
	})
}

// SortPeers orders peers as loadRuns does: by execution, step and number.
func SortPeers(peers []trace.Attempt) {
	slices.SortStableFunc(peers, func(a, b trace.Attempt) int {
		return cmp.Or(cmp.Compare(a.ExecutionID, b.ExecutionID), cmp.Compare(a.StepID, b.StepID), cmp.Compare(a.Number, b.Number))
	})
}
