package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/oncetrace/oncetrace/trace"
)

// The reads of many rows (a run's attempts and effects) take each row's
// text fields joined into one column: a driver's cost is per column and
// row, and a 10,000-attempt execution's attempts read from SQLite in
// about half the time so (36 → 17 ms, 19 columns → 7). Both engines join
// text with || and take the separator in a literal.

// unitSeparator joins the text fields: ASCII's own separator, which JSON
// escapes; a name or error holding it makes readPacked read the row's
// query again column by column.
const unitSeparator = "\x1f"

// packedRead is how readPacked reads rows of one kind: the columns token
// a query names, the packed and the plain columns put in its place, and
// a scanner of each.
type packedRead[T any] struct {
	token, packed, plain  string
	scanPacked, scanPlain func(*sql.Rows) (T, error)
}

// packText is fields joined by the separator, as an SQL expression.
func packText(fields ...string) string {
	return strings.Join(fields, `||'`+unitSeparator+`'||`)
}

// unpackText splits packed into the len(into) fields packText joined,
// false when it holds another number of separators.
func unpackText(packed string, into []string) bool {
	for i := range len(into) - 1 {
		field, rest, ok := strings.Cut(packed, unitSeparator)
		if !ok {
			return false
		}
		into[i], packed = field, rest
	}
	into[len(into)-1] = packed
	return !strings.Contains(packed, unitSeparator)
}

// errSeparatorInText is a packed row whose fields hold the separator
// themselves: it cannot be split, so the query is read again unpacked.
var errSeparatorInText = errors.New("store: a row's text holds the unit separator")

// readPacked runs query, its columns named by r.token, and scans its rows
// packed, or column by column in the rare case a field holds the
// separator; expect is about how many there are (0 when unknown), to
// size the result once (growing a slice of 10,000 attempts by doubling
// copies twice their 4 MB).
func readPacked[T any](ctx context.Context, q querier, expect int, query string, r packedRead[T], args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, strings.ReplaceAll(query, r.token, r.packed), args...)
	if err != nil {
		return nil, err
	}
	out, err := scanRows(rows, expect, r.scanPacked)
	if !errors.Is(err, errSeparatorInText) {
		return out, err
	}
	if rows, err = q.QueryContext(ctx, strings.ReplaceAll(query, r.token, r.plain), args...); err != nil {
		return nil, err
	}
	return scanRows(rows, expect, r.scanPlain)
}

func scanRows[T any](rows *sql.Rows, expect int, scan func(*sql.Rows) (T, error)) ([]T, error) {
	defer rows.Close()
	out := make([]T, 0, expect)
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// attemptsRead is where a query given to readAttempts names its columns.
const attemptsRead = `{attempt columns}`

// packedAttempt reads an attempt in 7 columns: its key and numbers
// apart, its 13 text fields in one.
var packedAttempt = packedRead[trace.Attempt]{
	token: attemptsRead,
	packed: `execution_id, step_id, attempt, deduplicated, started_at, ended_at, ` + packText("tool", "effect", "provider", "outcome",
		"idempotency_key", "worker", "args", "result", "error", "conflicts", "trace_id", "span_id", "recognised_by"),
	plain:      attemptColumns,
	scanPacked: scanPackedAttempt,
	scanPlain:  scanPlainAttempt,
}

// readAttempts runs query, whose columns are attemptsRead, and scans its
// attempts; expect is about how many there are (0 when unknown).
func readAttempts(ctx context.Context, q querier, expect int, query string, args ...any) ([]trace.Attempt, error) {
	return readPacked(ctx, q, expect, query, packedAttempt, args...)
}

func scanPackedAttempt(rows *sql.Rows) (trace.Attempt, error) {
	var a trace.Attempt
	var started, ended sql.NullInt64
	var dedup int
	var packed string
	if err := rows.Scan(&a.ExecutionID, &a.StepID, &a.Number, &dedup, &started, &ended, &packed); err != nil {
		return a, err
	}
	var text [13]string
	if !unpackText(packed, text[:]) {
		return a, errSeparatorInText
	}
	a.Tool, a.Effect, a.Provider, a.Outcome, a.IdempotencyKey, a.Worker = text[0], trace.EffectClass(text[1]), text[2], trace.Outcome(text[3]), text[4], text[5]
	a.Args, a.Result, a.Error, a.Conflicts = rawJSON(text[6]), rawJSON(text[7]), text[8], conflicts(text[9])
	a.TraceID, a.SpanID, a.RecognisedBy = text[10], text[11], text[12]
	a.Deduplicated = dedup == 1
	a.StartedAt, a.EndedAt = fromNanos(started), fromNanos(ended)
	return a, nil
}

// runEffectsRead is where a query given to readRunEffects names its
// columns: an effect's and its state.
const runEffectsRead = `{run effect columns}`

// packedRunEffect reads an effect and its state in 5 columns: what the
// run's queries sort by and its numbers apart, its other 11 text fields
// in one.
var packedRunEffect = packedRead[runEffect]{
	token: runEffectsRead,
	packed: `provider, effect_id, at, stray, ` + packText("idempotency_key", "execution_id", "step_id", "target", "conflicts",
		"trace_id", "span_id", "fingerprint", "summary", "joined_execution_id", "state"),
	plain:      effectColumns + `, state`,
	scanPacked: scanPackedRunEffect,
	scanPlain: func(rows *sql.Rows) (runEffect, error) {
		var f runEffect
		var err error
		f.Effect, err = scanEffect(rows, &f.state)
		return f, err
	},
}

func scanPackedRunEffect(rows *sql.Rows) (runEffect, error) {
	var f runEffect
	var at sql.NullInt64
	var stray int
	var packed string
	if err := rows.Scan(&f.Provider, &f.ID, &at, &stray, &packed); err != nil {
		return f, err
	}
	var text [11]string
	if !unpackText(packed, text[:]) {
		return f, errSeparatorInText
	}
	f.IdempotencyKey, f.ExecutionID, f.StepID, f.Target, f.Conflicts = text[0], text[1], text[2], text[3], conflicts(text[4])
	f.TraceID, f.SpanID, f.Fingerprint, f.Summary, f.JoinedExecutionID = text[5], text[6], text[7], text[8], text[9]
	f.state = trace.MatchState(text[10])
	f.StrayTrace = stray != 0
	f.At = fromNanos(at)
	return f, nil
}
