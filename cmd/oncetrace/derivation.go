package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// rebuildDerived brings an older database's derived rows up to this
// binary's derivation rules before anything writes to or serves from it
// (docs/configuration.md, "Upgrades and the derived cache"): both pages
// then count from the same rules. It logs only when it rebuilds.
func rebuildDerived(ctx context.Context, db *store.DB, cfg trace.Config, logger *slog.Logger) error {
	stored, err := db.DerivationVersion(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	started := false
	_, err = writer.Rebuild(ctx, db, cfg, func(done, total int) {
		if !started {
			started = true
			logger.Info("rebuilding the derived cache from the event log", "db_derivation", stored,
				"binary_derivation", trace.DerivationVersion, "executions", total)
		}
		logger.Info("derived cache rebuild", "done", done, "total", total)
	})
	if err != nil {
		return fmt.Errorf("rebuild the derived cache: %w", err)
	}
	if started {
		logger.Info("derived cache rebuilt", "derivation", trace.DerivationVersion, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}
