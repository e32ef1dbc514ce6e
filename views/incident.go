package views

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oncetrace/oncetrace/trace"
)

// AttemptRef names one attempt of a step.
type AttemptRef struct {
	StepID string
	Number int
}

// IncidentMarks are what the timeline marks from the critical findings: the
// attempts that caused an extra effect, and each duplicated effect's place
// among its step's effects.
type IncidentMarks struct {
	// Culprits are the attempts that caused an extra effect, with their
	// label ("caused duplicate").
	Culprits map[AttemptRef]string
	// EffectLabels place each duplicated effect: "1 of 2 · original",
	// "2 of 2 · extra".
	EffectLabels map[trace.EffectRef]string
}

// CulpritLabel marks an attempt that caused an extra effect.
const CulpritLabel = "caused duplicate"

// Incident is one incident (trace.Incidents) told in one sentence, with
// what it marks. The sentence's words are documented in docs/ui.md,
// "Incidents".
type Incident struct {
	Kind trace.IncidentKind `json:"kind"`
	// Rule is the incident's first critical rule; Rules all of them.
	// Both are empty for a held incident, which is not critical.
	Rule     trace.Rule   `json:"rule,omitempty"`
	Rules    []trace.Rule `json:"rules,omitempty"`
	Critical bool         `json:"critical"`
	StepID   string       `json:"step_id,omitempty"`
	// Parts are the sentence: plain text and links (ids cut in the
	// middle, ShortID, the whole id beside them).
	Parts []SentencePart `json:"-"`
	// Link is the execution page with the incident's attempt selected
	// (SelectAttemptURL), for its "copy link" button.
	Link     string           `json:"-"`
	Sentence string           `json:"sentence"`
	Culprits []int            `json:"culprits"`
	Effects  []IncidentEffect `json:"effects"`
}

// SentencePart is a run of an incident's sentence; with an Href it is a
// link. ID is set when the link's Text is an id cut short (ShortID): the
// whole id.
type SentencePart struct {
	Text, Href, Title, ID string
}

// IncidentEffect is an effect an incident names, with its place among its
// step's effects ("1 of 2 · original") when the step duplicated it.
type IncidentEffect struct {
	Provider string `json:"provider"`
	ID       string `json:"effect_id"`
	Label    string `json:"label,omitempty"`
	// Attempt is the attempt of the incident's step that caused it, when
	// one is shown to; 0 otherwise.
	Attempt int `json:"attempt,omitempty"`
}

// NewIncidents tells the run's critical findings (or, when it has none,
// the repeats its keys and journal held) in sentences. gaps are the run's.
func NewIncidents(run trace.Run, findings []trace.Finding, gaps []trace.Gap) []Incident {
	return newIncidents(run, findings, gaps, run.StepEffects())
}

// newIncidents is NewIncidents with the run's effects placed by step.
func newIncidents(run trace.Run, findings []trace.Finding, gaps []trace.Gap, stepEffects map[string][]trace.Effect) []Incident {
	var out []Incident
	for _, in := range trace.IncidentsPlaced(run, findings, gaps, stepEffects) {
		out = append(out, newIncident(run, in))
	}
	return out
}

// NewIncidentMarks collects what the incidents mark on the timeline.
func NewIncidentMarks(incidents []Incident) IncidentMarks {
	m := IncidentMarks{Culprits: map[AttemptRef]string{}, EffectLabels: map[trace.EffectRef]string{}}
	for _, in := range incidents {
		if !in.Critical {
			continue
		}
		for _, n := range in.Culprits {
			m.Culprits[AttemptRef{StepID: in.StepID, Number: n}] = CulpritLabel
		}
		for _, e := range in.Effects {
			if e.Label != "" {
				m.EffectLabels[trace.EffectRef{Provider: e.Provider, ID: e.ID}] = e.Label
			}
		}
	}
	return m
}

// Culprit is the attempt's culprit label, or "".
func (m IncidentMarks) Culprit(stepID string, n int) string {
	return m.Culprits[AttemptRef{StepID: stepID, Number: n}]
}

func newIncident(run trace.Run, in trace.Incident) Incident {
	v := Incident{Kind: in.Kind, Rules: in.Rules(), Critical: in.Kind != trace.IncidentHeld, StepID: in.Step.ID,
		Culprits: in.Culprits(), Effects: []IncidentEffect{}, Link: incidentLink(run.Execution.ID, in)}
	if len(v.Rules) > 0 {
		v.Rule = v.Rules[0]
	}
	if v.Culprits == nil {
		v.Culprits = []int{}
	}
	for i, ce := range in.Effects {
		e := IncidentEffect{Provider: ce.Provider, ID: ce.ID, Attempt: ce.Attempt}
		if in.Kind == trace.IncidentDuplicate {
			place := "extra"
			if i == 0 {
				place = "original"
			}
			e.Label = fmt.Sprintf("%d of %d · %s", i+1, len(in.Effects), place)
		}
		v.Effects = append(v.Effects, e)
	}
	t := teller{run: run, in: in, origin: runOrigin(run)}
	switch in.Kind {
	case trace.IncidentDuplicate:
		t.duplicate()
	case trace.IncidentHeld:
		t.held()
	case trace.IncidentRepeated:
		t.repeated()
	case trace.IncidentSuppressed:
		t.suppressed()
	default:
		t.text(capitalize(in.Findings[0].Message))
		if !strings.HasSuffix(in.Findings[0].Message, ".") {
			t.text(".")
		}
	}
	v.Parts = t.parts
	for _, p := range t.parts {
		v.Sentence += p.Text
	}
	return v
}

// teller builds one incident's sentence.
type teller struct {
	run    trace.Run
	in     trace.Incident
	origin time.Time
	parts  []SentencePart
}

func (t *teller) text(s string) {
	if n := len(t.parts); n > 0 && t.parts[n-1].Href == "" {
		t.parts[n-1].Text += s
		return
	}
	t.parts = append(t.parts, SentencePart{Text: s})
}

func (t *teller) link(text, href, title string) {
	t.parts = append(t.parts, SentencePart{Text: text, Href: href, Title: title})
}

// idLink links an id, its text cut in the middle (ShortID).
func (t *teller) idLink(id, href, title string) {
	t.parts = append(t.parts, SentencePart{Text: ShortID(id), Href: href, Title: title, ID: id})
}

func (t *teller) effectID(e trace.Effect) {
	t.idLink(e.ID, "#"+EffectAnchor(e.Provider, e.ID), e.Provider+" "+e.ID)
}

func (t *teller) key(k string) {
	t.idLink(k, KeyURL(k), "idempotency key "+k)
}

func (t *teller) attempt(n int) {
	t.link(fmt.Sprintf("attempt %d", n), "#"+AttemptAnchor(t.in.Step.ID, n), "")
}

// at is " at +1.11 s", or "" for an unknown time.
func (t *teller) at(when time.Time) string {
	if when.IsZero() || t.origin.IsZero() {
		return ""
	}
	return " at +" + Duration(when.Sub(t.origin))
}

// stepName is "step-1 (send_invoice_email)", or for a step id derived
// from a span its name (trace.StepNames: "send_invoice_email #2").
func (t *teller) stepName() string {
	tool := t.in.Step.ToolName()
	if len(t.in.Step.Attempts) > 0 && isTemporalActivity(t.in.Step.Attempts[0]) && tool != "" {
		return "activity " + tool + " (id " + t.in.Step.ID + ")"
	}
	if trace.DerivedStepID(t.in.Step.ID) && tool != "" {
		return trace.StepNames(t.run.Steps)[t.in.Step.ID]
	}
	if tool != "" {
		return t.in.Step.ID + " (" + tool + ")"
	}
	return t.in.Step.ID
}

// withReceivedKey is the attempt with the key the provider received from
// it when its span recorded none: the key an effect it caused carried.
func (t *teller) withReceivedKey(a trace.Attempt) trace.Attempt {
	if a.IdempotencyKey != "" {
		return a
	}
	for _, e := range t.in.Effects {
		if e.Attempt == a.Number && e.IdempotencyKey != "" {
			a.IdempotencyKey = e.IdempotencyKey
			return a
		}
	}
	return a
}

// head starts the sentence: "2 emails to jordan@acme.dev from step-1
// (send_invoice_email): ".
func (t *teller) head() {
	provider := t.in.Step.ProviderName()
	var targets []string
	for _, ce := range t.in.Effects {
		provider = ce.Provider
		if ce.Target != "" && !slices.Contains(targets, ce.Target) {
			targets = append(targets, ce.Target)
		}
	}
	n := len(t.in.Effects)
	s := plural(n, effectNoun(provider, false), effectNoun(provider, true))
	if len(targets) > 0 {
		// A message goes to someone; a charge or a record is for something.
		to := " for "
		if noun := effectNoun(provider, false); noun == "email" || noun == "message" {
			to = " to "
		}
		s += to + joinAnd(targets)
	}
	t.text(s + " from " + t.stepName() + ": ")
}

func (t *teller) attemptNumbered(n int) (trace.Attempt, bool) {
	for _, a := range t.in.Step.Attempts {
		if a.Number == n {
			return a, true
		}
	}
	return trace.Attempt{}, false
}

// workersDiffer: the step's attempts ran on more than one worker, so the
// sentence names them.
func (t *teller) workersDiffer() bool {
	var ws []string
	for _, a := range t.in.Step.Attempts {
		if a.Worker != "" && !slices.Contains(ws, a.Worker) {
			ws = append(ws, a.Worker)
		}
	}
	return len(ws) > 1
}

// attemptOn writes "attempt 2" or, when workers differ, "attempt 2 on pid-7".
func (t *teller) attemptOn(a trace.Attempt) {
	t.attempt(a.Number)
	if a.Worker != "" && t.workersDiffer() {
		t.text(" on " + a.Worker)
	}
}

// ending says how an attempt ended: "timed out at +1 s without seeing it".
func (t *teller) ending(a trace.Attempt) string {
	switch t.run.Outcome(a) {
	case trace.OutcomeTimeout:
		return " timed out" + t.at(a.EndedAt) + " without seeing it"
	case trace.OutcomeError:
		return " returned an error" + t.at(a.EndedAt)
	case trace.OutcomeLost:
		return " never finished"
	case trace.OutcomeRunning:
		return " is still running"
	case trace.OutcomeReplayed:
		return " was replayed from the journal" + t.at(a.StartedAt)
	}
	return " ended ok" + t.at(a.EndedAt)
}

// keyPhrase says which key a repeat carried, against the first attempt's.
func (t *teller) keyPhrase(a, first trace.Attempt) {
	a, first = t.withReceivedKey(a), t.withReceivedKey(first)
	switch {
	case a.IdempotencyKey == "":
		t.text(" without an idempotency key")
	case a.IdempotencyKey == first.IdempotencyKey && first.Number != a.Number:
		t.text(" with the same key ")
		t.key(a.IdempotencyKey)
	case first.IdempotencyKey != "" && first.Number != a.Number:
		t.text(" with a new key ")
		t.key(a.IdempotencyKey)
		t.text(" (" + fmt.Sprintf("attempt %d sent ", first.Number))
		t.key(first.IdempotencyKey)
		t.text(")")
	default:
		t.text(" with key ")
		t.key(a.IdempotencyKey)
	}
}

// gapBefore writes ", then 6.02 s passed with no process running, and"
// when the incident's crash gap lies between the two attempts.
func (t *teller) gapBefore(prev, next trace.Attempt) bool {
	g := t.in.Gap
	if g == nil || prev.StartedAt.After(g.Start) || next.StartedAt.Before(g.End) {
		return false
	}
	t.text(", then " + Duration(g.End.Sub(g.Start)) + " passed with no process running, and ")
	return true
}

// original writes "sandbox-mail delivered msg_689…b2902 at +3 ms, attempt 1
// timed out at +1 s without seeing it" and returns the attempt that caused
// the first effect, if one is known.
//
// A call an MCP proxy recorded is told as the protocol has it: "the MCP
// server invoices delivered msg_1 at +3 ms, the answer to tools/call #7
// was lost (attempt 1 timed out at +2 s)".
//
// A Temporal activity's attempt is told as Temporal has it: "attempt 1 on
// worker host-a:1234 timed out after 10 s (start-to-close) after mail-api
// delivered msg_1 at +3 ms".
func (t *teller) original() (trace.Attempt, bool) {
	first := t.in.Effects[0]
	a, ok := t.attemptNumbered(first.Attempt)
	if ok && isTemporalActivity(a) {
		t.attemptOnWorker(a)
		t.text(t.temporalEnding(a) + " after " + first.Provider + " " + effectVerb(first.Provider) + " ")
		t.effectID(first.Effect)
		t.text(t.at(first.At))
		return a, true
	}
	if ok && isMCPCall(a) {
		t.text("the MCP server ")
	}
	t.text(first.Provider + " " + effectVerb(first.Provider) + " ")
	t.effectID(first.Effect)
	t.text(t.at(first.At))
	if !ok {
		return a, false
	}
	t.text(", ")
	if id := mcpRequestID(a); id != "" && t.run.Outcome(a) == trace.OutcomeTimeout {
		t.text("the answer to tools/call #" + id + " was lost (")
		t.attemptOn(a)
		t.text(t.ending(a) + ")")
		return a, true
	}
	t.attemptOn(a)
	t.text(t.ending(a))
	return a, true
}

// isTemporalActivity: the attempt is a Temporal activity's, read from its
// workflow's history or its OpenTelemetry interceptor's RunActivity span
// (ingest/feed/temporal).
func isTemporalActivity(a trace.Attempt) bool { return a.RecognisedBy == "temporal" }

// attemptOnWorker writes "attempt 2 on worker host-b:5678", the worker
// always named: Temporal retries on whichever worker polls first.
func (t *teller) attemptOnWorker(a trace.Attempt) {
	t.attempt(a.Number)
	if a.Worker != "" {
		t.text(" on worker " + a.Worker)
	}
}

// temporalTimeouts are the timeouts a Temporal activity's failure names,
// however it spells them (TIMEOUT_TYPE_START_TO_CLOSE, "activity
// StartToClose timeout", "start-to-close").
var temporalTimeouts = []string{"start-to-close", "heartbeat", "schedule-to-start", "schedule-to-close"}

// temporalTimeout is the timeout an attempt's error names, or "".
func temporalTimeout(a trace.Attempt) string {
	squeeze := strings.NewReplacer("_", "", "-", "", " ", "")
	e := squeeze.Replace(strings.ToLower(a.Error))
	for _, kind := range temporalTimeouts {
		if strings.Contains(e, squeeze.Replace(kind)) {
			return kind
		}
	}
	return ""
}

// temporalEnding says how an activity's attempt ended: "timed out after
// 10 s (start-to-close)", "never finished (heartbeat timeout)".
func (t *teller) temporalEnding(a trace.Attempt) string {
	kind := temporalTimeout(a)
	switch t.run.Outcome(a) {
	case trace.OutcomeTimeout:
		s := " timed out"
		if !a.StartedAt.IsZero() && !a.EndedAt.IsZero() {
			s += " after " + Duration(a.EndedAt.Sub(a.StartedAt))
		}
		if kind != "" {
			s += " (" + kind + ")"
		}
		return s
	case trace.OutcomeLost:
		if kind != "" {
			return " never finished (" + kind + " timeout)"
		}
		return " never finished"
	case trace.OutcomeError:
		return " failed" + t.at(a.EndedAt)
	}
	return t.ending(a)
}

// isMCPCall: an MCP proxy recorded the attempt (ingest/feed/mcp).
func isMCPCall(a trace.Attempt) bool { return a.RecognisedBy == "mcp" }

// mcpRequestID is the JSON-RPC id of an MCP call whose error names it
// ("tools/call #7: …", as the proxy writes every error), else "".
func mcpRequestID(a trace.Attempt) string {
	rest, ok := strings.CutPrefix(a.Error, "tools/call #")
	if !isMCPCall(a) || !ok {
		return ""
	}
	id, _, ok := strings.Cut(rest, ": ")
	if !ok {
		return ""
	}
	return id
}

// duplicate tells a step that caused more than one effect.
func (t *teller) duplicate() {
	t.head()
	prev, known := t.original()
	first := prev
	for _, ce := range t.in.Effects[1:] {
		a, ok := t.attemptNumbered(ce.Attempt)
		switch {
		case !ok:
			t.text(", then ")
			t.effectID(ce.Effect)
			t.text(t.at(ce.At) + ", which no single attempt is shown to have caused")
			continue
		case known && a.Number == prev.Number:
			t.text(", and ")
			t.attempt(a.Number)
			t.text(" caused ")
			t.effectID(ce.Effect)
			t.text(t.at(ce.At) + " too")
			continue
		}
		if !known || !t.gapBefore(prev, a) {
			t.text(cmp.Or(map[bool]string{true: "; "}[isTemporalActivity(a)], ", "))
		}
		switch {
		case isTemporalActivity(a):
			t.text("Temporal retried it as ")
			t.attemptOnWorker(a)
			t.text(", which " + repeatVerb(ce.Provider))
		case isMCPCall(a):
			t.text("the client called the tool again (")
			t.attemptOn(a)
			t.text(") and the server " + repeatVerb(ce.Provider))
		default:
			t.attemptOn(a)
			t.text(" " + repeatVerb(ce.Provider))
		}
		if known {
			t.keyPhrase(a, first)
		} else {
			t.keyPhrase(a, a)
		}
		t.text(": ")
		t.effectID(ce.Effect)
		t.text(t.at(ce.At))
		prev, known = a, true
		if first.Number == 0 {
			first = a
		}
	}
	t.text(".")
}

// held tells a step whose repeat the provider's key store or the agent's
// journal answered, so that it caused one effect.
func (t *teller) held() {
	t.head()
	prev, known := t.original()
	first := prev
	for _, a := range t.in.Step.Attempts {
		if known && a.Number <= first.Number {
			continue
		}
		replayed := t.run.Outcome(a) == trace.OutcomeReplayed
		if !a.Deduplicated && !replayed {
			continue
		}
		if !known || !t.gapBefore(prev, a) {
			t.text(", ")
		}
		t.attemptOn(a)
		if replayed {
			t.text(" was replayed from the journal without calling the tool")
		} else {
			provider := cmp.Or(a.Provider, t.in.Step.ProviderName(), t.in.Effects[0].Provider)
			t.text(" " + repeatVerb(provider))
			if known {
				t.keyPhrase(a, first)
			} else {
				t.keyPhrase(a, a)
			}
			t.text(", and " + provider + " answered from its idempotency store without sending again")
		}
		prev, known = a, true
	}
	t.text(".")
}

// repeated tells a critical step that acted again but shows at most one
// effect.
func (t *teller) repeated() {
	t.text(t.stepName())
	switch t.in.Findings[0].Rule {
	case trace.RuleReexecutedAfterCrash:
		t.text(" ran again after a crash: ")
	case trace.RuleUnsafeRetried:
		t.text(" must not be retried, but was: ")
	case trace.RuleUnstableKey:
		t.text(" changed its idempotency key between attempts: ")
	default:
		t.text(": ")
	}
	var prev trace.Attempt
	for i, a := range t.in.Step.Attempts {
		if t.run.Outcome(a) == trace.OutcomeReplayed {
			continue
		}
		if i > 0 && !t.gapBefore(prev, a) {
			t.text(", ")
		}
		t.attemptOn(a)
		if i == 0 {
			if a.IdempotencyKey != "" {
				t.text(" sent key ")
				t.key(a.IdempotencyKey)
				t.text(" and")
			}
			t.text(t.ending(a))
		} else {
			t.text(" ran it again" + t.at(a.StartedAt))
			t.keyPhrase(a, t.in.Step.Attempts[0])
		}
		prev = a
	}
	provider := t.in.Step.ProviderName()
	switch len(t.in.Effects) {
	case 0:
		t.text("; no " + effectNoun(provider, false) + " of it is known, so whether it acted twice is unverified.")
	default:
		e := t.in.Effects[0]
		t.text("; only 1 " + effectNoun(e.Provider, false) + " of it is known, ")
		t.effectID(e.Effect)
		t.text(t.at(e.At) + ".")
	}
}

// suppressed tells a step the provider answered with another execution's
// effect.
func (t *teller) suppressed() {
	f := t.in.Findings[0]
	provider := cmp.Or(t.in.Step.ProviderName(), firstProvider(t.in.Effects))
	t.text("No " + effectNoun(provider, false) + " from " + t.stepName() + " was sent: ")
	for i, n := range f.Attempts {
		if i > 0 {
			t.text(" and ")
		}
		t.attempt(n)
	}
	t.text(" sent key ")
	t.key(f.IdempotencyKey)
	t.text(" and " + provider + " answered from its idempotency store with ")
	var owners []string
	for i, ce := range t.in.Effects {
		if i > 0 {
			t.text(", ")
		}
		t.effectID(ce.Effect)
		if ce.ExecutionID != "" && !slices.Contains(owners, ce.ExecutionID) {
			owners = append(owners, ce.ExecutionID)
		}
	}
	if len(owners) > 0 {
		t.text(", which belongs to ")
		for i, id := range owners {
			if i > 0 {
				t.text(" and ")
			}
			t.idLink(id, ExecutionURL(id), "execution "+id)
		}
	}
	t.text(": this run's " + effectNoun(provider, false) + " never went out.")
}

func firstProvider(es []trace.CausedEffect) string {
	if len(es) == 0 {
		return ""
	}
	return es[0].Provider
}

// runOrigin is where offsets count from: the execution's start, else its
// earliest known time.
func runOrigin(r trace.Run) time.Time {
	if !r.Execution.StartedAt.IsZero() {
		return r.Execution.StartedAt
	}
	var times []time.Time
	for _, s := range r.Steps {
		for _, a := range s.Attempts {
			times = append(times, a.StartedAt)
		}
	}
	for _, e := range r.Effects {
		times = append(times, e.At)
	}
	lo, _ := span(times)
	return lo
}

// effectVerb is what a provider did to create an effect.
func effectVerb(provider string) string {
	switch effectNoun(provider, false) {
	case "email", "message":
		return "delivered"
	case "charge":
		return "made charge"
	}
	return "recorded"
}

// repeatVerb is what a later attempt did again.
func repeatVerb(provider string) string {
	switch effectNoun(provider, false) {
	case "charge":
		return "charged again"
	case "effect":
		return "did it again"
	}
	return "sent it again"
}

func joinAnd(parts []string) string {
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// maxIncidentsShown is how many incident sentences show before "N more",
// so a run with many duplicates still shows its findings and timeline
// near the top.
const maxIncidentsShown = 3

func incidentClass(in Incident) string {
	if in.Critical {
		return "incident incident-critical"
	}
	return "incident incident-held"
}

// EffectPlace is an effect's place among its step's duplicated effects
// ("2 of 2 · extra") and the attempt that caused it, as the critical
// incidents tell them; "" and 0 when they do not name it.
func EffectPlace(incidents []Incident, ref trace.EffectRef) (label string, attempt int) {
	for _, in := range incidents {
		if !in.Critical {
			continue
		}
		for _, e := range in.Effects {
			if e.Provider == ref.Provider && e.ID == ref.ID {
				return e.Label, e.Attempt
			}
		}
	}
	return "", 0
}
