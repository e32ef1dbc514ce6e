package derive

import (
	"errors"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// Reaudit returns what store.PruneOptions.Reaudit needs: a function that
// re-derives executions, inside a write transaction, after something other
// than their own events changed what their audit sees — a prune deleted a
// peer that shared their key, an effect that carried it, or a span of
// their trace. It judges and stores them as the writer's commit does
// (findings, effect states, counts and audit state), with the providers
// whose outbox holds an effect now.
func Reaudit(cfg trace.Config) func(tx *store.Tx, executionIDs []string) error {
	return func(tx *store.Tx, executionIDs []string) error {
		// Their attempts did not change, so neither did their steps' rows.
		return rederive(tx, executionIDs, cfg, false)
	}
}

// rederive loads the executions from the store and saves what trace
// derives from them now; withSteps also rewrites every step's row.
func rederive(tx *store.Tx, executionIDs []string, cfg trace.Config, withSteps bool) error {
	fed, err := tx.FedProviders()
	if err != nil {
		return err
	}
	runs := make([]trace.Run, 0, len(executionIDs))
	var steps map[string]map[string]bool
	if withSteps {
		steps = make(map[string]map[string]bool, len(executionIDs))
	}
	for _, id := range executionIDs {
		run, err := tx.LoadRun(id, fed)
		if errors.Is(err, store.ErrNotFound) {
			continue // pruned since it was queued
		}
		if err != nil {
			return err
		}
		runs = append(runs, run)
		if withSteps {
			steps[id] = make(map[string]bool, len(run.Steps))
			for _, s := range run.Steps {
				steps[id][s.ID] = true
			}
		}
	}
	_, _, err = saveAnalyses(tx, runs, fed, cfg, steps, nil)
	return err
}
