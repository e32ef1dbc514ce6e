package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
)

// callTimeout keeps the tests fast: a lost answer costs this much.
const callTimeout = 500 * time.Millisecond

// callLog collects the tools/call requests a server receives; its Record
// is a ServerOptions.OnCall.
type callLog struct {
	mu    sync.Mutex
	calls []ToolCall
}

func (l *callLog) Record(c ToolCall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
}

func (l *callLog) of(tool string) []ToolCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []ToolCall
	for _, c := range l.calls {
		if c.Tool == tool {
			out = append(out, c)
		}
	}
	return out
}

func serveHTTP(t *testing.T, opts ServerOptions) string {
	t.Helper()
	url, stop, err := ServeHTTP("127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return url
}

func runClient(t *testing.T, opts ClientOptions) ClientReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	report, err := RunClient(ctx, opts)
	if err != nil {
		t.Fatalf("RunClient: %v", err)
	}
	return report
}

// outcomes lists the outcomes of each call's tries, such as
// "get_invoice:ok send_invoice_email:timeout,ok".
func outcomes(r ClientReport) []string {
	var out []string
	for _, c := range r.Calls {
		var tries []string
		for _, tr := range c.Tries {
			tries = append(tries, tr.Outcome)
		}
		out = append(out, c.Tool+":"+join(tries))
	}
	return out
}

func join(s []string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestToolsListAnnotations(t *testing.T) {
	t.Parallel()
	report := runClient(t, ClientOptions{URL: serveHTTP(t, ServerOptions{}), CallTimeout: callTimeout})
	if len(report.Tools) != 3 {
		t.Fatalf("tools/list: got %d tools, want 3", len(report.Tools))
	}
	if a := report.Tool(ToolGetInvoice).Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("get_invoice annotations: got %+v, want readOnlyHint", a)
	}
	if a := report.Tool(ToolChargeCard).Annotations; a == nil || !a.IdempotentHint || a.ReadOnlyHint {
		t.Errorf("charge_card annotations: got %+v, want idempotentHint and not readOnlyHint", a)
	}
	if a := report.Tool(ToolSendInvoiceEmail).Annotations; a != nil {
		t.Errorf("send_invoice_email annotations: got %+v, want none", a)
	}
	for _, c := range report.Calls {
		if c.ID == "" {
			t.Errorf("%s: no structuredContent.id in its answer", c.Tool)
		}
	}
	if got, want := report.Call(ToolGetInvoice).ID, DefaultInvoiceID; got != want {
		t.Errorf("get_invoice id: got %q, want %q", got, want)
	}
}

// TestRunClientHTTP loses the first answers of both side-effecting tools
// at the server: the naive client makes each effect twice, the keyed one
// once, and the session carries on after each timeout.
func TestRunClientHTTP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		keyed          bool
		sends, charges int
	}{
		{"naive", false, 2, 2},
		{"keyed", true, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var effects EffectLog
			var calls callLog
			url := serveHTTP(t, ServerOptions{OnEffect: effects.Record, OnCall: calls.Record,
				LoseResponse: LoseFirst(ToolSendInvoiceEmail, ToolChargeCard)})
			report := runClient(t, ClientOptions{URL: url, Keyed: tc.keyed, CallTimeout: callTimeout})

			if got, want := effects.Count(ToolSendInvoiceEmail), tc.sends; got != want {
				t.Errorf("emails sent: got %d, want %d", got, want)
			}
			if got, want := effects.Count(ToolChargeCard), tc.charges; got != want {
				t.Errorf("cards charged: got %d, want %d", got, want)
			}
			want := []string{`get_invoice:["ok"]`, `send_invoice_email:["timeout","ok"]`, `charge_card:["timeout","ok"]`}
			if got := outcomes(report); !slices.Equal(got, want) {
				t.Errorf("tries: got %v, want %v", got, want)
			}
			if report.SessionID == "" {
				t.Error("no Mcp-Session-Id: the session is not stateful")
			}
			if report.ProtocolVersion != LegacyProtocolVersion {
				t.Errorf("protocol version: got %q, want %q (stateful HTTP falls back to initialize)", report.ProtocolVersion, LegacyProtocolVersion)
			}
			checkKeys(t, &calls, tc.keyed)
		})
	}
}

// checkKeys checks the keys both tries of each side-effecting call
// carried: one non-empty key, the same on both, when keyed; none when naive.
func checkKeys(t *testing.T, calls *callLog, keyed bool) {
	t.Helper()
	for _, tool := range []string{ToolSendInvoiceEmail, ToolChargeCard} {
		tries := calls.of(tool)
		if len(tries) != 2 {
			t.Errorf("%s: the server got %d calls, want 2", tool, len(tries))
			continue
		}
		for i, c := range tries {
			key, _ := c.Meta[MetaIdempotencyKey].(string)
			var args ChargeCardArgs
			json.Unmarshal(c.Arguments, &args)
			switch {
			case !keyed && (key != "" || args.IdempotencyKey != ""):
				t.Errorf("%s try %d: naive, but got key %q in _meta, %q in the arguments", tool, i+1, key, args.IdempotencyKey)
			case keyed && key == "":
				t.Errorf("%s try %d: keyed, but no %s in _meta", tool, i+1, MetaIdempotencyKey)
			case keyed && tool == ToolChargeCard && args.IdempotencyKey != key:
				t.Errorf("%s try %d: idempotency_key argument %q, want the _meta key %q", tool, i+1, args.IdempotencyKey, key)
			}
		}
		if !bytes.Equal(tries[0].Arguments, tries[1].Arguments) || tries[0].Meta[MetaIdempotencyKey] != tries[1].Meta[MetaIdempotencyKey] {
			t.Errorf("%s: the retry differs: %s %v, then %s %v", tool, tries[0].Arguments, tries[0].Meta, tries[1].Arguments, tries[1].Meta)
		}
	}
}

// losingProxy stands in for a recording proxy's lose-response: a tools/call
// whose _meta asks for it is forwarded, its answer dropped and the request
// held until the client gives up, before any response header is written.
func losingProxy(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		json.Unmarshal(body, &msg)
		if r.Method != http.MethodPost || msg.Method != "tools/call" || msg.Params.Meta[MetaFault] != "lose-response" {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(httptest.NewRecorder(), r)
		<-r.Context().Done()
	})
}

// TestRunClientHTTPLostResponse loses an answer the way the HTTP proxy will,
// asked by the client's _meta fault: the client's POST gets no response at
// all, and its retry goes through the same session.
func TestRunClientHTTPLostResponse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		keyed bool
		sends int
	}{
		{"naive", false, 2},
		{"keyed", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var effects EffectLog
			var calls callLog
			ts := httptest.NewServer(losingProxy(HTTPHandler(NewServer(ServerOptions{OnEffect: effects.Record, OnCall: calls.Record}))))
			t.Cleanup(ts.Close)
			report := runClient(t, ClientOptions{URL: ts.URL, Keyed: tc.keyed, CallTimeout: callTimeout,
				Fault: "lose-response", FaultTool: ToolSendInvoiceEmail})

			if got, want := effects.Count(ToolSendInvoiceEmail), tc.sends; got != want {
				t.Errorf("emails sent: got %d, want %d", got, want)
			}
			if got, want := effects.Count(ToolChargeCard), 1; got != want {
				t.Errorf("cards charged: got %d, want %d", got, want)
			}
			want := []string{`get_invoice:["ok"]`, `send_invoice_email:["timeout","ok"]`, `charge_card:["ok"]`}
			if got := outcomes(report); !slices.Equal(got, want) {
				t.Errorf("tries: got %v, want %v", got, want)
			}
			sends := calls.of(ToolSendInvoiceEmail)
			if len(sends) != 2 || sends[0].Meta[MetaFault] != "lose-response" || sends[1].Meta[MetaFault] != nil {
				t.Errorf("send_invoice_email _meta: got %v, want the fault on the first try only", sends)
			}
		})
	}
}

// TestRunClientStdio runs the mcpserver command as the client's child,
// counting its effects through its -effects file, in the SDK's newest
// (sessionless) protocol and in the legacy one with initialize.
func TestRunClientStdio(t *testing.T) {
	t.Parallel()
	server, _ := builtCommands(t)
	for _, tc := range []struct {
		name           string
		keyed          bool
		protocol       string
		wantProtocol   string
		sends, charges int
	}{
		{"naive", false, "", "2026-07-28", 2, 2},
		{"keyed", true, "", "2026-07-28", 1, 1},
		{"naive legacy", false, LegacyProtocolVersion, LegacyProtocolVersion, 2, 2},
		{"keyed legacy", true, LegacyProtocolVersion, LegacyProtocolVersion, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			effectsFile, callsFile := filepath.Join(dir, "effects.jsonl"), filepath.Join(dir, "calls.jsonl")
			var stderr bytes.Buffer
			report := runClient(t, ClientOptions{Command: server, Stderr: &stderr, Keyed: tc.keyed,
				ProtocolVersion: tc.protocol, CallTimeout: callTimeout,
				Args: []string{"-effects", effectsFile, "-calls", callsFile, "-lose-first", ToolSendInvoiceEmail + "," + ToolChargeCard}})
			if stderr.Len() > 0 {
				t.Logf("mcpserver's stderr: %s", stderr.Bytes())
			}

			effects, err := ReadEffects(effectsFile)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := CountEffects(effects, ToolSendInvoiceEmail), tc.sends; got != want {
				t.Errorf("emails sent: got %d, want %d", got, want)
			}
			if got, want := CountEffects(effects, ToolChargeCard), tc.charges; got != want {
				t.Errorf("cards charged: got %d, want %d", got, want)
			}
			want := []string{`get_invoice:["ok"]`, `send_invoice_email:["timeout","ok"]`, `charge_card:["timeout","ok"]`}
			if got := outcomes(report); !slices.Equal(got, want) {
				t.Errorf("tries: got %v, want %v", got, want)
			}
			if report.ProtocolVersion != tc.wantProtocol {
				t.Errorf("protocol version: got %q, want %q", report.ProtocolVersion, tc.wantProtocol)
			}
			if report.SessionID != "" {
				t.Errorf("session id over stdio: got %q, want none", report.SessionID)
			}
			if a := report.Tool(ToolGetInvoice); a == nil || a.Annotations == nil || !a.Annotations.ReadOnlyHint {
				t.Errorf("get_invoice over stdio: got %+v, want readOnlyHint", a)
			}
			got, err := ReadCalls(callsFile)
			if err != nil {
				t.Fatal(err)
			}
			var calls callLog
			for _, c := range got {
				calls.Record(c)
			}
			checkKeys(t, &calls, tc.keyed)
		})
	}
}

var traceparentPattern = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-01$`)

// TestTraceparent checks the client's _meta.traceparent: one trace for the
// run, a new span for every try, and the effects carry their call's.
func TestTraceparent(t *testing.T) {
	t.Parallel()
	var effects EffectLog
	var calls callLog
	url := serveHTTP(t, ServerOptions{OnEffect: effects.Record, OnCall: calls.Record, LoseResponse: LoseFirst(ToolSendInvoiceEmail)})
	report := runClient(t, ClientOptions{URL: url, Traceparent: true, CallTimeout: callTimeout})

	if len(report.TraceID) != 32 {
		t.Fatalf("trace id: got %q, want 32 hex digits", report.TraceID)
	}
	spans := map[string]bool{}
	calls.mu.Lock()
	received := slices.Clone(calls.calls)
	calls.mu.Unlock()
	if len(received) != 4 {
		t.Fatalf("tools/call received: got %d, want 4 (one retried)", len(received))
	}
	for _, c := range received {
		tp, _ := c.Meta[MetaTraceparent].(string)
		m := traceparentPattern.FindStringSubmatch(tp)
		if m == nil || m[1] != report.TraceID {
			t.Errorf("%s #%d traceparent: got %q, want 00-%s-SPAN-01", c.Tool, c.N, tp, report.TraceID)
			continue
		}
		if spans[m[2]] {
			t.Errorf("%s #%d: span %s used twice", c.Tool, c.N, m[2])
		}
		spans[m[2]] = true
	}
	sends := calls.of(ToolSendInvoiceEmail)
	for i, e := range effects.Effects() {
		if e.Tool == ToolSendInvoiceEmail && len(sends) == 2 && e.Traceparent != sends[i].Meta[MetaTraceparent] {
			t.Errorf("email %d: traceparent %q, want its call's %v", i+1, e.Traceparent, sends[i].Meta[MetaTraceparent])
		}
	}
}

// TestMailThroughSandbox sends the emails through the real sandbox mail
// API, which keeps the idempotency keys: the keyed client's retry is
// replayed there.
func TestMailThroughSandbox(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		keyed    bool
		sends    int
		replayed int
	}{
		{"naive", false, 2, 0},
		{"keyed", true, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mail := sandbox.New(sandbox.Config{})
			ts := httptest.NewServer(http.HandlerFunc(mail.ServeSend))
			t.Cleanup(ts.Close)
			var effects EffectLog
			url := serveHTTP(t, ServerOptions{OnEffect: effects.Record, MailURL: ts.URL, LoseResponse: LoseFirst(ToolSendInvoiceEmail)})
			report := runClient(t, ClientOptions{URL: url, Keyed: tc.keyed, CallTimeout: callTimeout})

			events := map[string]int{}
			for _, e := range mail.Log() {
				events[e.Event]++
			}
			if events["delivered"] != tc.sends || events["replayed"] != tc.replayed {
				t.Errorf("sandbox log: got %v, want %d delivered, %d replayed", events, tc.sends, tc.replayed)
			}
			if got, want := effects.Count(ToolSendInvoiceEmail), tc.sends; got != want {
				t.Errorf("emails sent: got %d, want %d", got, want)
			}
			// The answer to the keyed retry is the replay of the first send.
			for _, e := range effects.Effects() {
				if got := report.Call(ToolSendInvoiceEmail).ID; tc.keyed && e.Tool == ToolSendInvoiceEmail && got != e.ID {
					t.Errorf("keyed send id: got %q, want the first send's %q", got, e.ID)
				}
			}
		})
	}
}
