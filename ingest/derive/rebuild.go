package derive

import (
	"context"
	"fmt"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// rebuildBatch is how many events of the log one transaction of a rebuild
// folds: short enough that a crash loses little, long enough that commits
// do not dominate.
const rebuildBatch = 1000

// NewerDerivationError is Rebuild's refusal of a database whose derived
// rows a newer binary wrote: rebuilding them by older rules would undo
// its rules (and it would rebuild them again at its next start), so the
// database is left as it is and this binary does not start on it.
type NewerDerivationError struct {
	Stored, Binary int // the database's derivation version, this binary's
}

func (e *NewerDerivationError) Error() string {
	return fmt.Sprintf("rebuild: the database is of derivation version %d, newer than this binary's %d", e.Stored, e.Binary)
}

// Rebuild brings the derived rows of a database up to this binary's
// trace.DerivationVersion: when the database records another version it
// deletes every derived row and folds the whole raw event log again, in
// sequence order, a batch a transaction, exactly as the writer's commits
// fold new events (ingest is order-free, so the result is what ingesting
// the log in any order gives), then records the new version. A database
// without events only records it. progress, if set, is told after each
// transaction how many events are done of how many. It must run before
// the writer takes requests. Rebuilt is whether any event was folded.
//
// The version is recorded only after the last batch, so a rebuild cut
// short starts again, from the start, at the next open. A database of a
// newer version is refused with a *NewerDerivationError, untouched.
func Rebuild(ctx context.Context, db *store.DB, cfg trace.Config, progress func(done, total int)) (rebuilt bool, err error) {
	stored, err := db.DerivationVersion(ctx)
	if err != nil || stored == trace.DerivationVersion {
		return false, err
	}
	if stored > trace.DerivationVersion {
		return false, &NewerDerivationError{Stored: stored, Binary: trace.DerivationVersion}
	}
	total, err := db.EventCount(ctx)
	if err != nil {
		return false, err
	}
	if err := db.Update(ctx, func(tx *store.Tx) error {
		if err := tx.ClearDerived(); err != nil {
			return err
		}
		return tx.BumpGeneration()
	}); err != nil {
		return false, err
	}
	fed := map[string]bool{} // providers with an effect folded so far
	var after int64
	done := 0
	for {
		var folded []store.StoredEvent
		var analysed analysis
		err := db.Update(ctx, func(tx *store.Tx) error {
			var err error
			if folded, err = tx.LogAfter(after, rebuildBatch); err != nil || len(folded) == 0 {
				return err
			}
			touched := map[string][]trace.Event{}
			for _, s := range folded {
				ev, err := ingest.ParseStored(s.Body)
				if err != nil {
					return fmt.Errorf("rebuild: stored event %d no longer parses: %w", s.Seq, err)
				}
				touched[ev.Entity()] = append(touched[ev.Entity()], ev)
			}
			analysed, err = materialise(tx, touched, fed, cfg, nil)
			return err
		})
		if err != nil {
			return false, err
		}
		if len(folded) == 0 {
			break
		}
		for _, p := range analysed.fed {
			fed[p] = true
		}
		after = folded[len(folded)-1].Seq
		done += len(folded)
		if progress != nil {
			progress(done, total)
		}
	}
	return done > 0, db.SetDerivationVersion(ctx, trace.DerivationVersion)
}
