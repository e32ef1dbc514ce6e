package derive

import (
	"context"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// Deriver derives the rows of one writer's commits. It keeps what that
// writer learnt across them: the runs it analysed last (runcache.go) and
// the providers known to have effects (only ever growing). One goroutine
// alone may use it.
type Deriver struct {
	cfg   trace.Config
	fed   map[string]bool
	cache *runCache
}

// Derived is what one commit's derivation concluded.
type Derived struct {
	// Executions are those re-audited.
	Executions []string
	// NewCritical are critical findings that did not exist before.
	NewCritical []trace.Finding
	a           analysis
}

// New returns a Deriver for a writer of db, auditing by cfg.
func New(db *store.DB, cfg trace.Config) *Deriver {
	fed, err := db.FedProviders(context.Background())
	if err != nil {
		fed = map[string]bool{} // each provider is then looked up when it is first seen
	}
	return &Deriver{cfg: cfg, fed: fed, cache: newRunCache()}
}

// Check runs first in every write transaction: it empties what the Deriver
// keeps unless nothing but its writer changed the database since its last
// commit, and returns the log's last sequence number.
func (d *Deriver) Check(tx *store.Tx) (lastSeq int64, err error) {
	return d.cache.check(tx)
}

// Derive refolds the touched entities (entity -> the events this commit
// stored of it) and re-audits what they can change, inside tx.
func (d *Deriver) Derive(tx *store.Tx, touched map[string][]trace.Event) (Derived, error) {
	a, err := materialise(tx, touched, d.fed, d.cfg, d.cache)
	return Derived{Executions: a.executions, NewCritical: a.newCritical, a: a}, err
}

// Committed records that the transaction of derived committed, leaving
// the log's last sequence number at lastSeq.
func (d *Deriver) Committed(lastSeq int64, derived Derived) {
	d.cache.committed(lastSeq, derived.a.runs, derived.a.entities)
	for _, p := range derived.a.fed {
		d.fed[p] = true
	}
}

// RolledBack forgets what a transaction that did not commit patched into
// what the Deriver keeps.
func (d *Deriver) RolledBack() { d.cache.clear() }
