package derive

import (
	"errors"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// RunSource gives a derivation the runs it audits: an execution's run as
// the audit takes it (FedProviders set, HTTP calls folded into attempts),
// or store.ErrNotFound when the execution does not exist. The store reads
// each run whole (storeRuns); a writer's commit brings the runs it
// analysed last up to date with what the commit changed (runSource,
// runcache.go). Both give the same run (TestRunSourceContract).
type RunSource interface {
	Run(id string) (trace.Run, error)
}

// storeRuns reads runs whole from the store.
type storeRuns struct {
	tx  *store.Tx
	fed map[string]bool
}

func (s storeRuns) Run(id string) (trace.Run, error) { return s.tx.LoadRun(id, s.fed) }

// Run is get without the cached run behind it.
func (s *runSource) Run(id string) (trace.Run, error) {
	run, _, err := s.get(id)
	return run, err
}

// runsOf is the source of a derivation's runs: the writer's commit's,
// when src is set, else the store's.
func runsOf(tx *store.Tx, fed map[string]bool, src *runSource) RunSource {
	if src == nil {
		return storeRuns{tx: tx, fed: fed}
	}
	return src
}

// loadRuns returns the runs of the executions that still exist.
func loadRuns(source RunSource, ids []string) ([]trace.Run, error) {
	runs := make([]trace.Run, 0, len(ids))
	for _, id := range ids {
		run, err := source.Run(id)
		if errors.Is(err, store.ErrNotFound) {
			continue // a trace's placeholder, dropped in this commit, or pruned since it was queued
		}
		if err != nil {
			return nil, err
		}
		runs = append(runs, run)
	}
	return runs, nil
}
