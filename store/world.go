package store

import (
	"context"
	"fmt"

	"github.com/oncetrace/oncetrace/trace"
)

// World loads every execution, step and effect, for an audit of the whole
// database computed afresh (oncetrace audit --db, tests).
func (db *DB) World(ctx context.Context) (trace.World, error) {
	var w trace.World
	rows, err := db.read.QueryContext(ctx, `SELECT `+executionColumns+` FROM executions ORDER BY execution_id`)
	if err != nil {
		return w, fmt.Errorf("store: world: %w", err)
	}
	for rows.Next() {
		x, err := scanExecution(rows)
		if err != nil {
			rows.Close()
			return w, fmt.Errorf("store: world: %w", err)
		}
		w.Executions = append(w.Executions, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return w, fmt.Errorf("store: world: %w", err)
	}
	attempts, err := readAttempts(ctx, db.read, 0, `SELECT `+attemptsRead+` FROM attempts ORDER BY execution_id, step_id, attempt`)
	if err != nil {
		return w, fmt.Errorf("store: world: %w", err)
	}
	for start := 0; start < len(attempts); {
		end := start
		for end < len(attempts) && attempts[end].ExecutionID == attempts[start].ExecutionID {
			end++
		}
		w.Steps = append(w.Steps, groupSteps(attempts[start:end])...)
		start = end
	}
	rows, err = db.read.QueryContext(ctx, `SELECT `+effectColumns+` FROM effects ORDER BY provider, effect_id`)
	if err != nil {
		return w, fmt.Errorf("store: world: %w", err)
	}
	if w.Effects, err = scanEffects(rows); err != nil {
		return w, fmt.Errorf("store: world: %w", err)
	}
	rows, err = db.read.QueryContext(ctx, `SELECT `+spanColumns+` FROM spans ORDER BY trace_id, span_id`)
	if err != nil {
		return w, fmt.Errorf("store: world: %w", err)
	}
	if w.Spans, err = scanSpans(rows); err != nil {
		return w, fmt.Errorf("store: world: %w", err)
	}
	return w, nil
}
