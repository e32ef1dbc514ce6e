package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/oncetrace/oncetrace/ingest/derive"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// rebuildDerived brings an older database's derived rows up to this
// binary's derivation rules before anything writes to or serves from it
// (docs/configuration.md, "Upgrades and the derived cache"): both pages
// then count from the same rules. It logs only when it rebuilds. A newer
// database's it refuses, naming both versions, and leaves as they are.
func rebuildDerived(ctx context.Context, db *store.DB, cfg trace.Config, logger *slog.Logger, progress func(done, total int)) error {
	stored, err := db.DerivationVersion(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	started := false
	_, err = derive.Rebuild(ctx, db, cfg, func(done, total int) {
		if !started {
			started = true
			logger.Info("rebuilding the derived cache from the event log", "db_derivation", stored,
				"binary_derivation", trace.DerivationVersion, "events", total)
		}
		logger.Info("derived cache rebuild", "done", done, "total", total)
		if progress != nil {
			progress(done, total)
		}
	})
	if newer, ok := errors.AsType[*derive.NewerDerivationError](err); ok {
		return fmt.Errorf("the database was derived by a newer oncetrace (derivation version %d; this binary's is %d): "+
			"run a release of derivation version %d or later on it; the database is left unchanged", newer.Stored, newer.Binary, newer.Stored)
	}
	if err != nil {
		return fmt.Errorf("rebuild the derived cache: %w", err)
	}
	if started {
		logger.Info("derived cache rebuilt", "derivation", trace.DerivationVersion, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// startingGate is serve's handler until the server is ready: a 503 with
// Retry-After, saying how far a rebuild of the derived cache has come, then
// the server itself.
type startingGate struct {
	next        atomic.Pointer[http.Handler]
	done, total atomic.Int64
}

func newStartingGate() *startingGate { return &startingGate{} }

func (g *startingGate) progress(done, total int) {
	g.done.Store(int64(done))
	g.total.Store(int64(total))
}

func (g *startingGate) ready(h http.Handler) { g.next.Store(&h) }

func (g *startingGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := g.next.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	msg := "oncetrace is starting"
	if total := g.total.Load(); total > 0 {
		msg = fmt.Sprintf("oncetrace is rebuilding its derived cache from the event log (%d of %d events)", g.done.Load(), total)
	}
	w.Header().Set("Retry-After", "5")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
