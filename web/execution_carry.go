package web

import (
	"maps"
	"slices"

	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// A kept model answers only at the change token it was read at, and every
// commit changes the token: under steady ingest of other executions a big
// page was read from the store at every load. Carrying moves a big model
// to the token after a commit that cannot have changed it, so that it
// keeps answering. "Cannot" is decided conservatively, from what the
// commit says of itself (writer.Commit) and what the model depends on
// besides its execution's own rows (modelDeps):
//
//   - the commit is the next one: its events' sequence numbers follow the
//     model's token without a gap, so no commit (another process's, one
//     the hub dropped) came between unseen; and a prune or re-derivation
//     changes the token's generation, which carrying never moves;
//   - the writer did not re-audit the execution (writer.Commit.Executions:
//     every execution whose findings the commit can change), no event
//     names it, and neither is true of an execution related to it: one
//     that shares a key or a trace with its attempts, spans or effects,
//     or that its effects name (the audits of every execution an effect
//     belongs to store its state: TestCarriedModelsMatchFreshReads found
//     that);
//   - no event is of one of its effects (an effect's events are folded:
//     one may change a field it does not carry), carries one of its keys
//     or traces, or brings an effect of a provider not yet fed;
//   - no effect is unanchored (no execution, and no key or a trace): such
//     an effect may be joined to any execution by its trace or target;
//   - the model shows no orphans: none of its own effects is an orphan or
//     unjudged, and it lists no nearby orphans (it is not unverified), as a
//     commit anywhere may match or add one.
//
// Only on a database this process alone derives (SQLite): on a shared one
// every commit bumps the generation. TestCarriedModelsMatchFreshReads
// compares carried models with fresh reads after random commits.

// carryMinItems is the smallest model carried: smaller ones are cheap to
// read again, and the checks cost a commit of the hub's time per model.
const carryMinItems = warmMinItems

// modelDeps is what a model depends on besides the rows of its execution.
type modelDeps struct {
	keys, traces map[string]bool // its attempts', spans' and effects'
	// related are the executions that share a key or a trace with it, its
	// key peers' and those its effects name or joined: an audit of one
	// may change what it shows (an effect's state is stored by the audits
	// of every execution it belongs to).
	related map[string]bool
	// effects are its effects: an event of one may change fields it does
	// not carry itself (an effect's events are folded into one).
	effects map[trace.EffectRef]bool
	fed     map[string]bool
}

// sharingFunc returns the executions that share one of the keys or
// traces (store.DB.ExecutionsSharing).
type sharingFunc func(keys, traces []string) ([]string, error)

// dependencies returns what x depends on, nil when it is smaller than
// minItems or shows orphans, or its related executions cannot be read.
// They are read after the model, so they may include ones that came
// since: more than needed, never less.
func dependencies(x views.Execution, minItems int, sharing sharingFunc) *modelDeps {
	if modelItems(x) < minItems {
		return nil
	}
	if _, _, limit := views.NearbyOrphanWindow(x.Run, x.Findings); limit > 0 {
		return nil
	}
	for _, f := range x.Run.Effects {
		if st := x.States[f.Ref()]; st != trace.MatchMatched && st != trace.MatchDuplicate {
			return nil
		}
	}
	keys, traces := store.RunKeysAndTraces(x.Run)
	for _, s := range x.Run.Spans {
		if s.IdempotencyKey != "" {
			keys[s.IdempotencyKey] = true
		}
	}
	for _, f := range x.Run.Effects {
		if f.IdempotencyKey != "" {
			keys[f.IdempotencyKey] = true
		}
		if f.TraceID != "" {
			traces[f.TraceID] = true
		}
	}
	shared, err := sharing(slices.Sorted(maps.Keys(keys)), slices.Sorted(maps.Keys(traces)))
	if err != nil {
		return nil
	}
	related := map[string]bool{}
	for _, id := range shared {
		related[id] = true
	}
	for _, p := range x.Run.Peers {
		related[p.ExecutionID] = true
	}
	effects := make(map[trace.EffectRef]bool, len(x.Run.Effects))
	for _, f := range x.Run.Effects {
		related[f.ExecutionID], related[f.JoinedExecutionID] = true, true
		effects[f.Ref()] = true
	}
	delete(related, "")
	return &modelDeps{keys: keys, traces: traces, related: related, effects: effects, fed: x.Run.FedProviders}
}

// commitTouch is what one commit's events name, once for every model.
type commitTouch struct {
	first, last int64
	contiguous  bool
	executions  map[string]bool // named by an event or re-audited
	keys        map[string]bool
	traces      map[string]bool
	providers   map[string]bool
	effects     map[trace.EffectRef]bool
	unanchored  bool
}

func touchOf(c writer.Commit) commitTouch {
	t := commitTouch{contiguous: len(c.Events) > 0, executions: map[string]bool{},
		keys: map[string]bool{}, traces: map[string]bool{}, providers: map[string]bool{}, effects: map[trace.EffectRef]bool{}}
	for _, id := range c.Executions {
		t.executions[id] = true
	}
	for i, e := range c.Events {
		if i == 0 {
			t.first = e.Seq
		} else if e.Seq != t.last+1 {
			t.contiguous = false
		}
		t.last = e.Seq
		ev := e.Event
		t.executions[ev.ExecutionID()] = true
		switch ev.Type {
		case trace.EventExecution:
		case trace.EventAttempt:
			t.keys[ev.Attempt.IdempotencyKey] = true
			t.traces[ev.Attempt.TraceID] = true
		case trace.EventSpan:
			t.keys[ev.Span.IdempotencyKey] = true
			t.traces[ev.Span.TraceID] = true
		case trace.EventEffect:
			f := ev.Effect
			t.keys[f.IdempotencyKey] = true
			t.traces[f.TraceID] = true
			t.providers[f.Provider] = true
			t.effects[f.Ref()] = true
			if f.ExecutionID == "" && (f.IdempotencyKey == "" || f.TraceID != "") {
				t.unanchored = true
			}
		default:
			t.unanchored = true // a kind this code does not know: nothing is carried
		}
	}
	delete(t.keys, "")
	delete(t.traces, "")
	return t
}

// leaves reports whether the commit cannot have changed the model of
// execution id with dependencies d.
func (t commitTouch) leaves(id string, d *modelDeps) bool {
	if d == nil || t.unanchored || t.executions[id] {
		return false
	}
	for p := range t.providers {
		if !d.fed[p] {
			return false
		}
	}
	for ref := range t.effects {
		if d.effects[ref] {
			return false
		}
	}
	return !meets(t.keys, d.keys) && !meets(t.traces, d.traces) && !meets(t.executions, d.related)
}

// meets reports whether two sets share a member, looking the smaller up in
// the larger.
func meets(a, b map[string]bool) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	for k := range a {
		if b[k] {
			return true
		}
	}
	return false
}

// carry moves the models commits cannot have changed to the token after
// each, in order; it returns how many moves it made. The hub calls it
// with every round's commits.
func (c *executionCache) carry(commits []writer.Commit) int {
	moved := 0
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.anyCarriable() {
		return 0 // the commits need no reading
	}
	for _, cm := range commits {
		t := touchOf(cm)
		if !t.contiguous {
			continue
		}
		for k, e := range c.entries {
			if e.deps != nil && e.token.Seq == t.first-1 && t.leaves(k.id, e.deps) {
				e.token.Seq = t.last
				moved++
			}
		}
	}
	return moved
}

// anyCarriable reports whether a kept model may be carried; c.mu is held.
func (c *executionCache) anyCarriable() bool {
	for _, e := range c.entries {
		if e.deps != nil {
			return true
		}
	}
	return false
}
