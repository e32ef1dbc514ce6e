package trace

import (
	"cmp"
	"strings"
)

// CompareNatural orders strings as people count: runs of digits compare by
// their value, so step-2 comes before step-14 and step-14 before step-123.
// Strings equal by that measure (step-7, step-007) are ordered as plain
// strings, so the order is total and the same on every run and page.
func CompareNatural(a, b string) int {
	return cmp.Or(compareDigitRuns(a, b), strings.Compare(a, b))
}

// compareDigitRuns compares a and b run by run, digit runs by value
// (leading zeros ignored) and everything else byte by byte.
func compareDigitRuns(a, b string) int {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitPrefix(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// CompareFindingPlaces orders findings as lists of them read: critical
// first, then by where they are (execution, step, in natural order), rule,
// key and first effect. It is the store's listing order (severity,
// execution, step, rule, key, effect) with ids compared naturally.
func CompareFindingPlaces(a, b Finding) int {
	ea, eb := firstEffect(a), firstEffect(b)
	return cmp.Or(
		cmp.Compare(a.Severity.Rank(), b.Severity.Rank()),
		CompareNatural(a.ExecutionID, b.ExecutionID),
		CompareNatural(a.StepID, b.StepID),
		cmp.Compare(a.Rule, b.Rule),
		CompareNatural(a.IdempotencyKey, b.IdempotencyKey),
		cmp.Compare(ea.Provider, eb.Provider),
		CompareNatural(ea.ID, eb.ID),
	)
}

func firstEffect(f Finding) EffectRef {
	if len(f.Effects) == 0 {
		return EffectRef{}
	}
	return f.Effects[0]
}
