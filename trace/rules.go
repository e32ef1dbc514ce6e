package trace

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AuditRun applies every rule of the audit to one execution, except
// orphan_effect, which only the whole world can judge (see Audit).
// Findings come sorted as SortFindings sorts them.
func AuditRun(r Run, cfg Config) []Finding {
	ix := newEffectIndex(r)
	return auditRun(r, cfg, ix.stepEffects(), ix.unattributed())
}

func auditRun(r Run, cfg Config, stepEffects map[string][]Effect, unattributed []Effect) []Finding {
	au := newAuditor(r, cfg, stepEffects)
	au.gaps = Gaps(r, au.cfg)
	var fs []Finding
	for _, s := range r.Steps {
		fs = append(fs, au.stepFindings(s)...)
	}
	fs = append(fs, au.keyCollisions(nil)...)
	fs = append(fs, unattributedFindings(r, unattributed)...)
	fs = append(fs, au.keysSharedAcrossExecutions(nil)...)
	fs = append(fs, outboxFindings(r, identicalGroups(r, stepOfEffects(stepEffects)))...)
	SortFindings(fs)
	return fs
}

func newAuditor(r Run, cfg Config, stepEffects map[string][]Effect) auditor {
	return auditor{run: r, cfg: cfg.withDefaults(), effects: stepEffects, peers: peersByKey(r.Peers), byKey: effectsByKey(r.Effects),
		spanAttempt: spanAttempts(r)}
}

// spanAttempts finds the tool attempt a span belongs to (spanTree's
// toolAttempt), building the tree when first asked: only an effect
// carrying a key needs it.
func spanAttempts(r Run) func(spanID string) (Attempt, bool) {
	var tree *spanTree
	return func(spanID string) (Attempt, bool) {
		if spanID == "" {
			return Attempt{}, false
		}
		if tree == nil {
			t := newSpanTree(r)
			tree = &t
		}
		return tree.toolAttempt(spanID)
	}
}

// effectsByKey indexes effects by their key, in their order, when first
// asked: only a deduplicated attempt needs it.
func effectsByKey(effects []Effect) func(string) []Effect {
	var byKey map[string][]Effect
	return func(k string) []Effect {
		if byKey == nil {
			byKey = map[string][]Effect{}
			for _, e := range effects {
				if e.IdempotencyKey != "" {
					byKey[e.IdempotencyKey] = append(byKey[e.IdempotencyKey], e)
				}
			}
		}
		return byKey[k]
	}
}

// stepFindings applies the rules that judge one step.
func (au auditor) stepFindings(s Step) []Finding {
	stepRules := [...]func(Step) (Finding, bool){
		au.duplicateEffect,
		au.reexecutedAfterCrash,
		au.missingEffect,
		au.unkeyedRetry,
		au.unstableKey,
		au.retryBeyondRetention,
		au.unsafeRetried,
		au.suppressedAsRepeat,
	}
	var fs []Finding
	for _, rule := range stepRules {
		if f, ok := rule(s); ok {
			fs = append(fs, f)
		}
	}
	return fs
}

// keyFindings applies the rules that judge one key to the keys in only,
// or to every key when only is nil, by key.
func (au auditor) keyFindings(only map[string]bool) map[string][]Finding {
	out := map[string][]Finding{}
	for _, f := range au.keyCollisions(only) {
		out[f.IdempotencyKey] = append(out[f.IdempotencyKey], f)
	}
	for _, f := range au.keysSharedAcrossExecutions(only) {
		out[f.IdempotencyKey] = append(out[f.IdempotencyKey], f)
	}
	return out
}

// OrphanFinding is the orphan_effect warning for an effect that matched no
// attempt of any execution.
func OrphanFinding(e Effect) Finding {
	details := []string{"no key"}
	if e.IdempotencyKey != "" {
		details[0] = "key " + e.IdempotencyKey
	}
	if e.Target != "" {
		details = append(details, "target "+e.Target)
	}
	if e.ExecutionID != "" || e.StepID != "" {
		details = append(details, "named "+strings.TrimSpace(e.ExecutionID+" "+e.StepID))
	}
	return Finding{
		Rule:           RuleOrphanEffect,
		Severity:       Severities[RuleOrphanEffect],
		ExecutionID:    e.ExecutionID,
		StepID:         e.StepID,
		Effects:        []EffectRef{e.Ref()},
		IdempotencyKey: e.IdempotencyKey,
		Message: fmt.Sprintf("%s %s matches no attempt of any execution (%s)",
			e.Provider, e.ID, strings.Join(details, ", ")),
	}
}

// unattributedFindings are the orphan_effect warnings for the effects of
// the run's trace that belong to no step. Each names the span its request
// came from and what is wrong above it: no span up to the root is a tool
// call oncetrace recognises (a dialect it does not read), or a span on the
// way up never arrived (an SDK that never exports a failed tool call's
// span does this).
func unattributedFindings(r Run, unattributed []Effect) []Finding {
	if len(unattributed) == 0 {
		return nil
	}
	byID := make(map[string]Span, len(r.Spans))
	for _, sp := range r.Spans {
		byID[sp.SpanID] = sp
	}
	fs := make([]Finding, 0, len(unattributed))
	for _, e := range unattributed {
		from := "span " + e.SpanID
		if sp, ok := byID[e.SpanID]; ok && sp.Name != "" {
			from = fmt.Sprintf("span %s (%q)", e.SpanID, sp.Name)
		}
		why := "no span above it is a tool call oncetrace recognises, so which step sent it is unknown " +
			"(a framework whose span dialect is not mapped: docs/otlp.md, serve --span-map)"
		// The walk up ends at the root, which is the execution and no span
		// of the run. A missing span right above an HTTP call (or the
		// effect's own span missing) is a tool call that never arrived; one
		// above a context span is taken for that root.
		below := RoleHTTP
		for cur, depth := e.SpanID, 0; cur != "" && depth < maxSpanDepth; depth++ {
			sp, ok := byID[cur]
			if !ok {
				if cur == e.SpanID {
					why = "that span never arrived, so which step sent it is unknown " +
						"(an SDK that never exports a failed tool call's span does this)"
				} else if below == RoleHTTP {
					why = fmt.Sprintf("the span above it, %s, never arrived, so which step sent it is unknown "+
						"(an SDK that never exports a failed tool call's span does this)", cur)
				}
				break
			}
			below, cur = sp.Role, sp.ParentSpanID
		}
		fs = append(fs, Finding{
			Rule:           RuleOrphanEffect,
			Severity:       Severities[RuleOrphanEffect],
			ExecutionID:    r.Execution.ID,
			Effects:        []EffectRef{e.Ref()},
			IdempotencyKey: e.IdempotencyKey,
			Message:        fmt.Sprintf("%s %s was sent from %s of this execution's trace, but %s", e.Provider, e.ID, from, why),
		})
	}
	return fs
}

// CriticalCount counts the critical findings; an execution is clean when
// it is zero.
func CriticalCount(fs []Finding) int {
	n := 0
	for _, f := range fs {
		if f.Severity == SeverityCritical {
			n++
		}
	}
	return n
}

// Rank orders severities most severe first: critical 0, warning 1,
// anything else after.
func (s Severity) Rank() int {
	switch s {
	case SeverityCritical:
		return 0
	case SeverityWarning:
		return 1
	}
	return 2
}

// SortFindings orders findings critical first, then by rule, execution,
// step, key and first effect, ids in natural order (CompareNatural), so
// that the same trace always reads the same.
func SortFindings(fs []Finding) {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		ea, eb := firstEffect(a), firstEffect(b)
		return cmp.Or(
			cmp.Compare(a.Severity.Rank(), b.Severity.Rank()),
			cmp.Compare(a.Rule, b.Rule),
			CompareNatural(a.ExecutionID, b.ExecutionID),
			CompareNatural(a.StepID, b.StepID),
			CompareNatural(a.IdempotencyKey, b.IdempotencyKey),
			cmp.Compare(ea.Provider, eb.Provider),
			CompareNatural(ea.ID, eb.ID),
		)
	})
}

// auditor holds what several rules of one run's audit share, computed once.
type auditor struct {
	run     Run
	cfg     Config
	effects map[string][]Effect // StepEffects of the run
	gaps    []Gap
	peers   peerIndex
	byKey   func(string) []Effect // the run's effects with a key, in the run's order
	// spanAttempt is the tool attempt a span of the run's traces belongs to.
	spanAttempt func(spanID string) (Attempt, bool)
}

func (au auditor) finding(rule Rule, s Step) Finding {
	return Finding{Rule: rule, Severity: Severities[rule], ExecutionID: au.run.Execution.ID, StepID: s.ID}
}

// executed returns the attempts that invoked the tool: a replay answered
// from the journal did not, so it is never a retry. Callers only read it:
// without a replay it is the step's own slice, not a copy.
func (au auditor) executed(s Step) []Attempt {
	if !slices.ContainsFunc(s.Attempts, replayed) {
		return s.Attempts
	}
	var out []Attempt
	for _, a := range s.Attempts {
		if !replayed(a) {
			out = append(out, a)
		}
	}
	return out
}

func (au auditor) duplicateEffect(s Step) (Finding, bool) {
	es := au.effects[s.ID]
	if len(es) < 2 {
		return Finding{}, false
	}
	f := au.finding(RuleDuplicateEffect, s)
	f.Attempts = numbers(s.Attempts)
	f.Effects = refs(es)
	f.IdempotencyKey = cmp.Or(stepKey(s), es[0].IdempotencyKey)
	f.Message = fmt.Sprintf("%s caused %d effects for one logical step: %s", stepLabel(s), len(es), effectList(es))
	green := len(s.Attempts) > 0
	for _, a := range s.Attempts {
		// An attempt without an outcome derives lost or running: neither.
		if a.Outcome != OutcomeOK && !replayed(a) {
			green = false
		}
	}
	if green {
		f.Message += " — a green duplicate: every attempt looks successful"
	}
	return f, true
}

func (au auditor) reexecutedAfterCrash(s Step) (Finding, bool) {
	if !possiblyWrites(s) {
		return Finding{}, false
	}
	for _, g := range au.gaps {
		if g.Kind != GapCrash {
			continue
		}
		var before, after []int
		for _, a := range s.Attempts {
			switch {
			case a.StartedAt.IsZero():
			case !a.StartedAt.After(g.Start):
				before = append(before, a.Number)
			case !a.StartedAt.Before(g.End) && !replayed(a):
				after = append(after, a.Number)
			}
		}
		if len(before) == 0 || len(after) == 0 {
			continue
		}
		why := "an attempt before it never finished"
		if g.WorkerBefore != "" && g.WorkerAfter != "" && g.WorkerBefore != g.WorkerAfter {
			why = "worker " + g.WorkerBefore + " → " + g.WorkerAfter
		}
		f := au.finding(RuleReexecutedAfterCrash, s)
		f.Attempts = sortedInts(append(before, after...))
		f.Effects = refs(au.effects[s.ID])
		f.IdempotencyKey = stepKey(s)
		f.Message = fmt.Sprintf("%s ran again after a %s crash gap (%s): %s before it, %s after it, not replayed from a recorded result",
			stepLabel(s), humanDuration(g.End.Sub(g.Start)), why, attemptsPhrase(before), attemptsPhrase(after)) + unknownClassNote(s)
		return f, true
	}
	return Finding{}, false
}

func (au auditor) missingEffect(s Step) (Finding, bool) {
	provider := s.ProviderName()
	if s.Class() != EffectWrite || provider == "" || !au.run.FedProviders[provider] ||
		len(s.Attempts) == 0 || len(au.effects[s.ID]) > 0 {
		return Finding{}, false
	}
	final := s.Attempts[0]
	for _, a := range s.Attempts {
		if a.Number > final.Number {
			final = a
		}
	}
	// A deduplicated answer is a stored response: its effect may predate
	// the trace, so its absence proves nothing.
	if final.Outcome != OutcomeOK || final.Deduplicated { // a derived outcome is never ok
		return Finding{}, false
	}
	f := au.finding(RuleMissingEffect, s)
	f.Attempts = []int{final.Number}
	f.IdempotencyKey = final.IdempotencyKey
	f.Message = fmt.Sprintf("%s ended ok at attempt %d, but the outbox of %s, which is being fed, holds no effect for it",
		stepLabel(s), final.Number, provider)
	return f, true
}

func (au auditor) unkeyedRetry(s Step) (Finding, bool) {
	if !possiblyWrites(s) {
		return Finding{}, false
	}
	tries := au.executed(s)
	if len(tries) < 2 {
		return Finding{}, false
	}
	received := au.receivedKeys(s)
	var unkeyed []int
	for _, a := range tries {
		if a.IdempotencyKey == "" && received[a.Number] == "" {
			unkeyed = append(unkeyed, a.Number)
		}
	}
	if len(unkeyed) == 0 {
		return Finding{}, false
	}
	f := au.finding(RuleUnkeyedRetry, s)
	f.Attempts = numbers(tries)
	f.IdempotencyKey = stepKey(s)
	f.Message = fmt.Sprintf("%s was attempted %d times and %s carried no idempotency key — the receiving API cannot tell a retry from a new request",
		stepLabel(s), len(tries), attemptsPhrase(unkeyed)) + unknownClassNote(s)
	return f, true
}

// receivedKeys are the keys the provider received from the step's
// attempts, by attempt number: an effect's key, for the attempt its
// request's span belongs to (an HTTP instrumentation does not record the
// headers of a request that failed, but the feed saw them).
func (au auditor) receivedKeys(s Step) map[int]string {
	var out map[int]string
	for _, e := range au.effects[s.ID] {
		if e.IdempotencyKey == "" {
			continue
		}
		if a, ok := au.spanAttempt(e.SpanID); ok && a.StepID == s.ID {
			if out == nil {
				out = map[int]string{}
			}
			out[a.Number] = e.IdempotencyKey
		}
	}
	return out
}

// unstableKey reports a step whose attempts sent different keys: as their
// spans say, and as the feeds recorded them on the requests the provider
// received (an effect's key, joined to its attempt through trace context),
// since an HTTP instrumentation does not record the headers of a request
// that failed.
func (au auditor) unstableKey(s Step) (Finding, bool) {
	var keys []string
	byKey := map[string][]int{}
	fromOutbox := map[string]bool{}
	add := func(k string, number int) {
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		if number > 0 && !slices.Contains(byKey[k], number) {
			byKey[k] = append(byKey[k], number)
		}
	}
	for _, a := range s.Attempts {
		if a.IdempotencyKey != "" {
			add(a.IdempotencyKey, a.Number)
		}
	}
	for _, e := range au.effects[s.ID] {
		if e.IdempotencyKey == "" {
			continue
		}
		if _, sent := byKey[e.IdempotencyKey]; !sent {
			fromOutbox[e.IdempotencyKey] = true
		}
		n := 0
		if a, ok := au.spanAttempt(e.SpanID); ok && a.StepID == s.ID {
			n = a.Number
		}
		add(e.IdempotencyKey, n)
	}
	if len(keys) < 2 {
		return Finding{}, false
	}
	var parts []string
	var carriers []int
	for _, k := range keys {
		part := k
		switch {
		case len(byKey[k]) > 0 && fromOutbox[k]:
			part += fmt.Sprintf(" (%s, as the provider received it)", attemptsPhrase(byKey[k]))
		case len(byKey[k]) > 0:
			part += fmt.Sprintf(" (%s)", attemptsPhrase(byKey[k]))
		default:
			part += " (as the provider received it)"
		}
		parts = append(parts, part)
		carriers = append(carriers, byKey[k]...)
	}
	f := au.finding(RuleUnstableKey, s)
	f.Attempts = sortedInts(carriers)
	f.IdempotencyKey = keys[0]
	f.Message = fmt.Sprintf("%s sent %d different idempotency keys across its attempts: %s — the key keyed the attempt, not the intent",
		stepLabel(s), len(keys), strings.Join(parts, ", "))
	return f, true
}

func (au auditor) retryBeyondRetention(s Step) (Finding, bool) {
	var first time.Time
	for _, a := range s.Attempts {
		if !a.StartedAt.IsZero() && (first.IsZero() || a.StartedAt.Before(first)) {
			first = a.StartedAt
		}
	}
	var late []int
	var latest time.Duration
	for _, a := range au.executed(s) {
		if a.StartedAt.IsZero() {
			continue
		}
		if d := a.StartedAt.Sub(first); d > au.cfg.KeyRetention {
			late = append(late, a.Number)
			latest = max(latest, d)
		}
	}
	if len(late) == 0 {
		return Finding{}, false
	}
	f := au.finding(RuleRetryBeyondRetention, s)
	f.Attempts = sortedInts(late)
	f.IdempotencyKey = stepKey(s)
	f.Message = fmt.Sprintf("%s was retried %s after its first attempt (%s), beyond the %s key retention — the receiving API may have forgotten the key",
		stepLabel(s), humanDuration(latest), attemptsPhrase(late), humanDuration(au.cfg.KeyRetention))
	return f, true
}

func (au auditor) unsafeRetried(s Step) (Finding, bool) {
	if s.Class() != EffectUnsafe {
		return Finding{}, false
	}
	tries := au.executed(s)
	if len(tries) < 2 {
		return Finding{}, false
	}
	f := au.finding(RuleUnsafeRetried, s)
	f.Attempts = numbers(tries)
	f.Effects = refs(au.effects[s.ID])
	f.IdempotencyKey = stepKey(s)
	f.Message = fmt.Sprintf("%s is unsafe to repeat but was attempted %d times (%s) — it should fail loudly and escalate instead",
		stepLabel(s), len(tries), attemptsPhrase(numbers(tries)))
	return f, true
}

// keyCarrier is one attempt that sent a key, as key_collision compares it.
type keyCarrier struct {
	label    string // the step, as a message names it
	stepID   string
	own      bool // an attempt of this run rather than a peer
	number   int
	args     json.RawMessage
	provider string
}

// keyCollisions reports each key of the run that was sent, here or by a
// peer execution, by different steps or with different arguments: a key
// derived from the intent cannot do either.
func (au auditor) keyCollisions(only map[string]bool) []Finding {
	var keys []string
	byKey := map[string][]keyCarrier{}
	for _, s := range au.run.Steps {
		label := ""
		for _, a := range s.Attempts {
			k := a.IdempotencyKey
			if k == "" || only != nil && !only[k] {
				continue
			}
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			if label == "" {
				label = stepLabel(s)
			}
			byKey[k] = append(byKey[k], keyCarrier{label, s.ID, true, a.Number, a.Args, a.Provider})
		}
	}
	for _, p := range au.sortedPeers() {
		k := p.IdempotencyKey
		if _, ok := byKey[k]; !ok || p.ExecutionID == au.run.Execution.ID {
			continue // not a key of this run, or an attempt already counted above
		}
		label := strings.TrimSpace(p.ExecutionID + " " + p.StepID)
		if p.Tool != "" {
			label += " (" + p.Tool + ")"
		}
		byKey[k] = append(byKey[k], keyCarrier{label, p.StepID, false, p.Number, p.Args, p.Provider})
	}

	// A receiving API keeps its own keys (sentKey): the carriers of one key
	// are compared within each provider they name, a carrier naming none
	// with every provider.
	atProvider := func(cs []keyCarrier) [][]keyCarrier {
		var providers []string
		for _, c := range cs {
			if c.provider != "" && !slices.Contains(providers, c.provider) {
				providers = append(providers, c.provider)
			}
		}
		if len(providers) < 2 {
			return [][]keyCarrier{cs}
		}
		slices.Sort(providers)
		out := make([][]keyCarrier, 0, len(providers))
		for _, p := range providers {
			var group []keyCarrier
			for _, c := range cs {
				if sameProvider(c.provider, p) {
					group = append(group, c)
				}
			}
			out = append(out, group)
		}
		return out
	}
	var fs []Finding
	for _, k := range keys {
		for _, cs := range atProvider(byKey[k]) {
			if f, ok := keyCollision(au.run.Execution.ID, k, cs); ok {
				fs = append(fs, f)
				break // one finding a key
			}
		}
	}
	return fs
}

// keyCollision judges the carriers of key k at one provider.
func keyCollision(executionID, k string, cs []keyCarrier) (Finding, bool) {
	stepsDiffer, argsDiffer := false, false
	var args json.RawMessage
	var labels []string
	stepID := ""
	for _, c := range cs {
		// A step known only from a span without arguments (ADK exports a
		// failed tool call so) has no identity of its own to differ by.
		if len(c.args) > 0 || !DerivedStepID(c.stepID) {
			if stepID == "" {
				stepID = c.stepID
			} else if c.stepID != stepID {
				stepsDiffer = true
			}
		}
		// Empty args say nothing about the intent, so they conflict with nothing.
		if len(c.args) > 0 {
			if args == nil {
				args = c.args
			} else if !bytes.Equal(args, c.args) {
				argsDiffer = true
			}
		}
		if !slices.Contains(labels, c.label) {
			labels = append(labels, c.label)
		}
	}
	if !stepsDiffer && !argsDiffer {
		return Finding{}, false
	}
	var reasons []string
	if stepsDiffer {
		reasons = append(reasons, "different step ids")
	}
	if argsDiffer {
		reasons = append(reasons, "different args")
	}
	var attempts []int
	for _, c := range cs {
		if c.own && c.stepID == cs[0].stepID {
			attempts = append(attempts, c.number)
		}
	}
	f := Finding{
		Rule:           RuleKeyCollision,
		Severity:       Severities[RuleKeyCollision],
		ExecutionID:    executionID,
		StepID:         cs[0].stepID,
		Attempts:       sortedInts(attempts),
		IdempotencyKey: k,
		Message: fmt.Sprintf("idempotency key %s was sent by %s with %s — one key must name one intent",
			k, joinAnd(labels), joinAnd(reasons)),
	}
	return f, true
}

// sortedPeers are the run's peers by execution, step and number. Peers are a
// set, loaded in whatever order a store keeps them; sorted, messages read
// the same from a fresh audit and an incremental one.
func (au auditor) sortedPeers() []Attempt {
	return slices.SortedStableFunc(slices.Values(au.run.Peers), func(a, b Attempt) int {
		return cmp.Or(cmp.Compare(a.ExecutionID, b.ExecutionID), cmp.Compare(a.StepID, b.StepID), cmp.Compare(a.Number, b.Number))
	})
}

// keysSharedAcrossExecutions reports each key of the run that attempts of
// another execution sent to the same provider (sameProvider). A key derived
// from the arguments alone, not from the run, lets the provider take the
// next run's request for a repeat of this one. Each execution involved
// reports it from its side, from its own attempts and its peers.
func (au auditor) keysSharedAcrossExecutions(only map[string]bool) []Finding {
	var keys []string
	own := map[string][]string{} // key -> the providers of this run's attempts that sent it, in step order
	first := map[string]int{}    // key -> the index of the first step of the run that sent it
	for i, s := range au.run.Steps {
		for _, a := range s.Attempts {
			k := a.IdempotencyKey
			if k == "" || only != nil && !only[k] {
				continue
			}
			if _, ok := own[k]; !ok {
				keys = append(keys, k)
				first[k] = i
			}
			own[k] = append(own[k], a.Provider)
		}
	}
	peersOf := map[string][]Attempt{} // key -> the peers that sent it, sorted
	for _, p := range au.sortedPeers() {
		if _, ok := own[p.IdempotencyKey]; ok {
			peersOf[p.IdempotencyKey] = append(peersOf[p.IdempotencyKey], p)
		}
	}
	var fs []Finding
	for _, k := range keys {
		var others []string // executions that sent k to a provider this run sent it to
		var provider string
		for _, p := range own[k] {
			provider = cmp.Or(provider, p)
		}
		for _, p := range peersOf[k] {
			if p.ExecutionID == "" || p.ExecutionID == au.run.Execution.ID ||
				slices.Contains(others, p.ExecutionID) {
				continue
			}
			if slices.ContainsFunc(own[k], func(provider string) bool { return sameProvider(provider, p.Provider) }) {
				others = append(others, p.ExecutionID)
				provider = cmp.Or(provider, p.Provider)
			}
		}
		if len(others) == 0 {
			continue
		}
		s := au.run.Steps[first[k]]
		var attempts []int
		for _, a := range s.Attempts {
			if a.IdempotencyKey == k {
				attempts = append(attempts, a.Number)
			}
		}
		to := ""
		if provider != "" {
			to = " to " + provider
		}
		f := au.finding(RuleKeySharedAcrossExecutions, s)
		f.Attempts = sortedInts(attempts)
		f.IdempotencyKey = k
		f.Message = fmt.Sprintf("%s sent idempotency key %s%s, and %s sent it too — the key is not scoped to the run (next month's invoice mistaken for a repeat of this one)",
			stepLabel(s), k, to, executionsPhrase(others))
		fs = append(fs, f)
	}
	return fs
}

// suppressedAsRepeat reports a step that has no effect of its own and whose
// attempt was answered from a stored response (deduplicated) to a key whose
// every effect belongs to another execution (ownedByPeer): the provider took
// this run's request for a repeat of that one, so its intent never
// happened, and nothing in the trace says so.
func (au auditor) suppressedAsRepeat(s Step) (Finding, bool) {
	var attempts []int
	var answers []Effect
	var key string
	for _, a := range s.Attempts {
		if !a.Deduplicated || a.IdempotencyKey == "" {
			continue
		}
		if slices.ContainsFunc(au.effects[s.ID], func(e Effect) bool { return sameProvider(a.Provider, e.Provider) }) {
			continue // the step's own effect at that provider: the intent happened
		}
		var carried []Effect
		foreign := true
		for _, e := range au.byKey(a.IdempotencyKey) {
			if sentKey(a, e.IdempotencyKey, e.Provider) {
				carried = append(carried, e)
				foreign = foreign && au.peers.owns(au.run.Execution.ID, e)
			}
		}
		if len(carried) == 0 || !foreign {
			continue
		}
		attempts = append(attempts, a.Number)
		key = cmp.Or(key, a.IdempotencyKey)
		for _, e := range carried {
			if !slices.ContainsFunc(answers, func(x Effect) bool { return x.Ref() == e.Ref() }) {
				answers = append(answers, e)
			}
		}
	}
	if len(attempts) == 0 {
		return Finding{}, false
	}
	sortEffects(answers)
	var owners []string
	for _, e := range answers {
		if !slices.Contains(owners, e.ExecutionID) {
			owners = append(owners, e.ExecutionID)
		}
	}
	slices.Sort(owners)
	whose := "its only effect, " + effectList(answers) + ", belongs to"
	if len(answers) > 1 {
		whose = "its effects, " + effectList(answers) + ", belong to"
	}
	f := au.finding(RuleSuppressedAsRepeat, s)
	f.Attempts = sortedInts(attempts)
	f.Effects = refs(answers)
	f.IdempotencyKey = key
	f.Message = fmt.Sprintf("%s %s was answered from a stored response to key %s, but %s %s — the provider took this run's request for a repeat: its intent never happened, silently",
		stepLabel(s), attemptsPhrase(attempts), key, whose, executionsPhrase(owners))
	return f, true
}

// executionsPhrase reads "execution exec_A" or "executions exec_A and exec_B".
func executionsPhrase(ids []string) string {
	if len(ids) == 1 {
		return "execution " + ids[0]
	}
	return "executions " + joinAnd(ids)
}

// possiblyWrites: the retry rules judge write steps, and steps of a tool
// nobody classified, which may write.
func possiblyWrites(s Step) bool {
	c := s.Class()
	return c == EffectWrite || c == EffectUnknown
}

// unknownClassNote says, in a finding about an unclassified tool, that the
// audit assumed it may write.
func unknownClassNote(s Step) string {
	if s.Class() != EffectUnknown {
		return ""
	}
	return " (its tool is unclassified, so it is treated as possibly writing; set oncetrace.effect or serve --tool-class to classify it)"
}

// stepKey is the first key the step's attempts sent, the one findings cite.
func stepKey(s Step) string {
	for _, a := range s.Attempts {
		if a.IdempotencyKey != "" {
			return a.IdempotencyKey
		}
	}
	return ""
}

// stepLabel names a step as messages do: "step-4 (send_invoice_email)".
func stepLabel(s Step) string {
	tool := s.ToolName()
	if DerivedStepID(s.ID) && tool != "" {
		// A derived id is a hash; the finding's step_id still holds it.
		return tool
	}
	if tool != "" {
		return s.ID + " (" + tool + ")"
	}
	return s.ID
}

func numbers(as []Attempt) []int {
	var ns []int
	for _, a := range as {
		ns = append(ns, a.Number)
	}
	return sortedInts(ns)
}

func sortedInts(ns []int) []int {
	ns = slices.Clone(ns)
	slices.Sort(ns)
	return ns
}

func refs(es []Effect) []EffectRef {
	var out []EffectRef
	for _, e := range es {
		out = append(out, e.Ref())
	}
	return out
}

// effectList names effects as "mail-api msg_41bcc7, mail-api msg_6a0799".
func effectList(es []Effect) string {
	var parts []string
	for _, e := range es {
		parts = append(parts, e.Provider+" "+e.ID)
	}
	return strings.Join(parts, ", ")
}

// attemptsPhrase reads "attempt 1" or "attempts 1, 2".
func attemptsPhrase(ns []int) string {
	var parts []string
	for _, n := range sortedInts(ns) {
		parts = append(parts, strconv.Itoa(n))
	}
	if len(parts) == 1 {
		return "attempt " + parts[0]
	}
	return "attempts " + strings.Join(parts, ", ")
}

// joinAnd reads "a", "a and b", "a, b and c".
func joinAnd(parts []string) string {
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// humanDuration prints a duration without the noise of Duration.String:
// "24h" rather than "24h0m0s", "2m" rather than "2m0s".
func humanDuration(d time.Duration) string {
	s := d.Round(time.Millisecond).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
