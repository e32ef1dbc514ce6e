package trace

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// compareRun is execution id, started at start seconds after t0, with the
// given steps and effects; every attempt and effect is moved to id.
func compareRun(id string, start float64, steps []Step, effects ...Effect) Run {
	r := Run{Execution: Execution{ID: id, Status: StatusCompleted, StartedAt: at(start)}}
	for _, s := range steps {
		s.ExecutionID = id
		s.Attempts = slices.Clone(s.Attempts)
		for i := range s.Attempts {
			s.Attempts[i].ExecutionID = id
			s.Attempts[i].StartedAt = s.Attempts[i].StartedAt.Add(time.Duration(start * float64(time.Second)))
			if !s.Attempts[i].EndedAt.IsZero() {
				s.Attempts[i].EndedAt = s.Attempts[i].EndedAt.Add(time.Duration(start * float64(time.Second)))
			}
		}
		r.Steps = append(r.Steps, s)
	}
	for _, e := range effects {
		e.ExecutionID = id
		r.Effects = append(r.Effects, e)
	}
	return r
}

const invoiceArgs = `{"subject":"Your June invoice","to":"jordan@acme.dev"}`

// rowIDs are the rows' step ids, "a/b", with "-" for a missing side.
func rowIDs(c Comparison) []string {
	var out []string
	for _, r := range c.Steps {
		a, b := "-", "-"
		if r.A != nil {
			a = r.A.Step.ID
		}
		if r.B != nil {
			b = r.B.Step.ID
		}
		out = append(out, a+"/"+b)
	}
	return out
}

func kinds(ds []Difference) []DiffKind {
	var out []DiffKind
	for _, d := range ds {
		out = append(out, d.Kind)
	}
	return out
}

// TestCompareEmailCase is the usual question: yesterday's run sent one
// email, today's two, because step-2's retry sent no key.
func TestCompareEmailCase(t *testing.T) {
	lookup := step("step-1", "lookup_customer", EffectRead, try(1, 0, 0.2, OutcomeOK, args(`{"customer":"acme"}`)))
	yesterday := compareRun("exec_yesterday", 0, []Step{
		lookup,
		step("step-2", "send_invoice_email", EffectWrite, try(1, 0.5, 0.7, OutcomeOK, key("ik_1"), provider("mail-api"), args(invoiceArgs))),
	}, Effect{Provider: "mail-api", ID: "msg_1", IdempotencyKey: "ik_1", StepID: "step-2", Target: "jordan@acme.dev", At: at(0.6)})
	today := compareRun("exec_today", 86400, []Step{
		lookup,
		step("step-2", "send_invoice_email", EffectWrite,
			try(1, 0.5, 10.5, OutcomeTimeout, provider("mail-api"), args(invoiceArgs)),
			try(2, 10.6, 10.8, OutcomeOK, provider("mail-api"), args(invoiceArgs))),
	},
		Effect{Provider: "mail-api", ID: "msg_2", StepID: "step-2", Target: "jordan@acme.dev", At: at(86400.6)},
		Effect{Provider: "mail-api", ID: "msg_3", StepID: "step-2", Target: "jordan@acme.dev", At: at(86410.7)})

	c := Compare(yesterday, today)
	if got, want := rowIDs(c), []string{"step-1/step-1", "step-2/step-2"}; !slices.Equal(got, want) {
		t.Fatalf("rows: got %v, want %v", got, want)
	}
	if c.Steps[0].Differs() {
		t.Errorf("step-1: got differences %v, want none (the same lookup in both runs)", c.Steps[0].Differences)
	}
	row := c.Steps[1]
	if row.Match != MatchByStepID {
		t.Errorf("step-2: got match %q, want %q", row.Match, MatchByStepID)
	}
	if got, want := kinds(row.Differences), []DiffKind{DiffEffects, DiffAttempts, DiffUnkeyedRetry}; !slices.Equal(got, want) {
		t.Errorf("step-2 differences: got %v, want %v (%v)", got, want, row.Differences)
	}
	if got, want := row.Differences[0].Text, "b: 2 emails, a: 1"; got != want {
		t.Errorf("step-2 effect difference: got %q, want %q", got, want)
	}
	if got, want := row.Differences[2].Text, "b retried without a key"; got != want {
		t.Errorf("step-2 key difference: got %q, want %q", got, want)
	}
	if got, want := len(row.B.Effects), 2; got != want {
		t.Errorf("step-2 in b: got %d effects, want %d", got, want)
	}
	if got, want := c.Summary(), "1 step differs: step-2 (send_invoice_email) sends 2 emails in b, 1 in a."; got != want {
		t.Errorf("summary: got %q, want %q", got, want)
	}
	// The outcomes are the derived ones, last attempt last.
	if got, want := row.B.Outcomes, []Outcome{OutcomeTimeout, OutcomeOK}; !slices.Equal(got, want) {
		t.Errorf("step-2 outcomes in b: got %v, want %v", got, want)
	}
}

// TestCompareByToolArgs pairs steps whose ids differ (OpenTelemetry runs
// name steps after spans) by their tool and canonical args, and leaves
// the rest to one side, inserted where they fell in time.
func TestCompareByToolArgs(t *testing.T) {
	a := compareRun("exec_a", 0, []Step{
		step("span-a1", "lookup_customer", EffectRead, try(1, 0, 0.2, OutcomeOK, args(`{"customer":"acme"}`))),
		step("span-a2", "send_invoice_email", EffectWrite, try(1, 1, 1.2, OutcomeOK, args(invoiceArgs))),
		step("span-a3", "archive_invoice", EffectWrite, try(1, 3, 3.1, OutcomeOK)),
	})
	b := compareRun("exec_b", 100, []Step{
		// Another customer: the same tool, other args, so another call.
		step("span-b0", "lookup_customer", EffectRead, try(1, 0, 0.2, OutcomeOK, args(`{"customer":"globex"}`))),
		step("span-b2", "send_invoice_email", EffectWrite, try(1, 1, 1.5, OutcomeError, args(invoiceArgs))),
		step("span-b9", "notify_team", EffectWrite, try(1, 2, 2.1, OutcomeOK)),
	})
	c := Compare(a, b)
	want := []string{"span-a1/-", "-/span-b0", "span-a2/span-b2", "-/span-b9", "span-a3/-"}
	// span-b0 started at +0 like span-a1: b-only steps go after a's steps of
	// the same time.
	if got := rowIDs(c); !slices.Equal(got, want) {
		t.Fatalf("rows: got %v, want %v", got, want)
	}
	byRow := map[string]ComparedStep{}
	for i, id := range want {
		byRow[id] = c.Steps[i]
	}
	if got := byRow["span-a2/span-b2"].Match; got != MatchByToolArgs {
		t.Errorf("send_invoice_email: got match %q, want %q", got, MatchByToolArgs)
	}
	if got, want := kinds(byRow["span-a2/span-b2"].Differences), []DiffKind{DiffOutcome}; !slices.Equal(got, want) {
		t.Errorf("send_invoice_email differences: got %v, want %v", got, want)
	}
	for id, m := range map[string]StepMatch{"span-a1/-": MatchOnlyInA, "-/span-b0": MatchOnlyInB, "-/span-b9": MatchOnlyInB, "span-a3/-": MatchOnlyInA} {
		if got := byRow[id].Match; got != m {
			t.Errorf("%s: got match %q, want %q", id, got, m)
		}
	}
	if got, want := byRow["-/span-b9"].Differences[0].Text, "only in b"; got != want {
		t.Errorf("notify_team: got %q, want %q", got, want)
	}
	if got, want := byRow["span-a3/-"].Differences[0].Summary, "span-a3 (archive_invoice) ran only in a"; got != want {
		t.Errorf("archive_invoice: got %q, want %q", got, want)
	}
	if got := len(c.Differing()); got != 5 {
		t.Errorf("differing rows: got %d, want 5", got)
	}
}

// TestCompareIDBeforeToolArgs: a step id shared by both runs pairs them
// even when another step of b has the same call; what the ids paired is
// not offered to the tool+args pass again.
func TestCompareIDBeforeToolArgs(t *testing.T) {
	a := compareRun("exec_a", 0, []Step{
		step("step-1", "send_invoice_email", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_a"), args(invoiceArgs))),
	})
	b := compareRun("exec_b", 0, []Step{
		step("step-0", "send_invoice_email", EffectWrite, try(1, 0, 1, OutcomeOK, key("ik_a"), args(invoiceArgs))),
		step("step-1", "send_invoice_email", EffectWrite, try(1, 2, 3, OutcomeOK, key("ik_b"), args(`{"to":"sam@acme.dev"}`))),
	})
	c := Compare(a, b)
	if got, want := rowIDs(c), []string{"step-1/step-1", "-/step-0"}; !slices.Equal(got, want) {
		t.Fatalf("rows: got %v, want %v", got, want)
	}
	if got, want := kinds(c.Steps[0].Differences), []DiffKind{DiffKey, DiffArgs}; !slices.Equal(got, want) {
		t.Errorf("step-1 differences: got %v, want %v", got, want)
	}
	if got := c.Steps[0].Differences[0].Text; !strings.Contains(got, "a ik_a") || !strings.Contains(got, "b ik_b") {
		t.Errorf("step-1 key difference: got %q, want both keys named", got)
	}
}

// TestCompareIdentical: a run compared with itself differs nowhere.
func TestCompareIdentical(t *testing.T) {
	r := designExample()
	c := Compare(r, r)
	if len(c.Steps) != 1 || c.Steps[0].Differs() {
		t.Fatalf("got %+v, want one row without differences", c.Steps)
	}
	if got, want := c.Summary(), "No step differs."; got != want {
		t.Errorf("summary: got %q, want %q", got, want)
	}
}
