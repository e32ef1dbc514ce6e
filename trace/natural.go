package trace

import (
	"cmp"
	"strconv"
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

// NaturalKey is a string whose byte order is CompareNatural's, but for
// ties (step-7 and step-007 have one key): a store sorts by it, then by
// the string itself. Each run of digits is written as its length class
// ('0' plus the number of digits without leading zeros, or past eight
// '9', the length's own digit count and the length) and the digits, so
// a longer number sorts later; a digit run starts with a byte from '0'
// to '9', as the run itself does, so it compares with any other byte as
// the run's first digit would.
func NaturalKey(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 4)
	for s != "" {
		n := digitPrefix(s)
		if n == 0 {
			b.WriteByte(s[0])
			s = s[1:]
			continue
		}
		digits := strings.TrimLeft(s[:n], "0")
		if l := len(digits); l < 9 {
			b.WriteByte(byte('0' + l))
		} else {
			ls := strconv.Itoa(l)
			b.WriteByte('9')
			b.WriteByte(byte('0' + len(ls)))
			b.WriteString(ls)
		}
		b.WriteString(digits)
		s = s[n:]
	}
	return b.String()
}
