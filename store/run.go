package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// querier is what both the reader pool and a write transaction offer.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

const executionColumns = `execution_id, name, status, started_at, ended_at, idempotency_key, labels, conflicts`

func scanExecution(row interface{ Scan(...any) error }, extra ...any) (trace.Execution, error) {
	var x trace.Execution
	var started, ended sql.NullInt64
	var labelText, conflictText string
	dest := append([]any{&x.ID, &x.Name, &x.Status, &started, &ended, &x.IdempotencyKey, &labelText, &conflictText}, extra...)
	if err := row.Scan(dest...); err != nil {
		return x, err
	}
	x.StartedAt, x.EndedAt = fromNanos(started), fromNanos(ended)
	x.Labels, x.Conflicts = labels(labelText), conflicts(conflictText)
	return x, nil
}

const attemptColumns = `execution_id, step_id, attempt, tool, effect, provider, outcome, deduplicated, idempotency_key,
	worker, started_at, ended_at, args, result, error, conflicts, trace_id, span_id, recognised_by`

// scanPlainAttempt scans a row of attemptColumns.
func scanPlainAttempt(rows *sql.Rows) (trace.Attempt, error) {
	var a trace.Attempt
	var started, ended sql.NullInt64
	var dedup int
	var args, result, conflictText string
	if err := rows.Scan(&a.ExecutionID, &a.StepID, &a.Number, &a.Tool, &a.Effect, &a.Provider, &a.Outcome, &dedup,
		&a.IdempotencyKey, &a.Worker, &started, &ended, &args, &result, &a.Error, &conflictText, &a.TraceID, &a.SpanID, &a.RecognisedBy); err != nil {
		return a, err
	}
	a.Deduplicated = dedup == 1
	a.StartedAt, a.EndedAt = fromNanos(started), fromNanos(ended)
	a.Args, a.Result, a.Conflicts = rawJSON(args), rawJSON(result), conflicts(conflictText)
	return a, nil
}

// effectColumns are read by scanEffect: the folded fields, then the
// derived stray-trace join (store/stray.go).
const effectColumns = effectWriteColumns + `, joined_execution_id, stray`

// effectWriteColumns are the folded fields PutEffect writes.
const effectWriteColumns = `provider, effect_id, idempotency_key, execution_id, step_id, target, at, conflicts, trace_id, span_id,
	fingerprint, summary`

func scanEffect(row interface{ Scan(...any) error }, extra ...any) (trace.Effect, error) {
	var f trace.Effect
	var at sql.NullInt64
	var conflictText string
	var stray int
	dest := append([]any{&f.Provider, &f.ID, &f.IdempotencyKey, &f.ExecutionID, &f.StepID, &f.Target, &at, &conflictText,
		&f.TraceID, &f.SpanID, &f.Fingerprint, &f.Summary, &f.JoinedExecutionID, &stray}, extra...)
	if err := row.Scan(dest...); err != nil {
		return f, err
	}
	f.StrayTrace = stray != 0
	f.At, f.Conflicts = fromNanos(at), conflicts(conflictText)
	return f, nil
}

func scanEffects(rows *sql.Rows) ([]trace.Effect, error) {
	defer rows.Close()
	var out []trace.Effect
	for rows.Next() {
		f, err := scanEffect(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// loadRun reads everything the audit needs about one execution.
func loadRun(ctx context.Context, q querier, id string, fed map[string]bool) (trace.Run, error) {
	run, _, err := loadRunStates(ctx, q, id, fed)
	return run, err
}

// loadRunStates is loadRun, and the match states of the run's effects.
func loadRunStates(ctx context.Context, q querier, id string, fed map[string]bool) (trace.Run, map[trace.EffectRef]trace.MatchState, error) {
	runs, states, err := loadRunsStates(ctx, q, []string{id}, fed)
	if err != nil {
		return trace.Run{FedProviders: fed}, nil, err
	}
	run, ok := runs[id]
	if !ok {
		return trace.Run{FedProviders: fed}, nil, ErrNotFound
	}
	return run, states, nil
}

// loadRuns reads the executions asked for, each as loadRun would, in five
// queries however many there are; an id with no execution is left out.
// Every run shares fed, which is only read.
func loadRuns(ctx context.Context, q querier, ids []string, fed map[string]bool) (map[string]trace.Run, error) {
	runs, _, err := loadRunsStates(ctx, q, ids, fed)
	return runs, err
}

// loadRunsStates is loadRuns, and the match states of every effect of the
// runs, read with them.
func loadRunsStates(ctx context.Context, q querier, ids []string, fed map[string]bool) (map[string]trace.Run, map[trace.EffectRef]trace.MatchState, error) {
	runs, expect, err := loadExecutionRows(ctx, q, ids, fed)
	if err != nil || len(runs) == 0 {
		return runs, nil, err
	}
	found := make([]string, 0, len(runs))
	for id := range runs {
		found = append(found, id)
	}
	sort.Strings(found)
	all, attempts, err := loadRunAttempts(ctx, q, found, expect)
	if err != nil {
		return nil, nil, err
	}
	spans, err := loadRunSpans(ctx, q, found)
	if err != nil {
		return nil, nil, err
	}
	terms := newRunTerms(found, attempts, spans)
	effects, states, err := loadRunEffects(ctx, q, found, terms)
	if err != nil {
		return nil, nil, err
	}
	peers, err := loadRunPeers(ctx, q, found, terms, all)
	if err != nil {
		return nil, nil, err
	}
	for _, id := range found {
		runs[id] = assembleRun(runs[id], attempts[id], spans[id], effects, peers, terms.keys[id], terms.traces[id])
	}
	return runs, states, nil
}

// loadRunBeside is loadRunStates and the run's findings, read on two
// transactions of one snapshot at once: q reads the execution, its
// attempts and spans; beside, meanwhile, its effects, key peers and
// findings, finding the run's keys and traces by a read of their own
// (loadTermsOfRun) rather than from the attempts read (runTerms).
func loadRunBeside(ctx context.Context, q, beside querier, id string, fed map[string]bool) (trace.Run, map[trace.EffectRef]trace.MatchState, []trace.Finding, error) {
	type besideRead struct {
		effects  []trace.Effect
		states   map[trace.EffectRef]trace.MatchState
		peers    []trace.Attempt
		findings []trace.Finding
		err      error
	}
	done := make(chan besideRead, 1)
	go func() {
		var b besideRead
		var keys, traces []string
		if keys, traces, b.err = loadTermsOfRun(ctx, beside, id); b.err == nil {
			if b.effects, b.states, b.err = loadEffectsOfRun(ctx, beside, id, keys, traces); b.err == nil {
				if b.peers, b.err = loadPeersOfRun(ctx, beside, id, keys); b.err == nil {
					b.findings, _, b.err = findings(ctx, beside, FindingFilter{ExecutionID: id})
				}
			}
		}
		done <- b
	}()
	run, attempts, spans, err := loadRunAlone(ctx, q, id, fed)
	b := <-done // beside's transaction is used by nothing else once it is back
	if err != nil {
		return run, nil, nil, err
	}
	if b.err != nil {
		return run, nil, nil, b.err
	}
	run = assembleRun(run, attempts, spans, b.effects, b.peers, attemptKeys(attempts), runTraces(id, attempts, spans))
	return run, b.states, b.findings, nil
}

// loadRunAlone reads one execution's row, attempts and spans.
func loadRunAlone(ctx context.Context, q querier, id string, fed map[string]bool) (trace.Run, []trace.Attempt, []trace.Span, error) {
	runs, expect, err := loadExecutionRows(ctx, q, []string{id}, fed)
	if err != nil {
		return trace.Run{FedProviders: fed}, nil, nil, err
	}
	run, ok := runs[id]
	if !ok {
		return trace.Run{FedProviders: fed}, nil, nil, ErrNotFound
	}
	_, attempts, err := loadRunAttempts(ctx, q, []string{id}, expect)
	if err != nil {
		return run, nil, nil, err
	}
	spans, err := loadRunSpans(ctx, q, []string{id})
	if err != nil {
		return run, nil, nil, err
	}
	return run, attempts[id], spans[id], nil
}

// loadTermsOfRun reads the run's keys and traces (attemptKeys and
// runTraces) with a scan of two of its attempts' columns and its spans',
// for a read beside the attempts' that does not wait for them. Once, not
// a subquery in each query that needs them: each would scan the run's
// attempts again (a third of a 10,000-attempt read's time).
func loadTermsOfRun(ctx context.Context, q querier, id string) (keys, traces []string, err error) {
	rows, err := q.QueryContext(ctx, `SELECT idempotency_key, trace_id FROM attempts WHERE execution_id = ? AND (`+keyed+` OR trace_id != '')
		UNION ALL SELECT '', trace_id FROM spans WHERE execution_id = ?`, id, id)
	if err != nil {
		return nil, nil, fmt.Errorf("store: load the run's keys and traces: %w", err)
	}
	defer rows.Close()
	keySet, traceSet := map[string]bool{}, map[string]bool{id: true}
	for rows.Next() {
		var key, traceID string
		if err := rows.Scan(&key, &traceID); err != nil {
			return nil, nil, fmt.Errorf("store: load the run's keys and traces: %w", err)
		}
		if key != "" {
			keySet[key] = true
		}
		if traceID != "" {
			traceSet[traceID] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("store: load the run's keys and traces: %w", err)
	}
	return sortedSet(keySet), sortedSet(traceSet), nil
}

// loadEffectsOfRun is loadRunEffects of one run. An effect naming the run
// is read by the first part only.
func loadEffectsOfRun(ctx context.Context, q querier, id string, keys, traces []string) ([]trace.Effect, map[trace.EffectRef]trace.MatchState, error) {
	return readRunEffects(ctx, q, `SELECT `+runEffectsRead+` FROM effects WHERE execution_id = ?
		UNION ALL SELECT `+runEffectsRead+` FROM effects WHERE idempotency_key IN `+listParam+` AND `+keyed+` AND execution_id != ?
		UNION ALL SELECT `+runEffectsRead+` FROM effects WHERE trace_id IN `+listParam+` AND execution_id != ?
		UNION ALL SELECT `+runEffectsRead+` FROM effects WHERE joined_execution_id = ? AND joined_execution_id != '' AND execution_id != ?
		ORDER BY at NULLS FIRST, provider, effect_id`,
		id, jsonList(keys), id, jsonList(traces), id, id, id)
}

// loadPeersOfRun is loadRunPeers of one run.
func loadPeersOfRun(ctx context.Context, q querier, id string, keys []string) ([]trace.Attempt, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	peers, err := readAttempts(ctx, q, 0, `SELECT `+attemptsRead+` FROM attempts
		WHERE idempotency_key IN `+listParam+` AND `+keyed+` AND execution_id != ? ORDER BY execution_id, step_id, attempt`, jsonList(keys), id)
	if err != nil {
		return nil, fmt.Errorf("store: load key peers: %w", err)
	}
	return peers, nil
}

// loadExecutionRows reads the executions' rows, as runs of nothing else,
// and the number of attempts they count.
func loadExecutionRows(ctx context.Context, q querier, ids []string, fed map[string]bool) (map[string]trace.Run, int, error) {
	runs := make(map[string]trace.Run, len(ids))
	if len(ids) == 0 {
		return runs, 0, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT `+executionColumns+`, attempts FROM executions WHERE execution_id IN `+listParam, jsonList(ids))
	if err != nil {
		return nil, 0, fmt.Errorf("store: load executions: %w", err)
	}
	total := 0
	for rows.Next() {
		var attempts int
		x, err := scanExecution(rows, &attempts)
		if err != nil {
			rows.Close()
			return nil, 0, fmt.Errorf("store: load executions: %w", err)
		}
		runs[x.ID] = trace.Run{Execution: x, FedProviders: fed}
		total += attempts
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("store: load executions: %w", err)
	}
	return runs, total, nil
}

// loadRunAttempts reads the executions' attempts: all of them, in the
// order of ORDER BY execution_id, step_id, attempt, and by execution,
// each run's a part of all, not a copy.
func loadRunAttempts(ctx context.Context, q querier, found []string, expect int) ([]trace.Attempt, map[string][]trace.Attempt, error) {
	all, err := readAttempts(ctx, q, expect, `SELECT `+attemptsRead+` FROM attempts WHERE execution_id IN `+listParam+` ORDER BY execution_id, step_id, attempt`, jsonList(found))
	if err != nil {
		return nil, nil, fmt.Errorf("store: load attempts: %w", err)
	}
	attempts := map[string][]trace.Attempt{}
	for start := 0; start < len(all); {
		end := start
		for end < len(all) && all[end].ExecutionID == all[start].ExecutionID {
			end++
		}
		attempts[all[start].ExecutionID] = all[start:end:end]
		start = end
	}
	return all, attempts, nil
}

// loadRunSpans reads the executions' spans, by execution.
func loadRunSpans(ctx context.Context, q querier, found []string) (map[string][]trace.Span, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+spanColumns+` FROM spans WHERE execution_id IN `+listParam+` ORDER BY started_at NULLS FIRST, span_id`, jsonList(found))
	if err != nil {
		return nil, fmt.Errorf("store: load spans: %w", err)
	}
	allSpans, err := scanSpans(rows)
	if err != nil {
		return nil, fmt.Errorf("store: load spans: %w", err)
	}
	spans := map[string][]trace.Span{}
	for _, s := range allSpans {
		spans[s.ExecutionID] = append(spans[s.ExecutionID], s)
	}
	return spans, nil
}

// runTerms are what the runs find their effects and peers by: each run's
// keys (those its attempts sent) and traces (the execution id is the trace
// id unless the spans said otherwise), and all of them.
type runTerms struct {
	keys, traces       map[string][]string
	keySet             map[string]bool
	allKeys, allTraces []string
}

func newRunTerms(found []string, attempts map[string][]trace.Attempt, spans map[string][]trace.Span) runTerms {
	t := runTerms{keys: map[string][]string{}, traces: map[string][]string{}, keySet: map[string]bool{}}
	traceSet := map[string]bool{}
	for _, id := range found {
		t.keys[id], t.traces[id] = attemptKeys(attempts[id]), runTraces(id, attempts[id], spans[id])
		for _, k := range t.keys[id] {
			t.keySet[k] = true
		}
		for _, tr := range t.traces[id] {
			traceSet[tr] = true
		}
	}
	t.allKeys, t.allTraces = sortedSet(t.keySet), sortedSet(traceSet)
	return t
}

// loadRunEffects reads in one query the union of the runs' effects: those
// naming one, carrying a key one sent, of one of their traces, or joined
// to one from a stray trace; and their match states. Each run then keeps
// its own (assembleRun). An effect found by several of the four is read
// by each (UNION ALL: a UNION would compare whole rows to drop them) and
// kept once: the copies are the same row, so they sort side by side.
func loadRunEffects(ctx context.Context, q querier, found []string, terms runTerms) ([]trace.Effect, map[trace.EffectRef]trace.MatchState, error) {
	return readRunEffects(ctx, q, `SELECT `+runEffectsRead+` FROM effects WHERE execution_id IN `+listParam+`
		UNION ALL SELECT `+runEffectsRead+` FROM effects WHERE idempotency_key IN `+listParam+`
		UNION ALL SELECT `+runEffectsRead+` FROM effects WHERE trace_id IN `+listParam+`
		UNION ALL SELECT `+runEffectsRead+` FROM effects WHERE joined_execution_id IN `+listParam+` AND joined_execution_id != ''
		ORDER BY at NULLS FIRST, provider, effect_id`,
		jsonList(found), jsonList(terms.allKeys), jsonList(terms.allTraces), jsonList(found))
}

// runEffect is an effect as a run reads it, with its match state.
type runEffect struct {
	trace.Effect
	state trace.MatchState
}

// readRunEffects runs query, whose columns are runEffectsRead, and keeps
// one of each run of copies (an effect several parts of a UNION ALL
// found: the query sorts by time, provider and id, so they are side by
// side), with the states.
func readRunEffects(ctx context.Context, q querier, query string, args ...any) ([]trace.Effect, map[trace.EffectRef]trace.MatchState, error) {
	read, err := readPacked(ctx, q, 0, query, packedRunEffect, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("store: load effects: %w", err)
	}
	effects := make([]trace.Effect, 0, len(read))
	states := make(map[trace.EffectRef]trace.MatchState, len(read))
	for _, f := range read {
		if n := len(effects); n > 0 && effects[n-1].Ref() == f.Ref() {
			continue
		}
		effects = append(effects, f.Effect)
		states[f.Ref()] = f.state
	}
	return effects, states, nil
}

// loadRunPeers reads the attempts of other executions carrying one of the
// runs' keys: those of executions outside the batch are read, those
// inside it were read already (all: a run's own attempts are most of what
// its keys find, and are not read twice).
func loadRunPeers(ctx context.Context, q querier, found []string, terms runTerms, all []trace.Attempt) ([]trace.Attempt, error) {
	if len(terms.allKeys) == 0 {
		return nil, nil
	}
	peers, err := readAttempts(ctx, q, 0, `SELECT `+attemptsRead+` FROM attempts
		WHERE idempotency_key IN `+listParam+` AND `+keyed+` AND execution_id NOT IN `+listParam+` ORDER BY execution_id, step_id, attempt`,
		jsonList(terms.allKeys), jsonList(found))
	if err != nil {
		return nil, fmt.Errorf("store: load key peers: %w", err)
	}
	if len(found) > 1 {
		for _, a := range all {
			if terms.keySet[a.IdempotencyKey] {
				peers = append(peers, a)
			}
		}
		sort.SliceStable(peers, func(i, j int) bool { return attemptBefore(peers[i], peers[j]) })
	}
	return peers, nil
}

// assembleRun gives a run its steps, spans, and of the effects and peers
// read for the batch those that are its own (by keys and traces), its
// HTTP calls folded into its attempts.
func assembleRun(run trace.Run, attempts []trace.Attempt, spans []trace.Span, effects []trace.Effect, peers []trace.Attempt,
	keys, traces []string) trace.Run {
	id := run.Execution.ID
	run.Steps = groupSteps(attempts)
	run.Spans = spans
	run.FillLostEngineAttempts()
	ownKeys, ownTraces := setOf(keys), setOf(traces)
	for _, f := range effects {
		if f.ExecutionID == id || f.IdempotencyKey != "" && ownKeys[f.IdempotencyKey] || ownTraces[f.TraceID] && !f.StrayTrace ||
			f.JoinedExecutionID == id {
			if f.JoinedExecutionID == id {
				_, f.Inferred, _ = trace.InferAttempt(f, run)
			}
			run.Effects = append(run.Effects, f)
		}
	}
	for _, a := range peers {
		if a.ExecutionID != id && ownKeys[a.IdempotencyKey] {
			run.Peers = append(run.Peers, a)
		}
	}
	run.FoldHTTPCalls()
	return run
}

// attemptBefore is the order of ORDER BY execution_id, step_id, attempt.
func attemptBefore(a, b trace.Attempt) bool {
	if a.ExecutionID != b.ExecutionID {
		return a.ExecutionID < b.ExecutionID
	}
	if a.StepID != b.StepID {
		return a.StepID < b.StepID
	}
	return a.Number < b.Number
}

func setOf(ss []string) map[string]bool {
	out := make(map[string]bool, len(ss))
	for _, s := range ss {
		out[s] = true
	}
	return out
}

func sortedSet(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// groupSteps groups attempts (sorted by step, then number) into steps, an
// engine's history and spans of one attempt merged (MergeEngineAttempts),
// ordered by when each step first started, then in natural id order as
// trace's own grouping orders them. A step's tool and provider come from
// its lowest-numbered attempt that names them, its effect class from the
// lowest-numbered that names one other than unknown, if any does. Each
// step's attempts are a part of attempts, not a copy (capped, so that an
// append to them copies).
func groupSteps(attempts []trace.Attempt) []trace.Step {
	var steps []trace.Step
	for start := 0; start < len(attempts); {
		end := start + 1
		for end < len(attempts) && attempts[end].StepID == attempts[start].StepID {
			end++
		}
		s := trace.Step{ExecutionID: attempts[start].ExecutionID, ID: attempts[start].StepID, Attempts: trace.MergeEngineAttempts(attempts[start:end:end])}
		for _, a := range s.Attempts {
			s.Tool, s.Provider = cmp.Or(s.Tool, a.Tool), cmp.Or(s.Provider, a.Provider)
			if s.Effect == "" || s.Effect == trace.EffectUnknown && a.Effect != "" {
				s.Effect = a.Effect // a class beats unknown, as in an attempt's fold
			}
		}
		steps = append(steps, s)
		start = end
	}
	sort.SliceStable(steps, func(i, j int) bool {
		ti, tj := firstStart(steps[i]), firstStart(steps[j])
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return trace.CompareNatural(steps[i].ID, steps[j].ID) < 0
	})
	return steps
}

func firstStart(s trace.Step) (t time.Time) {
	for _, a := range s.Attempts {
		if !a.StartedAt.IsZero() && (t.IsZero() || a.StartedAt.Before(t)) {
			t = a.StartedAt
		}
	}
	return t
}

// runTraces are the trace ids an execution's spans came from, and its own
// id, which is the trace id of an execution no oncetrace.execution.id named.
func runTraces(id string, attempts []trace.Attempt, spans []trace.Span) []string {
	set := map[string]bool{id: true}
	for _, a := range attempts {
		if a.TraceID != "" {
			set[a.TraceID] = true
		}
	}
	for _, s := range spans {
		set[s.TraceID] = true
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

const spanColumns = `trace_id, span_id, execution_id, parent_span_id, role, name, started_at, ended_at, error, model,
	input_tokens, output_tokens, http_method, http_url, http_status, idempotency_key`

func scanSpans(rows *sql.Rows) ([]trace.Span, error) {
	defer rows.Close()
	var out []trace.Span
	for rows.Next() {
		var s trace.Span
		var started, ended sql.NullInt64
		if err := rows.Scan(&s.TraceID, &s.SpanID, &s.ExecutionID, &s.ParentSpanID, &s.Role, &s.Name, &started, &ended, &s.Error,
			&s.Model, &s.InputTokens, &s.OutputTokens, &s.HTTPMethod, &s.HTTPURL, &s.HTTPStatus, &s.IdempotencyKey); err != nil {
			return nil, err
		}
		s.StartedAt, s.EndedAt = fromNanos(started), fromNanos(ended)
		out = append(out, s)
	}
	return out, rows.Err()
}

func attemptKeys(attempts []trace.Attempt) []string {
	seen := map[string]bool{}
	var keys []string
	for _, a := range attempts {
		if a.IdempotencyKey != "" && !seen[a.IdempotencyKey] {
			seen[a.IdempotencyKey] = true
			keys = append(keys, a.IdempotencyKey)
		}
	}
	sort.Strings(keys)
	return keys
}

// keyed is said by every query that looks attempts up by key: attempts_key
// holds only the attempts that carry one (SQLite 0016, PostgreSQL 0009;
// most attempts carry none), and neither engine reads a partial index for
// a comparison with a parameter unless the query states the index's
// condition itself. The empty key is no key: it finds no attempt.
const keyed = `idempotency_key != ''`

// listParam and pairsParam are where a query takes a list as one
// parameter, a JSON array: of strings (jsonList), as a subquery of the
// strings in a column value; of [a, b] pairs of strings (jsonPairs), as a
// subquery of the pairs in columns a and b. The query's text stays the
// same whatever the list's length, so it is prepared once. They are
// written `x IN `+listParam, `(x, y) IN `+pairsParam or `FROM `+listParam+`
// AS alias`; the dialect replaces each with the engine's SQL
// (Engine.ListSQL, Engine.PairsSQL) once per query text. Braces are no SQL
// of either engine, so a query that bypassed the dialect fails to parse.
const (
	listParam  = `{list}`
	pairsParam = `{pairs}`
)

func jsonList(ss []string) string {
	if ss == nil {
		ss = []string{}
	}
	b, _ := json.Marshal(ss)
	return string(b)
}

// placeholders returns "?, ?, ?" for n arguments; for n = 0 it returns
// "NULL", so that "x IN (NULL)" matches nothing.
func placeholders(n int) string {
	if n == 0 {
		return "NULL"
	}
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func stringsAsAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
