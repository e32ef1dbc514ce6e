package trace

import (
	"encoding/json"
	"time"
)

// EffectClass says how safe a step is to run again.
type EffectClass string

const (
	EffectRead   EffectClass = "read"   // safe to retry
	EffectWrite  EffectClass = "write"  // a side effect: needs a key or natural idempotency
	EffectUnsafe EffectClass = "unsafe" // must not be retried
	// EffectUnknown is a tool nobody classified (an OpenTelemetry tool span
	// without oncetrace.effect): the retry rules treat it as possibly writing.
	EffectUnknown EffectClass = "unknown"
)

// SideEffecting reports whether a step of the class may change the world:
// write, unsafe, unknown, or no class at all (a native event that did not
// say: nothing shows it only reads). Only read is known to change nothing.
func (c EffectClass) SideEffecting() bool {
	return c != EffectRead
}

// Outcome is how an attempt ended. Running and Lost are derived, never sent.
type Outcome string

const (
	OutcomeOK       Outcome = "ok"
	OutcomeError    Outcome = "error"
	OutcomeTimeout  Outcome = "timeout"
	OutcomeReplayed Outcome = "replayed" // answered from the journal; the tool was not called
	OutcomeRunning  Outcome = "running"  // derived: no end yet
	OutcomeLost     Outcome = "lost"     // derived: never finished, and the run moved on without it
)

// SentOutcomes are the outcomes an event may carry.
var SentOutcomes = []Outcome{OutcomeOK, OutcomeError, OutcomeTimeout, OutcomeReplayed}

// Status of an execution.
type Status string

const (
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Statuses lists every execution status.
var Statuses = []Status{StatusRunning, StatusCompleted, StatusFailed, StatusCancelled}

// Terminal reports whether the status ends an execution.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Execution is one run of an agent or workflow.
type Execution struct {
	ID   string `json:"execution_id"`
	Name string `json:"name,omitempty"`
	// NameSource says where an OpenTelemetry execution's name came from;
	// empty for a name sent natively. A name from a better source wins
	// (NameSources), whatever the order its spans arrive in.
	NameSource     string            `json:"name_source,omitempty"`
	Status         Status            `json:"status"`
	StartedAt      time.Time         `json:"started_at,omitzero"`
	EndedAt        time.Time         `json:"ended_at,omitzero"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Conflicts      []Conflict        `json:"conflicts,omitempty"`
}

// NameSources ranks where an execution's name may come from, best first:
// a native event, the agent's name, the Vercel AI SDK's function id,
// OpenLLMetry's entity name, the root span's name.
var NameSources = []string{"", "gen_ai.agent.name", "ai.telemetry.functionId", "traceloop.entity.name", "span"}

func nameRank(source string) int {
	for i, s := range NameSources {
		if s == source {
			return i
		}
	}
	return len(NameSources)
}

// Step is one logical unit of work of an execution, with its attempts in
// attempt order.
type Step struct {
	ExecutionID string      `json:"-"`
	ID          string      `json:"step_id"`
	Tool        string      `json:"tool,omitempty"`
	Effect      EffectClass `json:"effect,omitempty"`
	Provider    string      `json:"provider,omitempty"`
	Attempts    []Attempt   `json:"attempts"`
}

// Attempt is one try at a step.
type Attempt struct {
	ExecutionID    string          `json:"-"`
	StepID         string          `json:"-"`
	Number         int             `json:"attempt"`
	Tool           string          `json:"tool,omitempty"`
	Effect         EffectClass     `json:"effect,omitempty"`
	Provider       string          `json:"provider,omitempty"`
	Outcome        Outcome         `json:"outcome"` // as sent; empty while running
	Deduplicated   bool            `json:"deduplicated"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Worker         string          `json:"worker,omitempty"`
	StartedAt      time.Time       `json:"started_at,omitzero"`
	EndedAt        time.Time       `json:"ended_at,omitzero"`
	Args           json.RawMessage `json:"args,omitempty"` // canonical JSON
	Result         json.RawMessage `json:"result,omitempty"`
	Error          string          `json:"error,omitempty"`
	// TraceID and SpanID name the OpenTelemetry span the attempt came from.
	// An attempt with a SpanID and no number sent is identified by its span;
	// its number is its rank by start among its step's attempts.
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
	// RecognisedBy names the span-dialect rule that made a span this
	// attempt when it was not an entry for a known framework: "generic"
	// for the fallback that recognises tool spans in any namespace.
	RecognisedBy string     `json:"recognised_by,omitempty"`
	Conflicts    []Conflict `json:"conflicts,omitempty"`
}

// Finished reports whether the attempt carries a terminal outcome.
func (a Attempt) Finished() bool { return a.Outcome != "" }

// Effect is one side effect as the external system saw it.
type Effect struct {
	Provider       string    `json:"provider"`
	ID             string    `json:"effect_id"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	ExecutionID    string    `json:"execution_id,omitempty"`
	StepID         string    `json:"step_id,omitempty"`
	Target         string    `json:"target,omitempty"`
	At             time.Time `json:"at,omitzero"`
	// TraceID and SpanID are the W3C trace context of the request that
	// caused the effect: the trace names the execution, the span is the one
	// that made the request (usually an HTTP client span under a tool span).
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
	// Fingerprint is what was asked of the provider, as the feed that
	// recorded the effect saw it, without what differs between two sends
	// of one intent (keys, timestamps, nonces): two effects of one run at
	// one provider with one fingerprint asked for the same thing twice.
	// Summary says the same for humans ("email to jordan@acme.dev,
	// subject 'Your June invoice'").
	Fingerprint string `json:"fingerprint,omitempty"`
	Summary     string `json:"summary,omitempty"`
	// JoinedExecutionID is derived, never sent: the execution an effect of
	// a stray trace joined, because one of its tool attempts was in flight
	// with arguments naming the effect's target (InferAttempt); Inferred
	// says so in words.
	JoinedExecutionID string `json:"joined_execution_id,omitempty"`
	Inferred          string `json:"inferred,omitempty"`
	// StrayTrace is derived: the effect's trace is a stray one
	// (StrayTraces), whose context claims nothing by itself.
	StrayTrace bool       `json:"-"`
	Conflicts  []Conflict `json:"conflicts,omitempty"`
}

// Conflict records a terminal value that disagreed with the one kept.
// Both stay in the raw event log; the kept one is the earliest.
type Conflict struct {
	Field   string `json:"field"`
	Kept    string `json:"kept"`
	Other   string `json:"other"`
	EventID string `json:"event_id"`
}
