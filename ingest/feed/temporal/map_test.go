package temporal_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	historypb "go.temporal.io/api/history/v1"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed/temporal"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

// The histories in testdata were printed by `temporal workflow show
// --output json` against a dev server (testdata/capture records them):
//
//	invoice: a signal, a timer, a local activity, SendInvoiceEmail
//	         timed out (start-to-close) in attempts 1 and 2 and answered
//	         in 3, a child workflow, ChargeCard timed out (heartbeat) on
//	         one worker and answered on the other in attempt 2
//	receipt: the child workflow's own history
//	refund:  a failed workflow: Refund failed (502) then was declined
//	export:  still running: two activities scheduled, not yet closed
const (
	invoiceRun = "invoice-050603/8478e81a-707e-491a-a907-017d11492fe6"
	receiptRun = "invoice-050603-receipt/01a23525-535b-784c-9d8f-a5941d3b557d"
	refundRun  = "refund-050603/01a23525-3fb0-7f1d-980f-d4195c66d341"
	exportRun  = "export-050603/01a23525-5b31-7b5a-9066-364ae972d5f9"
	// The workers' identities in the histories are 4121@host-a@ and
	// 5678@host-b@, named as their processes' OpenTelemetry resources
	// name them (trace.NormaliseWorker).
	workerA = "host-a:4121"
	workerB = "host-b:5678"
)

var histories = []string{"invoice", "receipt", "refund", "export"}

func readHistory(t *testing.T, name string) *historypb.History {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return readHistoryBytes(t, raw)
}

func readHistoryBytes(t *testing.T, raw []byte) *historypb.History {
	t.Helper()
	h, err := temporal.ReadHistoryJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func mapHistory(t *testing.T, h *historypb.History, opts temporal.MapOptions) []trace.Event {
	t.Helper()
	evs, err := temporal.MapHistory(h, opts)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// prefix is the history's first n events.
func prefix(h *historypb.History, n int) *historypb.History {
	return &historypb.History{Events: h.GetEvents()[:n]}
}

// testStore is a real SQLite store behind the real writer.
type testStore struct {
	db *store.DB
	w  *writer.Writer
}

func newStore(t *testing.T) testStore {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(db, writer.DefaultConfig)
	t.Cleanup(func() {
		w.Close()
		db.Close()
	})
	return testStore{db: db, w: w}
}

func (s testStore) write(t *testing.T, evs []trace.Event) writer.Result {
	t.Helper()
	res, err := s.w.Write(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (s testStore) read(t *testing.T, id string) store.ExecutionRead {
	t.Helper()
	r, err := s.db.ReadExecution(context.Background(), id, nil)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	return r
}

// view is what a read shows that must not depend on how or in which
// order the events arrived.
func view(t *testing.T, r store.ExecutionRead) string {
	t.Helper()
	b, err := json.MarshalIndent(struct {
		Run      trace.Run
		Findings []trace.Finding
	}{r.Run, r.Findings}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func step(t *testing.T, r trace.Run, id string) trace.Step {
	t.Helper()
	for _, s := range r.Steps {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no step %q in %s", id, r.Execution.ID)
	return trace.Step{}
}

func TestRetriedActivityThroughTheStore(t *testing.T) {
	s := newStore(t)
	evs := mapHistory(t, readHistory(t, "invoice"), temporal.MapOptions{Namespace: "default"})
	if res := s.write(t, evs); res.Accepted != len(evs) || res.Duplicates != 0 {
		t.Fatalf("write: got %+v, want %d accepted", res, len(evs))
	}
	r := s.read(t, invoiceRun)
	x := r.Run.Execution
	if x.Name != "InvoiceWorkflow" || x.Status != trace.StatusCompleted || x.StartedAt.IsZero() || !x.EndedAt.After(x.StartedAt) {
		t.Errorf("execution: got %q %s %v..%v, want InvoiceWorkflow completed with its start and end", x.Name, x.Status, x.StartedAt, x.EndedAt)
	}
	if x.Labels["namespace"] != "default" || len(x.Labels["trace_id"]) != 32 {
		t.Errorf("labels: got %v, want the namespace and the workflow's trace id", x.Labels)
	}

	send := step(t, r.Run, "send-invoice")
	if send.Tool != "SendInvoiceEmail" || len(send.Attempts) != 3 {
		t.Fatalf("send-invoice: got tool %q and %d attempts, want SendInvoiceEmail and 3", send.Tool, len(send.Attempts))
	}
	for i, a := range send.Attempts[:2] {
		if !a.StartedAt.IsZero() || !a.EndedAt.IsZero() || a.Worker != "" {
			t.Errorf("attempt %d: got start %v, end %v, worker %q; want none: the history does not hold them", a.Number, a.StartedAt, a.EndedAt, a.Worker)
		}
		if a.Number != i+1 || a.TraceID != x.Labels["trace_id"] {
			t.Errorf("attempt %d: got number %d, trace %q", i+1, a.Number, a.TraceID)
		}
	}
	if a := send.Attempts[0]; a.Outcome != trace.OutcomeError || a.Error != "failed before attempt 2; how is not recorded (Temporal keeps only the last attempt's failure)" {
		t.Errorf("attempt 1: got %s %q, want an error known only by count", a.Outcome, a.Error)
	}
	if a := send.Attempts[1]; a.Outcome != trace.OutcomeTimeout || !strings.HasPrefix(a.Error, "start-to-close timeout (recorded by Temporal as attempt 3's last failure") {
		t.Errorf("attempt 2: got %s %q, want the start-to-close timeout Temporal kept as attempt 3's last failure", a.Outcome, a.Error)
	}
	last := send.Attempts[2]
	if last.Outcome != trace.OutcomeOK || last.Worker != workerB || last.StartedAt.IsZero() || !last.EndedAt.After(last.StartedAt) {
		t.Errorf("attempt 3: got %s on %q, %v..%v; want ok on %s with its times", last.Outcome, last.Worker, last.StartedAt, last.EndedAt, workerB)
	}
	if string(last.Args) != `{"amount":4200,"subject":"Your June invoice","to":"jordan@acme.dev"}` ||
		string(last.Result) != `{"message_id":"msg_jordan@acme.dev","status":"sent"}` {
		t.Errorf("attempt 3: got args %s result %s, want the payloads as canonical JSON", last.Args, last.Result)
	}
	if send.Effect != trace.EffectUnknown {
		t.Errorf("send-invoice: got class %q, want unknown (nobody classified it)", send.Effect)
	}

	charge := step(t, r.Run, "charge-card")
	if len(charge.Attempts) != 2 {
		t.Fatalf("charge-card: got %d attempts, want 2", len(charge.Attempts))
	}
	if a := charge.Attempts[0]; a.Outcome != trace.OutcomeTimeout || !strings.HasPrefix(a.Error, "heartbeat timeout") || a.Worker != "" || !a.StartedAt.IsZero() {
		t.Errorf("charge-card attempt 1: got %s %q on %q at %v, want a heartbeat timeout with no worker and no time", a.Outcome, a.Error, a.Worker, a.StartedAt)
	}
	if a := charge.Attempts[1]; a.Outcome != trace.OutcomeOK || a.Worker != workerB {
		t.Errorf("charge-card attempt 2: got %s on %q, want ok on %s", a.Outcome, a.Worker, workerB)
	}

	local := step(t, r.Run, "1")
	if local.Tool != "LookupCustomer" || len(local.Attempts) != 1 || local.Attempts[0].Outcome != trace.OutcomeOK ||
		local.Attempts[0].Worker != workerB || string(local.Attempts[0].Result) != `"cus_jordan@acme.dev"` {
		t.Errorf("local activity: got %+v, want LookupCustomer ok on %s with its result", local, workerB)
	}
	child := step(t, r.Run, "invoice-050603-receipt")
	if a := child.Attempts[0]; child.Tool != "ReceiptWorkflow" || a.Outcome != trace.OutcomeOK || a.StartedAt.IsZero() || !a.EndedAt.After(a.StartedAt) {
		t.Errorf("child workflow: got %+v, want ReceiptWorkflow ok with its times", child)
	}
	if len(r.Run.Steps) != 4 {
		t.Errorf("steps: got %d, want 4 (local activity, send-invoice, child, charge-card)", len(r.Run.Steps))
	}

	var names []string
	for _, sp := range r.Run.Spans {
		names = append(names, sp.Name)
		if sp.Role != trace.RoleContext || sp.StartedAt.IsZero() || sp.EndedAt.Before(sp.StartedAt) {
			t.Errorf("span %q: got role %s, %v..%v, want a context span with its times", sp.Name, sp.Role, sp.StartedAt, sp.EndedAt)
		}
	}
	if strings.Join(names, ",") != "signal approve,timer 6 (100ms)" {
		t.Errorf("context spans: got %q, want the signal and the timer", names)
	}

	// An unclassified activity may write: retried without a key, it is
	// what unkeyed_retry exists for.
	rules := map[string]bool{}
	for _, f := range r.Findings {
		rules[string(f.Rule)+" "+f.StepID] = true
	}
	if !rules["unkeyed_retry send-invoice"] || !rules["unkeyed_retry charge-card"] {
		t.Errorf("findings: got %v, want unkeyed_retry for both retried activities", rules)
	}
}

func TestToolClassesApplyToActivityTypes(t *testing.T) {
	classes, err := ingest.ParseToolClasses("Send*=write,Lookup*=read")
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t)
	s.write(t, mapHistory(t, readHistory(t, "invoice"), temporal.MapOptions{ToolClasses: classes}))
	r := s.read(t, invoiceRun)
	for id, want := range map[string]trace.EffectClass{"send-invoice": trace.EffectWrite, "1": trace.EffectRead, "charge-card": trace.EffectUnknown} {
		if got := step(t, r.Run, id).Effect; got != want {
			t.Errorf("step %s: got class %q, want %q", id, got, want)
		}
	}
}

func TestImportTwiceChangesNothing(t *testing.T) {
	for _, name := range histories {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			evs := mapHistory(t, readHistory(t, name), temporal.MapOptions{Namespace: "default"})
			s.write(t, evs)
			id := evs[0].ExecutionID()
			before := view(t, s.read(t, id))
			again := mapHistory(t, readHistory(t, name), temporal.MapOptions{Namespace: "default"})
			if res := s.write(t, again); res.Accepted != 0 || res.Duplicates != len(again) {
				t.Errorf("second import: got %+v, want all %d duplicates", res, len(again))
			}
			if after := view(t, s.read(t, id)); after != before {
				t.Errorf("second import changed the execution:\n%s\nwant\n%s", after, before)
			}
		})
	}
}

// A longer prefix of a history maps to the same events with the same
// ids and bodies, and more: what a follower re-reading a growing history
// sends again is a duplicate.
func TestLongerPrefixIsASuperset(t *testing.T) {
	for _, name := range histories {
		h := readHistory(t, name)
		whole := map[string]string{}
		for _, ev := range mapHistory(t, h, temporal.MapOptions{}) {
			if _, dup := whole[ev.ID]; dup {
				t.Fatalf("%s: event id %s made twice", name, ev.ID)
			}
			whole[ev.ID] = string(ev.Body)
		}
		for n := 1; n <= len(h.GetEvents()); n++ {
			for _, ev := range mapHistory(t, prefix(h, n), temporal.MapOptions{}) {
				if body, ok := whole[ev.ID]; !ok || body != string(ev.Body) {
					t.Fatalf("%s: the first %d events made %s, which the whole history does not (it has %q)", name, n, ev.Body, body)
				}
			}
		}
	}
}

// Importing a prefix then the whole history (as a follower does) stores
// what importing the whole once does, including the attempt that was
// running in the prefix and ended later.
func TestPrefixThenWholeIsTheWhole(t *testing.T) {
	h := readHistory(t, "invoice")
	// Event 13 is send-invoice's ActivityTaskStarted: after it, attempt 3
	// is running; event 14 completes it.
	if got := h.GetEvents()[12].GetActivityTaskStartedEventAttributes().GetAttempt(); got != 3 {
		t.Fatalf("event 13: got attempt %d, want ActivityTaskStarted of attempt 3", got)
	}
	once := newStore(t)
	once.write(t, mapHistory(t, h, temporal.MapOptions{}))
	want := view(t, once.read(t, invoiceRun))

	for _, n := range []int{1, 12, 13, 20, 27, 28} {
		s := newStore(t)
		s.write(t, mapHistory(t, prefix(h, n), temporal.MapOptions{}))
		mid := s.read(t, invoiceRun)
		if mid.Run.Execution.Status != trace.StatusRunning {
			t.Errorf("after %d events: got status %s, want running", n, mid.Run.Execution.Status)
		}
		if n == 13 {
			a := step(t, mid.Run, "send-invoice").Attempts[2]
			if a.Number != 3 || a.Finished() || a.Worker != workerB || mid.Run.Outcome(a) != trace.OutcomeRunning {
				t.Errorf("after 13 events: got attempt %d %s on %q, want attempt 3 running on %s", a.Number, mid.Run.Outcome(a), a.Worker, workerB)
			}
		}
		if n == 27 {
			// charge-card is scheduled, not started: a history holds no
			// start yet, and send-invoice's attempts went on before it.
			a := step(t, mid.Run, "charge-card").Attempts[0]
			if !a.StartedAt.IsZero() || mid.Run.Outcome(a) != trace.OutcomeRunning {
				t.Errorf("after 27 events: got charge-card attempt 1 %s from %v, want running with no start", mid.Run.Outcome(a), a.StartedAt)
			}
		}
		s.write(t, mapHistory(t, h, temporal.MapOptions{}))
		if got := view(t, s.read(t, invoiceRun)); got != want {
			t.Errorf("the first %d events, then all: got\n%s\nwant\n%s", n, got, want)
		}
	}
}

func TestFailedWorkflow(t *testing.T) {
	s := newStore(t)
	s.write(t, mapHistory(t, readHistory(t, "refund"), temporal.MapOptions{}))
	r := s.read(t, refundRun)
	if x := r.Run.Execution; x.Status != trace.StatusFailed || x.Labels["failure"] != "activity error: card declined (Declined, non-retryable)" {
		t.Errorf("execution: got %s with labels %v, want failed with the failure", x.Status, x.Labels)
	}
	refund := step(t, r.Run, "refund")
	if len(refund.Attempts) != 2 {
		t.Fatalf("refund: got %d attempts, want 2", len(refund.Attempts))
	}
	if a := refund.Attempts[0]; a.Outcome != trace.OutcomeError || !strings.HasPrefix(a.Error, "gateway answered 502 (recorded by Temporal as attempt 2's last failure") {
		t.Errorf("attempt 1: got %s %q, want the application failure Temporal kept", a.Outcome, a.Error)
	}
	if a := refund.Attempts[1]; a.Outcome != trace.OutcomeError || a.Error != "card declined (Declined, non-retryable)" || a.Worker != workerA {
		t.Errorf("attempt 2: got %s %q on %q, want declined on %s", a.Outcome, a.Error, a.Worker, workerA)
	}
}

func TestRunningWorkflow(t *testing.T) {
	s := newStore(t)
	s.write(t, mapHistory(t, readHistory(t, "export"), temporal.MapOptions{}))
	r := s.read(t, exportRun)
	if x := r.Run.Execution; x.Status != trace.StatusRunning || !x.EndedAt.IsZero() {
		t.Errorf("execution: got %s ended %v, want running", x.Status, x.EndedAt)
	}
	// Temporal writes an activity's ActivityTaskStarted only when it
	// closes: a scheduled activity is attempt 1, running.
	for _, id := range []string{"export", "sync"} {
		st := step(t, r.Run, id)
		if len(st.Attempts) != 1 || r.Run.Outcome(st.Attempts[0]) != trace.OutcomeRunning || len(st.Attempts[0].Args) == 0 {
			t.Errorf("step %s: got %+v, want one running attempt with its arguments", id, st)
		}
	}
}

// The parent's history and the child's own give one child execution,
// linked to its parent, whichever comes first.
func TestChildWorkflowLinksToItsExecution(t *testing.T) {
	parent := mapHistory(t, readHistory(t, "invoice"), temporal.MapOptions{})
	child := mapHistory(t, readHistory(t, "receipt"), temporal.MapOptions{})
	var views []string
	for _, order := range [][][]trace.Event{{parent, child}, {child, parent}} {
		s := newStore(t)
		for _, evs := range order {
			s.write(t, evs)
		}
		r := s.read(t, receiptRun)
		x := r.Run.Execution
		if x.Name != "ReceiptWorkflow" || x.Status != trace.StatusCompleted || x.Labels["parent"] != invoiceRun || x.StartedAt.IsZero() || x.EndedAt.IsZero() {
			t.Errorf("child execution: got %+v, want ReceiptWorkflow completed with its times, parent %s", x, invoiceRun)
		}
		views = append(views, view(t, r))
	}
	if views[0] != views[1] {
		t.Errorf("parent then child:\n%s\nchild then parent:\n%s", views[0], views[1])
	}
	// The parent's history alone already names the child's execution.
	s := newStore(t)
	s.write(t, parent)
	if x := s.read(t, receiptRun).Run.Execution; x.Status != trace.StatusCompleted || x.Labels["parent"] != invoiceRun {
		t.Errorf("child from the parent's history: got %+v, want completed with its parent", x)
	}
}

// screaming matches the enum values `temporal workflow show` prints, for
// rewriting them the other way Temporal's JSON spells them.
var screaming = regexp.MustCompile(`"(EVENT_TYPE|TIMEOUT_TYPE|TASK_QUEUE_KIND|PARENT_CLOSE_POLICY|WORKFLOW_ID_REUSE_POLICY|RETRY_STATE)_([A-Z_]+)"`)

func TestEnumSpellings(t *testing.T) {
	for _, name := range histories {
		raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		camel := screaming.ReplaceAllFunc(raw, func(m []byte) []byte {
			words := strings.Split(strings.ToLower(string(screaming.FindSubmatch(m)[2])), "_")
			for i, w := range words {
				words[i] = strings.ToUpper(w[:1]) + w[1:]
			}
			return []byte(`"` + strings.Join(words, "") + `"`)
		})
		if bytes.Equal(camel, raw) || !bytes.Contains(camel, []byte(`"WorkflowExecutionStarted"`)) {
			t.Fatalf("%s: the rewrite changed nothing", name)
		}
		want := mapHistory(t, readHistoryBytes(t, raw), temporal.MapOptions{})
		got := mapHistory(t, readHistoryBytes(t, camel), temporal.MapOptions{})
		if len(got) != len(want) {
			t.Fatalf("%s: got %d events from the short enum names, want %d", name, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i].Body, want[i].Body) {
				t.Errorf("%s: got %s from the short enum names, want %s", name, got[i].Body, want[i].Body)
			}
		}
	}
}

func TestReadHistoryJSONAcceptsAResponse(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "refund.json"))
	if err != nil {
		t.Fatal(err)
	}
	wrapped := []byte(`{"history":` + string(raw) + `,"nextPageToken":null,"archived":false}`)
	if got, want := len(readHistoryBytes(t, wrapped).GetEvents()), len(readHistory(t, "refund").GetEvents()); got != want {
		t.Errorf("got %d events, want %d", got, want)
	}
}

func TestReadHistoryJSONErrors(t *testing.T) {
	started := `{"eventId":"1","eventType":"EVENT_TYPE_WORKFLOW_EXECUTION_STARTED","workflowExecutionStartedEventAttributes":{"workflowType":{"name":"W"},"workflowId":"w","originalExecutionRunId":"r"}}`
	timer := func(id int) string {
		return `{"eventId":"` + strconv.Itoa(id) + `","eventType":"EVENT_TYPE_TIMER_FIRED","timerFiredEventAttributes":{"timerId":"1"}}`
	}
	many := make([]string, temporal.MaxHistoryEvents)
	many[0] = started
	for i := 1; i < len(many); i++ {
		many[i] = timer(i + 1)
	}
	tooMany := append(many, timer(len(many)+1))
	for _, c := range []struct{ name, in, want string }{
		{"not JSON", `events: []`, "history: not a JSON object"},
		{"no events", `{}`, "history.events: none"},
		{"wrong type", `{"events":[{"eventId":"x"}]}`, "history: not a Temporal workflow history"},
		{"not from the start", `{"events":[` + timer(2) + `]}`, "history.events[0]: event 2 is TimerFired; want WorkflowExecutionStarted"},
		{"a gap", `{"events":[` + started + `,` + timer(3) + `]}`, "history.events[1].eventId: 3; want 2"},
		{"no attributes", `{"events":[` + started + `,{"eventId":"2","eventType":"EVENT_TYPE_TIMER_FIRED"}]}`, "history.events[1]: event 2 (TimerFired) has no attributes"},
		{"too many", `{"events":[` + strings.Join(tooMany, ",") + `]}`, "history.events: 51201 events, over the limit of 51200"},
	} {
		_, err := temporal.ReadHistoryJSON(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if h, err := temporal.ReadHistoryJSON(strings.NewReader(`{"events":[` + strings.Join(many, ",") + `]}`)); err != nil || len(h.GetEvents()) != temporal.MaxHistoryEvents {
		t.Errorf("at the limit: got %v, want it read", err)
	}
}

func TestMapHistoryNamesTheRun(t *testing.T) {
	h := readHistory(t, "refund")
	evs := mapHistory(t, h, temporal.MapOptions{WorkflowID: "w", RunID: "r"})
	for _, ev := range evs {
		if ev.ExecutionID() != "w/r" {
			t.Fatalf("got execution %q, want w/r (the options name the run)", ev.ExecutionID())
		}
	}
	h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().WorkflowId = ""
	if _, err := temporal.MapHistory(h, temporal.MapOptions{}); err == nil || !strings.Contains(err.Error(), "workflowId: missing") {
		t.Errorf("no workflow id: got %v, want an error naming workflowId", err)
	}
	long := strings.Repeat("w", 300)
	if _, err := temporal.MapHistory(h, temporal.MapOptions{WorkflowID: long}); err == nil || !strings.Contains(err.Error(), "execution_id: must be 1 to 256 bytes") {
		t.Errorf("a long workflow id: got %v, want the execution id's limit", err)
	}
}

// shorthand rewrites decoded history JSON with Temporal's "JSON
// shorthand payloads": a JSON payload as its value alone, and payloads as
// an array of values.
func shorthand(t *testing.T, v any) (any, bool) {
	switch x := v.(type) {
	case []any:
		changed := false
		for i := range x {
			var c bool
			x[i], c = shorthand(t, x[i])
			changed = changed || c
		}
		return x, changed
	case map[string]any:
		if meta, ok := x["metadata"].(map[string]any); ok && meta["encoding"] == "anNvbi9wbGFpbg==" && len(x) == 2 {
			data, err := base64.StdEncoding.DecodeString(x["data"].(string))
			if err != nil {
				t.Fatal(err)
			}
			var value any
			if err := json.Unmarshal(data, &value); err != nil {
				t.Fatal(err)
			}
			return value, true
		}
		if list, ok := x["payloads"].([]any); ok && len(x) == 1 {
			short, _ := shorthand(t, list)
			return short, true
		}
		changed := false
		for k := range x {
			var c bool
			x[k], c = shorthand(t, x[k])
			changed = changed || c
		}
		return x, changed
	}
	return v, false
}

// Temporal's JSON may also write JSON payloads as their values alone (the
// CLI's "JSON shorthand payloads"): the same history maps the same.
func TestShorthandPayloads(t *testing.T) {
	for _, name := range histories {
		raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		v, changed := shorthand(t, v)
		short, err := json.Marshal(v)
		if err != nil || !changed {
			t.Fatalf("%s: no payload rewritten (%v)", name, err)
		}
		if name == "invoice" && !bytes.Contains(short, []byte(`"input":[{"amount":4200`)) {
			t.Fatalf("%s: got %.300s, want payloads as arrays of values", name, short)
		}
		want := mapHistory(t, readHistoryBytes(t, raw), temporal.MapOptions{})
		got := mapHistory(t, readHistoryBytes(t, short), temporal.MapOptions{})
		if len(got) != len(want) {
			t.Fatalf("%s: got %d events from shorthand payloads, want %d", name, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i].Body, want[i].Body) {
				t.Errorf("%s: got %s from shorthand payloads, want %s", name, got[i].Body, want[i].Body)
			}
		}
	}
}

// An import without the namespace and one with it (a file, then a
// follower) store the same, in either order: the label is an event of
// its own.
func TestNamespaceLabelIsOrderFree(t *testing.T) {
	h := readHistory(t, "refund")
	without := mapHistory(t, h, temporal.MapOptions{})
	with := mapHistory(t, h, temporal.MapOptions{Namespace: "billing"})
	var views []string
	for _, order := range [][][]trace.Event{{without, with}, {with, without}} {
		s := newStore(t)
		for _, evs := range order {
			s.write(t, evs)
		}
		r := s.read(t, refundRun)
		if r.Run.Execution.Labels["namespace"] != "billing" {
			t.Errorf("labels: got %v, want namespace billing", r.Run.Execution.Labels)
		}
		views = append(views, view(t, r))
	}
	if views[0] != views[1] {
		t.Errorf("without then with:\n%s\nwith then without:\n%s", views[0], views[1])
	}
}
