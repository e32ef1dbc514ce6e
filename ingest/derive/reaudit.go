package derive

import (
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// Reaudit returns what store.PruneOptions.Reaudit needs: a function that
// re-derives executions, inside a write transaction, after something other
// than their own events changed what their audit sees — a prune deleted a
// peer that shared their key, an effect that carried it, or a span of
// their trace. It judges and stores them as the writer's commit does
// (findings, effect states, counts and audit state), with the providers
// whose outbox holds an effect now, reading each run whole from the store.
// Their attempts did not change, so neither did their steps' rows.
func Reaudit(cfg trace.Config) func(tx *store.Tx, executionIDs []string) error {
	return func(tx *store.Tx, executionIDs []string) error {
		fed, err := tx.FedProviders()
		if err != nil {
			return err
		}
		runs, err := loadRuns(storeRuns{tx: tx, fed: fed}, executionIDs)
		if err != nil {
			return err
		}
		_, _, err = saveAnalyses(tx, runs, fed, cfg, nil, nil)
		return err
	}
}
