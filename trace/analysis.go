package trace

import (
	"encoding/json"
	"time"
)

// GapKind tells why nothing ran during a gap.
type GapKind string

const (
	GapCrash GapKind = "crash" // the worker changed across it, or an attempt before it never finished
	GapIdle  GapKind = "idle"
)

// Gap is an interval inside an execution where no attempt was running,
// longer than the configured threshold.
type Gap struct {
	Start        time.Time `json:"start"`
	End          time.Time `json:"end"`
	Kind         GapKind   `json:"kind"`
	WorkerBefore string    `json:"worker_before,omitempty"`
	WorkerAfter  string    `json:"worker_after,omitempty"`
}

// Seconds is the gap's length.
func (g Gap) Seconds() float64 { return g.End.Sub(g.Start).Seconds() }

// MarshalJSON adds the length in seconds, which readers want without
// parsing two timestamps.
func (g Gap) MarshalJSON() ([]byte, error) {
	type plain Gap
	return json.Marshal(struct {
		plain
		Seconds float64 `json:"seconds"`
	}{plain(g), g.Seconds()})
}

// MatchState says how an effect relates to the attempts of the executions.
type MatchState string

const (
	MatchMatched   MatchState = "matched"   // caused by exactly one logical step's attempts
	MatchDuplicate MatchState = "duplicate" // its logical step has more than one effect
	MatchOrphan    MatchState = "orphan"    // no attempt of any execution matches it
)

// The states' two orders, kept here and nowhere else.
//
// OutboxRank is a state's place in the outbox: duplicates first, then
// orphans, then the rest (matched, or no state yet). The stores keep it
// beside the state (effects.state_rank; the migration that added the
// column wrote this order, and a new row's default is an orphan's), so a
// state's page seeks in an index.
func (s MatchState) OutboxRank() int {
	switch s {
	case MatchDuplicate:
		return 0
	case MatchOrphan:
		return 1
	}
	return 2
}

// matchPrecedence is WorseState's order: a duplicate anywhere beats
// matched anywhere, which beats orphan, which beats no state.
var matchPrecedence = map[MatchState]int{"": 0, MatchOrphan: 1, MatchMatched: 2, MatchDuplicate: 3}

// World is a whole database's worth of traces, for audits that see
// everything at once (the CLI, tests).
type World struct {
	Executions []Execution
	Steps      []Step // every step of every execution, attempts filled
	Effects    []Effect
	Spans      []Span // model calls, HTTP client calls and context spans
}

// RunAnalysis is everything one run's audit derives, as AuditRun, Judge,
// EffectStates and Run.Counts give it.
type RunAnalysis struct {
	Findings []Finding
	Verdict  Verdict
	States   map[EffectRef]MatchState
	Counts   Counts
}

// AnalyseRun derives what AuditRun, Judge, EffectStates and Counts do,
// matching the run's effects to its steps once for all of them.
func AnalyseRun(r Run, cfg Config) RunAnalysis {
	ix := newEffectIndex(r)
	stepEffects, unattributed := ix.stepEffects(), ix.unattributed()
	findings := auditRun(r, cfg, stepEffects, unattributed)
	return RunAnalysis{
		Findings: findings,
		Verdict:  judge(r, findings, stepEffects, unattributed),
		States:   withOutboxDuplicates(effectStates(stepEffects, unattributed), identicalGroups(r, stepOfEffects(stepEffects))),
		Counts:   r.Counts(),
	}
}
