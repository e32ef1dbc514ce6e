package temporaldemo

import (
	"strings"
	"testing"
)

// TestIdempotencyKey: one key per intent — the same for every attempt of
// one activity of one workflow with the same email, another for another
// workflow, activity or email.
func TestIdempotencyKey(t *testing.T) {
	k := IdempotencyKey("invoice-keyed-1", "5", DefaultInvoice)
	if !strings.HasPrefix(k, "ik_") || len(k) != 3+32 {
		t.Fatalf("key: got %q, want ik_ and 32 hex digits", k)
	}
	if again := IdempotencyKey("invoice-keyed-1", "5", DefaultInvoice); again != k {
		t.Errorf("same intent: got %q then %q, want one key", k, again)
	}
	other := DefaultInvoice
	other.Subject = "Your July invoice"
	for what, got := range map[string]string{
		"another workflow": IdempotencyKey("invoice-keyed-2", "5", DefaultInvoice),
		"another activity": IdempotencyKey("invoice-keyed-1", "6", DefaultInvoice),
		"another email":    IdempotencyKey("invoice-keyed-1", "5", other),
	} {
		if got == k {
			t.Errorf("%s: got the same key %q, want another", what, got)
		}
	}
}

func TestCheckScenario(t *testing.T) {
	for _, s := range Scenarios {
		if err := CheckScenario(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	err := CheckScenario("safe")
	if err == nil || !strings.Contains(err.Error(), "naive, crash, keyed") {
		t.Errorf("unknown scenario: got %v, want an error naming naive, crash, keyed", err)
	}
}
