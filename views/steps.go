package views

import (
	"cmp"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/oncetrace/oncetrace/trace"
)

// The execution page's views: the timeline (the default) and the step
// table, chosen by ?view=.
const (
	ViewTimeline = "timeline"
	ViewSteps    = "steps"
)

// ExecutionViews are the values ?view= may take.
var ExecutionViews = []string{ViewTimeline, ViewSteps}

// StepSorts are the step table's columns it can be sorted by (?sort=),
// "step" (natural step order) first, the default.
var StepSorts = []string{"step", "tool", "class", "attempts", "outcome", "effects", "findings"}

// SortDirs are the values ?dir= may take; asc is the default.
var SortDirs = []string{"asc", "desc"}

// StepRow is one step of the step table.
type StepRow struct {
	StepID   string
	Tool     string
	Class    trace.EffectClass
	Attempts int
	// Outcome is the derived outcome of the step's last attempt: how the
	// step ended.
	Outcome trace.Outcome
	Effects int
	// Findings counts the findings naming the step; Critical says whether
	// one of them is critical.
	Findings int
	Critical bool
	// DetailURL is the last attempt's detail: the page's script shows it
	// in the detail panel, and without it the link opens the attempt's page.
	DetailURL string
	// LaneURL is the last attempt's place on the timeline.
	LaneURL string
	// RecognisedBy names the span-map rule that recognised the step's
	// tool spans when it is not a framework's own (the generic rule): the
	// step is an inference from attributes that say "tool", shown as such.
	RecognisedBy string
	// Provider is the step's provider: for a call an MCP proxy recorded,
	// the MCP server.
	Provider string
}

// Recognised says how the step was told a tool call, and its title why:
// by an MCP proxy, which saw the tools/call itself, or by a span-map rule
// that is not a framework's own.
func (r StepRow) Recognised() (label, title string) {
	switch r.RecognisedBy {
	case "":
		return "", ""
	case "mcp":
		return " MCP tools/call to " + cmp.Or(r.Provider, "its server"),
			"recorded by oncetrace's MCP proxy (tap --mcp or mcp-stdio), which saw the call and its answer; the class is the tool's annotations'"
	}
	return " recognised by the " + r.RecognisedBy + " rule", "no entry of the span map names this framework; its spans say they are tool calls"
}

// StepTable is the execution page's step table, sorted.
type StepTable struct {
	Rows []StepRow
	Sort string // one of StepSorts
	Dir  string // one of SortDirs
	// ExecutionID builds the headers' sort links.
	ExecutionID string
}

// StepTableInput is what NewStepTable needs: the run the page loaded, its
// findings, and the sort the reader asked for (already validated; "" is
// the default).
type StepTableInput struct {
	Run       trace.Run
	Findings  []trace.Finding
	Sort, Dir string
}

// NewStepTable builds one row per step, sorted by in.Sort and in.Dir; ties
// keep natural step order.
func NewStepTable(in StepTableInput) StepTable {
	t := StepTable{Sort: cmp.Or(in.Sort, StepSorts[0]), Dir: cmp.Or(in.Dir, SortDirs[0]), ExecutionID: in.Run.Execution.ID}
	effects := in.Run.StepEffects()
	findings := map[string]int{}
	critical := map[string]bool{}
	for _, f := range in.Findings {
		if f.StepID == "" {
			continue
		}
		findings[f.StepID]++
		if f.Severity == trace.SeverityCritical {
			critical[f.StepID] = true
		}
	}
	for _, st := range in.Run.Steps {
		r := StepRow{StepID: st.ID, Tool: st.ToolName(), Class: st.Class(), Attempts: len(st.Attempts), Provider: st.ProviderName(),
			Effects: len(effects[st.ID]), Findings: findings[st.ID], Critical: critical[st.ID]}
		for _, a := range st.Attempts {
			r.RecognisedBy = cmp.Or(r.RecognisedBy, a.RecognisedBy)
		}
		if n := len(st.Attempts); n > 0 {
			last := st.Attempts[n-1]
			r.Outcome = in.Run.Outcome(last)
			r.DetailURL = AttemptURL(t.ExecutionID, st.ID, last.Number)
			r.LaneURL = ExecutionURL(t.ExecutionID) + "#" + AttemptAnchor(st.ID, last.Number)
		} else {
			r.DetailURL = ExecutionURL(t.ExecutionID)
			r.LaneURL = r.DetailURL
		}
		t.Rows = append(t.Rows, r)
	}
	by := stepColumns[t.Sort]
	if by == nil {
		by = stepColumns[StepSorts[0]]
	}
	slices.SortStableFunc(t.Rows, func(a, b StepRow) int {
		c := by(a, b)
		if t.Dir == "desc" {
			c = -c
		}
		if c == 0 {
			c = trace.CompareNatural(a.StepID, b.StepID)
		}
		return c
	})
	return t
}

// stepColumns compares two rows by a column, ascending; ties fall back to
// natural step order.
var stepColumns = map[string]func(a, b StepRow) int{
	"step":     func(a, b StepRow) int { return trace.CompareNatural(a.StepID, b.StepID) },
	"tool":     func(a, b StepRow) int { return trace.CompareNatural(a.Tool, b.Tool) },
	"class":    func(a, b StepRow) int { return cmp.Compare(a.Class, b.Class) },
	"attempts": func(a, b StepRow) int { return cmp.Compare(a.Attempts, b.Attempts) },
	"outcome":  func(a, b StepRow) int { return cmp.Compare(outcomeRank(a.Outcome), outcomeRank(b.Outcome)) },
	"effects":  func(a, b StepRow) int { return cmp.Compare(a.Effects, b.Effects) },
	"findings": func(a, b StepRow) int {
		return cmp.Or(cmp.Compare(a.Findings, b.Findings), compareBool(a.Critical, b.Critical))
	},
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// outcomeRank orders outcomes from fine to worst, so that sorting by
// outcome descending puts the steps that ended badly first.
func outcomeRank(o trace.Outcome) int {
	switch o {
	case trace.OutcomeOK:
		return 0
	case trace.OutcomeReplayed:
		return 1
	case trace.OutcomeRunning:
		return 2
	case trace.OutcomeTimeout:
		return 3
	case trace.OutcomeLost:
		return 4
	case trace.OutcomeError:
		return 5
	}
	return 6
}

// StepsURL is an execution's step table, sorted by a column of StepSorts
// in a direction of SortDirs; "" leaves the default.
func StepsURL(executionID, sort, dir string) string {
	q := url.Values{"view": {ViewSteps}}
	if sort != "" && sort != StepSorts[0] {
		q.Set("sort", sort)
	}
	if dir != "" && dir != SortDirs[0] {
		q.Set("dir", dir)
	}
	return executionURL(executionID, "", q)
}

// SortURL is the link of a column's header: sorted by it, or, when it is
// the current sort, in the other direction.
func (t StepTable) SortURL(column string) string {
	dir := "asc"
	if column == t.Sort && t.Dir == "asc" {
		dir = "desc"
	}
	return StepsURL(t.ExecutionID, column, dir)
}

// AriaSort is a header's aria-sort: the table's direction on the column it
// is sorted by, "" (no attribute) on the others.
func (t StepTable) AriaSort(column string) string {
	if column != t.Sort {
		return ""
	}
	if t.Dir == "desc" {
		return "descending"
	}
	return "ascending"
}

// stepClassLabel is a class in a table cell: short, since the detail
// explains what unknown means.
func stepClassLabel(c trace.EffectClass) string {
	if c == "" {
		return "—"
	}
	return string(c)
}

// findingsLabel is a step's findings count with the icon of the worst, so
// that a marked row does not rely on colour.
func findingsLabel(r StepRow) string {
	switch {
	case r.Findings == 0:
		return "—"
	case r.Critical:
		return severityIcon(trace.SeverityCritical) + " " + strconv.Itoa(r.Findings) + " · critical"
	}
	return severityIcon(trace.SeverityWarning) + " " + strconv.Itoa(r.Findings) + " · warning"
}

func stepRowClass(r StepRow) string {
	switch {
	case r.Critical:
		return "step-row has-findings has-critical"
	case r.Findings > 0:
		return "step-row has-findings"
	}
	return "step-row"
}

// sortArrow shows the direction beside the sorted column's name.
func (t StepTable) sortArrow(column string) string {
	switch t.AriaSort(column) {
	case "ascending":
		return " ▲"
	case "descending":
		return " ▼"
	}
	return ""
}

// stepHeaders are the step table's columns: the sort key and its title.
var stepHeaders = []struct{ Sort, Title string }{
	{"step", "Step"}, {"tool", "Tool"}, {"class", "Class"}, {"attempts", "Attempts"},
	{"outcome", "Outcome"}, {"effects", "Effects"}, {"findings", "Findings"},
}

func numericColumn(sort string) bool {
	return sort == "attempts" || sort == "effects" || sort == "findings"
}

// ShowSteps makes the page show the step table instead of the timeline.
// The findings, the audit and the incident sentences link to attempts and
// effects by their timeline anchors ("#a-…"), which the table does not
// have: those links lead to the timeline view instead.
func (v *ExecutionView) ShowSteps(t StepTable) {
	v.View, v.Steps = ViewSteps, t
	timeline := ExecutionURL(v.Execution.ID)
	toTimeline := func(href string) string {
		if strings.HasPrefix(href, "#") {
			return timeline + href
		}
		return href
	}
	for i := range v.Findings {
		for j := range v.Findings[i].Links {
			v.Findings[i].Links[j].Href = toTimeline(v.Findings[i].Links[j].Href)
		}
	}
	for _, ls := range [][]Link{v.Audit.Unverified, v.Audit.Unattributed} {
		for i := range ls {
			ls[i].Href = toTimeline(ls[i].Href)
		}
	}
	for i := range v.Incidents {
		for j := range v.Incidents[i].Parts {
			v.Incidents[i].Parts[j].Href = toTimeline(v.Incidents[i].Parts[j].Href)
		}
	}
}
