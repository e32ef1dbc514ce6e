package derive

import (
	"sort"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// analysis is what materialise concluded.
type analysis struct {
	executions  []string
	newCritical []trace.Finding
	newlyFed    []string              // providers whose outbox got its first effect
	fed         []string              // every provider this commit stored an effect of
	runs        map[string]*cachedRun // for the writer's cache, once committed
	entities    []entityFold          // likewise
}

// materialise derives the rows of one commit (touched: entity -> the
// events it stored of it) in passes, each of which loads what it needs in
// batched queries, plans with a pure function of what it loaded, and
// applies the plan with a few store calls:
//
//   - number: the attempts of steps new to the store (planNumbers);
//   - fold: every touched entity refolded from all of its events
//     (planFold), so the result never depends on arrival order;
//   - adopt: spans that name no execution but their trace to the one
//     execution the trace's other spans and attempts name;
//   - attribute: effects to their executions, placeholders and stray
//     joins (tracePlaceholders, strayCandidates);
//   - audit: every execution whose findings the commit can change,
//     judged again (effectOwners, planSave).
//
// known is the writer's set of providers known to have effects; cache,
// when set, the writer's runs (runcache.go).
func materialise(tx *store.Tx, touched map[string][]trace.Event, known map[string]bool, cfg trace.Config, cache *runCache) (analysis, error) {
	d := &derivation{tx: tx, cache: cache, ensured: map[string]bool{}}
	entities := make([]string, 0, len(touched))
	for e := range touched {
		entities = append(entities, e)
	}
	sort.Strings(entities) // a fixed order keeps lock and write patterns stable
	all, err := entityEvents(tx, touched, cache)
	if err != nil {
		return analysis{}, err
	}
	numbered, err := d.number(entities, touched, all)
	if err != nil {
		return analysis{}, err
	}
	fold := planFold(entities, all, numbered, known, cache != nil)
	applied, err := d.applyFold(fold)
	if err != nil {
		return analysis{}, err
	}
	if err := d.adopt(fold); err != nil {
		return analysis{}, err
	}
	byTrace, err := d.attribute(fold)
	if err != nil {
		return analysis{}, err
	}
	if err := d.renumber(applied.renumber); err != nil {
		return analysis{}, err
	}
	out := analysis{fed: fold.providers, newlyFed: applied.newlyFed, entities: fold.cached}
	err = d.audit(&out, &fold.reach, byTrace, withProviders(known, fold.providers), cfg)
	return out, err
}

// derivation is one commit's derivation under way.
type derivation struct {
	tx      *store.Tx
	cache   *runCache // nil: every run read whole, nothing kept
	ensured map[string]bool
}

// ensure creates an execution an attempt or effect names, once a commit.
func (d *derivation) ensure(id string) error {
	if d.ensured[id] {
		return nil
	}
	d.ensured[id] = true
	return d.tx.EnsureExecution(id)
}

// withProviders is known and the providers a commit stored an effect of.
func withProviders(known map[string]bool, providers []string) map[string]bool {
	fed := make(map[string]bool, len(known)+len(providers))
	for p := range known {
		fed[p] = true
	}
	for _, p := range providers {
		fed[p] = true
	}
	return fed
}

func setList(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
