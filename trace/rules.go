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
	for _, e := range unattributed {
		fs = append(fs, unattributedFinding(r.Execution.ID, e))
	}
	fs = append(fs, au.keysSharedAcrossExecutions(nil)...)
	SortFindings(fs)
	return fs
}

func newAuditor(r Run, cfg Config, stepEffects map[string][]Effect) auditor {
	return auditor{run: r, cfg: cfg.withDefaults(), effects: stepEffects, peers: peersByKey(r.Peers), byKey: effectsByKey(r.Effects)}
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

// unattributedFinding is the orphan_effect warning for an effect of the
// run's trace that belongs to no step: the span that made its request is
// known, but no tool-call span above it ever arrived.
func unattributedFinding(executionID string, e Effect) Finding {
	return Finding{
		Rule:           RuleOrphanEffect,
		Severity:       Severities[RuleOrphanEffect],
		ExecutionID:    executionID,
		Effects:        []EffectRef{e.Ref()},
		IdempotencyKey: e.IdempotencyKey,
		Message: fmt.Sprintf("%s %s was sent from span %s of this execution's trace, but no tool call above that span was exported: "+
			"which step sent it is unknown (an SDK that never exports a failed tool call's span does this)", e.Provider, e.ID, e.SpanID),
	}
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
// step, key and first effect, so that the same trace always reads the same.
func SortFindings(fs []Finding) {
	firstEffect := func(f Finding) EffectRef {
		if len(f.Effects) == 0 {
			return EffectRef{}
		}
		return f.Effects[0]
	}
	slices.SortStableFunc(fs, func(a, b Finding) int {
		ea, eb := firstEffect(a), firstEffect(b)
		return cmp.Or(
			cmp.Compare(a.Severity.Rank(), b.Severity.Rank()),
			cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.ExecutionID, b.ExecutionID),
			cmp.Compare(a.StepID, b.StepID),
			cmp.Compare(a.IdempotencyKey, b.IdempotencyKey),
			cmp.Compare(ea.Provider, eb.Provider),
			cmp.Compare(ea.ID, eb.ID),
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
	f.Message = fmt.Sprintf("%s ended ok at attempt %d, but %s's outbox, which is being fed, holds no effect for it",
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
	var unkeyed []int
	for _, a := range tries {
		if a.IdempotencyKey == "" {
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

func (au auditor) unstableKey(s Step) (Finding, bool) {
	var keys []string
	byKey := map[string][]int{}
	for _, a := range s.Attempts {
		k := a.IdempotencyKey
		if k == "" {
			continue
		}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], a.Number)
	}
	if len(keys) < 2 {
		return Finding{}, false
	}
	var parts []string
	var carriers []int
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s (%s)", k, attemptsPhrase(byKey[k])))
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

// keyCollisions reports each key of the run that was sent, here or by a
// peer execution, by different steps or with different arguments: a key
// derived from the intent cannot do either.
func (au auditor) keyCollisions(only map[string]bool) []Finding {
	type carrier struct {
		label  string // the step, as a message names it
		stepID string
		own    bool // an attempt of this run rather than a peer
		number int
		args   json.RawMessage
	}
	var keys []string
	byKey := map[string][]carrier{}
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
			byKey[k] = append(byKey[k], carrier{label, s.ID, true, a.Number, a.Args})
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
		byKey[k] = append(byKey[k], carrier{label, p.StepID, false, p.Number, p.Args})
	}

	var fs []Finding
	for _, k := range keys {
		cs := byKey[k]
		stepsDiffer, argsDiffer := false, false
		var args json.RawMessage
		var labels []string
		for _, c := range cs {
			if c.stepID != cs[0].stepID {
				stepsDiffer = true
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
			continue
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
			ExecutionID:    au.run.Execution.ID,
			StepID:         cs[0].stepID,
			Attempts:       sortedInts(attempts),
			IdempotencyKey: k,
			Message: fmt.Sprintf("idempotency key %s was sent by %s with %s — one key must name one intent",
				k, joinAnd(labels), joinAnd(reasons)),
		}
		fs = append(fs, f)
	}
	return fs
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
	if tool := s.ToolName(); tool != "" {
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
