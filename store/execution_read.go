package store

import (
	"context"
	"fmt"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// testHookAfterRunRead runs inside ReadExecution's read transaction after
// the run is read, before its findings are (export_test.go); Go's own
// packages keep such hooks as package variables too.
var testHookAfterRunRead func()

// inReadTx runs fn in one read transaction on a reader connection, which
// the engine makes one snapshot (SQLite in WAL mode takes it at the first
// statement; PostgreSQL's is REPEATABLE READ): every query of fn sees the
// same commits, so what one page shows cannot come from two.
func (db *DB) inReadTx(ctx context.Context, fn func(tx querier) error) error {
	tx, err := db.read.DB.BeginTx(ctx, db.engine.ReadTx())
	if err != nil {
		return fmt.Errorf("store: begin read: %w", err)
	}
	defer tx.Rollback() // it only read
	return fn(readTx{tx: tx, d: db.d})
}

// ChangeToken names what a read transaction saw of the whole database:
// the event log's last sequence number and the derived generation
// (BumpGeneration). Every commit that changes what a read can return
// changes one of them: a writer's commit stores events (and, on a shared
// database, bumps the generation as it derives, so a commit of a lower
// sequence number made visible late still changes the token); a prune or
// a re-derivation bumps the generation. So two reads with equal tokens saw
// the same rows, and what was built from one answers for the other — the
// same test the writer's own run cache makes (ingest/derive).
type ChangeToken struct{ Seq, Generation int64 }

const changeTokenQuery = `SELECT coalesce((SELECT max(seq) FROM events), 0),
	coalesce((SELECT generation FROM derived_generation WHERE id = 1), 0)`

func changeToken(ctx context.Context, q querier) (ChangeToken, error) {
	var t ChangeToken
	if err := q.QueryRowContext(ctx, changeTokenQuery).Scan(&t.Seq, &t.Generation); err != nil {
		return t, fmt.Errorf("store: change token: %w", err)
	}
	return t, nil
}

// ChangeToken reads the database's change token now: one query on two
// indexed rows.
func (db *DB) ChangeToken(ctx context.Context) (ChangeToken, error) {
	var t ChangeToken
	err := db.inReadTx(ctx, func(tx querier) (err error) {
		t, err = changeToken(ctx, tx)
		return err
	})
	return t, err
}

// ExecutionRead is everything an execution's page shows that is stored.
type ExecutionRead struct {
	// Token is the change token of the snapshot everything below was
	// read in.
	Token    ChangeToken
	Run      trace.Run
	Findings []trace.Finding
	States   map[trace.EffectRef]trace.MatchState
	// Orphans are the orphan effects in the window the caller asked for,
	// by time; they may include the run's own.
	Orphans []trace.Effect
}

// OrphanWindow asks for up to Limit orphan effects whose time falls in
// [From, To]; a zero Limit asks for none.
type OrphanWindow struct {
	From, To time.Time
	Limit    int
}

// ReadExecution reads an execution, its findings, its effects' states and,
// when orphans asks for some once it has seen the run and its findings,
// orphan effects near it, and the change token of what it read: one
// snapshot, at most ten queries however many steps, attempts and effects
// it has. When a second read connection is free and sees the same state
// (the same change token: every commit changes it), the run's effects, key
// peers and findings are read on it while the first reads the attempts,
// which are most of a big execution's time.
func (db *DB) ReadExecution(ctx context.Context, id string, orphans func(trace.Run, []trace.Finding) OrphanWindow) (ExecutionRead, error) {
	var r ExecutionRead
	paired := false
	select {
	case db.pairedReads <- struct{}{}:
		paired = true
		defer func() { <-db.pairedReads }()
	default:
	}
	err := db.inReadTx(ctx, func(tx querier) error {
		// First, so that the snapshot is taken by it (SQLite's starts at
		// the first statement).
		var err error
		if r.Token, err = changeToken(ctx, tx); err != nil {
			return err
		}
		fed, err := fedProviders(ctx, tx)
		if err != nil {
			return err
		}
		var states map[trace.EffectRef]trace.MatchState
		beside, done := db.sameSnapshot(ctx, paired, r.Token)
		if beside != nil {
			defer done()
			r.Run, states, r.Findings, err = loadRunBeside(ctx, tx, beside, id, fed)
		} else {
			r.Run, states, err = loadRunStates(ctx, tx, id, fed)
		}
		if err != nil {
			return err
		}
		if testHookAfterRunRead != nil {
			testHookAfterRunRead()
		}
		if beside == nil {
			if r.Findings, _, err = findings(ctx, tx, FindingFilter{ExecutionID: id}); err != nil {
				return err
			}
		}
		// The states of the run's own effects, read with them.
		r.States = make(map[trace.EffectRef]trace.MatchState, len(r.Run.Effects))
		for _, f := range r.Run.Effects {
			if st, ok := states[f.Ref()]; ok {
				r.States[f.Ref()] = st
			}
		}
		if orphans == nil {
			return nil
		}
		if w := orphans(r.Run, r.Findings); w.Limit > 0 {
			r.Orphans, err = orphanEffectsBetween(ctx, tx, w.From, w.To, w.Limit)
		}
		return err
	})
	return r, err
}

// sameSnapshot begins a second read transaction for a read admitted to
// hold two (paired) and keeps it only when it sees the state token names;
// otherwise, or when it cannot begin, the caller reads alone.
func (db *DB) sameSnapshot(ctx context.Context, paired bool, token ChangeToken) (querier, func()) {
	if !paired {
		return nil, nil
	}
	tx, err := db.read.DB.BeginTx(ctx, db.engine.ReadTx())
	if err != nil {
		return nil, nil
	}
	q := readTx{tx: tx, d: db.d}
	if seen, err := changeToken(ctx, q); err != nil || seen != token {
		tx.Rollback()
		return nil, nil
	}
	return q, func() { tx.Rollback() } // it only read
}

// KeyRead is everything that carried one idempotency key.
type KeyRead struct {
	// Attempts are every attempt, of any execution, that carried the key.
	Attempts []trace.Attempt
	// Runs are the executions of those attempts, whole: an attempt's
	// derived outcome needs its run.
	Runs     map[string]trace.Run
	Effects  []EffectRow
	Findings []trace.Finding
}

// ReadKey reads what carried key in one read transaction, in at most nine
// queries however many executions used it; of its effects, the first
// MaxPageSize.
func (db *DB) ReadKey(ctx context.Context, key string) (KeyRead, error) {
	var r KeyRead
	err := db.inReadTx(ctx, func(tx querier) error {
		var err error
		if r.Attempts, err = attemptsWithKey(ctx, tx, key); err != nil {
			return err
		}
		var ids []string
		seen := map[string]bool{}
		for _, a := range r.Attempts {
			if !seen[a.ExecutionID] {
				seen[a.ExecutionID] = true
				ids = append(ids, a.ExecutionID)
			}
		}
		r.Runs = map[string]trace.Run{}
		if len(ids) > 0 {
			fed, err := fedProviders(ctx, tx)
			if err != nil {
				return err
			}
			if r.Runs, err = loadRuns(ctx, tx, ids, fed); err != nil {
				return err
			}
		}
		if r.Effects, _, err = effects(ctx, tx, EffectFilter{Key: key, Limit: MaxPageSize}); err != nil {
			return err
		}
		r.Findings, _, err = findings(ctx, tx, FindingFilter{Key: key})
		return err
	})
	return r, err
}
