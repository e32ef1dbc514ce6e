package trace

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestCompareNatural(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"step-2", "step-14", -1},
		{"step-14", "step-123", -1},
		{"step-123", "step-2", 1},
		{"step-24", "step-231", -1},
		{"step-9", "step-10", -1},
		{"step-10", "step-10", 0},
		// Equal by value, so the plain strings decide: the order stays total.
		{"step-007", "step-7", -1},
		{"step-7", "step-007", 1},
		{"step-2a", "step-2b", -1},
		{"a", "b", -1},
		{"step", "step-1", -1},
		{"step-1-10", "step-1-9", 1},
		{"ik_cus_00000002", "ik_cus_00000010", -1},
		{"99999999999999999999999", "100000000000000000000000", -1}, // beyond any integer type
		{"", "", 0},
		{"", "a", -1},
	}
	for _, tt := range tests {
		if got := CompareNatural(tt.a, tt.b); got != tt.want {
			t.Errorf("CompareNatural(%q, %q): got %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestSortFindingsNaturalSteps(t *testing.T) {
	var fs []Finding
	for _, id := range []string{"step-123", "step-14", "step-2"} {
		fs = append(fs, Finding{Rule: RuleDuplicateEffect, Severity: SeverityCritical, ExecutionID: "exec_1", StepID: id})
	}
	fs = append(fs, Finding{Rule: RuleUnkeyedRetry, Severity: SeverityWarning, ExecutionID: "exec_1", StepID: "step-1"})
	SortFindings(fs)
	var got []string
	for _, f := range fs {
		got = append(got, f.StepID)
	}
	if want := []string{"step-2", "step-14", "step-123", "step-1"}; !slices.Equal(got, want) {
		t.Errorf("steps: got %v, want %v", got, want)
	}
	slices.SortStableFunc(fs, CompareFindingPlaces)
	got = got[:0]
	for _, f := range fs {
		got = append(got, f.StepID)
	}
	if want := []string{"step-2", "step-14", "step-123", "step-1"}; !slices.Equal(got, want) {
		t.Errorf("by place: got %v, want %v", got, want)
	}
}

// TestIncidentsWorstFirst: the step with the most duplicated effects comes
// first, then the other duplicates in natural step order, then a repeat
// whose second effect is unknown; the same whatever order the findings
// arrive in.
func TestIncidentsWorstFirst(t *testing.T) {
	var steps []Step
	var effects []Effect
	twice := func(id string, start float64) {
		steps = append(steps, step(id, "send_invoice_email", EffectWrite, try(1, start, start+1, OutcomeTimeout), try(2, start+1.1, start+1.3, OutcomeOK)))
		effects = append(effects, effect(id+"-m1", "", id, start+0.5), effect(id+"-m2", "", id, start+1.2))
	}
	// Started in an order that is neither natural nor the strings' order.
	twice("step-14", 0)
	twice("step-123", 10)
	twice("step-2", 20)
	steps = append(steps, step("step-300", "send_invoice_email", EffectWrite,
		try(1, 30, 31, OutcomeTimeout), try(2, 31.1, 32, OutcomeTimeout), try(3, 32.1, 32.3, OutcomeOK)))
	effects = append(effects, effect("t1", "", "step-300", 30.5), effect("t2", "", "step-300", 31.5), effect("t3", "", "step-300", 32.2))
	steps = append(steps, step("step-1", "charge_card", EffectUnsafe, try(1, 40, 41, OutcomeTimeout), try(2, 41.1, 41.3, OutcomeOK)))
	r := run(steps...).with(effects...).fed("mail-api")

	findings := AuditRun(r, DefaultConfig)
	want := []string{"step-300 duplicate", "step-2 duplicate", "step-14 duplicate", "step-123 duplicate", "step-1 repeated"}
	for _, order := range []string{"sorted", "reversed"} {
		fs := slices.Clone(findings)
		if order == "reversed" {
			slices.Reverse(fs)
		}
		var got []string
		for _, in := range Incidents(r, fs, Gaps(r, DefaultConfig)) {
			got = append(got, fmt.Sprintf("%s %s", in.Step.ID, in.Kind))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s findings: got %v, want %v", order, got, want)
		}
	}
}

// TestNaturalKeyOrdersAsCompareNatural checks, on every pair of many
// strings of digits, letters and separators, that ordering by NaturalKey
// and then by the string is CompareNatural's order.
func TestNaturalKeyOrdersAsCompareNatural(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "-", "_", "0", "1", "5", "9", "Z", "é"}
	words := []string{"", "0", "00", "step-2", "step-14", "step-123", "step-007", "step-7", "x999999999", "x1000000000", "x0999999999"}
	for range 400 {
		var b strings.Builder
		for range rng.IntN(8) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		if rng.IntN(3) == 0 {
			b.WriteString(strings.Repeat("9", rng.IntN(12)))
		}
		words = append(words, b.String())
	}
	sign := func(c int) int { return cmp.Compare(c, 0) }
	for _, a := range words {
		for _, b := range words {
			want := sign(CompareNatural(a, b))
			got := sign(cmp.Or(strings.Compare(NaturalKey(a), NaturalKey(b)), strings.Compare(a, b)))
			if got != want {
				t.Fatalf("%q against %q: by NaturalKey %d (keys %q, %q), CompareNatural %d", a, b, got, NaturalKey(a), NaturalKey(b), want)
			}
		}
	}
}
