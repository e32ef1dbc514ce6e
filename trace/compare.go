package trace

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// StepMatch says how a compared row's steps were paired.
type StepMatch string

const (
	MatchByStepID   StepMatch = "step_id"   // both runs have a step of this id
	MatchByToolArgs StepMatch = "tool_args" // ids differ; the same tool with the same canonical args
	MatchOnlyInA    StepMatch = "only_in_a"
	MatchOnlyInB    StepMatch = "only_in_b"
)

// DiffKind names one way two paired steps differ.
type DiffKind string

const (
	DiffOnlyInA      DiffKind = "only_in_a"
	DiffOnlyInB      DiffKind = "only_in_b"
	DiffEffects      DiffKind = "effects"       // a different number of effects
	DiffTargets      DiffKind = "targets"       // as many effects, to other targets
	DiffAttempts     DiffKind = "attempts"      // a different number of executed attempts
	DiffUnkeyedRetry DiffKind = "unkeyed_retry" // one side retried without a key
	DiffKeyMissing   DiffKind = "key_missing"   // one side sent a key, the other none
	DiffKey          DiffKind = "key"           // both sent keys, not the same ones
	DiffOutcome      DiffKind = "outcome"       // the last attempts ended differently
	DiffDeduplicated DiffKind = "deduplicated"  // one side was answered from the API's key store
	DiffTool         DiffKind = "tool"
	DiffArgs         DiffKind = "args"
)

// Difference is one way two paired steps differ: Text reads in the row
// ("b: 2 emails, a: 1"), Summary names the step ("step-1 sends 2 emails in
// b, 1 in a").
type Difference struct {
	Kind    DiffKind `json:"kind"`
	Text    string   `json:"text"`
	Summary string   `json:"summary"`
}

// StepSide is one execution's side of a compared row.
type StepSide struct {
	Step Step
	// Outcomes are the attempts' derived outcomes (Run.Outcome), in
	// Step.Attempts order.
	Outcomes []Outcome
	// Effects are the step's effects (Run.StepEffects).
	Effects []Effect
	// Offset is when the step's first attempt started, after the run began.
	Offset time.Duration
}

// Outcome is the derived outcome of the step's last attempt, or "".
func (s *StepSide) Outcome() Outcome {
	if s == nil || len(s.Outcomes) == 0 {
		return ""
	}
	return s.Outcomes[len(s.Outcomes)-1]
}

// ComparedStep is one row of a comparison: a step of a, of b, or of both.
type ComparedStep struct {
	A, B        *StepSide // nil on the side the step did not run
	Match       StepMatch
	Differences []Difference
}

// Label names the row's step: its id (both ids when they differ) and tool.
func (c ComparedStep) Label() string {
	var ids []string
	var tool string
	for _, s := range []*StepSide{c.A, c.B} {
		if s == nil {
			continue
		}
		if !slices.Contains(ids, s.Step.ID) {
			ids = append(ids, s.Step.ID)
		}
		if tool == "" {
			tool = s.Step.ToolName()
		}
	}
	label := strings.Join(ids, " / ")
	if tool != "" {
		label += " (" + tool + ")"
	}
	return label
}

// Differs reports whether the row shows any difference.
func (c ComparedStep) Differs() bool { return len(c.Differences) > 0 }

// Comparison is two executions' steps aligned row by row.
type Comparison struct {
	Steps []ComparedStep
}

// Differing are the rows that differ, those whose effects differ first
// (the usual question is "why two emails?"), then in row order.
func (c Comparison) Differing() []ComparedStep {
	var out []ComparedStep
	for _, s := range c.Steps {
		if s.Differs() {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(x, y ComparedStep) int {
		return cmp.Compare(effectRank(x), effectRank(y))
	})
	return out
}

func effectRank(c ComparedStep) int {
	for _, d := range c.Differences {
		if d.Kind == DiffEffects {
			return 0
		}
	}
	return 1
}

// Summary is one sentence over the differing rows: "2 steps differ: step-1
// sends 2 emails in b, 1 in a; step-3 (notify) ran only in b."
func (c Comparison) Summary() string {
	diff := c.Differing()
	if len(diff) == 0 {
		return "No step differs."
	}
	parts := make([]string, len(diff))
	for i, s := range diff {
		parts[i] = s.Differences[0].Summary
	}
	noun := "steps differ"
	if len(diff) == 1 {
		noun = "step differs"
	}
	return fmt.Sprintf("%d %s: %s.", len(diff), noun, strings.Join(parts, "; "))
}

// Compare aligns the steps of a and b: first by step id, then the rest by
// tool and canonical args (an OpenTelemetry run's step ids come from its
// spans, so they never repeat across runs), earliest with earliest; what
// is left ran in one run only. Rows keep a's steps in time order; a step
// only b ran is inserted where it fell in time, measured from each run's
// start, so yesterday's and today's runs line up.
func Compare(a, b Run) Comparison {
	as, bs := sides(a), sides(b)
	pairOf := make([]int, len(as)) // index into bs, or -1
	taken := make([]bool, len(bs))
	matched := make([]StepMatch, len(as))
	byID := map[string]int{}
	for j, s := range bs {
		byID[s.Step.ID] = j
	}
	for i, s := range as {
		pairOf[i] = -1
		if j, ok := byID[s.Step.ID]; ok {
			pairOf[i], taken[j], matched[i] = j, true, MatchByStepID
		}
	}
	for i, s := range as {
		if pairOf[i] >= 0 {
			continue
		}
		for j, t := range bs {
			if !taken[j] && sameCall(s.Step, t.Step) {
				pairOf[i], taken[j], matched[i] = j, true, MatchByToolArgs
				break
			}
		}
	}

	var c Comparison
	for i := range as {
		row := ComparedStep{A: &as[i], Match: MatchOnlyInA}
		if j := pairOf[i]; j >= 0 {
			row.B, row.Match = &bs[j], matched[i]
		}
		row.Differences = differences(row)
		c.Steps = append(c.Steps, row)
	}
	for j := range bs {
		if taken[j] {
			continue
		}
		row := ComparedStep{B: &bs[j], Match: MatchOnlyInB}
		row.Differences = differences(row)
		at := len(c.Steps)
		for k, r := range c.Steps {
			if rowOffset(r) > bs[j].Offset {
				at = k
				break
			}
		}
		c.Steps = slices.Insert(c.Steps, at, row)
	}
	return c
}

// rowOffset is when a row's step started: a's side when it has one, since
// rows follow a's time.
func rowOffset(r ComparedStep) time.Duration {
	if r.A != nil {
		return r.A.Offset
	}
	return r.B.Offset
}

// sides are the run's steps with their outcomes, effects and offsets, in
// the order they started (then by id).
func sides(r Run) []StepSide {
	effects := r.StepEffects()
	start := r.Execution.StartedAt
	for _, s := range r.Steps {
		if t := stepStart(s); !t.IsZero() && (start.IsZero() || t.Before(start)) {
			start = t
		}
	}
	out := make([]StepSide, len(r.Steps))
	for i, s := range r.Steps {
		side := StepSide{Step: s, Effects: effects[s.ID]}
		for _, a := range s.Attempts {
			side.Outcomes = append(side.Outcomes, r.Outcome(a))
		}
		if t := stepStart(s); !t.IsZero() {
			side.Offset = t.Sub(start)
		}
		out[i] = side
	}
	slices.SortStableFunc(out, func(x, y StepSide) int {
		return cmp.Or(cmp.Compare(x.Offset, y.Offset), cmp.Compare(x.Step.ID, y.Step.ID))
	})
	return out
}

func stepStart(s Step) time.Time {
	var t time.Time
	for _, a := range s.Attempts {
		if !a.StartedAt.IsZero() && (t.IsZero() || a.StartedAt.Before(t)) {
			t = a.StartedAt
		}
	}
	return t
}

// stepArgs are the canonical args the step was called with: its first
// attempt's that has any.
func stepArgs(s Step) string {
	for _, a := range s.Attempts {
		if len(a.Args) > 0 {
			return string(a.Args)
		}
	}
	return ""
}

// sameCall reports whether two steps are the same call: the same tool with
// the same canonical args.
func sameCall(x, y Step) bool {
	return x.ToolName() != "" && x.ToolName() == y.ToolName() && stepArgs(x) == stepArgs(y)
}

// differences lists how the row's sides differ, the most telling first.
func differences(r ComparedStep) []Difference {
	label := r.Label()
	if r.B == nil {
		return []Difference{onlyIn(DiffOnlyInA, "a", label, r.A)}
	}
	if r.A == nil {
		return []Difference{onlyIn(DiffOnlyInB, "b", label, r.B)}
	}
	a, b := r.A, r.B
	var out []Difference
	add := func(k DiffKind, text, summary string) {
		out = append(out, Difference{Kind: k, Text: text, Summary: label + " " + summary})
	}
	one, many, verb := effectNouns(a, b)
	if na, nb := len(a.Effects), len(b.Effects); na != nb {
		add(DiffEffects, fmt.Sprintf("b: %s, a: %d", countOf(nb, one, many), na),
			fmt.Sprintf("%s %s in b, %d in a", verb, countOf(nb, one, many), na))
	} else if ta, tb := targets(a), targets(b); ta != tb {
		add(DiffTargets, fmt.Sprintf("targets differ: a %s, b %s", ta, tb), fmt.Sprintf("went to %s in b, %s in a", tb, ta))
	}
	if na, nb := executed(a), executed(b); na != nb {
		add(DiffAttempts, fmt.Sprintf("b: %s, a: %d", countOf(nb, "attempt", "attempts"), na),
			fmt.Sprintf("ran %s in b, %d in a", countOf(nb, "attempt", "attempts"), na))
	}
	ua, ub := unkeyedRetry(a), unkeyedRetry(b)
	ka, kb := stepKeys(a), stepKeys(b)
	switch {
	case ub && !ua:
		add(DiffUnkeyedRetry, "b retried without a key", "was retried without a key in b")
	case ua && !ub:
		add(DiffUnkeyedRetry, "a retried without a key", "was retried without a key in a")
	case len(ka) > 0 && len(kb) == 0:
		add(DiffKeyMissing, "b sent no key, a did", "sent no key in b")
	case len(kb) > 0 && len(ka) == 0:
		add(DiffKeyMissing, "a sent no key, b did", "sent no key in a")
	case !slices.Equal(ka, kb):
		add(DiffKey, "key differs: a "+strings.Join(ka, ", ")+", b "+strings.Join(kb, ", "), "sent another key in b")
	}
	if oa, ob := a.Outcome(), b.Outcome(); oa != ob {
		add(DiffOutcome, fmt.Sprintf("outcome differs: a %s, b %s", orNone(string(oa)), orNone(string(ob))),
			fmt.Sprintf("ended %s in b, %s in a", orNone(string(ob)), orNone(string(oa))))
	}
	if da, db := deduplicated(a), deduplicated(b); da != db {
		side := "b"
		if da {
			side = "a"
		}
		add(DiffDeduplicated, side+" was answered from the API's key store (deduplicated)", "was deduplicated by the API in "+side+" only")
	}
	if ta, tb := a.Step.ToolName(), b.Step.ToolName(); ta != tb {
		add(DiffTool, fmt.Sprintf("tool differs: a %s, b %s", orNone(ta), orNone(tb)), "called "+orNone(tb)+" in b, "+orNone(ta)+" in a")
	}
	if stepArgs(a.Step) != stepArgs(b.Step) {
		add(DiffArgs, "arguments differ", "was called with other arguments in b")
	}
	return out
}

func onlyIn(k DiffKind, side, label string, s *StepSide) Difference {
	d := Difference{Kind: k, Text: "only in " + side, Summary: label + " ran only in " + side}
	if n := len(s.Effects); n > 0 {
		one, many, _ := effectNouns(s, nil)
		d.Text += ": " + countOf(n, one, many)
		d.Summary += " (" + countOf(n, one, many) + ")"
	}
	return d
}

// effectNouns words the steps' effects: emails when their provider or
// tool is about mail, effects otherwise.
func effectNouns(sides ...*StepSide) (one, many, verb string) {
	for _, s := range sides {
		if s == nil {
			continue
		}
		names := []string{s.Step.ProviderName(), s.Step.ToolName()}
		for _, e := range s.Effects {
			names = append(names, e.Provider)
		}
		for _, n := range names {
			if strings.Contains(strings.ToLower(n), "mail") {
				return "email", "emails", "sends"
			}
		}
	}
	return "effect", "effects", "has"
}

func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func targets(s *StepSide) string {
	var ts []string
	for _, e := range s.Effects {
		ts = append(ts, orNone(e.Target))
	}
	slices.Sort(ts)
	return strings.Join(ts, ", ")
}

// executed counts the attempts that ran the tool: a replay from the
// journal did not.
func executed(s *StepSide) int {
	n := 0
	for _, o := range s.Outcomes {
		if o != OutcomeReplayed {
			n++
		}
	}
	return n
}

// unkeyedRetry reports whether the step ran more than once and some run of
// it sent no key.
func unkeyedRetry(s *StepSide) bool {
	if executed(s) < 2 {
		return false
	}
	for i, a := range s.Step.Attempts {
		if s.Outcomes[i] != OutcomeReplayed && a.IdempotencyKey == "" {
			return true
		}
	}
	return false
}

// stepKeys are the distinct keys the step's attempts sent, sorted.
func stepKeys(s *StepSide) []string {
	var ks []string
	for _, a := range s.Step.Attempts {
		if a.IdempotencyKey != "" && !slices.Contains(ks, a.IdempotencyKey) {
			ks = append(ks, a.IdempotencyKey)
		}
	}
	slices.Sort(ks)
	return ks
}

func deduplicated(s *StepSide) bool {
	return slices.ContainsFunc(s.Step.Attempts, func(a Attempt) bool { return a.Deduplicated })
}
