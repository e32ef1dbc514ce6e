package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// invoice is the article's email; most tests send it.
var invoice = sandbox.Message{To: "jordan@acme.dev", Subject: "Your June invoice", Body: "Invoice INV-0612: 1,240.00 EUR"}

// env is a real oncetrace server (web.New over a SQLite file and the real
// ingest writer) with the sandbox mounted, as `oncetrace serve` runs it.
type env struct {
	url    string
	client *http.Client
	db     *store.DB
	// delaying receives the key of a request whose latency fault began:
	// the sandbox logs the fault once it has taken the key, so a test can
	// act while the key is in flight.
	delaying chan string
}

// faultKeys is the sandbox's logger in tests: it hands on the key of each
// "sandbox fault" line, dropping what nobody waits for.
type faultKeys chan string

func (f faultKeys) Enabled(context.Context, slog.Level) bool { return true }

func (f faultKeys) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "sandbox fault" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "key" {
			select {
			case f <- a.Value.String():
			default:
			}
		}
		return true
	})
	return nil
}

func (f faultKeys) WithAttrs([]slog.Attr) slog.Handler { return f }
func (f faultKeys) WithGroup(string) slog.Handler      { return f }

func newEnv(t *testing.T, cfg web.Config) *env {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	ingestWriter := writer.New(db, writer.DefaultConfig)
	cfg.DB, cfg.Writer, cfg.Limits, cfg.Analysis = db, ingestWriter, ingest.DefaultLimits, trace.DefaultConfig
	cfg.Logger = slog.New(slog.DiscardHandler)
	e := &env{db: db, delaying: make(chan string, 16)}
	if cfg.Sandbox.Logger == nil {
		cfg.Sandbox.Logger = slog.New(faultKeys(e.delaying))
	}
	srv := web.New(cfg)
	ts := httptest.NewServer(srv)
	// Closed in reverse: the server (waiting for held requests), then the
	// writer (committing what is queued), then the database.
	t.Cleanup(func() {
		ts.Close()
		ingestWriter.Close()
		db.Close()
	})
	e.url = ts.URL
	e.client = &http.Client{Timeout: 30 * time.Second}
	return e
}

// reply is a sandbox answer, decoded both ways.
type reply struct {
	status int
	header http.Header
	raw    []byte
	sent   sandbox.SendResponse
	err    sandbox.APIError
}

// req describes one send.
type req struct {
	key, execution, step, fault string
	msg                         any // a sandbox.Message, or a string sent as is
	token                       string
}

func (e *env) send(t *testing.T, r req) reply {
	t.Helper()
	got, err := e.trySend(e.client, r)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (e *env) trySend(client *http.Client, r req) (reply, error) {
	var body []byte
	switch m := r.msg.(type) {
	case string:
		body = []byte(m)
	case nil:
		body, _ = json.Marshal(invoice)
	default:
		body, _ = json.Marshal(m)
	}
	hr, err := http.NewRequest(http.MethodPost, e.url+"/sandbox/mail/v1/send", bytes.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	for k, v := range map[string]string{"Idempotency-Key": r.key, sandbox.HeaderExecution: r.execution,
		sandbox.HeaderStep: r.step, sandbox.HeaderFault: r.fault} {
		if v != "" {
			hr.Header.Set(k, v)
		}
	}
	if r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := client.Do(hr)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	out := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if resp.StatusCode == http.StatusOK {
		err = json.Unmarshal(raw, &out.sent)
	} else if resp.StatusCode != http.StatusUnauthorized {
		err = json.Unmarshal(raw, &out.err)
	}
	if err != nil {
		return out, fmt.Errorf("status %d: body %s: %w", resp.StatusCode, raw, err)
	}
	return out, nil
}

// do makes a request to the server and returns its status and body.
func (e *env) do(t *testing.T, method, path, body string, header ...string) (int, []byte) {
	t.Helper()
	hr, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		hr.Header.Set("Content-Type", "application/json") // the faults' type; a header below may replace it
	}
	for i := 0; i+1 < len(header); i += 2 {
		hr.Header.Set(header[i], header[i+1])
	}
	resp, err := e.client.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// effects reads the sandbox's effects through GET /api/v1/effects, as a
// user of the trace would see them.
func (e *env) effects(t *testing.T) []store.EffectRow {
	t.Helper()
	status, data := e.do(t, http.MethodGet, "/api/v1/effects?limit=500&provider="+url.QueryEscape(sandbox.Provider), "")
	if status != http.StatusOK {
		t.Fatalf("GET /api/v1/effects: got status %d, want 200: %s", status, data)
	}
	var page struct {
		Effects []store.EffectRow `json:"effects"`
	}
	if err := json.Unmarshal(data, &page); err != nil {
		t.Fatal(err)
	}
	return page.Effects
}

func (e *env) wantEffects(t *testing.T, n int) []store.EffectRow {
	t.Helper()
	got := e.effects(t)
	if len(got) != n {
		t.Fatalf("effects of %s: got %d, want %d: %+v", sandbox.Provider, len(got), n, got)
	}
	return got
}

// sandboxLog is GET /sandbox/log, newest first.
func (e *env) sandboxLog(t *testing.T) []sandbox.LogEntry {
	t.Helper()
	status, data := e.do(t, http.MethodGet, "/sandbox/log", "")
	if status != http.StatusOK {
		t.Fatalf("GET /sandbox/log: got status %d, want 200: %s", status, data)
	}
	var body struct {
		Log []sandbox.LogEntry `json:"log"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatal(err)
	}
	return body.Log
}

// waitDelaying waits until the request with the key is held by its
// latency fault, its key in flight.
func (e *env) waitDelaying(t *testing.T, key string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case k := <-e.delaying:
			if k == key {
				return
			}
		case <-deadline:
			t.Fatalf("no latency fault began for %s within 10s", key)
		}
	}
}

// eventually polls cond until it holds, for what happens after the client
// has stopped listening (a held request's log line, say).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wantStatus(t *testing.T, what string, got reply, want int) {
	t.Helper()
	if got.status != want {
		t.Fatalf("%s: got status %d, want %d: %s", what, got.status, want, got.raw)
	}
}

func wantError(t *testing.T, what string, got reply, status int, typ string) {
	t.Helper()
	wantStatus(t, what, got, status)
	if got.err.Error.Type != typ {
		t.Fatalf("%s: got error type %q, want %q: %s", what, got.err.Error.Type, typ, got.raw)
	}
}

// wantDelivered checks a fresh delivery's answer.
func wantDelivered(t *testing.T, what string, got reply, key string) {
	t.Helper()
	wantStatus(t, what, got, http.StatusOK)
	if !strings.HasPrefix(got.sent.ID, "msg_") || got.sent.Deduplicated || got.sent.IdempotencyKey != key || got.sent.Status != "sent" {
		t.Fatalf("%s: got %s, want a new msg_ id, status sent, deduplicated false, idempotency_key %q", what, got.raw, key)
	}
	if h := got.header.Get("Idempotent-Replayed"); h != "" {
		t.Fatalf("%s: got Idempotent-Replayed %q, want none", what, h)
	}
}

// wantReplay checks that got is first answered again from the key store.
func wantReplay(t *testing.T, what string, got, first reply) {
	t.Helper()
	wantStatus(t, what, got, first.status)
	want := first.sent
	want.Deduplicated = true
	if got.sent != want {
		t.Fatalf("%s: got body %+v, want the first response %+v with deduplicated true", what, got.sent, want)
	}
	if h := got.header.Get("Idempotent-Replayed"); h != "true" {
		t.Fatalf("%s: got Idempotent-Replayed %q, want true", what, h)
	}
}

func TestFirstRequestWithKeyExecutes(t *testing.T) {
	e := newEnv(t, web.Config{})
	got := e.send(t, req{key: "ik_a94a0b1d", execution: "exec_01H8", step: "step-4"})
	wantDelivered(t, "first send", got, "ik_a94a0b1d")
	if got.sent.To != invoice.To || got.sent.Subject != invoice.Subject || got.sent.Object != "email" {
		t.Fatalf("first send: got %s, want object email to %s subject %q", got.raw, invoice.To, invoice.Subject)
	}

	effects := e.wantEffects(t, 1)
	want := trace.Effect{Provider: sandbox.Provider, ID: got.sent.ID, IdempotencyKey: "ik_a94a0b1d",
		ExecutionID: "exec_01H8", StepID: "step-4", Target: invoice.To,
		Summary: "email to jordan@acme.dev, subject 'Your June invoice'"}
	want.Fingerprint, _ = feed.Mail{Recipients: []string{invoice.To}, Subject: invoice.Subject, Body: []string{invoice.Body}}.Fingerprint()
	gotEffect := effects[0].Effect
	gotEffect.At = time.Time{}
	if !reflect.DeepEqual(gotEffect, want) {
		t.Fatalf("effect: got %+v, want %+v", gotEffect, want)
	}
	if effects[0].At.IsZero() {
		t.Fatalf("effect: got no time, want the delivery's")
	}
}

// TestRepeatReplaysStoredResponse: Stripe compares parameters, not bytes,
// so a repeat whose JSON is laid out differently is still the same request.
func TestRepeatReplaysStoredResponse(t *testing.T) {
	e := newEnv(t, web.Config{})
	first := e.send(t, req{key: "ik_repeat", execution: "exec_1", step: "step-4"})
	wantDelivered(t, "first send", first, "ik_repeat")

	repeats := []req{
		{key: "ik_repeat", execution: "exec_1", step: "step-4"},
		{key: "ik_repeat"}, // the trace headers are not parameters
		{key: "ik_repeat", msg: `{ "body": "Invoice INV-0612: 1,240.00 EUR", "subject": "Your June invoice", "to": "jordan@acme.dev" }`},
	}
	for i, r := range repeats {
		wantReplay(t, fmt.Sprintf("repeat %d", i+1), e.send(t, r), first)
	}
	e.wantEffects(t, 1)
}

func TestSameKeyDifferentParametersIsRejected(t *testing.T) {
	e := newEnv(t, web.Config{})
	first := e.send(t, req{key: "ik_params"})
	wantDelivered(t, "first send", first, "ik_params")

	for _, m := range []sandbox.Message{
		{To: "someone@else.dev", Subject: invoice.Subject, Body: invoice.Body},
		{To: invoice.To, Subject: "Your July invoice", Body: invoice.Body},
		{To: invoice.To, Subject: invoice.Subject, Body: invoice.Body + "."},
	} {
		got := e.send(t, req{key: "ik_params", msg: m})
		wantError(t, fmt.Sprintf("same key, %+v", m), got, http.StatusBadRequest, "idempotency_error")
	}
	e.wantEffects(t, 1)
	// The stored response is untouched by the rejected requests.
	wantReplay(t, "repeat with the first parameters", e.send(t, req{key: "ik_params"}), first)
}

// TestErrorsAreNotStored: the sandbox's only errors a request can cause are
// validation errors (400 invalid_request_error) and 5xx meaning nothing was
// sent. As Stripe, it stores neither: the same key with a valid request then
// executes. (A 5xx is covered by TestFailBefore.)
func TestErrorsAreNotStored(t *testing.T) {
	cases := []struct {
		name string
		bad  req
	}{
		{"no recipient", req{msg: `{"subject":"hi","body":"x"}`}},
		{"unknown field", req{msg: `{"to":"a@b.dev","subject":"hi","body":"x","cc":"c@d.dev"}`}},
		{"not JSON", req{msg: `to=a@b.dev`}},
		{"bad fault header", req{fault: "explode"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, web.Config{})
			c.bad.key = "ik_after_error"
			wantError(t, "bad request", e.send(t, c.bad), http.StatusBadRequest, "invalid_request_error")
			e.wantEffects(t, 0)
			wantDelivered(t, "valid request, same key", e.send(t, req{key: "ik_after_error"}), "ik_after_error")
			e.wantEffects(t, 1)
		})
	}
}

// TestKeyInFlightConflicts holds the first request in its delivery with a
// latency fault and sends the same key meanwhile.
func TestKeyInFlightConflicts(t *testing.T) {
	e := newEnv(t, web.Config{})
	firstDone := make(chan reply, 1)
	go func() {
		got, err := e.trySend(e.client, req{key: "ik_slow", fault: "latency=1500ms"})
		if err != nil {
			t.Error(err)
		}
		firstDone <- got
	}()
	e.waitDelaying(t, "ik_slow") // the key is taken; the delivery is 1.5 s away
	second := e.send(t, req{key: "ik_slow"})
	wantError(t, "second request while the first is in flight", second, http.StatusConflict, "idempotency_error")

	first := <-firstDone
	wantDelivered(t, "first request", first, "ik_slow")
	wantReplay(t, "third request, after the first finished", e.send(t, req{key: "ik_slow"}), first)
	e.wantEffects(t, 1)
}

// TestConcurrentRequestsWithOneKey fires 20 requests with one key at once:
// one delivers, each other one is either told to wait (409) or gets the
// delivery's response. With a slow delivery most of them land in flight.
func TestConcurrentRequestsWithOneKey(t *testing.T) {
	for _, fault := range []string{"", "latency=50ms"} {
		t.Run("fault="+fault, func(t *testing.T) {
			e := newEnv(t, web.Config{})
			const n = 20
			replies := make([]reply, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					got, err := e.trySend(e.client, req{key: "ik_herd", fault: fault, execution: "exec_herd", step: "step-4"})
					if err != nil {
						t.Error(err)
					}
					replies[i] = got
				})
			}
			close(start)
			wg.Wait()

			var fresh, replayed, conflicts int
			ids := map[string]bool{}
			for i, r := range replies {
				switch {
				case r.status == http.StatusOK && !r.sent.Deduplicated:
					fresh++
					ids[r.sent.ID] = true
				case r.status == http.StatusOK && r.header.Get("Idempotent-Replayed") == "true":
					replayed++
					ids[r.sent.ID] = true
				case r.status == http.StatusConflict && r.err.Error.Type == "idempotency_error":
					conflicts++
				default:
					t.Errorf("request %d: got %d %s, want 200 or 409 idempotency_error", i, r.status, r.raw)
				}
			}
			if fresh != 1 || len(ids) != 1 {
				t.Fatalf("got %d fresh deliveries and message ids %v, want 1 delivery and 1 id (replays %d, 409s %d)", fresh, ids, replayed, conflicts)
			}
			effects := e.wantEffects(t, 1)
			if !ids[effects[0].ID] {
				t.Fatalf("effect %s: got an id no reply carried, want one of %v", effects[0].ID, ids)
			}
			t.Logf("%d requests: 1 delivered, %d replayed, %d in flight (409)", n, replayed, conflicts)
		})
	}
}

// clock is an injected Now that the test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// ingestRecorder records a delivery as oncetrace's server does: one effect
// event, parsed and committed by the real ingest writer.
type ingestRecorder struct{ writer *writer.Writer }

func (r ingestRecorder) RecordEffect(ctx context.Context, eff trace.Effect) error {
	raw, err := json.Marshal(map[string]any{"type": "effect", "provider": eff.Provider, "effect_id": eff.ID,
		"idempotency_key": eff.IdempotencyKey, "target": eff.Target, "at": eff.At.Format(time.RFC3339Nano)})
	if err != nil {
		return err
	}
	ev, err := ingest.ParseEvent(raw, ingest.DefaultLimits)
	if err != nil {
		return err
	}
	_, err = r.writer.Write(ctx, []trace.Event{ev})
	return err
}

// TestRetentionExpiry moves an injected clock across the retention window:
// a key replays until Retention has passed since its first use, then runs as
// new (Stripe's 24 h when unset).
func TestRetentionExpiry(t *testing.T) {
	for _, c := range []struct {
		name      string
		retention time.Duration
		window    time.Duration
	}{
		{"default 24h", 0, 24 * time.Hour},
		{"configured 90m", 90 * time.Minute, 90 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
			if err != nil {
				t.Fatal(err)
			}
			ingestWriter := writer.New(db, writer.DefaultConfig)
			t0 := time.Date(2026, 6, 30, 14, 2, 11, 0, time.UTC)
			clk := &clock{now: t0}
			sb := sandbox.New(sandbox.Config{Recorder: ingestRecorder{ingestWriter}, Retention: c.retention, Now: clk.Now,
				Logger: slog.New(slog.DiscardHandler)})
			ts := httptest.NewServer(http.HandlerFunc(sb.ServeSend))
			t.Cleanup(func() {
				ts.Close()
				ingestWriter.Close()
				db.Close()
			})
			e := &env{url: ts.URL, client: ts.Client(), db: db}
			countEffects := func() int {
				t.Helper()
				rows, _, err := db.Effects(ctx, store.EffectFilter{Provider: sandbox.Provider, Key: "ik_retained"})
				if err != nil {
					t.Fatal(err)
				}
				return len(rows)
			}

			first := e.send(t, req{key: "ik_retained"})
			wantDelivered(t, "first send", first, "ik_retained")
			clk.set(t0.Add(c.window - time.Nanosecond))
			wantReplay(t, "just before the window ends", e.send(t, req{key: "ik_retained"}), first)
			if n := countEffects(); n != 1 {
				t.Fatalf("effects before expiry: got %d, want 1", n)
			}

			clk.set(t0.Add(c.window))
			second := e.send(t, req{key: "ik_retained"})
			wantDelivered(t, "when the window has passed", second, "ik_retained")
			if second.sent.ID == first.sent.ID {
				t.Fatalf("after expiry: got message id %s again, want a new one", second.sent.ID)
			}
			if n := countEffects(); n != 2 {
				t.Fatalf("effects after expiry: got %d, want 2", n)
			}
			// The key now belongs to the second delivery, kept from its time.
			clk.set(t0.Add(2*c.window - time.Nanosecond))
			wantReplay(t, "repeat within the new window", e.send(t, req{key: "ik_retained"}), second)
		})
	}
}

func TestKeyLength(t *testing.T) {
	e := newEnv(t, web.Config{})
	for _, c := range []struct {
		length int
		status int
	}{
		{sandbox.MaxKeyLength, http.StatusOK},
		{sandbox.MaxKeyLength + 1, http.StatusBadRequest},
	} {
		key := strings.Repeat("k", c.length)
		got := e.send(t, req{key: key})
		if c.status == http.StatusOK {
			wantDelivered(t, fmt.Sprintf("key of %d characters", c.length), got, key)
		} else {
			wantError(t, fmt.Sprintf("key of %d characters", c.length), got, c.status, "invalid_request_error")
			if !strings.Contains(got.err.Error.Message, "Idempotency-Key") || !strings.Contains(got.err.Error.Message, "255") {
				t.Fatalf("key of %d characters: got message %q, want it to name Idempotency-Key and the limit 255", c.length, got.err.Error.Message)
			}
		}
	}
	e.wantEffects(t, 1)
}

func TestNoKeyDeliversEveryTime(t *testing.T) {
	e := newEnv(t, web.Config{})
	ids := map[string]bool{}
	for i := range 3 {
		got := e.send(t, req{execution: "exec_nokey", step: "step-4"})
		wantDelivered(t, fmt.Sprintf("send %d without a key", i+1), got, "")
		ids[got.sent.ID] = true
	}
	if len(ids) != 3 {
		t.Fatalf("message ids: got %d distinct, want 3", len(ids))
	}
	for _, eff := range e.wantEffects(t, 3) {
		if eff.IdempotencyKey != "" || eff.ExecutionID != "exec_nokey" || eff.StepID != "step-4" {
			t.Fatalf("effect: got %+v, want no key, exec_nokey, step-4", eff.Effect)
		}
	}
}

func TestFailBefore(t *testing.T) {
	e := newEnv(t, web.Config{})
	got := e.send(t, req{key: "ik_fail", fault: "fail-before"})
	wantError(t, "fail-before", got, http.StatusServiceUnavailable, "api_error")
	e.wantEffects(t, 0)

	retry := e.send(t, req{key: "ik_fail"})
	wantDelivered(t, "retry with the same key", retry, "ik_fail")
	e.wantEffects(t, 1)
}

// TestLoseResponse is the article's scenario for real: the email goes out,
// the client times out, and only the key stands between the retry and a
// second email.
func TestLoseResponse(t *testing.T) {
	for _, c := range []struct {
		name        string
		key         string
		wantEffects int
	}{
		{"with a key the retry is deduplicated", "ik_a94a0b1d", 1},
		{"without a key the retry sends again", "", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, web.Config{})
			impatient := &http.Client{Timeout: 300 * time.Millisecond}
			_, err := e.trySend(impatient, req{key: c.key, fault: "lose-response", execution: "exec_lost", step: "step-4"})
			var nerr net.Error
			if !errors.As(err, &nerr) || !nerr.Timeout() {
				t.Fatalf("first send: got error %v, want a client timeout", err)
			}
			// The held request is logged once the server sees the client
			// gone, which is after the key stored the response.
			var lost sandbox.LogEntry
			eventually(t, "log line of the lost response", func() bool {
				l := e.sandboxLog(t)
				if len(l) == 1 {
					lost = l[0]
				}
				return len(l) == 1
			})
			if lost.Event != "delivered; fault:lose-response" || lost.Status != 0 || lost.IdempotencyKey != c.key {
				t.Fatalf("log line: got %+v, want event \"delivered; fault:lose-response\", status 0 (no answer), key %q", lost, c.key)
			}
			// The email went out although the client never heard of it.
			delivered := e.wantEffects(t, 1)[0]
			if delivered.IdempotencyKey != c.key || delivered.ID != lost.MessageID {
				t.Fatalf("effect: got key %q message %s, want %q %s", delivered.IdempotencyKey, delivered.ID, c.key, lost.MessageID)
			}

			retry := e.send(t, req{key: c.key, execution: "exec_lost", step: "step-4"})
			wantStatus(t, "retry", retry, http.StatusOK)
			if c.key != "" {
				want := reply{status: http.StatusOK, sent: sandbox.SendResponse{ID: delivered.ID, Object: "email", Status: "sent",
					To: invoice.To, Subject: invoice.Subject, IdempotencyKey: c.key}}
				wantReplay(t, "retry with the same key", retry, want)
			} else {
				wantDelivered(t, "retry without a key", retry, "")
			}
			e.wantEffects(t, c.wantEffects)
		})
	}
}

func TestLoseResponse504(t *testing.T) {
	e := newEnv(t, web.Config{})
	got := e.send(t, req{key: "ik_504", fault: "lose-response;mode=504"})
	wantError(t, "lose-response;mode=504", got, http.StatusGatewayTimeout, "api_error")
	delivered := e.wantEffects(t, 1)[0]

	retry := e.send(t, req{key: "ik_504"})
	wantStatus(t, "retry", retry, http.StatusOK)
	if retry.sent.ID != delivered.ID || !retry.sent.Deduplicated {
		t.Fatalf("retry: got %s, want message %s deduplicated", retry.raw, delivered.ID)
	}
	e.wantEffects(t, 1)
}

// TestLoseResponseHoldLimit: a client that never gives up gets 504 after
// HoldLimit, so no connection is held forever.
func TestLoseResponseHoldLimit(t *testing.T) {
	e := newEnv(t, web.Config{Sandbox: sandbox.Config{HoldLimit: 200 * time.Millisecond}})
	got := e.send(t, req{key: "ik_hold", fault: "lose-response"})
	wantError(t, "lose-response past the hold limit", got, http.StatusGatewayTimeout, "api_error")
	e.wantEffects(t, 1)
}

func TestLatency(t *testing.T) {
	e := newEnv(t, web.Config{})
	start := time.Now()
	got := e.send(t, req{key: "ik_latency", fault: "latency=200ms"})
	elapsed := time.Since(start)
	wantDelivered(t, "latency=200ms", got, "ik_latency")
	if elapsed < 200*time.Millisecond {
		t.Fatalf("latency=200ms: answered after %v, want at least 200ms", elapsed)
	}
	e.wantEffects(t, 1)
	l := e.sandboxLog(t)
	if len(l) != 1 || !strings.Contains(l[0].Event, "fault:latency=200ms") || l[0].MessageID != got.sent.ID {
		t.Fatalf("sandbox log: got %+v, want one delivery of %s naming fault:latency=200ms", l, got.sent.ID)
	}
}

// TestLatencyClientGivesUp: a client that times out during the delay has
// sent nothing, so its key is freed and the retry delivers.
func TestLatencyClientGivesUp(t *testing.T) {
	e := newEnv(t, web.Config{})
	impatient := &http.Client{Timeout: 200 * time.Millisecond}
	_, err := e.trySend(impatient, req{key: "ik_gaveup", fault: "latency=5s"})
	var nerr net.Error
	if !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("send with latency=5s: got error %v, want a client timeout", err)
	}
	eventually(t, "log line of the abandoned request", func() bool {
		l := e.sandboxLog(t)
		return len(l) == 1 && l[0].Event == "fault:latency=5s" && l[0].Status == 0
	})
	e.wantEffects(t, 0)
	wantDelivered(t, "retry with the same key", e.send(t, req{key: "ik_gaveup"}), "ik_gaveup")
	e.wantEffects(t, 1)
}

func TestParseFaultsRoundTrip(t *testing.T) {
	for _, c := range []struct {
		spec string
		want []sandbox.Fault
		str  []string // String of each, the canonical spelling
	}{
		{"", nil, nil},
		{"lose-response", []sandbox.Fault{{Kind: sandbox.LoseResponse, Probability: 1}}, []string{"lose-response"}},
		{"fail-before", []sandbox.Fault{{Kind: sandbox.FailBefore, Probability: 1}}, []string{"fail-before"}},
		{"latency=500ms", []sandbox.Fault{{Kind: sandbox.Latency, Probability: 1, Delay: 500 * time.Millisecond}}, []string{"latency=500ms"}},
		{"lose-response;p=0.5", []sandbox.Fault{{Kind: sandbox.LoseResponse, Probability: 0.5}}, []string{"lose-response;p=0.5"}},
		{"lose-response;p=0.25;mode=504", []sandbox.Fault{{Kind: sandbox.LoseResponse, Probability: 0.25, Answer504: true}}, []string{"lose-response;mode=504;p=0.25"}},
		{" latency=90s ; p=1 ", []sandbox.Fault{{Kind: sandbox.Latency, Probability: 1, Delay: 90 * time.Second}}, []string{"latency=1m30s"}},
		{"fail-before;p=1e-3, latency=1.5s", []sandbox.Fault{{Kind: sandbox.FailBefore, Probability: 0.001}, {Kind: sandbox.Latency, Probability: 1, Delay: 1500 * time.Millisecond}},
			[]string{"fail-before;p=0.001", "latency=1.5s"}},
	} {
		got, err := sandbox.ParseFaults(c.spec)
		if err != nil {
			t.Errorf("ParseFaults(%q): got error %v, want none", c.spec, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseFaults(%q): got %+v, want %+v", c.spec, got, c.want)
			continue
		}
		var strs []string
		for _, f := range got {
			strs = append(strs, f.String())
			again, err := sandbox.ParseFaults(f.String())
			if err != nil || len(again) != 1 || again[0] != f {
				t.Errorf("ParseFaults(%q) of %+v: got %+v, %v, want it back", f.String(), f, again, err)
			}
			if err := f.Validate(); err != nil {
				t.Errorf("Validate(%+v): got %v, want nil", f, err)
			}
		}
		if !reflect.DeepEqual(strs, c.str) {
			t.Errorf("String of ParseFaults(%q): got %q, want %q", c.spec, strs, c.str)
		}
	}
}

// badFaults are specs ParseFaults must refuse, each with a word its error
// must contain.
var badFaults = []struct{ spec, mention string }{
	{"explode", "kind must be"},
	{"lose-response;p=0", "p must be"},
	{"lose-response;p=1.5", "p must be"},
	{"lose-response;p=-0.1", "p must be"},
	{"lose-response;p=half", "p must be"},
	{"latency", "latency needs a duration"},
	{"latency=0s", "latency needs a duration"},
	{"latency=-1s", "latency needs a duration"},
	{"latency=11m", "latency needs a duration"},
	{"fail-before=3", "takes no value"},
	{"fail-before;mode=504", "only lose-response takes mode=504"},
	{"lose-response;mode=503", "only lose-response takes mode=504"},
	{"lose-response;retries=2", "unknown option"},
	{"latency=1s,explode", "kind must be"},
}

func TestParseFaultsRejects(t *testing.T) {
	for _, c := range badFaults {
		if _, err := sandbox.ParseFaults(c.spec); err == nil || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("ParseFaults(%q): got error %v, want one containing %q", c.spec, err, c.mention)
		}
	}
	if err := (sandbox.Fault{Kind: sandbox.LoseResponse}).Validate(); err == nil {
		t.Errorf("Validate of a fault with probability 0: got nil, want an error")
	}
}

func TestBadFaultHeaderIsRejected(t *testing.T) {
	e := newEnv(t, web.Config{})
	for _, c := range badFaults {
		got := e.send(t, req{key: "ik_badfault", fault: c.spec})
		wantError(t, "fault "+c.spec, got, http.StatusBadRequest, "invalid_request_error")
		if msg := got.err.Error.Message; !strings.HasPrefix(msg, sandbox.HeaderFault+": ") || !strings.Contains(msg, c.mention) {
			t.Errorf("fault %q: got message %q, want it to start with %q and contain %q", c.spec, msg, sandbox.HeaderFault+": ", c.mention)
		}
	}
	e.wantEffects(t, 0)
}

// TestProbability decides each strike with an injected Rand: a fault of
// probability p strikes when Rand returns less than p.
func TestProbability(t *testing.T) {
	var roll atomic.Uint64 // float64 bits
	e := newEnv(t, web.Config{Sandbox: sandbox.Config{Rand: func() float64 { return math.Float64frombits(roll.Load()) }}})
	for _, c := range []struct {
		fault  string
		roll   float64
		status int
	}{
		{"fail-before;p=0.5", 0.49, http.StatusServiceUnavailable},
		{"fail-before;p=0.5", 0.5, http.StatusOK},
		{"fail-before;p=0.5", 0.99, http.StatusOK},
		{"fail-before;p=0.001", 0, http.StatusServiceUnavailable},
		{"fail-before", 0.999999, http.StatusServiceUnavailable},
		{"lose-response;mode=504;p=0.3", 0.29, http.StatusGatewayTimeout},
		{"lose-response;mode=504;p=0.3", 0.3, http.StatusOK},
	} {
		roll.Store(math.Float64bits(c.roll))
		got := e.send(t, req{fault: c.fault})
		wantStatus(t, fmt.Sprintf("%s with Rand %v", c.fault, c.roll), got, c.status)
	}
}

func TestStandingFaults(t *testing.T) {
	e := newEnv(t, web.Config{Sandbox: sandbox.Config{Faults: []sandbox.Fault{{Kind: sandbox.Latency, Probability: 1, Delay: time.Millisecond}}}})
	faults := func(method, body string, wantStatus int, want string) {
		t.Helper()
		status, data := e.do(t, method, "/sandbox/faults", body, "Content-Type", "application/json")
		if status != wantStatus || (want != "" && strings.TrimSpace(string(data)) != want) {
			t.Fatalf("%s /sandbox/faults %s: got %d %s, want %d %s", method, body, status, data, wantStatus, want)
		}
	}
	// Faults given at start-up (serve's --sandbox-fault) are standing.
	faults(http.MethodGet, "", http.StatusOK, `{"faults":["latency=1ms"]}`)
	faults(http.MethodPut, `{"faults":["fail-before","latency=500ms;p=0.5"]}`, http.StatusOK, `{"faults":["fail-before","latency=500ms;p=0.5"]}`)
	faults(http.MethodGet, "", http.StatusOK, `{"faults":["fail-before","latency=500ms;p=0.5"]}`)

	wantError(t, "send under standing fail-before", e.send(t, req{key: "ik_standing"}), http.StatusServiceUnavailable, "api_error")
	// A header replaces the standing faults for its request.
	wantDelivered(t, "send with its own fault header", e.send(t, req{key: "ik_standing", fault: "latency=1ms"}), "ik_standing")

	faults(http.MethodPut, `{"faults":["explode"]}`, http.StatusBadRequest, "")
	faults(http.MethodPut, `not json`, http.StatusBadRequest, "")
	faults(http.MethodGet, "", http.StatusOK, `{"faults":["fail-before","latency=500ms;p=0.5"]}`)

	faults(http.MethodDelete, "", http.StatusOK, `{"faults":[]}`)
	faults(http.MethodGet, "", http.StatusOK, `{"faults":[]}`)
	wantDelivered(t, "send after DELETE", e.send(t, req{key: "ik_cleared"}), "ik_cleared")
	e.wantEffects(t, 2)
}

// TestIngestTokenGuardsWrites: with a token, sending and changing faults
// need it, as every other POST; reading the faults and the log does not.
func TestIngestTokenGuardsWrites(t *testing.T) {
	const token = "s3cret"
	e := newEnv(t, web.Config{IngestToken: token})
	if got := e.send(t, req{key: "ik_tok"}); got.status != http.StatusUnauthorized {
		t.Fatalf("send without the token: got %d %s, want 401", got.status, got.raw)
	}
	e.wantEffects(t, 0)
	wantDelivered(t, "send with the token", e.send(t, req{key: "ik_tok", token: token}), "ik_tok")

	for _, c := range []struct {
		method, path, body, auth string
		want                     int
	}{
		{http.MethodPut, "/sandbox/faults", `{"faults":["fail-before"]}`, "", http.StatusUnauthorized},
		{http.MethodDelete, "/sandbox/faults", "", "", http.StatusUnauthorized},
		{http.MethodPut, "/sandbox/faults", `{"faults":["fail-before"]}`, "Bearer wrong", http.StatusUnauthorized},
		{http.MethodPut, "/sandbox/faults", `{"faults":["fail-before"]}`, "Bearer " + token, http.StatusOK},
		{http.MethodDelete, "/sandbox/faults", "", "Bearer " + token, http.StatusOK},
		{http.MethodGet, "/sandbox/faults", "", "", http.StatusOK},
		{http.MethodGet, "/sandbox/log", "", "", http.StatusOK},
	} {
		var h []string
		if c.auth != "" {
			h = []string{"Authorization", c.auth}
		}
		if status, data := e.do(t, c.method, c.path, c.body, h...); status != c.want {
			t.Errorf("%s %s (Authorization %q): got %d %s, want %d", c.method, c.path, c.auth, status, data, c.want)
		}
	}
}

// TestSandboxLog runs one request of every outcome and reads them back from
// GET /sandbox/log, newest first.
func TestSandboxLog(t *testing.T) {
	e := newEnv(t, web.Config{})
	first := e.send(t, req{key: "ik_log", execution: "exec_log", step: "step-4"})
	e.send(t, req{key: "ik_log"})                                      // replayed
	e.send(t, req{key: "ik_log", msg: sandbox.Message{To: "x@y.dev"}}) // key_conflict
	e.send(t, req{key: "ik_log_fail", fault: "fail-before"})           // fault
	e.send(t, req{key: "ik_log_504", fault: "lose-response;mode=504"}) // delivered, response lost
	e.send(t, req{key: strings.Repeat("k", 256)})                      // rejected
	slow := make(chan reply, 1)
	go func() {
		got, err := e.trySend(e.client, req{key: "ik_log_slow", fault: "latency=1s"})
		if err != nil {
			t.Error(err)
		}
		slow <- got
	}()
	e.waitDelaying(t, "ik_log_slow")
	e.send(t, req{key: "ik_log_slow"}) // in_flight
	slowReply := <-slow

	type line struct {
		event, key, message string
		status              int
	}
	want := []line{
		// Lines are ordered by arrival: the slow one arrived first.
		{"in_flight", "ik_log_slow", "", 409},
		{"delivered; fault:latency=1s", "ik_log_slow", slowReply.sent.ID, 200},
		{"rejected", strings.Repeat("k", 256), "", 400},
		{"delivered; fault:lose-response;mode=504", "ik_log_504", "*", 504},
		{"fault:fail-before", "ik_log_fail", "", 503},
		{"key_conflict", "ik_log", "", 400},
		{"replayed", "ik_log", "", 200},
		{"delivered", "ik_log", first.sent.ID, 200},
	}
	got := e.sandboxLog(t)
	if len(got) != len(want) {
		t.Fatalf("sandbox log: got %d lines %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Event != w.event || g.IdempotencyKey != w.key || g.Status != w.status ||
			(w.message == "*" && g.MessageID == "") || (w.message != "*" && g.MessageID != w.message) {
			t.Errorf("log line %d: got %+v, want event %q key %q status %d message %q", i, g, w.event, w.key, w.status, w.message)
		}
	}
	if l := got[len(got)-1]; l.Execution != "exec_log" || l.Step != "step-4" || l.To != invoice.To {
		t.Errorf("first log line: got %+v, want execution exec_log, step step-4, to %s", l, invoice.To)
	}
}

// Two sends of one email with different keys (a client such as stripe-node
// puts a fresh key on every request) are two deliveries with one
// fingerprint: what the audit needs to call them one intent sent twice.
// Another recipient is another fingerprint.
func TestEffectsCarryTheMailFingerprint(t *testing.T) {
	e := newEnv(t, web.Config{})
	wantDelivered(t, "first send", e.send(t, req{key: "ik_first", execution: "exec_fp"}), "ik_first")
	crlf := invoice
	crlf.Body += "\r\n"
	wantDelivered(t, "second send, another key", e.send(t, req{key: "ik_second", execution: "exec_fp", msg: crlf}), "ik_second")
	other := invoice
	other.To = "sam@acme.dev"
	wantDelivered(t, "to someone else", e.send(t, req{key: "ik_third", execution: "exec_fp", msg: other}), "ik_third")

	byTarget := map[string][]store.EffectRow{}
	for _, eff := range e.wantEffects(t, 3) {
		byTarget[eff.Target] = append(byTarget[eff.Target], eff)
	}
	jordan, sam := byTarget["jordan@acme.dev"], byTarget["sam@acme.dev"]
	if len(jordan) != 2 || len(sam) != 1 {
		t.Fatalf("effects by target: got %d to jordan and %d to sam, want 2 and 1", len(jordan), len(sam))
	}
	if fp := jordan[0].Fingerprint; !strings.HasPrefix(fp, "mail:") || fp != jordan[1].Fingerprint {
		t.Errorf("two sends of one email with different keys: got fingerprints %q and %q, want one mail: fingerprint", fp, jordan[1].Fingerprint)
	}
	if sam[0].Fingerprint == jordan[0].Fingerprint || sam[0].Fingerprint == "" {
		t.Errorf("another recipient: got fingerprint %q, want another one than %q", sam[0].Fingerprint, jordan[0].Fingerprint)
	}
	if want := "email to jordan@acme.dev, subject 'Your June invoice'"; jordan[0].Summary != want {
		t.Errorf("summary: got %q, want %q", jordan[0].Summary, want)
	}

	// With no step reported at all, the outbox alone proves the duplicate.
	status, data := e.do(t, http.MethodGet, "/api/v1/executions/exec_fp", "")
	var run struct {
		Findings []trace.Finding `json:"findings"`
	}
	if err := json.Unmarshal(data, &run); status != http.StatusOK || err != nil {
		t.Fatalf("GET /api/v1/executions/exec_fp: got %d %s", status, data)
	}
	var dups []trace.Finding
	for _, f := range run.Findings {
		if f.Rule == trace.RuleDuplicateEffect {
			dups = append(dups, f)
		}
	}
	if len(dups) != 1 || dups[0].Severity != trace.SeverityCritical || len(dups[0].Effects) != 2 {
		t.Errorf("findings: got %+v, want one critical duplicate_effect naming the two emails to jordan", run.Findings)
	}
}

// failingRecorder refuses every effect with err.
type failingRecorder struct{ err error }

func (r failingRecorder) RecordEffect(context.Context, trace.Effect) error { return r.err }

// TestRecordFailureTellsWhenToRetry: a delivery that cannot be recorded is
// not sent, and the answer says how long to wait as the native API does:
// longer when the database refuses writes (the store's UnwritableError,
// which the sandbox recognises without importing the store).
func TestRecordFailureTellsWhenToRetry(t *testing.T) {
	diskFull := &store.UnwritableError{Reason: store.ReasonDiskFull, Err: errors.New("database or disk is full")}
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		retryAfter string
	}{
		{"database full", fmt.Errorf("writer: %w", diskFull), http.StatusServiceUnavailable, "5"},
		{"writer busy", writer.ErrOverloaded, http.StatusServiceUnavailable, "1"},
		{"rejected", fmt.Errorf("sandbox effect: %w: too long", feed.ErrRejected), http.StatusBadRequest, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			box := sandbox.New(sandbox.Config{Recorder: failingRecorder{tc.err}, Logger: slog.New(slog.DiscardHandler)})
			ts := httptest.NewServer(http.HandlerFunc(box.ServeSend))
			t.Cleanup(ts.Close)
			body, _ := json.Marshal(invoice)
			resp, err := ts.Client().Post(ts.URL+"/sandbox/mail/v1/send", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("Retry-After"); resp.StatusCode != tc.status || got != tc.retryAfter {
				t.Errorf("got %d with Retry-After %q, want %d with %q", resp.StatusCode, got, tc.status, tc.retryAfter)
			}
		})
	}
}
