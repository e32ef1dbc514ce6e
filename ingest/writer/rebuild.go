package writer

import (
	"context"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// rebuildBatch is how many executions one transaction of a rebuild
// re-derives: short enough that a crash loses little, long enough that
// commits do not dominate.
const rebuildBatch = 200

// Rebuild brings the derived rows of a database up to this binary's
// trace.DerivationVersion: when the database records another version it
// re-derives every execution from its stored events, as the writer's
// commit does (findings, effect states, counts, audit state and every
// step's row), then records the new version. A database without
// executions only records it. progress, if set, is told after each
// transaction how many executions are done. It must run before the
// writer takes requests. Rebuilt is whether any execution was re-derived.
//
// The version is recorded only after the last batch, so a rebuild cut
// short starts again at the next open; re-deriving is idempotent.
func Rebuild(ctx context.Context, db *store.DB, cfg trace.Config, progress func(done, total int)) (rebuilt bool, err error) {
	stored, err := db.DerivationVersion(ctx)
	if err != nil || stored == trace.DerivationVersion {
		return false, err
	}
	ids, err := db.ExecutionIDs(ctx)
	if err != nil {
		return false, err
	}
	for start := 0; start < len(ids); start += rebuildBatch {
		batch := ids[start:min(start+rebuildBatch, len(ids))]
		if err := db.Update(ctx, func(tx *store.Tx) error { return rederive(tx, batch, cfg, true) }); err != nil {
			return false, err
		}
		if progress != nil {
			progress(start+len(batch), len(ids))
		}
	}
	return len(ids) > 0, db.SetDerivationVersion(ctx, trace.DerivationVersion)
}
