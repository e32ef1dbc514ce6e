package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Retention (docs/security.md, "Retention"). A prune deletes executions
// whose sort time is before a cutoff, with everything that names them, in
// small transactions on the single writer, so that ingest keeps going
// between them; it then re-derives what the deletions changed for the
// executions that remain, deletes orphan effects past their own cutoff,
// and gives the freed pages back to the file system.

// DefaultPruneMaxHold is how long one prune transaction may hold the
// writer unless told otherwise.
const DefaultPruneMaxHold = 50 * time.Millisecond

// DefaultVacuumConvertMax is the largest database a prune run by the
// server rewrites once with VACUUM to switch it to incremental vacuum.
const DefaultVacuumConvertMax = 64 << 20

// PruneOptions says what a prune deletes and how it shares the writer.
type PruneOptions struct {
	// Before: executions whose sort time (their start, else their earliest
	// attempt or effect) is before it are deleted. An execution without
	// any time goes when nothing naming it was received since Before.
	Before time.Time
	// EffectsBefore: orphan effects (naming no execution, matching no
	// attempt) whose time is before it are deleted. Zero means Before.
	EffectsBefore time.Time
	// MaxHold bounds how long one transaction holds the writer: batch
	// sizes adapt so that each takes about half of it. An execution is
	// deleted whole, so one with a huge number of rows can take longer.
	// Zero means DefaultPruneMaxHold.
	MaxHold time.Duration
	// Interleave pauses after each transaction as long as it held the
	// writer, so that a running server's ingest gets at least half of it.
	Interleave bool
	// Reaudit re-derives the findings, effect states and counts of
	// executions that remain, inside the prune's transaction (ingest
	// provides it). Nil leaves them queued in prune_pending for a later
	// prune that has one.
	Reaudit func(tx *Tx, executionIDs []string) error
	// RepeatWindow is the analysis's (trace.Config) for the orphans a key
	// re-check judges again; zero is the default.
	RepeatWindow time.Duration
	// VacuumConvertMax: a database that predates incremental vacuum and
	// is at most this many bytes is rewritten once with VACUUM (holding
	// the writer throughout) so that its freed pages can be returned; a
	// larger one keeps its size and reuses them. Zero never rewrites.
	VacuumConvertMax int64
	// OnBatch, if set, is told about every transaction of the prune.
	OnBatch func(PruneBatch)
}

// PruneBatch is one transaction of a prune.
type PruneBatch struct {
	Phase string // "executions", "reaudit-key", "reaudit-trace", "reaudit-execution", "effects", "vacuum" or "checkpoint"
	Items int    // executions, effects, pending entries or pages it handled
	Rows  int64  // rows it deleted
	// Hold is how long it held the writer; Work the part of it before the
	// commit (the rest is the commit, which may run a WAL checkpoint).
	Hold, Work time.Duration
}

// PruneResult is what a prune did.
type PruneResult struct {
	Executions int64 // executions deleted
	Effects    int64 // effects deleted, with or without an execution
	Events     int64 // raw events deleted
	Rows       int64 // every row deleted, events and effects included
	Reaudited  int64 // remaining executions re-derived
	Batches    int
	MaxHold    time.Duration // the longest any transaction held the writer
	// BytesBefore and BytesAfter are the database's size in pages times
	// the page size, before the prune and after its vacuum.
	BytesBefore, BytesAfter int64
	// Vacuum is how space was reclaimed: "incremental", "full" (rewritten
	// once with VACUUM), "auto" (auto_vacuum=FULL reclaims at each commit)
	// or "none" (a database that predates incremental vacuum and is over
	// VacuumConvertMax: freed pages are reused, the file does not shrink);
	// on PostgreSQL "autovacuum" (its autovacuum makes the space reusable).
	Vacuum   string
	Duration time.Duration
}

// PruneStats counts prunes since the database was opened, for metrics.
type PruneStats struct {
	Runs, Failures int64
	// Deleted, over all runs.
	Executions, Effects, Rows int64
	Batches                   int64
	LastRun                   time.Time // when the last run ended; zero before any
	LastDuration, LastMaxHold time.Duration
}

// pruneCounters is the DB's PruneStats.
type pruneCounters struct {
	mu    sync.Mutex
	stats PruneStats
}

// PruneStats returns the counters of the prunes run through this DB.
func (db *DB) PruneStats() PruneStats {
	db.pruneStats.mu.Lock()
	defer db.pruneStats.mu.Unlock()
	return db.pruneStats.stats
}

func (db *DB) countPrune(res PruneResult, err error, now time.Time) {
	db.pruneStats.mu.Lock()
	defer db.pruneStats.mu.Unlock()
	s := &db.pruneStats.stats
	s.Runs++
	if err != nil {
		s.Failures++
	}
	s.Executions += res.Executions
	s.Effects += res.Effects
	s.Rows += res.Rows
	s.Batches += int64(res.Batches)
	s.LastRun, s.LastDuration, s.LastMaxHold = now, res.Duration, res.MaxHold
}

// Prune deletes what opts says, re-derives what remains, and reclaims the
// space. Cancelling ctx stops it between transactions; what it committed
// stays committed and consistent, and the next prune resumes the rest.
func (db *DB) Prune(ctx context.Context, opts PruneOptions) (res PruneResult, err error) {
	start := time.Now()
	if opts.MaxHold <= 0 {
		opts.MaxHold = DefaultPruneMaxHold
	}
	if opts.EffectsBefore.IsZero() {
		opts.EffectsBefore = opts.Before
	}
	defer func() {
		res.Duration = time.Since(start)
		db.countPrune(res, err, time.Now())
	}()
	p := &pruner{db: db, opts: opts, res: &res}
	if res.BytesBefore, err = db.pageBytes(ctx); err != nil {
		return res, err
	}
	for _, phase := range []func(context.Context) error{p.executions, p.reaudit, p.orphanEffects, p.vacuum} {
		if err := phase(ctx); err != nil {
			return res, err
		}
	}
	res.BytesAfter, err = db.pageBytes(ctx)
	return res, err
}

type pruner struct {
	db   *DB
	opts PruneOptions
	res  *PruneResult
}

// batchSize adapts the number of items of the next transaction so that
// its work takes about half of MaxHold.
type batchSize struct{ n, max int }

func (b *batchSize) next(items int, work, maxHold time.Duration) {
	target := maxHold / 2
	switch {
	case work > target && items > 1:
		b.n = max(1, int(float64(items)*float64(target)/float64(work)))
	case work < target/2 && items >= b.n:
		// Grow gently: the cost of a batch is not linear in its items
		// (what it deletes varies), so a big step overshoots.
		b.n = min(b.max, b.n+max(1, b.n/2))
	}
}

// batch runs one prune transaction and accounts for it. Its hold runs
// from the moment the transaction began, once the writer was free, to
// the end of its commit. It returns the items and the work before the
// commit, which batch sizes follow: that part grows with the items, while
// the commit's cost is mostly SQLite's occasional WAL checkpoint, which
// a smaller batch would not make shorter.
func (p *pruner) batch(ctx context.Context, phase string, fn func(*Tx) (items int, rows int64, err error)) (int, time.Duration, error) {
	var began time.Time
	var items int
	var rows int64
	var work time.Duration
	err := p.db.Update(ctx, func(t *Tx) error {
		began = time.Now()
		var err error
		items, rows, err = fn(t)
		work = time.Since(began)
		if err == nil && items > 0 {
			err = t.BumpGeneration()
		}
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	p.account(ctx, PruneBatch{Phase: phase, Items: items, Rows: rows, Hold: time.Since(began), Work: work})
	return items, work, nil
}

func (p *pruner) account(ctx context.Context, b PruneBatch) {
	p.res.Batches++
	p.res.Rows += b.Rows
	p.res.MaxHold = max(p.res.MaxHold, b.Hold)
	if p.opts.OnBatch != nil {
		p.opts.OnBatch(b)
	}
	if p.opts.Interleave {
		t := time.NewTimer(max(b.Hold, time.Millisecond))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// executions deletes old executions, a batch at a time, and queues what
// they shared with the executions that remain.
func (p *pruner) executions(ctx context.Context) error {
	size := batchSize{n: 16, max: 2048}
	before := p.opts.Before.UnixNano()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		items, work, err := p.batch(ctx, "executions", func(t *Tx) (int, int64, error) {
			ids, err := t.strings(`SELECT execution_id FROM executions WHERE sort_at > 0 AND sort_at < ? ORDER BY sort_at LIMIT ?`, before, size.n)
			if err != nil {
				return 0, 0, err
			}
			if len(ids) < size.n {
				// No time at all: judged by when its events arrived.
				timeless, err := t.strings(`SELECT x.execution_id FROM executions x WHERE x.sort_at = 0
					AND NOT EXISTS (SELECT 1 FROM events v WHERE v.execution_id = x.execution_id AND v.received_at >= ?)
					AND NOT EXISTS (SELECT 1 FROM effects f JOIN events v ON v.entity = `+t.entitySQL("'e'", "f.provider", "f.effect_id")+`
						WHERE f.trace_id = x.execution_id AND v.received_at >= ?)
					LIMIT ?`, before, before, size.n-len(ids))
				if err != nil {
					return 0, 0, err
				}
				ids = append(ids, timeless...)
			}
			if len(ids) == 0 {
				return 0, 0, nil
			}
			rows, err := t.deleteExecutions(ids, p.res)
			return len(ids), rows, err
		})
		if err != nil {
			return fmt.Errorf("store: prune executions: %w", err)
		}
		if items == 0 {
			return nil
		}
		size.next(items, work, p.opts.MaxHold)
	}
}

// deleteExecutions deletes executions and every row naming them, and the
// effects that belonged to them alone. It returns the rows deleted.
func (t *Tx) deleteExecutions(ids []string, res *PruneResult) (int64, error) {
	list := jsonList(ids)
	keys, err := t.strings(`SELECT DISTINCT idempotency_key FROM attempts WHERE execution_id IN `+listParam+` AND idempotency_key != ''`, list)
	if err != nil {
		return 0, err
	}
	// Their traces: an execution named after its trace id is one too.
	traces, err := t.strings(`SELECT value FROM `+listParam+` AS list
		UNION SELECT trace_id FROM attempts WHERE execution_id IN `+listParam+` AND trace_id != ''
		UNION SELECT trace_id FROM spans WHERE execution_id IN `+listParam, list, list, list)
	if err != nil {
		return 0, err
	}
	effects, err := t.effectKeys(`SELECT provider, effect_id, idempotency_key FROM effects WHERE execution_id IN `+listParam, list)
	if err != nil {
		return 0, err
	}
	var rows int64
	del := func(query string, args ...any) (int64, error) {
		s, err := t.stmt(query)
		if err != nil {
			return 0, err
		}
		r, err := s.ExecContext(t.ctx, args...)
		if err != nil {
			return 0, err
		}
		n, err := r.RowsAffected()
		rows += n
		return n, err
	}
	// The raw log first: every event naming them, and every event of
	// their spans (an export without the span's ancestors names the trace).
	n, err := del(`DELETE FROM events WHERE execution_id IN `+listParam, list)
	if err != nil {
		return rows, err
	}
	res.Events += n
	n, err = del(`DELETE FROM events WHERE entity IN (SELECT `+t.entitySQL("'s'", "trace_id", "span_id")+` FROM spans WHERE execution_id IN `+listParam+`)`, list)
	if err != nil {
		return rows, err
	}
	res.Events += n
	for _, table := range []string{"spans", "attempts", "steps", "findings", "search_terms"} {
		if _, err := del(`DELETE FROM `+table+` WHERE execution_id IN `+listParam, list); err != nil {
			return rows, err
		}
	}
	n, err = del(`DELETE FROM executions WHERE execution_id IN `+listParam, list)
	if err != nil {
		return rows, err
	}
	res.Executions += n
	if err := t.exec(`DELETE FROM prune_pending WHERE kind = 'execution' AND value IN `+listParam, list); err != nil {
		return rows, err
	}
	// Effects joined by trace context alone belong to their trace's
	// executions: they go with the last of them.
	// (execution_id || '': found through the trace index, not through the
	// index of every effect that names no execution, which SQLite would
	// pick for the plain column.)
	joined, err := t.effectKeys(`SELECT provider, effect_id, idempotency_key FROM effects f
		WHERE f.execution_id || '' = '' AND f.trace_id IN `+listParam+`
		AND NOT EXISTS (SELECT 1 FROM attempts WHERE trace_id = f.trace_id)
		AND NOT EXISTS (SELECT 1 FROM spans WHERE trace_id = f.trace_id)
		AND NOT EXISTS (SELECT 1 FROM executions WHERE execution_id = f.trace_id)`, jsonList(traces))
	if err != nil {
		return rows, err
	}
	effects = append(effects, joined...)
	n, err = t.deleteEffects(effects, res)
	rows += n
	if err != nil {
		return rows, err
	}
	// What the remaining executions saw of these: effects carrying a key
	// a deleted attempt or effect carried, peers that shared the key, and
	// executions that shared a trace.
	for _, f := range effects {
		if f.key != "" {
			keys = append(keys, f.key)
		}
	}
	if err := t.exec(`INSERT INTO prune_pending (kind, value) SELECT 'key', value FROM `+listParam+` AS list WHERE true ON CONFLICT DO NOTHING`, jsonList(keys)); err != nil {
		return rows, err
	}
	if err := t.exec(`INSERT INTO prune_pending (kind, value) SELECT 'trace', value FROM `+listParam+` AS list WHERE true ON CONFLICT DO NOTHING`, jsonList(traces)); err != nil {
		return rows, err
	}
	return rows, nil
}

type effectKey struct{ provider, id, key string }

func (t *Tx) effectKeys(query string, args ...any) ([]effectKey, error) {
	rows, err := t.QueryContext(t.ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []effectKey
	for rows.Next() {
		var f effectKey
		if err := rows.Scan(&f.provider, &f.id, &f.key); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// deleteEffects deletes effects with their events, their orphan findings
// and the messages kept for them: four statements whatever their number.
func (t *Tx) deleteEffects(effects []effectKey, res *PruneResult) (int64, error) {
	if len(effects) == 0 {
		return 0, nil
	}
	pairs := make([][2]string, len(effects))
	for i, f := range effects {
		pairs[i] = [2]string{f.provider, f.id}
	}
	list, err := json.Marshal(pairs)
	if err != nil {
		return 0, err
	}
	// The effects are (provider, effect_id) pairs (pairsParam); an effect's
	// raw events are those of its entity, "e" NUL provider NUL effect_id
	// (trace.Event.Entity).
	var rows int64
	for _, q := range []struct {
		query string
		count *int64
	}{
		{`DELETE FROM events WHERE entity IN (SELECT ` + t.entitySQL("'e'", "a", "b") + ` FROM ` + pairsParam + ` AS refs)`, &res.Events},
		{`DELETE FROM findings WHERE source = 'effect' AND (effect_provider, effect_id) IN ` + pairsParam, nil},
		{`DELETE FROM messages WHERE (provider, effect_id) IN ` + pairsParam, nil},
		{`DELETE FROM effects WHERE (provider, effect_id) IN ` + pairsParam, &res.Effects},
	} {
		s, err := t.stmt(q.query)
		if err != nil {
			return rows, err
		}
		r, err := s.ExecContext(t.ctx, string(list))
		if err != nil {
			return rows, err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return rows, err
		}
		rows += n
		if q.count != nil {
			*q.count += n
		}
	}
	return rows, nil
}

// reaudit works off prune_pending, one kind after the other: keys (their
// effects are checked for a matching attempt again, and the executions
// that sent them are queued), traces (their executions are queued), then
// the queued executions, re-derived through opts.Reaudit. Re-deriving an
// execution costs far more than re-checking a key, so each kind has its
// own batch size (and its own phase, "reaudit-KIND").
func (p *pruner) reaudit(ctx context.Context) error {
	for _, kind := range []string{"key", "trace", "execution"} {
		if kind == "execution" && p.opts.Reaudit == nil {
			return nil // left queued for a prune that has one
		}
		size := batchSize{n: 16, max: 1024}
		if kind == "execution" {
			size.n = 4
		}
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			items, work, err := p.batch(ctx, "reaudit-"+kind, func(t *Tx) (int, int64, error) {
				values, err := t.strings(`SELECT value FROM prune_pending WHERE kind = ? ORDER BY value LIMIT ?`, kind, size.n)
				if err != nil || len(values) == 0 {
					return 0, 0, err
				}
				var queue []string
				switch kind {
				case "key":
					rechecked, err := t.RecheckOrphans(nil, values, nil, p.opts.RepeatWindow)
					if err != nil {
						return 0, 0, err
					}
					peers, err := t.ExecutionsWithKeys(values)
					if err != nil {
						return 0, 0, err
					}
					queue = append(rechecked.Executions, peers...)
				case "trace":
					if queue, err = t.ExecutionsOfTraces(values); err != nil {
						return 0, 0, err
					}
				case "execution":
					if err := p.opts.Reaudit(t, values); err != nil {
						return 0, 0, err
					}
					p.res.Reaudited += int64(len(values))
				}
				if err := t.exec(`INSERT INTO prune_pending (kind, value) SELECT 'execution', value FROM `+listParam+` AS list WHERE true ON CONFLICT DO NOTHING`, jsonList(queue)); err != nil {
					return 0, 0, err
				}
				if err := t.exec(`DELETE FROM prune_pending WHERE kind = ? AND value IN `+listParam, kind, jsonList(values)); err != nil {
					return 0, 0, err
				}
				return len(values), 0, nil
			})
			if err != nil {
				return fmt.Errorf("store: prune re-audit: %w", err)
			}
			if items == 0 {
				break
			}
			size.next(items, work, p.opts.MaxHold)
		}
	}
	return nil
}

// orphanEffects deletes effects that belong to no execution and match no
// attempt, older than EffectsBefore.
func (p *pruner) orphanEffects(ctx context.Context) error {
	size := batchSize{n: 32, max: 4096}
	before := p.opts.EffectsBefore.UnixNano()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		items, work, err := p.batch(ctx, "effects", func(t *Tx) (int, int64, error) {
			effects, err := t.effectKeys(`SELECT provider, effect_id, idempotency_key FROM effects
				WHERE state = 'orphan' AND at < ? AND execution_id = '' LIMIT ?`, before, size.n)
			if err != nil {
				return 0, 0, err
			}
			if len(effects) < size.n {
				// No time: judged by when its events arrived.
				timeless, err := t.effectKeys(`SELECT provider, effect_id, idempotency_key FROM effects f
					WHERE state = 'orphan' AND at IS NULL AND execution_id = ''
					AND NOT EXISTS (SELECT 1 FROM events WHERE entity = `+t.entitySQL("'e'", "f.provider", "f.effect_id")+` AND received_at >= ?)
					LIMIT ?`, before, size.n-len(effects))
				if err != nil {
					return 0, 0, err
				}
				effects = append(effects, timeless...)
			}
			if len(effects) == 0 {
				return 0, 0, nil
			}
			rows, err := t.deleteEffects(effects, p.res)
			return len(effects), rows, err
		})
		if err != nil {
			return fmt.Errorf("store: prune effects: %w", err)
		}
		if items == 0 {
			return nil
		}
		size.next(items, work, p.opts.MaxHold)
	}
}

// vacuum gives the space the prune freed back as the engine can
// (Engine.Vacuum).
func (p *pruner) vacuum(ctx context.Context) error {
	mode, err := p.db.engine.Vacuum(ctx, VacuumRun{
		Read: p.db.read.DB,
		WithWriter: func(fn func(*sql.Conn) error) (time.Duration, error) {
			return p.db.withWriter(ctx, fn)
		},
		Account: func(phase string, items int, hold time.Duration) {
			p.account(ctx, PruneBatch{Phase: phase, Items: items, Hold: hold, Work: hold})
		},
		NextChunk: func(size, done int, hold time.Duration) int {
			bs := batchSize{n: size, max: 1 << 16}
			bs.next(done, hold, p.opts.MaxHold)
			return bs.n
		},
		ConvertMax: p.opts.VacuumConvertMax,
	})
	p.res.Vacuum = mode
	return err
}

// withWriter runs fn on the writer's connection outside any transaction
// (VACUUM and checkpoints cannot run in one), holding the writer, and
// returns how long it held it.
func (db *DB) withWriter(ctx context.Context, fn func(*sql.Conn) error) (time.Duration, error) {
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	conn, err := db.writer(ctx)
	if err != nil {
		return 0, db.noteWrite(errNoWriter(err))
	}
	start := time.Now()
	err = fn(conn)
	if connectionLost(err) {
		db.dropWriter()
	}
	return time.Since(start), err
}

// pageBytes is the database's size as the engine measures it
// (Engine.PageBytes).
func (db *DB) pageBytes(ctx context.Context) (int64, error) {
	return db.engine.PageBytes(ctx, db.read.DB)
}

// FedProviders returns, inside the transaction, the providers whose
// outbox holds any effect.
func (t *Tx) FedProviders() (map[string]bool, error) { return fedProviders(t.ctx, t) }

// PendingReaudits counts what prunes left to re-derive (prune_pending):
// zero unless a prune was cut short or ran without a Reaudit.
func (db *DB) PendingReaudits(ctx context.Context) (int64, error) {
	var n int64
	if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM prune_pending`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: pending re-audits: %w", err)
	}
	return n, nil
}
