package trace

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestRules gives every rule a case that fires and near misses that must
// not: the audit is only useful if it is quiet about safe traces.
func TestRules(t *testing.T) {
	const hour = 3600.0
	tests := []struct {
		name  string
		rule  Rule
		run   Run
		cfg   Config
		fires bool
	}{
		// duplicate_effect
		{"two effects with the step's key, both attempts ok", RuleDuplicateEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1")), try(2, 2, 3, OutcomeOK, key("ik_1")))).
			with(effect("m1", "ik_1", "", 0.5), effect("m2", "ik_1", "", 2.5)),
			Config{}, true},
		{"two unkeyed effects naming the same execution and step", RuleDuplicateEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout), try(2, 2, 3, OutcomeOK))).
			with(effect("m1", "", "s1", 0.5), effect("m2", "", "s1", 2.5)),
			Config{}, true},
		{"one effect and a deduplicated retry", RuleDuplicateEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_1")), try(2, 2, 3, OutcomeOK, key("ik_1"), dedup))).
			with(effect("m1", "ik_1", "s1", 0.5)),
			Config{}, false},
		{"two effects for two different steps", RuleDuplicateEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"))),
			step("s2", "send", EffectWrite, try(1, 2, 3, OutcomeOK, key("ik_2")))).
			with(effect("m1", "ik_1", "s1", 0.5), effect("m2", "ik_2", "s2", 2.5)),
			Config{}, false},
		{"two identical emails in a run with no step recognised", RuleDuplicateEffect, run().
			with(fingerprinted(traced("m1", "", "t1", "http1", 0.5), "mail:aa"), fingerprinted(traced("m2", "", "t1", "http2", 2.5), "mail:aa")),
			Config{}, true},
		{"two emails with different fingerprints in a run with no step", RuleDuplicateEffect, run().
			with(fingerprinted(traced("m1", "", "t1", "http1", 0.5), "mail:aa"), fingerprinted(traced("m2", "", "t1", "http2", 2.5), "mail:bb")),
			Config{}, false},
		{"identical effects at two providers", RuleDuplicateEffect, run().
			with(fingerprinted(traced("m1", "", "t1", "http1", 0.5), "mail:aa"), fingerprinted(traced("m2", "", "t1", "http2", 2.5), "mail:aa").atProvider("crm")),
			Config{}, false},
		{"identical effects claimed by two different steps", RuleDuplicateEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), args(`{"to":"a"}`))),
			step("s2", "send", EffectWrite, try(1, 2, 3, OutcomeOK, key("ik_2"), args(`{"to":"a","cc":"b"}`)))).
			with(fingerprinted(effect("m1", "ik_1", "s1", 0.5), "mail:aa"), fingerprinted(effect("m2", "ik_2", "s2", 2.5), "mail:aa")),
			Config{}, false},
		{"identical effects in two steps, one known only from a span without arguments", RuleDuplicateEffect, run(
			step("span-1", "send", EffectUnknown, try(1, 0, 1, OutcomeError)),
			step("tool-2", "send", EffectUnknown, try(1, 2, 3, OutcomeOK, args(`{"to":"a"}`)))).
			with(fingerprinted(effect("m1", "", "span-1", 0.5), "mail:aa"), fingerprinted(effect("m2", "", "tool-2", 2.5), "mail:aa")),
			Config{}, true},
		{"identical effects, one claimed by a step, one by none", RuleDuplicateEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1")))).
			with(fingerprinted(effect("m1", "ik_1", "s1", 0.5), "mail:aa"), fingerprinted(traced("m2", "", "t1", "http2", 2.5), "mail:aa")),
			Config{}, true},
		{"a peer's identical effect under a shared key", RuleDuplicateEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api")))).
			withPeers(peer("exec_2", "s1", try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api")))).
			with(fingerprinted(effect("m1", "ik_1", "s1", 0.5), "mail:aa"), fingerprinted(namedEffect("m2", "ik_1", "exec_2", "s1", 2.5), "mail:aa")),
			Config{}, false},

		// repeated_effect
		{"identical effects claimed by two different steps", RuleRepeatedEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), args(`{"to":"a"}`))),
			step("s2", "send", EffectWrite, try(1, 2, 3, OutcomeOK, key("ik_2"), args(`{"to":"a","cc":"b"}`)))).
			with(fingerprinted(effect("m1", "ik_1", "s1", 0.5), "mail:aa"), fingerprinted(effect("m2", "ik_2", "s2", 2.5), "mail:aa")),
			Config{}, true},
		{"two steps, different fingerprints", RuleRepeatedEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"))),
			step("s2", "send", EffectWrite, try(1, 2, 3, OutcomeOK, key("ik_2")))).
			with(fingerprinted(effect("m1", "ik_1", "s1", 0.5), "mail:aa"), fingerprinted(effect("m2", "ik_2", "s2", 2.5), "mail:bb")),
			Config{}, false},
		{"the same effect reported twice", RuleDuplicateEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1")))).
			with(effect("m1", "ik_1", "s1", 0.5), effect("m1", "ik_1", "s1", 0.5)),
			Config{}, false},

		// reexecuted_after_crash
		{"write step run again by a new worker after a crash", RuleReexecutedAfterCrash, run(
			step("s1", "send", EffectWrite, try(1, 0, -1, "", worker("w1")), try(2, 53, 54, OutcomeOK, worker("w2")))),
			Config{}, true},
		{"write step replayed from the journal after a crash", RuleReexecutedAfterCrash, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, worker("w1")), try(2, 53, 53, OutcomeReplayed, worker("w2")))),
			Config{}, false},
		{"write step retried after an idle wait", RuleReexecutedAfterCrash, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeError, worker("w1")), try(2, 40, 41, OutcomeOK, worker("w1")))),
			Config{}, false},
		{"read step run again after a crash", RuleReexecutedAfterCrash, run(
			step("s1", "fetch", EffectRead, try(1, 0, -1, "", worker("w1")), try(2, 53, 54, OutcomeOK, worker("w2")))),
			Config{}, false},
		{"write step that ran only before the crash", RuleReexecutedAfterCrash, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, worker("w1"))),
			step("s2", "record", EffectWrite, try(1, 53, 54, OutcomeOK, worker("w2")))),
			Config{}, false},

		// missing_effect
		{"ok write step, fed provider, no effect", RuleMissingEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, provider("mail-api")))).fed("mail-api"),
			Config{}, true},
		{"provider named on the step itself", RuleMissingEffect, func() Run {
			r := run(step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK))).fed("mail-api")
			r.Steps[0].Provider = "mail-api"
			return r
		}(), Config{}, true},
		{"provider's outbox not fed", RuleMissingEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, provider("mail-api")))).fed("crm"),
			Config{}, false},
		{"final attempt deduplicated", RuleMissingEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout, provider("mail-api")), try(2, 2, 3, OutcomeOK, provider("mail-api"), dedup))).fed("mail-api"),
			Config{}, false},
		{"final attempt failed", RuleMissingEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeError, provider("mail-api")))).fed("mail-api"),
			Config{}, false},
		{"the effect is there", RuleMissingEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, provider("mail-api")))).fed("mail-api").with(effect("m1", "", "s1", 0.5)),
			Config{}, false},
		{"no provider named", RuleMissingEffect, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK))).fed("mail-api"),
			Config{}, false},

		// unkeyed_retry
		{"write step retried without keys", RuleUnkeyedRetry, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout), try(2, 2, 3, OutcomeOK))),
			Config{}, true},
		{"unclassified tool retried without keys: possibly writing", RuleUnkeyedRetry, run(
			step("s1", "send", EffectUnknown, try(1, 0, 1, OutcomeTimeout), try(2, 2, 3, OutcomeOK))),
			Config{}, true},
		{"read step retried without keys", RuleUnkeyedRetry, run(
			step("s1", "fetch", EffectRead, try(1, 0, 1, OutcomeTimeout), try(2, 2, 3, OutcomeOK))),
			Config{}, false},
		{"write step retried with one attempt unkeyed", RuleUnkeyedRetry, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_1")), try(2, 2, 3, OutcomeOK))),
			Config{}, true},
		{"write step retried with its key", RuleUnkeyedRetry, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_1")), try(2, 2, 3, OutcomeOK, key("ik_1")))),
			Config{}, false},
		{"unkeyed write step run once, then replayed", RuleUnkeyedRetry, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK), try(2, 60, 60, OutcomeReplayed))),
			Config{}, false},
		{"read step retried without keys", RuleUnkeyedRetry, run(
			step("s1", "fetch", EffectRead, try(1, 0, 1, OutcomeTimeout), try(2, 2, 3, OutcomeOK))),
			Config{}, false},

		// unstable_key
		{"attempts sent different keys", RuleUnstableKey, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_a")), try(2, 2, 3, OutcomeOK, key("ik_b")))),
			Config{}, true},
		{"one attempt sent no key", RuleUnstableKey, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_a")), try(2, 2, 3, OutcomeOK))),
			Config{}, false},
		{"the provider received two keys for one step (trace context)", RuleUnstableKey, func() Run {
			r := run(step("s1", "charge", EffectUnknown, try(1, 0, 1, OutcomeTimeout, span("t1", "tool1")), try(2, 2, 3, OutcomeOK, span("t1", "tool2"))))
			r.Spans = []Span{httpSpan("t1", "http1", "tool1"), httpSpan("t1", "http2", "tool2")}
			return r.with(traced("ch_1", "ik_random1", "t1", "http1", 0.5), traced("ch_2", "ik_random2", "t1", "http2", 2.5))
		}(), Config{}, true},
		{"the provider received one key for both attempts", RuleUnstableKey, func() Run {
			r := run(step("s1", "charge", EffectUnknown, try(1, 0, 1, OutcomeTimeout, span("t1", "tool1")), try(2, 2, 3, OutcomeOK, span("t1", "tool2"))))
			r.Spans = []Span{httpSpan("t1", "http1", "tool1"), httpSpan("t1", "http2", "tool2")}
			return r.with(traced("ch_1", "ik_1", "t1", "http1", 0.5))
		}(), Config{}, false},
		{"attempts sent the same key", RuleUnstableKey, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_a")), try(2, 2, 3, OutcomeOK, key("ik_a")))),
			Config{}, false},

		// key_collision
		{"two steps sent one key", RuleKeyCollision, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"))),
			step("s2", "send", EffectWrite, try(1, 2, 3, OutcomeOK, key("ik_1")))),
			Config{}, true},
		{"one key with different args", RuleKeyCollision, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_1"), args(`{"to":"a"}`)), try(2, 2, 3, OutcomeOK, key("ik_1"), args(`{"to":"b"}`)))),
			Config{}, true},
		{"a peer execution sent the key from another step", RuleKeyCollision, func() Run {
			r := run(step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"))))
			r.Peers = []Attempt{{ExecutionID: "exec_2", StepID: "s7", Number: 1, IdempotencyKey: "ik_1"}}
			return r
		}(), Config{}, true},
		{"a peer execution reran the same step with the same args", RuleKeyCollision, func() Run {
			r := run(step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), args(`{"to":"a"}`))))
			r.Peers = []Attempt{{ExecutionID: "exec_2", StepID: "s1", Number: 1, IdempotencyKey: "ik_1", Args: []byte(`{"to":"a"}`)}}
			return r
		}(), Config{}, false},
		{"one attempt recorded no args", RuleKeyCollision, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_1"), args(`{"to":"a"}`)), try(2, 2, 3, OutcomeOK, key("ik_1")))),
			Config{}, false},
		{"one key at one provider with different args", RuleKeyCollision, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api"), args(`{"to":"a"}`))),
			step("s2", "charge", EffectWrite, try(1, 2, 3, OutcomeOK, key("ik_1"), provider("mail-api"), args(`{"amount":1}`)))),
			Config{}, true},
		{"one key string at two providers with different args", RuleKeyCollision, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api"), args(`{"to":"a"}`))),
			step("s2", "charge", EffectWrite, try(1, 2, 3, OutcomeOK, key("ik_1"), provider("stripe"), args(`{"amount":1}`)))),
			Config{}, false},
		{"one key string at two providers, a third step naming none", RuleKeyCollision, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api"), args(`{"to":"a"}`))),
			step("s2", "charge", EffectWrite, try(1, 2, 3, OutcomeOK, key("ik_1"), provider("stripe"), args(`{"amount":1}`))),
			step("s3", "note", EffectWrite, try(1, 4, 5, OutcomeOK, key("ik_1"), args(`{"text":"x"}`)))),
			Config{}, true},
		{"a peer sent the key string to another provider", RuleKeyCollision, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api")))).
			withPeers(peer("exec_2", "s7", try(1, 0, 1, OutcomeOK, key("ik_1"), provider("stripe")))),
			Config{}, false},
		{"two steps, two keys", RuleKeyCollision, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"))),
			step("s2", "send", EffectWrite, try(1, 2, 3, OutcomeOK, key("ik_2")))),
			Config{}, false},

		// retry_beyond_retention
		{"retry a day and an hour later", RuleRetryBeyondRetention, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_1")), try(2, 25*hour, 25*hour+1, OutcomeOK, key("ik_1")))),
			Config{}, true},
		{"retry within the day", RuleRetryBeyondRetention, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_1")), try(2, 23*hour, 23*hour+1, OutcomeOK, key("ik_1")))),
			Config{}, false},
		{"a late replay is not a retry", RuleRetryBeyondRetention, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1")), try(2, 25*hour, 25*hour, OutcomeReplayed, key("ik_1")))),
			Config{}, false},
		{"a configured retention of one hour", RuleRetryBeyondRetention, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_1")), try(2, 2*hour, 2*hour+1, OutcomeOK, key("ik_1")))),
			Config{KeyRetention: time.Hour}, true},

		// unsafe_retried
		{"unsafe step attempted twice", RuleUnsafeRetried, run(
			step("s1", "wire", EffectUnsafe, try(1, 0, 1, OutcomeTimeout), try(2, 2, 3, OutcomeOK))),
			Config{}, true},
		{"unsafe step run once, then replayed", RuleUnsafeRetried, run(
			step("s1", "wire", EffectUnsafe, try(1, 0, 1, OutcomeOK), try(2, 60, 60, OutcomeReplayed))),
			Config{}, false},
		{"write step attempted twice", RuleUnsafeRetried, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_1")), try(2, 2, 3, OutcomeOK, key("ik_1")))),
			Config{}, false},
		{"class named only on the attempts", RuleUnsafeRetried, func() Run {
			r := run(step("s1", "wire", "", try(1, 0, 1, OutcomeTimeout), try(2, 2, 3, OutcomeOK)))
			r.Steps[0].Attempts[1].Effect = EffectUnsafe
			return r
		}(), Config{}, true},

		// key_shared_across_executions
		{"another execution sent the key to the same provider", RuleKeySharedAcrossExecutions, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api")))).
			withPeers(peer("exec_2", "s1", try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api")))),
			Config{}, true},
		{"another execution sent the key naming no provider", RuleKeySharedAcrossExecutions, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api")))).
			withPeers(peer("exec_2", "s1", try(1, 0, 1, OutcomeOK, key("ik_1")))),
			Config{}, true},
		{"another execution sent the key to another provider", RuleKeySharedAcrossExecutions, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api")))).
			withPeers(peer("exec_2", "s1", try(1, 0, 1, OutcomeOK, key("ik_1"), provider("crm")))),
			Config{}, false},
		{"only this execution's retry sent the key again", RuleKeySharedAcrossExecutions, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_1")), try(2, 2, 3, OutcomeOK, key("ik_1"), dedup))).
			withPeers(peer("exec_1", "s1", try(1, 0, 1, OutcomeTimeout, key("ik_1")))),
			Config{}, false},

		// suppressed_as_repeat
		{"deduplicated by another execution's effect", RuleSuppressedAsRepeat, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api"), dedup))).
			withPeers(peer("exec_2", "s1", try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api")))).
			with(namedEffect("m1", "ik_1", "exec_2", "s1", 0.5)),
			Config{}, true},
		{"deduplicated by this execution's own earlier effect", RuleSuppressedAsRepeat, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_1")), try(2, 2, 3, OutcomeOK, key("ik_1"), dedup))).
			withPeers(peer("exec_2", "s1", try(1, 0, 1, OutcomeOK, key("ik_1")))).
			with(effect("m1", "ik_1", "s1", 0.5)),
			Config{}, false},
		{"the other execution's effect is at another provider", RuleSuppressedAsRepeat, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api"), dedup))).
			withPeers(peer("exec_2", "s1", try(1, 0, 1, OutcomeOK, key("ik_1"), provider("crm")))).
			with(namedEffect("m1", "ik_1", "exec_2", "s1", 0.5).atProvider("crm")),
			Config{}, false},
		{"the effect names an execution that never sent the key", RuleSuppressedAsRepeat, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), dedup))).
			with(namedEffect("m1", "ik_1", "exec_2", "s1", 0.5)),
			Config{}, false},
		{"deduplicated, and no effect carries the key", RuleSuppressedAsRepeat, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), dedup))).
			withPeers(peer("exec_2", "s1", try(1, 0, 1, OutcomeOK, key("ik_1")))),
			Config{}, false},
		{"another execution's effect, but this attempt was not deduplicated", RuleSuppressedAsRepeat, run(
			step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1")))).
			withPeers(peer("exec_2", "s1", try(1, 0, 1, OutcomeOK, key("ik_1")))).
			with(namedEffect("m1", "ik_1", "exec_2", "s1", 0.5)),
			Config{}, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.rule)+"/"+tt.name, func(t *testing.T) {
			got := rules(AuditRun(tt.run, tt.cfg))
			if fired := slices.Contains(got, tt.rule); fired != tt.fires {
				t.Errorf("%s fired: got %v, want %v (findings %v)", tt.rule, fired, tt.fires, got)
			}
		})
	}
}

func TestAuditRunDesignExample(t *testing.T) {
	r := designExample()
	if got := AuditRun(r, Config{}); len(got) != 0 {
		t.Fatalf("got findings %+v, want none: a deduplicated retry is safe", got)
	}

	r.Effects = append(r.Effects, Effect{Provider: "mail-api", ID: "msg_6a0799", IdempotencyKey: "ik_a94a0b1d",
		ExecutionID: "exec_01H8", StepID: "step-4", At: at(21.35)})
	got := AuditRun(r, Config{})
	want := []Finding{{
		Rule:           RuleDuplicateEffect,
		Severity:       SeverityCritical,
		ExecutionID:    "exec_01H8",
		StepID:         "step-4",
		Attempts:       []int{1, 2},
		Effects:        []EffectRef{{"mail-api", "msg_41bcc7"}, {"mail-api", "msg_6a0799"}},
		IdempotencyKey: "ik_a94a0b1d",
		Message:        "step-4 (send_invoice_email) caused 2 effects for one logical step: mail-api msg_41bcc7, mail-api msg_6a0799",
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if n := CriticalCount(got); n != 1 {
		t.Errorf("critical count: got %d, want 1", n)
	}
}

// emailToolWorld is the article's email_tool.py run by two executions: it
// hashes only the arguments into its key, so exec_A and, a month later,
// exec_B send the same invoice email with the same key. mA is exec_A's
// delivery; mB, when bDelivered, is exec_B's. When not, the provider
// answered exec_B from the response it stored for exec_A.
func emailToolWorld(bDelivered bool) World {
	send := func(execID string, start float64, opts ...attemptOpt) Step {
		opts = append([]attemptOpt{key("ik_5e3f"), provider("mail-api"),
			args(`{"subject":"Your invoice","to":"jordan@acme.dev"}`)}, opts...)
		a := try(1, start, start+1, OutcomeOK, opts...)
		a.ExecutionID, a.StepID = execID, "step-4"
		return Step{ExecutionID: execID, ID: "step-4", Tool: "send_invoice_email", Effect: EffectWrite, Attempts: []Attempt{a}}
	}
	const month = 30 * 24 * 3600
	w := World{
		Executions: []Execution{{ID: "exec_A", Status: StatusCompleted}, {ID: "exec_B", Status: StatusCompleted}},
		Steps:      []Step{send("exec_A", 0), send("exec_B", month)},
		Effects:    []Effect{namedEffect("mA", "ik_5e3f", "exec_A", "step-4", 0.5)},
	}
	if bDelivered {
		w.Effects = append(w.Effects, namedEffect("mB", "ik_5e3f", "exec_B", "step-4", month+0.5))
	} else {
		w.Steps[1].Attempts[0].Deduplicated = true
	}
	return w
}

// findingsOf summarises findings as "severity rule execution step".
func findingsOf(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, string(f.Severity)+" "+string(f.Rule)+" "+f.ExecutionID+" "+f.StepID)
	}
	return out
}

// checkPathsAgree checks that each execution's audit from a Run loaded as
// the store loads it equals its part of the world's audit.
func checkPathsAgree(t *testing.T, w World, world []Finding) {
	t.Helper()
	for _, x := range w.Executions {
		var want []Finding
		for _, f := range world {
			if f.ExecutionID == x.ID && f.Rule != RuleOrphanEffect {
				want = append(want, f)
			}
		}
		if got := AuditRun(loadedRun(w, x.ID), Config{}); !reflect.DeepEqual(got, want) {
			t.Errorf("%s from its own run: got %+v, want the world's %+v", x.ID, got, want)
		}
	}
}

func TestKeySharedAcrossExecutions(t *testing.T) {
	w := emailToolWorld(true)
	for _, r := range w.Runs() {
		var got []string
		for _, e := range r.StepEffects()["step-4"] {
			got = append(got, e.ID)
		}
		want := []string{"m" + r.Execution.ID[len("exec_"):]}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s step-4 effects: got %v, want %v (its own delivery only)", r.Execution.ID, got, want)
		}
	}

	fs := Audit(w, Config{})
	want := []string{
		"warning key_shared_across_executions exec_A step-4",
		"warning key_shared_across_executions exec_B step-4",
	}
	if got := findingsOf(fs); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v: no duplicate_effect, no key_collision for the same step and args", got, want)
	}
	if len(fs) == 2 {
		if f := fs[1]; f.IdempotencyKey != "ik_5e3f" || !reflect.DeepEqual(f.Attempts, []int{1}) ||
			f.Message != "step-4 (send_invoice_email) sent idempotency key ik_5e3f to mail-api, and execution exec_A sent it too — the key is not scoped to the run (next month's invoice mistaken for a repeat of this one)" {
			t.Errorf("exec_B's finding: got %+v", f)
		}
	}
	wantStates := map[EffectRef]MatchState{{"mail-api", "mA"}: MatchMatched, {"mail-api", "mB"}: MatchMatched}
	if got := w.EffectStates(); !reflect.DeepEqual(got, wantStates) {
		t.Errorf("effect states: got %v, want %v", got, wantStates)
	}
	checkPathsAgree(t, w, fs)
}

func TestSuppressedAsRepeat(t *testing.T) {
	w := emailToolWorld(false)
	fs := Audit(w, Config{})
	want := []string{
		"critical suppressed_as_repeat exec_B step-4",
		"warning key_shared_across_executions exec_A step-4",
		"warning key_shared_across_executions exec_B step-4",
	}
	if got := findingsOf(fs); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v: exec_B's email was never sent, exec_A's was sent once", got, want)
	}
	f := fs[0]
	if !reflect.DeepEqual(f.Effects, []EffectRef{{"mail-api", "mA"}}) || !reflect.DeepEqual(f.Attempts, []int{1}) || f.IdempotencyKey != "ik_5e3f" {
		t.Errorf("got %+v, want exec_B's attempt 1 answered by mail-api mA", f)
	}
	for _, r := range w.Runs() {
		if got := len(r.StepEffects()["step-4"]); r.Execution.ID == "exec_B" && got != 0 {
			t.Errorf("exec_B step-4: got %d effects, want none: mA is exec_A's", got)
		}
	}
	checkPathsAgree(t, w, fs)
}

// TestKeysAreScopedByProvider: one key sent by two executions to two
// providers is two keys: no sharing, and each effect belongs to the
// execution that sent the key to its provider.
func TestKeysAreScopedByProvider(t *testing.T) {
	w := emailToolWorld(true)
	w.Steps[1].Attempts[0].Provider = "crm"
	w.Effects[1] = w.Effects[1].atProvider("crm")
	w.Effects = append(w.Effects, Effect{Provider: "payments", ID: "p1", IdempotencyKey: "ik_5e3f", At: at(2)})

	runs := w.Runs()
	for _, r := range runs {
		var got []string
		for _, e := range r.Effects {
			got = append(got, e.Provider+" "+e.ID)
		}
		want := map[string][]string{"exec_A": {"mail-api mA"}, "exec_B": {"crm mB"}}[r.Execution.ID]
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s effects: got %v, want %v", r.Execution.ID, got, want)
		}
	}
	fs := Audit(w, Config{})
	if got, want := findingsOf(fs), []string{"warning orphan_effect  "}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v: the payments effect matches no provider the key was sent to", got, want)
	}
	checkPathsAgree(t, w, fs)
}

// TestFindingMessages pins one sentence per rule: they are what a human
// reads, so a change to them should be a deliberate one.
func TestFindingMessages(t *testing.T) {
	tests := []struct {
		rule Rule
		run  Run
		want string
	}{
		{RuleDuplicateEffect, run(
			step("step-4", "send_invoice_email", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1")), try(2, 2, 3, OutcomeOK, key("ik_1")))).
			with(effect("msg_6a0799", "ik_1", "", 2.5), effect("msg_41bcc7", "ik_1", "", 0.5)),
			"step-4 (send_invoice_email) caused 2 effects for one logical step: mail-api msg_41bcc7, mail-api msg_6a0799 — a green duplicate: every attempt looks successful"},
		{RuleReexecutedAfterCrash, run(
			step("step-4", "send_invoice_email", EffectWrite, try(1, 0, -1, "", worker("pid-1"), key("ik_1")), try(2, 53, 54, OutcomeOK, worker("pid-2"), key("ik_1")))),
			"step-4 (send_invoice_email) ran again after a 53s crash gap (worker pid-1 → pid-2): attempt 1 before it, attempt 2 after it, not replayed from a recorded result"},
		{RuleMissingEffect, run(
			step("step-5", "create_ticket", EffectWrite, try(1, 0, 1, OutcomeOK, provider("tickets")))).fed("tickets"),
			"step-5 (create_ticket) ended ok at attempt 1, but the outbox of tickets, which is being fed, holds no effect for it"},
		{RuleUnkeyedRetry, run(
			step("step-4", "send_invoice_email", EffectWrite, try(1, 0, 1, OutcomeTimeout), try(2, 2, 3, OutcomeOK))),
			"step-4 (send_invoice_email) was attempted 2 times and attempts 1, 2 carried no idempotency key — the receiving API cannot tell a retry from a new request"},
		{RuleUnstableKey, run(
			step("step-4", "send_invoice_email", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_a")), try(2, 2, 3, OutcomeOK, key("ik_b")))),
			"step-4 (send_invoice_email) sent 2 different idempotency keys across its attempts: ik_a (attempt 1), ik_b (attempt 2) — the key keyed the attempt, not the intent"},
		{RuleKeyCollision, func() Run {
			r := run(step("step-4", "send_invoice_email", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), args(`{"to":"a"}`))))
			r.Peers = []Attempt{{ExecutionID: "exec_2", StepID: "step-7", Tool: "send_receipt", IdempotencyKey: "ik_1", Args: []byte(`{"to":"b"}`)}}
			return r
		}(),
			"idempotency key ik_1 was sent by step-4 (send_invoice_email) and exec_2 step-7 (send_receipt) with different step ids and different args — one key must name one intent"},
		{RuleRetryBeyondRetention, run(
			step("step-4", "send_invoice_email", EffectWrite, try(1, 0, 1, OutcomeTimeout, key("ik_1")), try(2, 26*3600, 26*3600+1, OutcomeOK, key("ik_1")))),
			"step-4 (send_invoice_email) was retried 26h after its first attempt (attempt 2), beyond the 24h key retention — the receiving API may have forgotten the key"},
		{RuleUnsafeRetried, run(
			step("step-6", "wire_transfer", EffectUnsafe, try(1, 0, 1, OutcomeTimeout), try(2, 2, 3, OutcomeOK))),
			"step-6 (wire_transfer) is unsafe to repeat but was attempted 2 times (attempts 1, 2) — it should fail loudly and escalate instead"},
		{RuleKeySharedAcrossExecutions, run(
			step("step-4", "send_invoice_email", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), provider("mail-api")))).
			withPeers(peer("exec_3", "step-4", try(1, 0, 1, OutcomeOK, key("ik_1"))), peer("exec_2", "step-4", try(1, 0, 1, OutcomeOK, key("ik_1")))),
			"step-4 (send_invoice_email) sent idempotency key ik_1 to mail-api, and executions exec_2 and exec_3 sent it too — the key is not scoped to the run (next month's invoice mistaken for a repeat of this one)"},
		{RuleSuppressedAsRepeat, run(
			step("step-4", "send_invoice_email", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"), dedup))).
			withPeers(peer("exec_2", "step-4", try(1, 0, 1, OutcomeOK, key("ik_1")))).
			with(namedEffect("msg_41bcc7", "ik_1", "exec_2", "step-4", 0.5)),
			"step-4 (send_invoice_email) attempt 1 was answered from a stored response to key ik_1, but its only effect, mail-api msg_41bcc7, belongs to execution exec_2 — the provider took this run's request for a repeat: its intent never happened, silently"},
	}
	for _, tt := range tests {
		t.Run(string(tt.rule), func(t *testing.T) {
			var got []string
			for _, f := range AuditRun(tt.run, Config{}) {
				if f.Rule == tt.rule {
					got = append(got, f.Message)
				}
			}
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("got %q, want [%q]", got, tt.want)
			}
		})
	}
}

func TestFindingFields(t *testing.T) {
	r := run(
		step("s1", "send", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_1"))),
		step("s2", "send", EffectWrite, try(1, 2, 3, OutcomeOK, key("ik_1")), try(2, 4, 5, OutcomeOK, key("ik_1"))),
	)
	var got []Finding
	for _, f := range AuditRun(r, Config{}) {
		if f.Rule == RuleKeyCollision {
			got = append(got, f)
		}
	}
	if len(got) != 1 {
		t.Fatalf("got %d key_collision findings, want 1 per key", len(got))
	}
	f := got[0]
	if f.StepID != "s1" || !reflect.DeepEqual(f.Attempts, []int{1}) || f.IdempotencyKey != "ik_1" || f.Severity != SeverityCritical || f.ExecutionID != "exec_1" {
		t.Errorf("got %+v, want step s1, attempts [1], key ik_1, critical, exec_1", f)
	}
}

func TestAuditRunOrder(t *testing.T) {
	r := run(
		step("step-c", "send", EffectWrite, try(1, 0, 1, OutcomeTimeout), try(2, 2, 3, OutcomeOK)),
		step("step-b", "wire", EffectUnsafe, try(1, 4, 5, OutcomeTimeout, key("ik_b")), try(2, 6, 7, OutcomeOK, key("ik_b"))),
		step("step-d", "send", EffectWrite, try(1, 8, 9, OutcomeTimeout, key("ik_x")), try(2, 10, 11, OutcomeOK, key("ik_y"))),
		step("step-a", "wire", EffectUnsafe, try(1, 12, 13, OutcomeTimeout, key("ik_a")), try(2, 14, 15, OutcomeOK, key("ik_a"))),
	)
	var got []string
	for _, f := range AuditRun(r, Config{}) {
		got = append(got, string(f.Severity)+" "+string(f.Rule)+" "+f.StepID)
	}
	want := []string{
		"critical unsafe_retried step-a",
		"critical unsafe_retried step-b",
		"critical unstable_key step-d",
		"warning unkeyed_retry step-c",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestSortFindings(t *testing.T) {
	fs := []Finding{
		{Rule: RuleOrphanEffect, Severity: SeverityWarning, Effects: []EffectRef{{"mail-api", "b"}}},
		{Rule: RuleUnkeyedRetry, Severity: SeverityWarning, ExecutionID: "e1", StepID: "s1"},
		{Rule: RuleKeyCollision, Severity: SeverityCritical, ExecutionID: "e1", StepID: "s1", IdempotencyKey: "k2"},
		{Rule: RuleOrphanEffect, Severity: SeverityWarning, Effects: []EffectRef{{"mail-api", "a"}}},
		{Rule: RuleKeyCollision, Severity: SeverityCritical, ExecutionID: "e1", StepID: "s1", IdempotencyKey: "k1"},
		{Rule: RuleDuplicateEffect, Severity: SeverityCritical, ExecutionID: "e2", StepID: "s1"},
		{Rule: RuleDuplicateEffect, Severity: SeverityCritical, ExecutionID: "e1", StepID: "s9"},
	}
	SortFindings(fs)
	var got []string
	for _, f := range fs {
		s := string(f.Rule) + " " + f.ExecutionID + " " + f.StepID + " " + f.IdempotencyKey
		if len(f.Effects) > 0 {
			s += f.Effects[0].ID
		}
		got = append(got, s)
	}
	want := []string{
		"duplicate_effect e1 s9 ",
		"duplicate_effect e2 s1 ",
		"key_collision e1 s1 k1",
		"key_collision e1 s1 k2",
		"orphan_effect   a",
		"orphan_effect   b",
		"unkeyed_retry e1 s1 ",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestOrphanFinding(t *testing.T) {
	tests := []struct {
		name   string
		effect Effect
		want   Finding
	}{
		{"with key, target and names",
			Effect{Provider: "mail-api", ID: "msg_x", IdempotencyKey: "ik_9", ExecutionID: "exec_9", StepID: "step-2", Target: "jordan@acme.dev"},
			Finding{Rule: RuleOrphanEffect, Severity: SeverityWarning, ExecutionID: "exec_9", StepID: "step-2",
				Effects: []EffectRef{{"mail-api", "msg_x"}}, IdempotencyKey: "ik_9",
				Message: "mail-api msg_x matches no attempt of any execution (key ik_9, target jordan@acme.dev, named exec_9 step-2)"}},
		{"bare",
			Effect{Provider: "payments", ID: "ch_1"},
			Finding{Rule: RuleOrphanEffect, Severity: SeverityWarning, Effects: []EffectRef{{"payments", "ch_1"}},
				Message: "payments ch_1 matches no attempt of any execution (no key)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OrphanFinding(tt.effect); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCriticalCount(t *testing.T) {
	fs := []Finding{{Severity: SeverityCritical}, {Severity: SeverityWarning}, {Severity: SeverityCritical}}
	if got := CriticalCount(fs); got != 2 {
		t.Errorf("got %d, want 2", got)
	}
	if got := CriticalCount(nil); got != 0 {
		t.Errorf("got %d, want 0", got)
	}
}

func TestHumanDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{53 * time.Second, "53s"},
		{24 * time.Hour, "24h"},
		{90 * time.Minute, "1h30m"},
		{2 * time.Minute, "2m"},
		{1500 * time.Millisecond, "1.5s"},
	}
	for _, tt := range tests {
		if got := humanDuration(tt.d); got != tt.want {
			t.Errorf("humanDuration(%v): got %q, want %q", tt.d, got, tt.want)
		}
	}
}

// TestOwnEffectsOnly: an execution that shares a key with another shows
// only its own effect, and counts one.
func TestOwnEffectsOnly(t *testing.T) {
	w := emailToolWorld(true)
	for _, r := range w.Runs() {
		own := r.OwnEffects()
		if len(own) != 1 || own[0].ExecutionID != r.Execution.ID {
			t.Errorf("%s own effects: got %+v, want its one delivery", r.Execution.ID, own)
		}
		if got := r.Counts().Effects; got != 1 {
			t.Errorf("%s effects count: got %d, want 1", r.Execution.ID, got)
		}
		var ra RunAuditor
		if got := ra.Analyse(r, Config{}).Counts.Effects; got != 1 {
			t.Errorf("%s effects count (incremental auditor): got %d, want 1", r.Execution.ID, got)
		}
	}
}

// TestOutboxProvesDuplicate: two identical emails of one run, with no tool
// span recognised, are a critical duplicate whose message says what
// proves it, and both effects are duplicates.
func TestOutboxProvesDuplicate(t *testing.T) {
	e1 := fingerprinted(traced("m1", "", "t1", "http1", 0.5), "mail:aa")
	e1.Summary = "email to jordan@acme.dev, subject 'Your June invoice'"
	e2 := fingerprinted(traced("m2", "", "t1", "http2", 2.5), "mail:aa")
	e2.Summary = e1.Summary
	r := run().with(e1, e2)
	r.Spans = []Span{{ExecutionID: "exec_1", TraceID: "t1", SpanID: "http1", Role: RoleHTTP, Name: "POST"},
		{ExecutionID: "exec_1", TraceID: "t1", SpanID: "http2", Role: RoleHTTP, Name: "POST"}}
	a := AnalyseRun(r, Config{})
	if a.Verdict.State != StateCritical {
		t.Fatalf("verdict: got %s, want critical (findings %v)", a.Verdict.State, findingsOf(a.Findings))
	}
	var dup *Finding
	for i, f := range a.Findings {
		if f.Rule == RuleDuplicateEffect {
			dup = &a.Findings[i]
		}
	}
	if dup == nil {
		t.Fatalf("no duplicate_effect in %v", findingsOf(a.Findings))
	}
	want := "2 identical emails (email to jordan@acme.dev, subject 'Your June invoice') at mail-api in this run, not deduplicated by the provider: mail-api m1, mail-api m2 — no tool call of a known dialect tied them to a step; the outbox proves it (same fingerprint)"
	if dup.Message != want {
		t.Errorf("message:\ngot  %s\nwant %s", dup.Message, want)
	}
	for _, ref := range []EffectRef{e1.Ref(), e2.Ref()} {
		if a.States[ref] != MatchDuplicate {
			t.Errorf("state of %v: got %s, want duplicate", ref, a.States[ref])
		}
	}
	var ra RunAuditor
	if got := ra.Analyse(r, Config{}); !reflect.DeepEqual(got.Findings, a.Findings) || !reflect.DeepEqual(got.States, a.States) {
		t.Errorf("incremental auditor: got %v %v, want %v %v", findingsOf(got.Findings), got.States, findingsOf(a.Findings), a.States)
	}
}
