package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed/mcp"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

// collected keeps what an observer recorded, each event checked as POST
// /api/v1/events would check it.
type collected struct {
	t      *testing.T
	mu     sync.Mutex
	events []trace.Event
	raw    []map[string]any
}

func (c *collected) RecordEvents(_ context.Context, events []json.RawMessage) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, raw := range events {
		ev, err := ingest.ParseEvent(raw, ingest.DefaultLimits)
		if err != nil {
			c.t.Errorf("recorded an event POST /api/v1/events refuses: %v\n%s", err, raw)
			continue
		}
		var m map[string]any
		json.Unmarshal(raw, &m)
		c.events, c.raw = append(c.events, ev), append(c.raw, m)
	}
	return nil
}

func (c *collected) ofType(typ string) []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []map[string]any
	for _, m := range c.raw {
		if m["type"] == typ {
			out = append(out, m)
		}
	}
	// Recorded concurrently: in the order they began.
	sort.SliceStable(out, func(i, j int) bool { return fmt.Sprint(out[i]["started_at"]) < fmt.Sprint(out[j]["started_at"]) })
	return out
}

func newObserver(t *testing.T, rec mcp.Recorder, cfg mcp.Config) *mcp.Observer {
	t.Helper()
	cfg.Provider, cfg.Recorder = "invoices", rec
	base := time.Date(2026, 7, 2, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	tick := 0
	cfg.Now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		tick++
		return base.Add(time.Duration(tick) * time.Second)
	}
	o, err := mcp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func wait(t *testing.T, o *mcp.Observer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := o.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// handshake is what every client does first: initialize, the initialized
// notification, tools/list; the server's answers name the tools' classes.
func handshake(t *testing.T, s *mcp.Session) {
	t.Helper()
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"billing-agent","version":"1.0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
	} {
		if calls := s.FromClient([]byte(m)); len(calls) != 0 {
			t.Fatalf("%s: got calls %+v, want none", m, calls)
		}
	}
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"invoices","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[
			{"name":"send_invoice_email","inputSchema":{"type":"object"}},
			{"name":"get_invoice","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},
			{"name":"charge_card","inputSchema":{"type":"object"},"annotations":{"idempotentHint":true,"destructiveHint":false}}]}}`,
	} {
		if s.FromServer([]byte(m)) {
			t.Fatalf("%s: dropped, want delivered", m)
		}
	}
}

func call(id int, tool, args, meta string) []byte {
	if meta == "" {
		meta = "{}"
	}
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":%s}}`, id, tool, args, meta))
}

func answer(id int, structured string) []byte {
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"done"}],"structuredContent":%s}}`, id, structured))
}

// TestToolCallsBecomeAttemptsAndEffects: each tools/call is an attempt of
// the step its tool and arguments name, classed by the server's
// annotations; a write the server did is an effect with the id its result
// gives; a read never is; the handshake and notifications are no attempt.
func TestToolCallsBecomeAttemptsAndEffects(t *testing.T) {
	rec := &collected{t: t}
	o := newObserver(t, rec, mcp.Config{})
	s := o.Session("sess-1")
	handshake(t, s)
	args := `{"to":"jordan@acme.dev","invoice_id":"inv_7"}`
	calls := s.FromClient(call(2, "get_invoice", `{"invoice_id":"inv_7"}`, ""))
	if len(calls) != 1 || calls[0].Class != trace.EffectRead || calls[0].Seq != 0 {
		t.Fatalf("get_invoice: got %+v, want one read call, no call site", calls)
	}
	s.FromServer(answer(2, `{"id":"inv_7","amount":1200}`))
	calls = s.FromClient(call(3, "send_invoice_email", args, ""))
	if len(calls) != 1 || calls[0].Class != trace.EffectWrite || calls[0].Seq != 1 || len(calls[0].Faults) != 0 {
		t.Fatalf("send_invoice_email: got %+v, want one write call, call site 1, no fault", calls)
	}
	s.FromServer(answer(3, `{"id":"msg_1"}`))
	calls = s.FromClient(call(4, "charge_card", `{"amount":1200,"customer":"cus_1"}`, `{"io.oncetrace/idempotency-key":"ik_charge_1"}`))
	if len(calls) != 1 || calls[0].Class != trace.EffectWrite || calls[0].Key != "ik_charge_1" || calls[0].Seq != 2 {
		t.Fatalf("charge_card: got %+v, want a write with its key, call site 2", calls)
	}
	s.FromServer([]byte(`{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"card declined"}],"isError":true}}`))
	wait(t, o)

	executions, attempts, effects := rec.ofType("execution"), rec.ofType("attempt"), rec.ofType("effect")
	if len(executions) != 1 || executions[0]["execution_id"] != "sess-1" || executions[0]["name"] != "billing-agent" {
		t.Errorf("executions: got %v, want the session's, named after the client", executions)
	}
	if len(attempts) != 3 {
		t.Fatalf("attempts: got %d, want 3 (initialize and tools/list are none)", len(attempts))
	}
	want := []struct{ tool, effect, outcome string }{{"get_invoice", "read", "ok"}, {"send_invoice_email", "write", "ok"}, {"charge_card", "write", "error"}}
	for i, w := range want {
		a := attempts[i]
		if a["tool"] != w.tool || a["effect"] != w.effect || a["outcome"] != w.outcome || a["execution_id"] != "sess-1" || a["provider"] != "invoices" {
			t.Errorf("attempt %d: got %v, want %s, %s, %s in sess-1", i, a, w.tool, w.effect, w.outcome)
		}
		if _, numbered := a["attempt"]; numbered || a["span_id"] == "" {
			t.Errorf("attempt %d: got %v, want no number and a span of its own (the store numbers it)", i, a)
		}
	}
	if attempts[2]["error"] != "tools/call #4: card declined" || attempts[2]["recognised_by"] != "mcp" || attempts[2]["idempotency_key"] != "ik_charge_1" {
		t.Errorf("charge_card: got %v, want the tool's error text and the key", attempts[2])
	}
	if attempts[1]["step_id"] != mcp.ToolStepID("send_invoice_email", json.RawMessage(args)) {
		t.Errorf("step: got %v, want the tool's and arguments'", attempts[1]["step_id"])
	}
	if len(effects) != 1 || effects[0]["effect_id"] != "msg_1" || effects[0]["provider"] != "invoices" || effects[0]["step_id"] != attempts[1]["step_id"] ||
		!strings.HasPrefix(fmt.Sprint(effects[0]["fingerprint"]), "tool:") || !strings.Contains(fmt.Sprint(effects[0]["summary"]), "send_invoice_email") {
		t.Errorf("effects: got %v, want msg_1 alone, of the email's step, with a tool fingerprint and summary (a read and a failed call are none)", effects)
	}
	if c := o.Counts(); c.Calls != 3 || c.Attempts != 3 || c.Effects != 1 {
		t.Errorf("counts: got %+v, want 3 calls, 3 attempts, 1 effect", c)
	}
}

// TestFaultsStrikeCalls: lose-response withholds the answer and records a
// timeout and the effect the server made; fail-before answers an error
// unforwarded and records no effect; a standing fault strikes writes only.
func TestFaultsStrikeCalls(t *testing.T) {
	rec := &collected{t: t}
	o := newObserver(t, rec, mcp.Config{Faults: []sandbox.Fault{{Kind: sandbox.FailBefore, Probability: 1}}})
	s := o.Session("sess-2")
	handshake(t, s)
	args := `{"to":"jordan@acme.dev","invoice_id":"inv_7"}`

	lost := s.FromClient(call(5, "send_invoice_email", args, `{"io.oncetrace/fault":"lose-response"}`))
	if _, ok := lost[0].Fault(sandbox.LoseResponse); !ok || len(lost[0].Faults) != 1 {
		t.Fatalf("got faults %+v, want the call's own lose-response alone", lost[0].Faults)
	}
	if !s.FromServer(answer(5, `{"id":"msg_1"}`)) {
		t.Error("the answer to a call lose-response struck: delivered, want dropped")
	}
	refused := s.FromClient(call(6, "send_invoice_email", args, ""))
	if _, ok := refused[0].Fault(sandbox.FailBefore); !ok {
		t.Fatalf("got faults %+v, want the standing fail-before", refused[0].Faults)
	}
	var reply struct {
		ID    int `json:"id"`
		Error struct{ Message string }
	}
	if err := json.Unmarshal(s.Refuse(refused[0]), &reply); err != nil || reply.ID != 6 || !strings.Contains(reply.Error.Message, "fail-before") {
		t.Errorf("refusal: got %+v (%v), want a JSON-RPC error for id 6 naming fail-before", reply, err)
	}
	read := s.FromClient(call(7, "get_invoice", `{"invoice_id":"inv_7"}`, ""))
	if len(read[0].Faults) != 0 {
		t.Errorf("a read: got faults %+v, want none of the standing ones", read[0].Faults)
	}
	s.Close() // get_invoice never answered
	wait(t, o)

	attempts, effects := rec.ofType("attempt"), rec.ofType("effect")
	outcomes := []string{}
	for _, a := range attempts {
		outcomes = append(outcomes, fmt.Sprint(a["tool"], ":", a["outcome"]))
	}
	if got := strings.Join(outcomes, " "); got != "send_invoice_email:timeout send_invoice_email:error get_invoice:timeout" {
		t.Errorf("attempts: got %s, want the withheld answer a timeout, the refused call an error, the unanswered read a timeout", got)
	}
	if len(effects) != 1 || effects[0]["effect_id"] != "msg_1" {
		t.Errorf("effects: got %v, want the one the server made before its answer was withheld", effects)
	}
	if c := o.Counts(); c.Dropped != 1 || c.Refused != 1 {
		t.Errorf("counts: got %+v, want 1 dropped, 1 refused", c)
	}
}

// TestTraceparentNamesTheExecution: a call carrying _meta.traceparent is
// an attempt of the trace's execution with the caller's span.
func TestTraceparentNamesTheExecution(t *testing.T) {
	rec := &collected{t: t}
	o := newObserver(t, rec, mcp.Config{})
	s := o.Session("sess-3")
	handshake(t, s)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	s.FromClient(call(2, "send_invoice_email", `{"to":"a@b.c"}`, `{"traceparent":"`+tp+`"}`))
	s.FromServer(answer(2, `{"id":"msg_9"}`))
	wait(t, o)
	a, e := rec.ofType("attempt"), rec.ofType("effect")
	if len(rec.ofType("execution")) != 0 {
		t.Error("got an execution event for the session, want none: the trace names the execution")
	}
	if len(a) != 1 || a[0]["execution_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || a[0]["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || a[0]["span_id"] != "00f067aa0ba902b7" {
		t.Errorf("attempt: got %v, want the trace's execution and the caller's span", a)
	}
	if len(e) != 1 || e[0]["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || e[0]["span_id"] != "00f067aa0ba902b7" {
		t.Errorf("effect: got %v, want the call's trace context", e)
	}
}

// storeRecorder commits the events through a real writer, as serve does.
type storeRecorder struct{ w *writer.Writer }

func (r storeRecorder) RecordEvents(ctx context.Context, raws []json.RawMessage) error {
	var events []trace.Event
	for _, raw := range raws {
		ev, err := ingest.ParseEvent(raw, ingest.DefaultLimits)
		if err != nil {
			return err
		}
		events = append(events, ev)
	}
	_, err := r.w.Write(ctx, events)
	return err
}

// TestLostAnswerRetriedIsADuplicate is the article's story one layer up,
// stored and audited: the answer to a send is lost, the client calls the
// tool again with the same arguments, the server sends again. One step,
// two attempts (timeout, then ok), two emails, a critical
// duplicate_effect. With a key the server honours (the same charge id
// back), one effect and no finding.
func TestLostAnswerRetriedIsADuplicate(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := writer.New(db, writer.DefaultConfig)
	defer w.Close()
	o := newObserver(t, storeRecorder{w}, mcp.Config{})

	naive := o.Session("naive")
	handshake(t, naive)
	args := `{"to":"jordan@acme.dev","invoice_id":"inv_7"}`
	naive.FromClient(call(2, "send_invoice_email", args, `{"io.oncetrace/fault":"lose-response"}`))
	naive.FromServer(answer(2, `{"id":"msg_1"}`))
	naive.FromClient(call(3, "send_invoice_email", args, ""))
	naive.FromServer(answer(3, `{"id":"msg_2"}`))

	keyed := o.Session("keyed")
	handshake(t, keyed)
	charge, meta := `{"amount":1200,"customer":"cus_1"}`, `{"io.oncetrace/idempotency-key":"ik_charge_1"`
	keyed.FromClient(call(2, "charge_card", charge, meta+`,"io.oncetrace/fault":"lose-response"}`))
	keyed.FromServer(answer(2, `{"id":"ch_1"}`))
	keyed.FromClient(call(3, "charge_card", charge, meta+`}`))
	keyed.FromServer(answer(3, `{"id":"ch_1"}`))
	wait(t, o)

	check := func(id string, wantEffects int, wantRules []trace.Rule) {
		t.Helper()
		run, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(run.Steps) != 1 {
			t.Fatalf("%s: got %d steps, want 1", id, len(run.Steps))
		}
		var got []string
		for _, a := range run.Steps[0].Attempts {
			got = append(got, fmt.Sprint(a.Number, ":", a.Outcome))
		}
		if strings.Join(got, " ") != "1:timeout 2:ok" {
			t.Errorf("%s: got attempts %v, want 1:timeout 2:ok", id, got)
		}
		if n := len(run.OwnEffects()); n != wantEffects {
			t.Errorf("%s: got %d effects, want %d", id, n, wantEffects)
		}
		findings, err := db.Findings(ctx, store.FindingFilter{ExecutionID: id})
		if err != nil {
			t.Fatal(err)
		}
		var rules []trace.Rule
		for _, f := range findings {
			if f.Severity == trace.SeverityCritical {
				rules = append(rules, f.Rule)
			}
		}
		if fmt.Sprint(rules) != fmt.Sprint(wantRules) {
			t.Errorf("%s: got critical findings %v, want %v", id, rules, wantRules)
		}
	}
	check("naive", 2, []trace.Rule{trace.RuleDuplicateEffect})
	check("keyed", 1, nil)
}

// TestCancelledCalls: a call the client gave up on (its timeout sent
// notifications/cancelled) is a timeout when it cancelled it; an answer
// the server sent later still proves the effect, and a call never
// answered proves none. A session that began without initialize (the
// sessionless revision) names its client in each request's _meta.
func TestCancelledCalls(t *testing.T) {
	rec := &collected{t: t}
	o := newObserver(t, rec, mcp.Config{})
	s := o.Session("")
	client := `{"io.modelcontextprotocol/clientInfo":{"name":"go-agent","version":"1"}}`
	s.FromClient([]byte(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":` + client + `}}`))
	args := `{"to":"jordan@acme.dev"}`
	s.FromClient(call(2, "send_invoice_email", args, client))
	s.FromClient([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"context deadline exceeded"}}`))
	if s.FromServer(answer(2, `{"id":"msg_late"}`)) {
		t.Error("a late answer to a cancelled call: dropped, want delivered (the client ignores it)")
	}
	s.FromClient(call(3, "send_invoice_email", `{"to":"sam@acme.dev"}`, client))
	s.FromClient([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`))
	s.Close()
	wait(t, o)

	executions, attempts, effects := rec.ofType("execution"), rec.ofType("attempt"), rec.ofType("effect")
	if len(executions) != 2 || executions[0]["name"] != "go-agent" || !strings.HasPrefix(fmt.Sprint(executions[0]["execution_id"]), "mcp-") ||
		executions[1]["execution_id"] != executions[0]["execution_id"] || executions[1]["status"] != "completed" || executions[1]["ended_at"] == nil {
		t.Errorf("executions: got %v, want one made-up session named go-agent, running, then completed when it closed", executions)
	}
	if len(attempts) != 2 {
		t.Fatalf("attempts: got %d, want 2 (server/discover is none)", len(attempts))
	}
	for i, want := range []string{"tools/call #2: the client cancelled the call (context deadline exceeded); the server answered later",
		"tools/call #3: the client cancelled the call; the server never answered"} {
		if attempts[i]["outcome"] != "timeout" || attempts[i]["error"] != want {
			t.Errorf("attempt %d: got %v, want a timeout saying %q", i, attempts[i], want)
		}
	}
	if len(effects) != 1 || effects[0]["effect_id"] != "msg_late" {
		t.Errorf("effects: got %v, want the late answer's alone", effects)
	}
}
