package views

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"

	"github.com/oncetrace/oncetrace/trace"
)

// AuditView is what the execution page may claim about the execution, in
// one of three states never blurred (docs/audit.md):
// critical, unverified, or clean. Only clean says that every side effect
// happened once.
type AuditView struct {
	State trace.AuditState
	// Critical is the number of critical findings.
	Critical int
	// SideEffecting is the number of steps of class write, unsafe or
	// unknown.
	SideEffecting int
	// Unverified links the side-effecting steps with no effect known to
	// their last attempt in the timeline, at most maxAuditLinks of them;
	// UnverifiedTotal counts them all.
	Unverified      []Link
	UnverifiedTotal int
	// Unattributed links the effects of the execution's trace whose
	// tool-call span never arrived; UnattributedTotal counts them all.
	Unattributed      []Link
	UnattributedTotal int
	// NearbyOrphans are orphan effects within the execution's time window:
	// one of them may be what an unverified step caused.
	NearbyOrphans []trace.Effect
}

// maxAuditLinks bounds the steps and effects the audit names one by one.
const maxAuditLinks = 20

// AuditInput is what the audit's block is built from.
type AuditInput struct {
	Run           trace.Run
	Verdict       trace.Verdict
	Findings      []trace.Finding
	NearbyOrphans []trace.Effect
}

// NewAuditView builds the audit's block of the execution page.
func NewAuditView(in AuditInput) AuditView {
	v := AuditView{State: in.Verdict.State, Critical: trace.CriticalCount(in.Findings), NearbyOrphans: in.NearbyOrphans}
	steps := map[string]trace.Step{}
	for _, s := range in.Run.Steps {
		steps[s.ID] = s
		if s.Class().SideEffecting() {
			v.SideEffecting++
		}
	}
	v.UnverifiedTotal = len(in.Verdict.Unverified)
	for _, id := range in.Verdict.Unverified {
		if len(v.Unverified) == maxAuditLinks {
			break
		}
		s := steps[id]
		l := Link{Text: id}
		if tool := s.ToolName(); tool != "" {
			l.Text += " (" + tool + ")"
		}
		if n := len(s.Attempts); n > 0 {
			l.Href = "#" + AttemptAnchor(id, s.Attempts[n-1].Number)
		}
		v.Unverified = append(v.Unverified, l)
	}
	v.UnattributedTotal = len(in.Verdict.Unattributed)
	for _, e := range in.Verdict.Unattributed {
		if len(v.Unattributed) == maxAuditLinks {
			break
		}
		v.Unattributed = append(v.Unattributed, Link{Href: "#" + EffectAnchor(e.Provider, e.ID), Text: e.Provider + " " + e.ID})
	}
	return v
}

// auditClass is the audit block's class: its state, for the colour beside
// the words.
func auditClass(s trace.AuditState) string { return "audit audit-" + string(s) }

func auditTestID(s trace.AuditState) string { return "audit-" + string(s) }

// AuditBadge is an audit state as a list's badge: an icon and the word,
// never colour alone; "" for a state not computed yet.
func AuditBadge(s trace.AuditState) string {
	switch s {
	case trace.StateCritical:
		return "✗ critical"
	case trace.StateUnverified:
		return "? unverified"
	case trace.StateClean:
		return "✓ clean"
	}
	return ""
}

// cleanDetail says what clean rests on.
func (v AuditView) cleanDetail() string {
	switch v.SideEffecting {
	case 0:
		return "no step of this execution has a side effect (every step reads)."
	case 1:
		return "the effect of its one side-effecting step is known, and it is not duplicated."
	}
	return fmt.Sprintf("effects are known for all %d side-effecting steps, and none is duplicated.", v.SideEffecting)
}

// OrphanURL lists an orphan effect's provider's orphans on the outbox page.
func OrphanURL(provider string) string {
	return "/outbox?" + url.Values{"provider": {provider}, "state": {string(trace.MatchOrphan)}}.Encode()
}

// listSep comes before the i-th item of a list that follows a colon.
func listSep(i int) string {
	if i > 0 {
		return ", "
	}
	return " "
}

// listTail follows the i-th of n items shown: after the last, how many
// of total were left out, and the sentence's end.
func listTail(i, n, total int, end string) string {
	if i < n-1 {
		return ""
	}
	if total > n {
		return fmt.Sprintf(" and %d more", total-n) + end
	}
	return end
}

// badgeWarnings is the badge of an execution the audit judged clean that
// still has warning findings: no critical finding and every side effect
// verified, but something worth a look (an unkeyed retry, say). An
// unverified or critical execution keeps its own badge, which says more.
const badgeWarnings = "warnings"

// AuditBadgeState is the state an execution's audit badge shows: its
// audit state (trace.Judge's), or "warnings" when that is clean and some
// findings are warnings; "" while no state is computed.
func (r ExecutionRow) AuditBadgeState() string {
	if r.AuditState == trace.StateClean && r.Findings > r.CriticalFindings {
		return badgeWarnings
	}
	return string(r.AuditState)
}

// RowBadge is the row's audit badge text: an icon and the word, never
// colour alone; "" while no state is computed.
func (r ExecutionRow) RowBadge() string {
	if r.AuditBadgeState() == badgeWarnings {
		return "! warnings"
	}
	return AuditBadge(r.AuditState)
}

func rowBadgeClass(r ExecutionRow) string {
	return "badge audit-badge audit-badge-" + r.AuditBadgeState()
}

// FindingGroup is the findings of one rule, in natural step order; Shown
// are the first maxGroupShown, Rest behind "show N more".
type FindingGroup struct {
	Rule     trace.Rule
	Severity trace.Severity
	Shown    []FindingView
	Rest     []FindingView
	// More, on the execution page, fetches the Hidden findings after
	// Shown instead of Rest.
	More   *MoreLink
	Hidden int
}

// Count is the number of findings in the group.
func (g FindingGroup) Count() int { return len(g.Shown) + len(g.Rest) + g.Hidden }

// maxGroupShown is how many findings of a rule show before "show N more".
const maxGroupShown = 10

// GroupFindings groups findings by rule: groups critical first, then by
// the natural step order of their first finding (step-24 before
// step-231, trace.CompareNatural), then by rule; findings inside a group in
// natural step order.
func GroupFindings(fs []FindingView) []FindingGroup {
	byRule := map[trace.Rule][]FindingView{}
	var rules []trace.Rule
	for _, f := range fs {
		if _, ok := byRule[f.Rule]; !ok {
			rules = append(rules, f.Rule)
		}
		byRule[f.Rule] = append(byRule[f.Rule], f)
	}
	var groups []FindingGroup
	for _, rule := range rules {
		list := byRule[rule]
		slices.SortStableFunc(list, func(a, b FindingView) int { return trace.CompareNatural(a.StepID, b.StepID) })
		g := FindingGroup{Rule: rule, Severity: list[0].Severity, Shown: list}
		if len(list) > maxGroupShown {
			g.Shown, g.Rest = list[:maxGroupShown], list[maxGroupShown:]
		}
		groups = append(groups, g)
	}
	slices.SortStableFunc(groups, func(a, b FindingGroup) int {
		return cmp.Or(cmp.Compare(a.Severity.Rank(), b.Severity.Rank()),
			trace.CompareNatural(a.Shown[0].StepID, b.Shown[0].StepID), cmp.Compare(a.Rule, b.Rule))
	})
	return groups
}
