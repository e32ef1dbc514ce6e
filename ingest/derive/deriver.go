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
	// shared: other instances derive on the database too, each commit
	// after another's (store.Tx.LockDerivation); every commit then bumps
	// the derived generation, which is how the others' caches learn of
	// it, whatever sequence numbers its events took.
	shared bool
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
	return &Deriver{cfg: cfg, fed: fed, cache: newRunCache(), shared: db.Shared()}
}

// Check runs in every write transaction before Derive, once the
// transaction holds the derivation lock (store.Tx.LockDerivation): it
// empties what the Deriver keeps unless nothing but its writer changed the
// database since its last commit, and returns the log's last sequence
// number before firstSeq, the first this transaction stored.
func (d *Deriver) Check(tx *store.Tx, firstSeq int64) (lastSeq int64, err error) {
	lastSeq, others, err := d.cache.check(tx, firstSeq)
	if err == nil && others && d.shared {
		// Another instance may have stored a provider's first effect.
		var fed map[string]bool
		fed, err = tx.FedProviders()
		for p := range fed {
			d.fed[p] = true
		}
	}
	return lastSeq, err
}

// Derive refolds the touched entities (entity -> the events this commit
// stored of it) and re-audits what they can change, inside tx.
func (d *Deriver) Derive(tx *store.Tx, touched map[string][]trace.Event) (Derived, error) {
	a, err := materialise(tx, touched, d.fed, d.cfg, d.cache)
	if err == nil && d.shared {
		if err = tx.BumpGeneration(); err == nil {
			d.cache.generation++
		}
	}
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
