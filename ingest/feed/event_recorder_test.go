package feed_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
)

const (
	mcpTrace   = "0af7651916cd43dd8448eb211c80319c"
	mcpSession = "mcp-session-1"
)

// toolCall is the batch an MCP proxy records for one answered tools/call of
// send_invoice_email: its attempt and the email it sent, one span. The
// arguments carry a secret, which must never reach the queue's files.
func toolCall(rpcID int, messageID string) feed.EventBatch {
	span := fmt.Sprintf("%016x", 0x37ad6b7169203330+rpcID)
	step := "send_invoice_email#3f2a9c1d"
	at := time.Date(2026, 6, 30, 14, 0, rpcID, 0, time.UTC)
	attempt := map[string]any{"type": "attempt", "id": fmt.Sprintf("mcp:billing:%s:%d", mcpSession, rpcID),
		"execution_id": mcpSession, "step_id": step, "tool": "send_invoice_email", "effect": "write", "provider": "billing",
		"args":       map[string]any{"to": "jordan@acme.dev", "invoice_id": "inv_7", "api_key": "sk_live_mcp1"},
		"started_at": at.Format(time.RFC3339Nano), "ended_at": at.Add(40 * time.Millisecond).Format(time.RFC3339Nano),
		"outcome": "ok", "result": map[string]any{"structuredContent": map[string]any{"id": messageID}},
		"trace_id": mcpTrace, "span_id": span, "worker": "billing-server"}
	effect := map[string]any{"type": "effect", "id": "mcp:billing:" + messageID, "provider": "billing", "effect_id": messageID,
		"execution_id": mcpSession, "step_id": step, "target": "jordan@acme.dev", "at": at.Format(time.RFC3339Nano),
		"trace_id": mcpTrace, "span_id": span}
	var b feed.EventBatch
	for _, ev := range []map[string]any{attempt, effect} {
		raw, err := json.Marshal(ev)
		if err != nil {
			panic(err)
		}
		b = append(b, raw)
	}
	return b
}

// openWriter opens a SQLite file in a temporary directory and its writer.
func openWriter(t *testing.T) (*store.DB, *writer.Writer) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(db, writer.DefaultConfig)
	t.Cleanup(func() { w.Close(); db.Close() })
	return db, w
}

func eventCount(t *testing.T, db *store.DB) int {
	t.Helper()
	n, err := db.EventCount(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// callsOf lists a stored execution's step attempts and effects as
// "step#attempt outcome" and "provider/effect".
func callsOf(t *testing.T, db *store.DB, execution string) (attempts, effects []string) {
	t.Helper()
	run, err := db.Run(context.Background(), execution)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range run.Steps {
		for _, a := range st.Attempts {
			attempts = append(attempts, fmt.Sprintf("%s#%d %s", st.ID, a.Number, a.Outcome))
		}
	}
	for _, e := range run.Effects {
		effects = append(effects, e.Provider+"/"+e.ID)
	}
	return attempts, effects
}

func TestWriterRecorderCommitsABatchOfEventsOnce(t *testing.T) {
	db, w := openWriter(t)
	r := feed.WriterRecorder{Writer: w, Limits: ingest.DefaultLimits}
	ctx := context.Background()
	for range 2 { // the second is a harmless duplicate
		if err := r.RecordEvents(ctx, toolCall(7, "msg_1")); err != nil {
			t.Fatalf("RecordEvents: %v", err)
		}
	}
	if n := eventCount(t, db); n != 2 {
		t.Errorf("events stored: got %d, want 2 (an attempt and an effect, once)", n)
	}
	attempts, effects := callsOf(t, db, mcpSession)
	if fmt.Sprint(attempts) != "[send_invoice_email#3f2a9c1d#1 ok]" || fmt.Sprint(effects) != "[billing/msg_1]" {
		t.Errorf("stored: got attempts %v, effects %v; want one ok attempt numbered 1 and billing/msg_1", attempts, effects)
	}

	// A batch with one invalid event stores none of them, and names the
	// event and the field.
	bad := toolCall(8, "msg_2")
	bad[1] = json.RawMessage(strings.Replace(string(bad[1]), `"effect_id":"msg_2"`, `"effect_id":""`, 1))
	err := r.RecordEvents(ctx, bad)
	if !errors.Is(err, feed.ErrRejected) || !strings.Contains(err.Error(), "event 1: effect_id:") {
		t.Errorf("a batch with an invalid event: got %v, want ErrRejected naming event 1's effect_id", err)
	}
	if n := eventCount(t, db); n != 2 {
		t.Errorf("events stored after the invalid batch: got %d, want still 2", n)
	}
}

func TestHTTPRecorderPostsEventsToARealServer(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	server := "http://" + ln.Addr().String()
	startOncetrace(t, ln, t.TempDir(), "s3cret")
	ctx := context.Background()

	err := feed.HTTPRecorder{Server: server}.RecordEvents(ctx, toolCall(7, "msg_1"))
	if err == nil || errors.Is(err, feed.ErrRejected) {
		t.Errorf("without the token: got %v, want a retryable error (401)", err)
	}
	r := feed.HTTPRecorder{Server: server + "/", Token: "s3cret"}
	for range 2 { // the second is a harmless duplicate
		if err := r.RecordEvents(ctx, toolCall(7, "msg_1")); err != nil {
			t.Fatalf("RecordEvents: %v", err)
		}
	}
	x := executionOf(t, server, mcpSession)
	if len(x.Steps) != 1 || len(x.Steps[0].Attempts) != 1 || x.Steps[0].Attempts[0].Outcome != "ok" || len(x.Effects) != 1 ||
		x.Effects[0].EffectID != "msg_1" {
		t.Fatalf("execution: got %+v, want one step with one ok attempt, and msg_1", x)
	}
	if args := string(x.Steps[0].Attempts[0].Args); strings.Contains(args, "sk_live_mcp1") || !strings.Contains(args, "inv_7") {
		t.Errorf("stored args: got %s, want the invoice with the api key masked", args)
	}

	// An invalid batch is refused before anything is sent: nothing listens here.
	bad := feed.EventBatch{json.RawMessage(`{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,"colour":"red"}`)}
	err = feed.HTTPRecorder{Server: "http://127.0.0.1:1"}.RecordEvents(ctx, bad)
	if !errors.Is(err, feed.ErrRejected) || !strings.Contains(err.Error(), "event 0: colour:") {
		t.Errorf("an invalid batch: got %v, want ErrRejected naming event 0's colour, without a request", err)
	}
}

type executionJSON struct {
	Steps []struct {
		StepID   string `json:"step_id"`
		Attempts []struct {
			Attempt int             `json:"attempt"`
			Outcome string          `json:"outcome"`
			Args    json.RawMessage `json:"args"`
		} `json:"attempts"`
	} `json:"steps"`
	Effects []struct {
		EffectID string `json:"effect_id"`
	} `json:"effects"`
}

func executionOf(t *testing.T, server, id string) executionJSON {
	t.Helper()
	resp, err := http.Get(server + "/api/v1/executions/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var x executionJSON
	if resp.StatusCode != http.StatusOK {
		return x
	}
	if err := json.NewDecoder(resp.Body).Decode(&x); err != nil {
		t.Fatal(err)
	}
	return x
}

// TestQueuedEventRecorderDeliversOnceTheServerIsBack records two tool
// calls through a server that is down: the caller is not failed, and both
// arrive, in order, when a server listens on the address again.
func TestQueuedEventRecorderDeliversOnceTheServerIsBack(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused

	q, err := feed.OpenEventQueue(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	r := feed.NewQueuedEventRecorder(feed.HTTPRecorder{Server: "http://" + addr}, q,
		feed.QueuedConfig{Timeout: time.Second, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	if out, err := r.Record(ctx, toolCall(7, "msg_1")); out != feed.Queued || err == nil {
		t.Fatalf("Record with the server down: got %s, %v; want queued with the failure", out, err)
	}
	if out, _ := r.Record(ctx, toolCall(8, "msg_2")); out != feed.Queued {
		t.Fatalf("Record behind a queued batch: got %s, want queued", out)
	}
	startOncetrace(t, listen(t, addr), t.TempDir(), "")
	deadline := time.Now().Add(10 * time.Second)
	for r.Counts().Queued > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("batches not delivered 10 s after the server came back; counts %+v", r.Counts())
		}
		time.Sleep(20 * time.Millisecond)
	}
	x := executionOf(t, "http://"+addr, mcpSession)
	var got []string
	for _, st := range x.Steps {
		for _, a := range st.Attempts {
			got = append(got, fmt.Sprintf("#%d %s", a.Attempt, a.Outcome))
		}
	}
	for _, e := range x.Effects {
		got = append(got, e.EffectID)
	}
	if fmt.Sprint(got) != "[#1 ok #2 ok msg_1 msg_2]" {
		t.Errorf("stored: got %v, want two attempts of the step and both emails", got)
	}
	if c := r.Counts(); c.Recorded != 2 || c.Failed < 1 || c.Queued != 0 || c.Dropped != 0 || c.Rejected != 0 {
		t.Errorf("counts: got %+v, want 2 recorded after ≥ 1 failure, none queued, dropped or rejected", c)
	}
}

// TestEventQueueSurvivesAReopen queues tool calls while the recorder
// fails, closes the queue as a stopping proxy does, and records what it
// left through the writer after opening it again. The files on disk hold
// the events as the server stores them: the secret in the arguments masked.
func TestEventQueueSurvivesAReopen(t *testing.T) {
	dir := t.TempDir()
	q, err := feed.OpenEventQueue(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	down := feed.HTTPRecorder{Server: "http://127.0.0.1:1"} // nothing listens
	r := feed.NewQueuedEventRecorder(down, q, feed.QueuedConfig{Timeout: time.Second})
	for i, call := range []feed.EventBatch{toolCall(7, "msg_1"), toolCall(8, "msg_2")} {
		if out, _ := r.Record(context.Background(), call); out != feed.Queued {
			t.Fatalf("Record %d while down: got %s, want queued", i, out)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, f.Name()))
		if strings.Contains(string(b), "sk_live_mcp1") {
			t.Errorf("queue file %s holds the api key: %s", f.Name(), b)
		}
	}

	q, err = feed.OpenEventQueue(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q.Len() != 2 {
		t.Fatalf("Len after reopen: got %d, want 2", q.Len())
	}
	db, w := openWriter(t)
	r = feed.NewQueuedEventRecorder(feed.WriterRecorder{Writer: w, Limits: ingest.DefaultLimits}, q,
		feed.QueuedConfig{Timeout: time.Second, MinBackoff: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for r.Counts().Recorded < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("queue not drained after 10 s; counts %+v", r.Counts())
		}
		time.Sleep(10 * time.Millisecond)
	}
	attempts, effects := callsOf(t, db, mcpSession)
	if fmt.Sprint(attempts) != "[send_invoice_email#3f2a9c1d#1 ok send_invoice_email#3f2a9c1d#2 ok]" ||
		fmt.Sprint(effects) != "[billing/msg_1 billing/msg_2]" {
		t.Errorf("stored: got attempts %v, effects %v; want two ok attempts and both emails", attempts, effects)
	}
	if c := r.Counts(); c.Queued != 0 || c.QueueBytes != 0 || c.Dropped != 0 {
		t.Errorf("counts: got %+v, want an empty queue and nothing dropped", c)
	}
}

// TestQueuedEventRecorderRejectsBeforeSending: an invalid batch is
// rejected without being sent or queued, so it never blocks the queue.
func TestQueuedEventRecorderRejectsBeforeSending(t *testing.T) {
	db, w := openWriter(t)
	q, err := feed.OpenEventQueue(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	r := feed.NewQueuedEventRecorder(feed.WriterRecorder{Writer: w, Limits: ingest.DefaultLimits}, q, feed.QueuedConfig{})
	ctx := context.Background()

	bad := toolCall(7, "msg_1")
	bad[0] = json.RawMessage(strings.Replace(string(bad[0]), `"outcome":"ok"`, `"outcome":"maybe"`, 1))
	if out, err := r.Record(ctx, bad); out != feed.Rejected || !errors.Is(err, feed.ErrRejected) || !strings.Contains(err.Error(), "event 0: outcome:") {
		t.Errorf("an invalid event: got %s, %v; want rejected naming event 0's outcome", out, err)
	}
	tooMany := make(feed.EventBatch, ingest.DefaultLimits.Events+1)
	for i := range tooMany {
		tooMany[i] = toolCall(7, "msg_1")[1]
	}
	if out, err := r.Record(ctx, tooMany); out != feed.Rejected || !strings.Contains(fmt.Sprint(err), "over the limit") {
		t.Errorf("a batch over the event limit: got %s, %v; want rejected", out, err)
	}
	if out, err := r.Record(ctx, nil); out != feed.Rejected || !errors.Is(err, feed.ErrRejected) {
		t.Errorf("an empty batch: got %s, %v; want rejected", out, err)
	}
	if n := eventCount(t, db); n != 0 {
		t.Errorf("events stored: got %d, want 0", n)
	}
	if c := r.Counts(); c.Rejected != 3 || c.Queued != 0 || c.Recorded != 0 || c.Failed != 0 {
		t.Errorf("counts: got %+v, want 3 rejected, nothing recorded, failed or queued", c)
	}
}

// TestQueuedEventsQueueIsNoError: seen as an EventRecorder, the queued
// recorder answers a batch it queued (the server down) with no error, and
// one it rejects with ErrRejected.
func TestQueuedEventsQueueIsNoError(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	q, err := feed.OpenEventQueue(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var r feed.EventRecorder = feed.QueuedEvents{Recorder: feed.NewQueuedEventRecorder(feed.HTTPRecorder{Server: "http://" + addr}, q, feed.QueuedConfig{Timeout: time.Second})}
	if err := r.RecordEvents(context.Background(), toolCall(7, "msg_1")); err != nil {
		t.Errorf("a batch queued: got %v, want no error", err)
	}
	if q.Len() != 1 {
		t.Errorf("queue: got %d batches, want 1", q.Len())
	}
	if err := r.RecordEvents(context.Background(), []json.RawMessage{json.RawMessage(`{"type":"attempt"}`)}); !errors.Is(err, feed.ErrRejected) {
		t.Errorf("an invalid batch: got %v, want ErrRejected", err)
	}
}
