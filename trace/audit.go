package trace

import "time"

// Severity of a finding. An execution is clean when it has no critical one.
type Severity string

const (
	SeverityCritical Severity = "critical"
	SeverityWarning  Severity = "warning"
)

// Rule names an audit rule (docs/audit.md, "Rules").
type Rule string

const (
	RuleDuplicateEffect      Rule = "duplicate_effect"
	RuleReexecutedAfterCrash Rule = "reexecuted_after_crash"
	RuleOrphanEffect         Rule = "orphan_effect"
	RuleMissingEffect        Rule = "missing_effect"
	RuleUnkeyedRetry         Rule = "unkeyed_retry"
	RuleUnstableKey          Rule = "unstable_key"
	RuleKeyCollision         Rule = "key_collision"
	RuleRetryBeyondRetention Rule = "retry_beyond_retention"
	RuleUnsafeRetried        Rule = "unsafe_retried"
	// RuleKeySharedAcrossExecutions: two executions sent one key to one
	// provider, so the key is not scoped to the run.
	RuleKeySharedAcrossExecutions Rule = "key_shared_across_executions"
	// RuleSuppressedAsRepeat: a deduplicated answer whose only effect
	// belongs to another execution; this run's intent never happened.
	RuleSuppressedAsRepeat Rule = "suppressed_as_repeat"
)

// Severities gives each rule its severity.
var Severities = map[Rule]Severity{
	RuleDuplicateEffect:           SeverityCritical,
	RuleReexecutedAfterCrash:      SeverityCritical,
	RuleOrphanEffect:              SeverityWarning,
	RuleMissingEffect:             SeverityWarning,
	RuleUnkeyedRetry:              SeverityWarning,
	RuleUnstableKey:               SeverityCritical,
	RuleKeyCollision:              SeverityCritical,
	RuleRetryBeyondRetention:      SeverityWarning,
	RuleUnsafeRetried:             SeverityCritical,
	RuleKeySharedAcrossExecutions: SeverityWarning,
	RuleSuppressedAsRepeat:        SeverityCritical,
}

// EffectRef identifies an effect.
type EffectRef struct {
	Provider string `json:"provider"`
	ID       string `json:"effect_id"`
}

// Finding is one conclusion of the audit: the rule, what it involves, and a
// sentence a human reads.
type Finding struct {
	Rule           Rule        `json:"rule"`
	Severity       Severity    `json:"severity"`
	ExecutionID    string      `json:"execution_id,omitempty"` // empty for an orphan effect naming no execution
	StepID         string      `json:"step_id,omitempty"`
	Attempts       []int       `json:"attempts,omitempty"`
	Effects        []EffectRef `json:"effects,omitempty"`
	IdempotencyKey string      `json:"idempotency_key,omitempty"`
	Message        string      `json:"message"`
}

// Config holds the thresholds of the analysis.
type Config struct {
	// GapThreshold is the shortest idle interval reported as a gap.
	GapThreshold time.Duration
	// KeyRetention is how long a receiving API is assumed to keep keys.
	KeyRetention time.Duration
	// RepeatWindow is how close in time two identical effects with no run
	// id must be for repeated_effect (RepeatedOrphans).
	RepeatWindow time.Duration
}

// DefaultConfig is the analysis configuration when nothing is set.
var DefaultConfig = Config{GapThreshold: 5 * time.Second, KeyRetention: 24 * time.Hour, RepeatWindow: 10 * time.Minute}

// Run is everything the audit needs to judge one execution.
type Run struct {
	Execution Execution
	// Steps of the execution, in step order, each with its attempts by number.
	Steps []Step
	// Effects that name this execution or carry a key one of its attempts sent.
	Effects []Effect
	// Peers are attempts of other executions that carry a key this execution
	// sent; they let key_collision see across executions.
	Peers []Attempt
	// FedProviders are providers whose outbox holds at least one effect
	// anywhere; missing_effect only judges steps of those.
	FedProviders map[string]bool
	// Spans are the OpenTelemetry spans of the execution's traces that are
	// not tool calls: model calls, HTTP client calls, context.
	Spans []Span
}
