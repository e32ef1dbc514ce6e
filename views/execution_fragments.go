package views

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/oncetrace/oncetrace/trace"
)

// IncidentsView is the incidents an answer shows and the link to the
// rest.
type IncidentsView struct {
	Shown []Incident
	More  *MoreLink
}

// ListFragmentView is a fragment of the execution page's findings or
// incidents: those asked for and the link to the next ones.
type ListFragmentView struct {
	ExecutionID string
	Caption     string // "of duplicate_effect, 11–110 of 500"
	Findings    []FindingView
	Incidents   []Incident
	More        *MoreLink
}

// FindingsURL is the fragment of the findings of rule from offset, in the
// order the page lists them.
func FindingsURL(executionID string, rule trace.Rule, offset int) string {
	return executionURL(executionID, "/findings", url.Values{"rule": {string(rule)}, "offset": {strconv.Itoa(offset)}})
}

// IncidentsURL is the fragment of the incidents from offset.
func IncidentsURL(executionID string, offset int) string {
	return executionURL(executionID, "/incidents", url.Values{"offset": {strconv.Itoa(offset)}})
}

// boundFindings keeps the first maxGroupShown findings of each group and
// links to the rest.
func boundFindings(execID string, groups []FindingGroup) []FindingGroup {
	for i := range groups {
		g := &groups[i]
		if len(g.Rest) == 0 {
			continue
		}
		g.Hidden = len(g.Rest)
		g.Rest = nil
		g.More = &MoreLink{Href: FindingsURL(execID, g.Rule, len(g.Shown)), Text: moreText(g.Hidden, findingsPerFragment, "finding", "findings")}
	}
	return groups
}

func moreText(rest, page int, one, many string) string {
	n := min(rest, page)
	text := "show " + plural(n, "more "+one, "more "+many)
	if rest > n {
		text += fmt.Sprintf(" (of %d)", rest)
	}
	return text
}

// firstIncidentsView is the incidents the page's first answer shows.
func firstIncidentsView(execID string, is []Incident) IncidentsView {
	v := IncidentsView{Shown: is[:min(len(is), maxIncidentsShown)]}
	if rest := len(is) - len(v.Shown); rest > 0 {
		v.More = &MoreLink{Href: IncidentsURL(execID, len(v.Shown)), Text: moreText(rest, incidentsPerFragment, "incident", "incidents")}
	}
	return v
}

// FindingsFragment is the findings of rule from offset, as the page lists
// them, at most findingsPerFragment, with the link to the next ones.
// Their links to the timeline lead to each attempt's, effect's or lane's
// own page: the lane may not be on the page.
func (x Execution) FindingsFragment(rule trace.Rule, offset int) ListFragmentView {
	var views []FindingView
	for _, f := range x.Findings {
		if f.Rule == rule {
			views = append(views, NewFindingView(f))
		}
	}
	slices.SortStableFunc(views, func(a, b FindingView) int { return trace.CompareNatural(a.StepID, b.StepID) })
	offset = min(max(offset, 0), len(views))
	end := min(offset+findingsPerFragment, len(views))
	v := ListFragmentView{ExecutionID: x.Run.Execution.ID, Findings: views[offset:end],
		Caption: fmt.Sprintf("of %s, %d–%d of %d", rule, offset+1, end, len(views))}
	if end < len(views) {
		v.More = &MoreLink{Href: FindingsURL(v.ExecutionID, rule, end), Text: moreText(len(views)-end, findingsPerFragment, "finding", "findings")}
	}
	t := newLinkTargets(x.Run, nil)
	for i := range v.Findings {
		v.Findings[i] = t.finding(v.Findings[i])
	}
	return v
}

// IncidentsFragment is the incidents from offset, at most
// incidentsPerFragment, with the link to the next ones.
func (x Execution) IncidentsFragment(offset int) ListFragmentView {
	offset = min(max(offset, 0), len(x.Incidents))
	end := min(offset+incidentsPerFragment, len(x.Incidents))
	v := ListFragmentView{ExecutionID: x.Run.Execution.ID, Caption: fmt.Sprintf("%d–%d of %d", offset+1, end, len(x.Incidents))}
	t := newLinkTargets(x.Run, nil)
	for _, in := range x.Incidents[offset:end] {
		v.Incidents = append(v.Incidents, t.incident(in))
	}
	if end < len(x.Incidents) {
		v.More = &MoreLink{Href: IncidentsURL(v.ExecutionID, end), Text: moreText(len(x.Incidents)-end, incidentsPerFragment, "incident", "incidents")}
	}
	return v
}

// Lanes is a fragment of the timeline: the lanes sel asks for, drawn at
// zoom's scale, with the link to the next ones.
func (x Execution) Lanes(zoom TimeRange, sel LaneSelection) LanesView {
	sel.Fragment = true
	tl := NewTimeline(TimelineInput{Run: x.Run, Gaps: x.Gaps, States: x.States, Findings: x.Findings, Range: zoom,
		SilenceAfter: x.silenceAfter, Marks: NewIncidentMarks(x.Incidents), Select: sel, Index: x.index})
	v := LanesView{ExecutionID: x.Run.Execution.ID, Timeline: tl}
	switch {
	case sel.StepID != "":
		v.Caption = "of " + sel.StepID
	case len(tl.Lanes) > 0:
		v.Caption = fmt.Sprintf("%d–%d of %d", sel.Offset+1, sel.Offset+len(tl.Lanes), tl.TotalLanes)
	}
	// Links from these lanes to effects in the outbox lane lead to the
	// effect's page: the fragment may be read without the page.
	t := newLinkTargets(x.Run, nil)
	for i := range v.Timeline.Lanes {
		for j, m := range v.Timeline.Lanes[i].Marks {
			v.Timeline.Lanes[i].Marks[j].Href = t.href(m.Href)
		}
	}
	return v
}

// linkTargets turns a link to an id of the timeline that an answer does
// not hold into a link to the thing's own page: an attempt's or an
// effect's detail, a lane's fragment. The ids are read back from the
// anchor itself (domID), so nothing is indexed per attempt.
type linkTargets struct {
	executionID string
	rendered    map[string]bool
}

// newLinkTargets rewrites links for run's page; rendered are the ids the
// answer holds (nil: none).
func newLinkTargets(run trace.Run, rendered map[string]bool) linkTargets {
	return linkTargets{executionID: run.Execution.ID, rendered: rendered}
}

func (t linkTargets) href(h string) string {
	if !strings.HasPrefix(h, "#") || t.rendered[h[1:]] {
		return h
	}
	prefix, parts, ok := parseDomID(h[1:])
	if !ok {
		return h
	}
	switch {
	case prefix == "a" && len(parts) == 2:
		if n, err := strconv.Atoi(parts[1]); err == nil {
			return AttemptURL(t.executionID, parts[0], n)
		}
	case prefix == "e" && len(parts) == 2:
		return EffectURL(t.executionID, parts[0], parts[1])
	case prefix == "lane" && len(parts) == 1:
		return LaneURL(t.executionID, parts[0])
	}
	return h
}

// parseDomID reads back what domID wrote: the prefix and the parts.
func parseDomID(id string) (prefix string, parts []string, ok bool) {
	fields := strings.Split(id, "-")
	for _, f := range fields[1:] {
		b, err := anchorEncoding.DecodeString(strings.ToUpper(f))
		if err != nil {
			return "", nil, false
		}
		parts = append(parts, string(b))
	}
	return fields[0], parts, true
}

func (t linkTargets) finding(f FindingView) FindingView {
	f.Links = slices.Clone(f.Links)
	for i := range f.Links {
		f.Links[i].Href = t.href(f.Links[i].Href)
	}
	return f
}

func (t linkTargets) incident(in Incident) Incident {
	in.Parts = slices.Clone(in.Parts)
	for i := range in.Parts {
		in.Parts[i].Href = t.href(in.Parts[i].Href)
	}
	return in
}

func (t linkTargets) links(ls []Link) []Link {
	ls = slices.Clone(ls)
	for i := range ls {
		ls[i].Href = t.href(ls[i].Href)
	}
	return ls
}

// renderedIDs are the ids the timeline's answer holds; nil when it holds
// every one, so no link needs another target.
func renderedIDs(tl Timeline) map[string]bool {
	all := len(tl.Lanes) == tl.TotalLanes && len(tl.EffectClusters) == 0
	for _, l := range tl.Lanes {
		all = all && !l.droppedAnchors
	}
	if all {
		return nil
	}
	ids := map[string]bool{}
	for _, l := range tl.Lanes {
		ids[l.ID] = true
		for _, b := range l.Bars {
			ids[b.Anchor] = true
		}
		for _, a := range l.Anchors {
			ids[a] = true
		}
	}
	for _, e := range tl.Effects {
		ids[e.Anchor] = true
	}
	for _, a := range tl.EffectAnchors {
		ids[a] = true
	}
	return ids
}
