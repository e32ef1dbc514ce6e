package views_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
	"github.com/oncetrace/oncetrace/views/htmlcheck"
)

// The runs below copy what `oncetrace serve --demo` stored for the naive,
// crash and key-only scenarios (read back from /api/v1/executions/:id):
// the same steps, outcomes, keys, workers, gaps and effect times, as
// seconds after the execution's start.
var demoT0 = time.Date(2026, 12, 1, 2, 5, 45, 341208444, time.UTC)

func demoAt(sec float64) time.Time {
	return demoT0.Add(time.Duration(sec * float64(time.Second)))
}

type demoAttempt struct {
	n          int
	start, end float64 // end < 0: never reported
	outcome    trace.Outcome
	key        string
	worker     string
	dedup      bool
}

func demoStep(execID, id, tool, provider string, as ...demoAttempt) trace.Step {
	s := trace.Step{ExecutionID: execID, ID: id, Tool: tool, Effect: trace.EffectWrite, Provider: provider}
	for _, d := range as {
		a := trace.Attempt{ExecutionID: execID, StepID: id, Number: d.n, Tool: tool, Effect: trace.EffectWrite, Provider: provider,
			Outcome: d.outcome, IdempotencyKey: d.key, Worker: d.worker, Deduplicated: d.dedup, StartedAt: demoAt(d.start)}
		if d.end >= 0 {
			a.EndedAt = demoAt(d.end)
		}
		s.Attempts = append(s.Attempts, a)
	}
	return s
}

func demoEffect(execID, provider, id, key, stepID, target string, sec float64) trace.Effect {
	return trace.Effect{Provider: provider, ID: id, IdempotencyKey: key, ExecutionID: execID, StepID: stepID, Target: target, At: demoAt(sec)}
}

func demoRun(id string, end float64, steps []trace.Step, effects ...trace.Effect) trace.Run {
	return trace.Run{
		Execution:    trace.Execution{ID: id, Name: "billing-agent", Status: trace.StatusCompleted, StartedAt: demoAt(0), EndedAt: demoAt(end)},
		Steps:        steps,
		Effects:      effects,
		FedProviders: map[string]bool{"sandbox-mail": true, "crm": true},
	}
}

// naive: no key; the sandbox delivers the first email but loses the
// response, attempt 1 times out after 1 s, attempt 2 sends again.
func demoNaive() trace.Run {
	const id = "demo-naive-20261201-020545"
	return demoRun(id, 1.113, []trace.Step{
		demoStep(id, "step-1", "send_invoice_email", "sandbox-mail",
			demoAttempt{n: 1, start: 0.001767, end: 1.003230, outcome: trace.OutcomeTimeout, worker: "pid-26527"},
			demoAttempt{n: 2, start: 1.106011, end: 1.109072, outcome: trace.OutcomeOK, worker: "pid-26527"}),
		demoStep(id, "step-2", "record_in_crm", "crm",
			demoAttempt{n: 1, start: 1.110302, end: 1.112526, outcome: trace.OutcomeOK, worker: "pid-26527"}),
	},
		demoEffect(id, "sandbox-mail", "msg_6899cb1b2902", "", "step-1", "jordan@acme.dev", 0.003083),
		demoEffect(id, "sandbox-mail", "msg_66395ddd4d38", "", "step-1", "jordan@acme.dev", 1.108236),
		demoEffect(id, "crm", "crm_INV-2026-06_312baaee", "", "step-2", "INV-2026-06", 1.111598),
	)
}

// crash: the process is killed right after the send (attempt 1 never
// ends); a new process on another worker resumes 6 s later and sends again.
func demoCrash() trace.Run {
	const id = "demo-crash-20261201-020545"
	return demoRun(id, 6.030202, []trace.Step{
		demoStep(id, "step-1", "send_invoice_email", "sandbox-mail",
			demoAttempt{n: 1, start: 0.001622, end: -1, worker: "pid-26583"},
			demoAttempt{n: 2, start: 6.017301, end: 6.022856, outcome: trace.OutcomeOK, worker: "pid-26850"}),
		demoStep(id, "step-2", "record_in_crm", "crm",
			demoAttempt{n: 1, start: 6.025547, end: 6.028901, outcome: trace.OutcomeOK, worker: "pid-26850"}),
	},
		demoEffect(id, "sandbox-mail", "msg_660e49d93017", "", "step-1", "jordan@acme.dev", 0.003060),
		demoEffect(id, "sandbox-mail", "msg_465521f84f46", "", "step-1", "jordan@acme.dev", 6.020473),
		demoEffect(id, "crm", "crm_INV-2026-06_73e29f53", "", "step-2", "INV-2026-06", 6.027477),
	)
}

// key-only: a finished run repeated by a new process after its journal
// entry for the send was deleted by hand: the send carries the same key
// and the sandbox answers from its key store; the CRM step is replayed.
func demoKeyOnly() trace.Run {
	const id = "demo-key-only-20261201-020545"
	return demoRun(id, 0.013268, []trace.Step{
		demoStep(id, "step-1", "send_invoice_email", "sandbox-mail",
			demoAttempt{n: 1, start: 0.001049, end: 0.003314, outcome: trace.OutcomeOK, key: "ik_0def99b842207546", worker: "pid-26527"},
			demoAttempt{n: 2, start: 0.027101, end: 0.031477, outcome: trace.OutcomeOK, key: "ik_0def99b842207546", worker: "pid-26866", dedup: true}),
		demoStep(id, "step-2", "record_in_crm", "crm",
			demoAttempt{n: 1, start: 0.004718, end: 0.008336, outcome: trace.OutcomeOK, key: "ik_ba5c40ad7638f367", worker: "pid-26527"},
			demoAttempt{n: 2, start: 0.034521, end: 0.034521, outcome: trace.OutcomeReplayed, key: "ik_ba5c40ad7638f367", worker: "pid-26866"}),
	},
		demoEffect(id, "sandbox-mail", "msg_2f24bd002675", "ik_0def99b842207546", "step-1", "jordan@acme.dev", 0.002122),
		demoEffect(id, "crm", "crm_INV-2026-06_d65cf331", "", "step-2", "INV-2026-06", 0.006533),
	)
}

// demoMCP is the naive run as an MCP proxy records it (ingest/feed/mcp):
// the send's answer withheld, the client calling the tool again.
func demoMCP() trace.Run {
	run := demoNaive()
	for i := range run.Steps[0].Attempts {
		run.Steps[0].Attempts[i].RecognisedBy = "mcp"
	}
	run.Steps[0].Attempts[0].Error = "tools/call #7: the server answered; oncetrace (lose-response) withheld the answer from the client"
	return run
}

// demoTemporal is a Temporal activity's run (ingest/feed/temporal): the
// naive run's send, attempt 1 failing a start-to-close timeout on one
// worker, retried by Temporal on another; and the crash run's, attempt 1's
// worker killed, its heartbeat timing out.
func demoTemporal(run trace.Run, failure string) trace.Run {
	workers := []string{"host-a:1234", "host-b:5678"}
	for i := range run.Steps[0].Attempts {
		a := &run.Steps[0].Attempts[i]
		a.RecognisedBy, a.Tool, a.Worker = "temporal", "SendInvoiceEmail", workers[i]
	}
	run.Steps[0].Tool = "SendInvoiceEmail"
	run.Steps[0].Attempts[0].Error = failure
	return run
}

func demoIncidents(run trace.Run) []views.Incident {
	return views.NewIncidents(run, trace.AuditRun(run, trace.DefaultConfig), trace.Gaps(run, trace.DefaultConfig))
}

func TestIncidentSentences(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  trace.Run
		want []string
	}{
		{"naive", demoNaive(), []string{
			"2 emails to jordan@acme.dev from step-1 (send_invoice_email): sandbox-mail delivered msg_689…b2902 at +3 ms, " +
				"attempt 1 timed out at +1 s without seeing it, " +
				"attempt 2 sent it again without an idempotency key: msg_663…d4d38 at +1.11 s.",
		}},
		{"mcp", demoMCP(), []string{
			"2 emails to jordan@acme.dev from step-1 (send_invoice_email): the MCP server sandbox-mail delivered msg_689…b2902 at +3 ms, " +
				"the answer to tools/call #7 was lost (attempt 1 timed out at +1 s without seeing it), " +
				"the client called the tool again (attempt 2) and the server sent it again without an idempotency key: msg_663…d4d38 at +1.11 s.",
		}},
		{"temporal", demoTemporal(demoNaive(), "activity StartToClose timeout"), []string{
			"2 emails to jordan@acme.dev from activity SendInvoiceEmail (id step-1): attempt 1 on worker host-a:1234 timed out after 1 s (start-to-close) " +
				"after sandbox-mail delivered msg_689…b2902 at +3 ms; Temporal retried it as attempt 2 on worker host-b:5678, " +
				"which sent it again without an idempotency key: msg_663…d4d38 at +1.11 s.",
		}},
		{"temporal crash", demoTemporal(demoCrash(), ""), []string{
			"2 emails to jordan@acme.dev from activity SendInvoiceEmail (id step-1): attempt 1 on worker host-a:1234 never finished " +
				"after sandbox-mail delivered msg_660…93017 at +3 ms, then 6.02 s passed with no process running, " +
				"and Temporal retried it as attempt 2 on worker host-b:5678, which sent it again without an idempotency key: msg_465…84f46 at +6.02 s.",
		}},
		{"crash", demoCrash(), []string{
			"2 emails to jordan@acme.dev from step-1 (send_invoice_email): sandbox-mail delivered msg_660…93017 at +3 ms, " +
				"attempt 1 on pid-26583 never finished, then 6.02 s passed with no process running, " +
				"and attempt 2 on pid-26850 sent it again without an idempotency key: msg_465…84f46 at +6.02 s.",
		}},
		{"key-only", demoKeyOnly(), []string{
			"1 email to jordan@acme.dev from step-1 (send_invoice_email): sandbox-mail delivered msg_2f2…02675 at +2 ms, " +
				"attempt 1 on pid-26527 ended ok at +3 ms, attempt 2 on pid-26866 sent it again with the same key ik_0def…07546, " +
				"and sandbox-mail answered from its idempotency store without sending again.",
			"1 effect for INV-2026-06 from step-2 (record_in_crm): crm recorded crm_INV…cf331 at +6 ms, " +
				"attempt 1 on pid-26527 ended ok at +8 ms, attempt 2 on pid-26866 was replayed from the journal without calling the tool.",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := demoIncidents(tc.run)
			var got []string
			for _, in := range is {
				got = append(got, in.Sentence)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("sentences:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestIncidentMarks(t *testing.T) {
	mail := func(id string) trace.EffectRef { return trace.EffectRef{Provider: "sandbox-mail", ID: id} }
	for _, tc := range []struct {
		name         string
		run          trace.Run
		rules        []trace.Rule
		culprits     map[views.AttemptRef]string
		effectLabels map[trace.EffectRef]string
	}{
		{"naive", demoNaive(), []trace.Rule{trace.RuleDuplicateEffect},
			map[views.AttemptRef]string{{StepID: "step-1", Number: 2}: "caused duplicate"},
			map[trace.EffectRef]string{mail("msg_6899cb1b2902"): "1 of 2 · original", mail("msg_66395ddd4d38"): "2 of 2 · extra"}},
		// The duplicate and the crash that caused it are one incident.
		{"crash", demoCrash(), []trace.Rule{trace.RuleDuplicateEffect, trace.RuleReexecutedAfterCrash},
			map[views.AttemptRef]string{{StepID: "step-1", Number: 2}: "caused duplicate"},
			map[trace.EffectRef]string{mail("msg_660e49d93017"): "1 of 2 · original", mail("msg_465521f84f46"): "2 of 2 · extra"}},
		// Held repeats are not critical: nothing to mark.
		{"key-only", demoKeyOnly(), nil, map[views.AttemptRef]string{}, map[trace.EffectRef]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := demoIncidents(tc.run)
			m := views.NewIncidentMarks(is)
			if !maps.Equal(m.Culprits, tc.culprits) {
				t.Errorf("culprits: got %v, want %v", m.Culprits, tc.culprits)
			}
			if !maps.Equal(m.EffectLabels, tc.effectLabels) {
				t.Errorf("effect labels: got %v, want %v", m.EffectLabels, tc.effectLabels)
			}
			if tc.rules != nil {
				if len(is) != 1 || !slicesEqual(is[0].Rules, tc.rules) || is[0].Rule != tc.rules[0] || !is[0].Critical {
					t.Errorf("incidents: got %+v, want one critical incident of rules %v", is, tc.rules)
				}
			}
		})
	}
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A culprit is the attempt in flight when its effect happened: when the
// first attempt's email arrived after it timed out and the retry had not
// started, the retry is not blamed for it.
func TestIncidentCauseByTime(t *testing.T) {
	const id = "exec_late"
	run := demoRun(id, 3, []trace.Step{
		demoStep(id, "step-1", "send_invoice_email", "sandbox-mail",
			demoAttempt{n: 1, start: 0, end: 1, outcome: trace.OutcomeTimeout, worker: "w1"},
			demoAttempt{n: 2, start: 2, end: 2.1, outcome: trace.OutcomeOK, worker: "w1", key: "ik_retry"},
			demoAttempt{n: 3, start: 2.5, end: 2.6, outcome: trace.OutcomeOK, worker: "w1", key: "ik_retry", dedup: true}),
	},
		demoEffect(id, "sandbox-mail", "msg_a", "", "step-1", "jordan@acme.dev", 1.5),
		demoEffect(id, "sandbox-mail", "msg_b", "ik_retry", "step-1", "jordan@acme.dev", 2.05),
	)
	is := demoIncidents(run)
	if len(is) != 1 {
		t.Fatalf("incidents: got %d, want 1", len(is))
	}
	if got, want := is[0].Culprits, []int{2}; !slicesEqual(got, want) {
		t.Errorf("culprits: got %v, want %v", got, want)
	}
	want := "2 emails to jordan@acme.dev from step-1 (send_invoice_email): sandbox-mail delivered msg_a at +1.5 s, " +
		"attempt 1 timed out at +1 s without seeing it, attempt 2 sent it again with key ik_retry: msg_b at +2.05 s."
	if is[0].Sentence != want {
		t.Errorf("sentence:\n got %q\nwant %q", is[0].Sentence, want)
	}
}

// The sentence renders above the findings, in the header a live page
// receives again; its ids are links whose title holds the full id, and the
// header's badge shows the audit state beside the run status.
func TestIncidentInHeader(t *testing.T) {
	run := demoNaive()
	v := executionView(run)
	doc := renderChecked(t, views.ExecutionHeader(v), htmlcheck.Fragment)
	sentence := one(t, doc, "incident-sentence")
	if got, want := seenText(sentence), v.Incidents[0].Sentence; got != want {
		t.Errorf("rendered sentence: got %q, want %q", got, want)
	}
	var titles []string
	for n := range sentence.Descendants() {
		if n.Data == "a" {
			titles = append(titles, attr(n, "title"))
		}
	}
	if !slicesContain(titles, "sandbox-mail msg_66395ddd4d38") {
		t.Errorf("link titles: got %q, want the full id of the extra email", titles)
	}
	badge := one(t, doc, "audit-badge")
	if got, want := attr(badge, "data-state"), "critical"; got != want {
		t.Errorf("header badge state: got %q, want %q", got, want)
	}
	if got, want := text(one(t, doc, "run-status")), "completed"; got != want {
		t.Errorf("run status: got %q, want %q", got, want)
	}
}

// A clean run with warning findings wears "warnings", not "clean".
func TestAuditBadgeWarnings(t *testing.T) {
	for _, tc := range []struct {
		row  views.ExecutionRow
		want string
	}{
		{views.ExecutionRow{AuditState: trace.StateClean}, "clean"},
		{views.ExecutionRow{AuditState: trace.StateClean, Findings: 1}, "warnings"},
		{views.ExecutionRow{AuditState: trace.StateUnverified, Findings: 1}, "unverified"},
		{views.ExecutionRow{AuditState: trace.StateCritical, Findings: 2, CriticalFindings: 1}, "critical"},
		{views.ExecutionRow{}, ""},
	} {
		if got := tc.row.AuditBadgeState(); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.row, got, tc.want)
		}
	}
}

func slicesContain(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The other critical variants read from their data too.
func TestIncidentOtherVariants(t *testing.T) {
	const id = "exec_next_month"
	suppressed := demoRun(id, 1, []trace.Step{
		demoStep(id, "step-1", "send_invoice_email", "sandbox-mail",
			demoAttempt{n: 1, start: 0.1, end: 0.2, outcome: trace.OutcomeOK, key: "ik_invoice_jordan", worker: "w1", dedup: true}),
	}, demoEffect("exec_june", "sandbox-mail", "msg_june00000001", "ik_invoice_jordan", "step-1", "jordan@acme.dev", -86400))
	suppressed.Peers = []trace.Attempt{{ExecutionID: "exec_june", StepID: "step-1", Number: 1, Provider: "sandbox-mail", IdempotencyKey: "ik_invoice_jordan"}}

	const cid = "exec_charge"
	unsafe := demoRun(cid, 3, []trace.Step{
		demoStep(cid, "step-3", "charge_card", "stripe",
			demoAttempt{n: 1, start: 0, end: 1, outcome: trace.OutcomeTimeout, worker: "w1"},
			demoAttempt{n: 2, start: 1.5, end: 1.7, outcome: trace.OutcomeOK, worker: "w1"}),
	}, demoEffect(cid, "stripe", "ch_1", "", "step-3", "", 1.6))
	unsafe.Steps[0].Effect = trace.EffectUnsafe
	for i := range unsafe.Steps[0].Attempts {
		unsafe.Steps[0].Attempts[i].Effect = trace.EffectUnsafe
	}

	for _, tc := range []struct {
		name string
		run  trace.Run
		kind trace.IncidentKind
		want string
	}{
		{"suppressed", suppressed, trace.IncidentSuppressed,
			"No email from step-1 (send_invoice_email) was sent: attempt 1 sent key ik_invo…ordan and sandbox-mail answered from its idempotency store with msg_jun…00001, which belongs to exec_june: this run's email never went out."},
		{"unsafe retried", unsafe, trace.IncidentRepeated,
			"step-3 (charge_card) must not be retried, but was: attempt 1 timed out at +1 s without seeing it, attempt 2 ran it again at +1.5 s without an idempotency key; only 1 charge of it is known, ch_1 at +1.6 s."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := demoIncidents(tc.run)
			if len(is) != 1 || is[0].Kind != tc.kind {
				t.Fatalf("incidents: got %+v, want one of kind %s", is, tc.kind)
			}
			if is[0].Sentence != tc.want {
				t.Errorf("sentence:\n got %q\nwant %q", is[0].Sentence, tc.want)
			}
		})
	}
}

// Findings group by rule with counts: critical groups first, then by the
// natural order of their first step; ten findings show, the rest are
// behind "show N more".
func TestFindingsPanelGroups(t *testing.T) {
	finding := func(rule trace.Rule, step string) views.FindingView {
		return views.NewFindingView(trace.Finding{Rule: rule, Severity: trace.Severities[rule], StepID: step, Message: string(rule) + " " + step, Attempts: []int{1}})
	}
	var fs []views.FindingView
	// Text order would put step-231 before step-24 and step-3.
	for _, n := range []string{"231", "24", "3", "100", "12", "7", "8", "9", "10", "11", "1000", "2"} {
		fs = append(fs, finding(trace.RuleUnkeyedRetry, "step-"+n))
	}
	fs = append(fs, finding(trace.RuleDuplicateEffect, "step-24"), finding(trace.RuleUnsafeRetried, "step-9"), finding(trace.RuleOrphanEffect, "step-1"))

	doc := renderChecked(t, views.FindingsPanel(fs), htmlcheck.Fragment)
	groups := byTestID(doc, "finding-group")
	var got []string
	for _, g := range groups {
		got = append(got, attr(g, "data-rule")+" · "+attr(g, "data-count"))
	}
	want := []string{"unsafe_retried · 1", "duplicate_effect · 1", "orphan_effect · 1", "unkeyed_retry · 12"}
	if !slicesEqual(got, want) {
		t.Fatalf("groups: got %q, want %q", got, want)
	}
	if c := text(one(t, groups[3], "finding-group-count")); c != "· 12" {
		t.Errorf("count: got %q, want \"· 12\"", c)
	}
	var steps []string
	for _, li := range byTestID(groups[3], "finding") {
		steps = append(steps, strings.TrimPrefix(text(one(t, li, "finding-message")), "unkeyed_retry "))
	}
	wantSteps := []string{"step-2", "step-3", "step-7", "step-8", "step-9", "step-10", "step-11", "step-12", "step-24", "step-100", "step-231", "step-1000"}
	if !slicesEqual(steps, wantSteps) {
		t.Errorf("findings order: got %q, want %q", steps, wantSteps)
	}
	more := one(t, groups[3], "findings-more")
	if n := len(byTestID(more, "finding")); n != 2 {
		t.Errorf("behind \"show more\": got %d findings, want 2", n)
	}
	if s := text(more); !strings.Contains(s, "show 2 more") {
		t.Errorf("show more: got %q, want \"show 2 more\"", s)
	}
	if _, open := attrOK(more, "open"); open {
		t.Errorf("show more: got open, want closed")
	}
	if _, open := attrOK(groups[3], "open"); !open {
		t.Errorf("group: got closed, want open")
	}
	if len(byTestID(groups[0], "findings-more")) != 0 {
		t.Errorf("a group of one: got a \"show more\", want none")
	}
	if href := attr(one(t, doc, "jump-to-timeline"), "href"); href != "#timeline-title" {
		t.Errorf("jump past 15 findings: got href %q, want \"#timeline-title\"", href)
	}
	if few := renderChecked(t, views.FindingsPanel(fs[:3]), htmlcheck.Fragment); len(byTestID(few, "jump-to-timeline")) != 0 {
		t.Errorf("3 findings: got a jump to the timeline, want none")
	}
}
