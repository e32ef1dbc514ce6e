package views

import "github.com/oncetrace/oncetrace/trace"

func navClass(active bool) string {
	if active {
		return "active"
	}
	return ""
}

func statusClass(s trace.Status) string { return "status status-" + string(s) }

func outcomeClass(o trace.Outcome) string { return "outcome outcome-" + string(o) }

func stateClass(s trace.MatchState) string { return "state state-" + string(s) }

func severityClass(s trace.Severity) string { return "finding severity-" + string(s) }

func barClass(b Bar) string {
	c := "bar outcome-" + string(b.Outcome)
	if b.Ghost {
		c += " ghost"
	}
	return c
}

func gapClass(g GapMark) string { return "gap gap-" + string(g.Kind) }

func effectClass(m EffectMark) string { return "effect state-" + string(m.State) }

func linkClass(m EffectMark) string {
	if m.State == trace.MatchDuplicate {
		return "cause duplicate"
	}
	return "cause"
}

func laneCountClass(l Lane) string {
	if l.Duplicate {
		return "lane-count duplicate"
	}
	return "lane-count"
}

func severityIcon(s trace.Severity) string {
	if s == trace.SeverityCritical {
		return "✗"
	}
	return "!"
}

func effectIcon(s trace.MatchState) string {
	switch s {
	case trace.MatchDuplicate:
		return "◆ duplicate"
	case trace.MatchOrphan:
		return "◇ orphan"
	}
	return "◆"
}

// stateLabel is an effect's state in a table or a detail: its icon and the
// word once ("◆ duplicate", not "◆ duplicate duplicate").
func stateLabel(s trace.MatchState) string {
	switch s {
	case trace.MatchDuplicate, trace.MatchOrphan:
		return effectIcon(s)
	}
	return "◆ " + string(s)
}

// classClass marks an unknown class, which the audit treats as possibly
// writing, apart from the classes a user chose.
func classClass(c trace.EffectClass) string {
	if c == trace.EffectUnknown {
		return "class-unknown"
	}
	return "muted"
}

func modelClass(m ModelMark) string {
	if m.Error {
		return "model-call model-error"
	}
	return "model-call"
}
