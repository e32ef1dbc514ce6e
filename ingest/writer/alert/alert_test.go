package alert_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/ingest/writer/alert"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

// receiver is a local webhook that answers each try with the next status
// of its script (200 once the script runs out) and records what it got.
type receiver struct {
	ts *httptest.Server

	mu       sync.Mutex
	script   []int
	tries    []time.Time
	messages []alert.Message
	types    []string
	hold     chan struct{} // when set, each try waits for it to close
	arrived  chan struct{} // a try arrived (buffered)
}

func newReceiver(t *testing.T, script ...int) *receiver {
	t.Helper()
	r := &receiver{script: script, arrived: make(chan struct{}, 1000)}
	r.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var m alert.Message
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("webhook body %q: %v", body, err)
		}
		r.mu.Lock()
		r.tries = append(r.tries, time.Now())
		r.messages = append(r.messages, m)
		r.types = append(r.types, req.Header.Get("Content-Type"))
		status := http.StatusOK
		if len(r.script) > 0 {
			status, r.script = r.script[0], r.script[1:]
		}
		hold := r.hold
		r.mu.Unlock()
		r.arrived <- struct{}{}
		if hold != nil {
			<-hold
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.ts.Close)
	return r
}

func (r *receiver) snapshot() (tries []time.Time, messages []alert.Message, types []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.tries...), append([]alert.Message(nil), r.messages...), append([]string(nil), r.types...)
}

func waitCounts(t *testing.T, n *alert.Notifier, done func(alert.Counts) bool) alert.Counts {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := n.Counts()
		if done(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("alert counts after 10s: %+v", c)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var critical = trace.Finding{Rule: trace.RuleDuplicateEffect, Severity: trace.SeverityCritical, ExecutionID: "exec/01 <b>&", StepID: "step-4",
	Effects: []trace.EffectRef{{Provider: "mail-api", ID: "msg_1"}, {Provider: "mail-api", ID: "msg_2"}}, IdempotencyKey: "ik_a",
	Message: "step-4 sent 2 emails <to jordan@acme.dev> & nobody noticed"}

// TestAlertRetriesWithBackoff: the receiver fails the first two tries; the
// third delivers the message, after waits that double.
func TestAlertRetriesWithBackoff(t *testing.T) {
	r := newReceiver(t, http.StatusServiceUnavailable, http.StatusInternalServerError)
	n := alert.New(alert.Config{URL: r.ts.URL, Backoff: 50 * time.Millisecond, MaxBackoff: time.Second,
		ExecutionURL: func(id string) string {
			return "https://oncetrace.example.com/executions/" + strings.ReplaceAll(id, "/", "%2F")
		}})
	defer n.Close(context.Background())

	warning := trace.Finding{Rule: trace.RuleOrphanEffect, Severity: trace.SeverityWarning, Message: "an orphan"}
	n.Notify([]trace.Finding{warning, critical})
	c := waitCounts(t, n, func(c alert.Counts) bool { return c.Sent+c.Failed > 0 })
	if c.Sent != 1 || c.Retries != 2 || c.Failed != 0 || c.Dropped != 0 {
		t.Errorf("counts: got %+v, want 1 sent after 2 retries", c)
	}
	tries, messages, types := r.snapshot()
	if len(tries) != 3 {
		t.Fatalf("tries: got %d, want 3 (two failures, then success; the warning is not sent)", len(tries))
	}
	if gap := tries[1].Sub(tries[0]); gap < 50*time.Millisecond {
		t.Errorf("wait before the first retry: got %v, want ≥ 50ms", gap)
	}
	if gap := tries[2].Sub(tries[1]); gap < 100*time.Millisecond {
		t.Errorf("wait before the second retry: got %v, want ≥ 100ms (doubled)", gap)
	}
	for i, m := range messages {
		if types[i] != "application/json" {
			t.Errorf("try %d: Content-Type %q, want application/json", i+1, types[i])
		}
		if !reflect.DeepEqual(m.Finding, critical) {
			t.Errorf("try %d: finding %+v, want %+v", i+1, m.Finding, critical)
		}
	}
	m := messages[2]
	if m.ExecutionURL != "https://oncetrace.example.com/executions/exec%2F01 <b>&" {
		t.Errorf("execution_url: got %q", m.ExecutionURL)
	}
	for _, want := range []string{"duplicate_effect", "step-4", "&lt;to jordan@acme.dev&gt; &amp; nobody noticed", "|exec/01 &lt;b&gt;&amp;>"} {
		if !strings.Contains(m.Text, want) {
			t.Errorf("text %q: want it to contain %q (Slack's escaping)", m.Text, want)
		}
	}
	if strings.Contains(m.Text, "<b>") {
		t.Errorf("text %q: an unescaped < from the trace", m.Text)
	}
}

// TestAlertNeverBlocksTheCaller: with the receiver stuck, Notify returns at
// once; what the queue cannot hold is dropped and counted, and Close
// delivers the rest once the receiver recovers.
func TestAlertNeverBlocksTheCaller(t *testing.T) {
	r := newReceiver(t)
	hold := make(chan struct{})
	r.hold = hold
	n := alert.New(alert.Config{URL: r.ts.URL, Queue: 4, Backoff: 10 * time.Millisecond})
	n.Notify([]trace.Finding{critical}) // taken by the delivery goroutine, which then waits on the receiver
	select {
	case <-r.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the first alert never reached the receiver")
	}
	many := make([]trace.Finding, 10)
	for i := range many {
		many[i] = critical
	}
	start := time.Now()
	n.Notify(many)
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("Notify with the receiver stuck: took %v, want it to return at once", took)
	}
	if c := n.Counts(); c.Queued != 4 || c.Dropped != 6 {
		t.Errorf("counts with the receiver stuck: got %+v, want 4 queued, 6 dropped", c)
	}
	close(hold)
	n.Close(context.Background())
	if c := n.Counts(); c.Sent != 5 || c.Dropped != 6 || c.Queued != 0 {
		t.Errorf("counts after Close: got %+v, want 5 sent, 6 dropped", c)
	}
	n.Notify([]trace.Finding{critical}) // after Close: dropped, not a panic
	if c := n.Counts(); c.Dropped != 7 {
		t.Errorf("Notify after Close: dropped %d, want 7", c.Dropped)
	}
}

// TestAlertGivesUp: a 4xx is the receiver refusing the message (one try);
// a receiver that keeps failing gets Attempts tries.
func TestAlertGivesUp(t *testing.T) {
	r := newReceiver(t, http.StatusBadRequest)
	n := alert.New(alert.Config{URL: r.ts.URL, Backoff: time.Millisecond})
	n.Notify([]trace.Finding{critical})
	if c := waitCounts(t, n, func(c alert.Counts) bool { return c.Sent+c.Failed > 0 }); c.Failed != 1 || c.Retries != 0 {
		t.Errorf("after a 400: got %+v, want 1 failed, no retry", c)
	}
	n.Close(context.Background())
	if tries, _, _ := r.snapshot(); len(tries) != 1 {
		t.Errorf("after a 400: got %d tries, want 1", len(tries))
	}

	down := newReceiver(t, 500, 500, 500, 500, 500)
	n = alert.New(alert.Config{URL: down.ts.URL, Attempts: 3, Backoff: time.Millisecond})
	n.Notify([]trace.Finding{critical})
	if c := waitCounts(t, n, func(c alert.Counts) bool { return c.Sent+c.Failed > 0 }); c.Failed != 1 || c.Retries != 2 {
		t.Errorf("after 3 failures: got %+v, want 1 failed after 2 retries", c)
	}
	n.Close(context.Background())
	if tries, _, _ := down.snapshot(); len(tries) != 3 {
		t.Errorf("with Attempts 3: got %d tries, want 3", len(tries))
	}
}

// TestAlertCloseGivesUpAtItsDeadline: Close does not wait out a long
// backoff past its context.
func TestAlertCloseGivesUpAtItsDeadline(t *testing.T) {
	r := newReceiver(t, 500, 500, 500)
	n := alert.New(alert.Config{URL: r.ts.URL, Backoff: time.Hour, MaxBackoff: time.Hour})
	n.Notify([]trace.Finding{critical, critical})
	<-r.arrived
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	n.Close(ctx)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close: took %v, want it to give up at its 100ms deadline", took)
	}
	if c := n.Counts(); c.Failed != 2 || c.Sent != 0 {
		t.Errorf("after Close: got %+v, want both failed", c)
	}
}

// TestAlertOncePerNewCriticalFinding wires the notifier to a real writer on
// a real SQLite file, as serve does: a duplicate email raises one alert;
// re-sending the same events, and a later event that re-audits the same
// execution, raise none.
func TestAlertOncePerNewCriticalFinding(t *testing.T) {
	r := newReceiver(t)
	n := alert.New(alert.Config{URL: r.ts.URL, Backoff: time.Millisecond})
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wcfg := writer.DefaultConfig
	wcfg.OnCommit = func(c writer.Commit) { n.Notify(c.NewCritical) }
	w := writer.New(db, wcfg)
	write := func(lines ...string) {
		t.Helper()
		var events []trace.Event
		for _, l := range lines {
			ev, err := ingest.ParseEvent([]byte(l), ingest.DefaultLimits)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			events = append(events, ev)
		}
		if _, err := w.Write(context.Background(), events); err != nil {
			t.Fatal(err)
		}
	}
	run := []string{
		`{"type":"execution","execution_id":"exec_a","name":"billing-agent","status":"running","started_at":"2026-06-30T14:02:11.120Z"}`,
		`{"type":"attempt","execution_id":"exec_a","step_id":"step-4","attempt":1,"tool":"send_invoice_email","effect":"write","provider":"mail-api","idempotency_key":"ik_a","started_at":"2026-06-30T14:02:11.200Z","ended_at":"2026-06-30T14:02:12.200Z","outcome":"ok"}`,
		`{"type":"effect","provider":"mail-api","effect_id":"msg_1","idempotency_key":"ik_a","execution_id":"exec_a","step_id":"step-4","at":"2026-06-30T14:02:11.350Z"}`,
	}
	write(run...)
	write(`{"type":"effect","provider":"mail-api","effect_id":"msg_2","idempotency_key":"ik_a","execution_id":"exec_a","step_id":"step-4","at":"2026-06-30T14:02:12.350Z"}`)
	write(run...) // duplicates: nothing new
	write(`{"type":"execution","execution_id":"exec_a","status":"completed","ended_at":"2026-06-30T14:03:04.000Z"}`)
	w.Close()
	n.Close(context.Background())

	_, messages, _ := r.snapshot()
	if len(messages) != 1 {
		t.Fatalf("alerts: got %d, want 1 (one new critical finding)", len(messages))
	}
	if f := messages[0].Finding; f.Rule != trace.RuleDuplicateEffect || f.ExecutionID != "exec_a" || f.StepID != "step-4" {
		t.Errorf("alert's finding: got %+v, want duplicate_effect of exec_a step-4", f)
	}
}
