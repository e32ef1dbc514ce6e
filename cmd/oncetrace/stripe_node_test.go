package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// TestStripeNodeAgentRetryThroughTap is issue 21's stripe-node case, end to
// end on 127.0.0.1: a Node agent using stripe-node 23 (fetch HTTP client,
// maxNetworkRetries 0) with the OpenTelemetry JS SDK's SimpleSpanProcessor
// and the undici instrumentation charges a customer through `oncetrace
// tap` in front of an API that keeps Stripe's idempotency contract. The tap
// loses the first answer after the charge was made; the tool call times
// out; the model calls the tool again with the same arguments, and
// stripe-node puts a fresh random Idempotency-Key on the new request (it
// does on every POST, ../shared/NOTES.md), which succeeds: two charges. The HTTP spans carry no request headers (the
// instrumentation records none on the failed attempt), so the only place
// the two keys are known is the tap's outbox.
//
// The verdict must be one execution, billing-agent, with a critical
// duplicate_effect on the charge step naming both charges and a critical
// unstable_key naming both keys as the provider received them; and it must
// not depend on the order in which the spans and the effects reach the
// server: what the server received live is posted again, in other orders
// and splits, to fresh servers, and every API answer must be
// byte-identical to the live one.
func TestStripeNodeAgentRetryThroughTap(t *testing.T) {
	// The live run: serve, a wiretap in front of it that keeps every write
	// it passes on (the tap's effect events and the agent's OTLP exports),
	// the Stripe-like API and the tap in front of it.
	live := startDemoServer(t, filepath.Join(t.TempDir(), "live.db"), "serve.log")
	wire := &wiretap{target: live.url}
	wireSrv := httptest.NewServer(wire)
	defer wireSrv.Close()
	stripe := newFakeStripe()
	api := httptest.NewServer(stripe)
	defer api.Close()
	tp := startTapProcess(t, "--upstream", api.URL, "--provider", "stripe", "--target-field", "customer", "--server", wireSrv.URL)

	ag := newStripeNodeAgent(wireSrv.URL, tp.url)
	charge := ag.run(t)

	// The tap recorded both charges (the lost one before holding the
	// connection) before anything is read.
	var st tapStatus
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		getJSON(t, tp.url+"/_oncetrace/tap", &st)
		if st.Recorded >= 2 && st.Queued == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tap status: got %+v, want 2 effects recorded\n%s", st, tp.logText())
		}
	}
	requests, charges, sawFault := stripe.counts()
	if requests != 2 || charges != 2 || sawFault {
		t.Fatalf("the API: got %d requests, %d charges, fault header seen %v; want 2 requests, 2 charges, no fault header", requests, charges, sawFault)
	}
	if st.Faults["lose-response"] != 1 || st.Effects != 2 || st.Recorded != 2 {
		t.Errorf("tap status: got %+v, want one lost response and two effects recorded", st)
	}

	sent := wire.labelled(t, ag)
	t.Logf("as sent: %s", strings.Join(labelsOf(sent), " "))
	want := readAnswers(t, live.url, ag.traceHex())
	checkStripeNodeVerdict(t, "live", want, ag, charge)

	// Other arrival orders of the same requests, each on a fresh server.
	byLabel := map[string]wireRequest{}
	for _, r := range sent {
		byLabel[r.label] = r
	}
	pick := func(labels ...string) []wireRequest {
		var out []wireRequest
		for _, l := range labels {
			r, ok := byLabel[l]
			if !ok {
				t.Fatalf("no recorded request %q (recorded: %v)", l, labelsOf(sent))
			}
			out = append(out, r)
		}
		return out
	}
	type order struct {
		name string
		reqs []wireRequest
	}
	orders := []order{
		{"as sent, replayed", sent},
		{"effects before all spans", pick("effect#1", "effect#2", "http#1", "tool#1", "http#2", "tool#2", "root")},
		{"effects after all spans", pick("http#1", "tool#1", "http#2", "tool#2", "root", "effect#1", "effect#2")},
		{"root first", pick("root", "effect#1", "http#1", "tool#1", "effect#2", "http#2", "tool#2")},
		{"tool spans before HTTP spans", pick("tool#1", "tool#2", "effect#1", "effect#2", "http#1", "http#2", "root")},
		{"HTTP spans before tool spans", pick("http#1", "http#2", "effect#1", "effect#2", "tool#1", "tool#2", "root")},
		{"reversed", reversed(sent)},
		{"batched: one OTLP export, one events request", []wireRequest{batchEvents(t, pick("effect#1", "effect#2")), batchSpans(t, pick("http#1", "tool#1", "http#2", "tool#2", "root"))}},
	}
	rng := mrand.New(mrand.NewPCG(21, 2026))
	for i := range 4 {
		shuffled := slices.Clone(sent)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		orders = append(orders, order{fmt.Sprintf("random permutation %d", i+1), shuffled})
	}
	for _, o := range orders {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			t.Logf("order: %s", strings.Join(labelsOf(o.reqs), " "))
			srv := startDemoServer(t, filepath.Join(t.TempDir(), "replay.db"), "serve.log")
			for _, r := range o.reqs {
				r.post(t, srv.url)
			}
			got := readAnswers(t, srv.url, ag.traceHex())
			checkStripeNodeVerdict(t, o.name, got, ag, charge)
			for _, name := range answerNames {
				if !bytes.Equal(got[name], want[name]) {
					t.Errorf("GET %s differs from the live answer:\n%s", name, lineDiff(indentJSON(want[name]), indentJSON(got[name])))
				}
			}
		})
	}
}

// stripeNodeAgent plays the Node agent: its spans as the OpenTelemetry JS
// SDK makes them, its requests as stripe-node sends them through undici.
type stripeNodeAgent struct {
	otlp, tap string
	traceID   pcommon.TraceID
	spans     map[string]pcommon.SpanID // by label: root, tool#1, http#1, ...
	keys      []string                  // the Idempotency-Key of each request, in order
	args      string
}

func newStripeNodeAgent(otlp, tap string) *stripeNodeAgent {
	a := &stripeNodeAgent{otlp: otlp, tap: tap, spans: map[string]pcommon.SpanID{},
		args: `{"customer":"cus_123","amount":2000,"currency":"usd","description":"June invoice"}`}
	rand.Read(a.traceID[:])
	for _, l := range []string{"root", "tool#1", "http#1", "tool#2", "http#2"} {
		var id pcommon.SpanID
		rand.Read(id[:])
		a.spans[l] = id
	}
	return a
}

func (a *stripeNodeAgent) traceHex() string { return hex.EncodeToString(a.traceID[:]) }

func (a *stripeNodeAgent) spanHex(label string) string {
	id := a.spans[label]
	return hex.EncodeToString(id[:])
}

// uuid4 is a random UUID, version 4, as stripe-node's uuid4() makes them.
func uuid4() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// agentSpan is one span as the JS SDK ends it.
type agentSpan struct {
	label, name, scope, scopeVersion string
	kind                             ptrace.SpanKind
	parent                           string // label of the parent; "" for the root
	start, end                       time.Time
	attrs                            map[string]any
	errMsg                           string // error status with this message, and an exception event
	errStack                         string
}

// export sends one span in one OTLP/HTTP protobuf request, as the JS SDK's
// SimpleSpanProcessor with @opentelemetry/exporter-trace-otlp-proto does
// when the span ends.
func (a *stripeNodeAgent) export(t *testing.T, s agentSpan) {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	for k, v := range map[string]string{"service.name": "billing-agent", "telemetry.sdk.language": "nodejs", "telemetry.sdk.name": "opentelemetry",
		"telemetry.sdk.version": "2.2.0", "process.runtime.name": "nodejs", "process.runtime.version": "20.20.2", "host.name": "agent-1"} {
		rs.Resource().Attributes().PutStr(k, v)
	}
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(s.scope)
	ss.Scope().SetVersion(s.scopeVersion)
	sp := ss.Spans().AppendEmpty()
	sp.SetTraceID(a.traceID)
	sp.SetSpanID(a.spans[s.label])
	if s.parent != "" {
		sp.SetParentSpanID(a.spans[s.parent])
	}
	sp.SetName(s.name)
	sp.SetKind(s.kind)
	sp.SetFlags(1)
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(s.start))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(s.end))
	if err := sp.Attributes().FromRaw(s.attrs); err != nil {
		t.Fatal(err)
	}
	if s.errMsg != "" {
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage(s.errMsg)
		ev := sp.Events().AppendEmpty()
		ev.SetName("exception")
		ev.SetTimestamp(pcommon.NewTimestampFromTime(s.end))
		// recordException of a DOMException: its legacy numeric code (23,
		// TIMEOUT_ERR) is the type, its name begins the stack.
		ev.Attributes().PutStr("exception.type", "23")
		ev.Attributes().PutStr("exception.message", s.errMsg)
		ev.Attributes().PutStr("exception.stacktrace", s.errStack)
	}
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, a.otlp+"/v1/traces", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "OTel-OTLP-Exporter-JavaScript/0.223.1")
	resp, err := demoHTTP.Do(req)
	if err != nil {
		t.Fatalf("export %s: %v", s.label, err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("export %s: got %s %s, want 200", s.label, resp.Status, msg)
	}
}

// charge is stripe.charges.create through the tap, as stripe-node sends it
// with the fetch client: undici's instrumentation opens the HTTP client
// span and puts its traceparent on the request; stripe-node adds a fresh
// key. The first request's answer is lost by the tap after the charge was
// made, and the client's timeout aborts it.
func (a *stripeNodeAgent) charge(t *testing.T, n int, lose bool) (agentSpan, string, error) {
	t.Helper()
	label := fmt.Sprintf("http#%d", n)
	key := "stripe-node-retry-" + uuid4()
	a.keys = append(a.keys, key)
	form := url.Values{"amount": {"2000"}, "currency": {"usd"}, "customer": {"cus_123"}, "description": {"June invoice"}}
	u := a.tap + "/v1/charges"
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer sk_test_oncetrace")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Stripe-Version", "2025-08-27.basil")
	req.Header.Set("User-Agent", "Stripe/v1 NodeBindings/23.0.0")
	req.Header.Set("X-Stripe-Client-User-Agent", `{"bindings_version":"23.0.0","lang":"node","publisher":"stripe","uname":"linux","platform":"linux","httplib":"fetch"}`)
	req.Header.Set("traceparent", "00-"+a.traceHex()+"-"+a.spanHex(label)+"-01")
	if lose {
		req.Header.Set("X-Oncetrace-Fault", "lose-response")
	}
	// The client gives up on the lost answer once the tap has recorded
	// the charge it made, as stripe-node's timeout would (80 s later),
	// however slow the machine.
	ctx, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	if lose {
		go func() {
			defer giveUp()
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if a.tapRecorded() >= 1 {
					return
				}
			}
		}()
	}
	req = req.WithContext(ctx)
	span := agentSpan{label: label, name: "POST", scope: "@opentelemetry/instrumentation-undici", scopeVersion: "0.33.0",
		kind: ptrace.SpanKindClient, parent: fmt.Sprintf("tool#%d", n), start: time.Now(),
		attrs: map[string]any{"http.request.method": "POST", "url.full": u, "url.path": "/v1/charges", "url.query": "", "url.scheme": "http",
			"server.address": "127.0.0.1", "server.port": int64(mustPort(t, a.tap))}}
	resp, err := demoHTTP.Do(req)
	span.end = time.Now()
	if err != nil {
		span.errMsg = "The operation was aborted due to timeout"
		span.errStack = "TimeoutError: The operation was aborted due to timeout\n    at node:internal/deps/undici/undici:13510:13\n    at async StripeFetchHttpClient.makeRequest"
		return span, "", err
	}
	defer resp.Body.Close()
	var ch struct {
		ID string `json:"id"`
	}
	raw, _ := io.ReadAll(resp.Body)
	json.Unmarshal(raw, &ch)
	span.attrs["http.response.status_code"] = int64(resp.StatusCode)
	span.attrs["network.peer.address"] = "127.0.0.1"
	span.attrs["network.peer.port"] = int64(mustPort(t, a.tap))
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(ch.ID, "ch_") {
		t.Fatalf("charge %d: got %s %s, want 200 and a charge", n, resp.Status, raw)
	}
	return span, string(raw), nil
}

// tapRecorded is how many effects the tap has recorded.
func (a *stripeNodeAgent) tapRecorded() int {
	resp, err := demoHTTP.Get(a.tap + "/_oncetrace/tap")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var st tapStatus
	json.NewDecoder(resp.Body).Decode(&st)
	return st.Recorded
}

func mustPort(t *testing.T, base string) int {
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var p int
	fmt.Sscanf(u.Port(), "%d", &p)
	return p
}

// run plays the whole agent run and returns the charge the agent got.
func (a *stripeNodeAgent) run(t *testing.T) string {
	t.Helper()
	rootStart := time.Now()
	var got string
	for n := 1; n <= 2; n++ {
		toolStart := time.Now()
		httpSpan, result, err := a.charge(t, n, n == 1)
		if (err == nil) != (n == 2) {
			t.Fatalf("charge %d: got error %v; want the first to time out and the second to succeed", n, err)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("charge %d: got %v, want the client to give up", n, err)
		}
		a.export(t, httpSpan)
		tool := agentSpan{label: fmt.Sprintf("tool#%d", n), name: "execute_tool charge_customer", scope: "billing-agent", scopeVersion: "1.0.0",
			kind: ptrace.SpanKindInternal, parent: "root", start: toolStart,
			attrs: map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge_customer", "gen_ai.tool.type": "function",
				"gen_ai.tool.call.id": "call_" + randomHex(12), "gen_ai.tool.call.arguments": a.args}}
		if err != nil {
			tool.errMsg = httpSpan.errMsg
			tool.errStack = httpSpan.errStack
			tool.attrs["error.type"] = "TimeoutError"
		} else {
			tool.attrs["gen_ai.tool.call.result"] = result
			var ch struct {
				ID string `json:"id"`
			}
			json.Unmarshal([]byte(result), &ch)
			got = ch.ID
		}
		tool.end = time.Now()
		a.export(t, tool)
	}
	a.export(t, agentSpan{label: "root", name: "invoke_agent billing-agent", scope: "billing-agent", scopeVersion: "1.0.0",
		kind: ptrace.SpanKindInternal, start: rootStart, end: time.Now(),
		attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent", "gen_ai.system": "openai"}})
	return got
}

func reversed(rs []wireRequest) []wireRequest {
	out := slices.Clone(rs)
	slices.Reverse(out)
	return out
}

// wireRequest is one write the server received: an OTLP export or a
// native events request.
type wireRequest struct {
	label             string
	path, contentType string
	body              []byte
}

func (r wireRequest) post(t *testing.T, server string) {
	t.Helper()
	resp, err := demoHTTP.Post(server+r.path, r.contentType, bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("POST %s (%s): %v", r.path, r.label, err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s (%s): got %s %s, want 200", r.path, r.label, resp.Status, msg)
	}
}

// wiretap passes every request on to target and keeps the writes it
// answered 200, in the order the server received them.
type wiretap struct {
	target string
	mu     sync.Mutex
	reqs   []wireRequest
}

func (w *wiretap) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	out, _ := http.NewRequestWithContext(r.Context(), r.Method, w.target+r.URL.RequestURI(), bytes.NewReader(body))
	for _, h := range []string{"Content-Type", "Content-Encoding", "Authorization", "User-Agent"} {
		if v := r.Header.Get(h); v != "" {
			out.Header.Set(h, v)
		}
	}
	// Held so that what the wiretap keeps is in the server's order.
	w.mu.Lock()
	defer w.mu.Unlock()
	resp, err := demoHTTP.Do(out)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if r.Method == http.MethodPost && resp.StatusCode == http.StatusOK {
		w.reqs = append(w.reqs, wireRequest{path: r.URL.Path, contentType: r.Header.Get("Content-Type"), body: body})
	}
	rw.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	rw.WriteHeader(resp.StatusCode)
	rw.Write(answer)
}

// labelled returns the writes the server received, each named after what
// it carries: root, tool#N, http#N (one span each), effect#N (the charge
// made by http#N's request).
func (w *wiretap) labelled(t *testing.T, a *stripeNodeAgent) []wireRequest {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	bySpan := map[pcommon.SpanID]string{}
	for l, id := range a.spans {
		bySpan[id] = l
	}
	var out []wireRequest
	for _, r := range w.reqs {
		switch r.path {
		case "/v1/traces":
			req := ptraceotlp.NewExportRequest()
			if err := req.UnmarshalProto(r.body); err != nil {
				t.Fatal(err)
			}
			spans := req.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Spans()
			if req.Traces().SpanCount() != 1 {
				t.Fatalf("an export of %d spans; SimpleSpanProcessor sends one", req.Traces().SpanCount())
			}
			r.label = bySpan[spans.At(0).SpanID()]
		case "/api/v1/events":
			var ev struct {
				Type    string `json:"type"`
				TraceID string `json:"trace_id"`
				SpanID  string `json:"span_id"`
			}
			if err := json.Unmarshal(r.body, &ev); err != nil || ev.Type != "effect" || ev.TraceID != a.traceHex() {
				t.Fatalf("the tap posted %s; want one effect event of trace %s", r.body, a.traceHex())
			}
			for n := 1; n <= 2; n++ {
				if ev.SpanID == a.spanHex(fmt.Sprintf("http#%d", n)) {
					r.label = fmt.Sprintf("effect#%d", n)
				}
			}
		}
		if r.label == "" {
			t.Fatalf("a write to %s the test cannot place: %s", r.path, r.body)
		}
		out = append(out, r)
	}
	// A re-sent effect (the tap retries what it could not record) is
	// harmless and kept; each of the seven must be there.
	for _, l := range []string{"root", "tool#1", "http#1", "tool#2", "http#2", "effect#1", "effect#2"} {
		if !slices.Contains(labelsOf(out), l) {
			t.Fatalf("writes the server received: got %v, want 5 span exports and 2 effects", labelsOf(out))
		}
	}
	return out
}

func labelsOf(rs []wireRequest) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.label)
	}
	return out
}

// batchSpans is the spans of several exports in one OTLP request, as a
// BatchSpanProcessor would send them.
func batchSpans(t *testing.T, rs []wireRequest) wireRequest {
	t.Helper()
	all := ptrace.NewTraces()
	var labels []string
	for _, r := range rs {
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(r.body); err != nil {
			t.Fatal(err)
		}
		req.Traces().ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
		labels = append(labels, r.label)
	}
	body, err := ptraceotlp.NewExportRequestFromTraces(all).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return wireRequest{label: "[" + strings.Join(labels, " ") + "]", path: "/v1/traces", contentType: "application/x-protobuf", body: body}
}

// batchEvents is several native events in one request.
func batchEvents(t *testing.T, rs []wireRequest) wireRequest {
	t.Helper()
	var events []json.RawMessage
	var labels []string
	for _, r := range rs {
		events = append(events, json.RawMessage(r.body))
		labels = append(labels, r.label)
	}
	body, err := json.Marshal(map[string]any{"events": events})
	if err != nil {
		t.Fatal(err)
	}
	return wireRequest{label: "[" + strings.Join(labels, " ") + "]", path: "/api/v1/events", contentType: "application/json", body: body}
}

// answerNames are the API answers compared across orders.
var answerNames = []string{"/api/v1/executions", "/api/v1/executions/{id}", "/api/v1/findings", "/api/v1/effects"}

func readAnswers(t *testing.T, server, id string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range answerNames {
		resp, err := demoHTTP.Get(server + strings.Replace(name, "{id}", id, 1))
		if err != nil {
			t.Fatalf("GET %s: %v", name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: got %s %s, want 200", name, resp.Status, b)
		}
		out[name] = b
	}
	return out
}

// checkStripeNodeVerdict asserts the verdict itself: one execution,
// billing-agent, completed; one step of charge_customer with the timed-out
// attempt and the successful one; both charges its effects; critical
// duplicate_effect on that step naming both; critical unstable_key naming
// both keys as the provider received them.
func checkStripeNodeVerdict(t *testing.T, order string, answers map[string][]byte, a *stripeNodeAgent, charge string) {
	t.Helper()
	var list struct {
		Executions []struct {
			ExecutionID string `json:"execution_id"`
			Name        string `json:"name"`
			Status      string `json:"status"`
		} `json:"executions"`
	}
	if err := json.Unmarshal(answers["/api/v1/executions"], &list); err != nil {
		t.Fatalf("%s: executions: %v", order, err)
	}
	if len(list.Executions) != 1 || list.Executions[0].ExecutionID != a.traceHex() || list.Executions[0].Name != "billing-agent" || list.Executions[0].Status != "completed" {
		t.Errorf("%s: executions: got %+v, want one, %s, billing-agent, completed", order, list.Executions, a.traceHex())
	}
	var d struct {
		Audit struct {
			State string `json:"state"`
		} `json:"audit"`
		Steps []struct {
			StepID   string `json:"step_id"`
			Tool     string `json:"tool"`
			Attempts []struct {
				Attempt int    `json:"attempt"`
				Outcome string `json:"outcome"`
			} `json:"attempts"`
		} `json:"steps"`
		Effects []struct {
			Provider string `json:"provider"`
			EffectID string `json:"effect_id"`
			Key      string `json:"idempotency_key"`
			StepID   string `json:"step_id"`
		} `json:"effects"`
	}
	if err := json.Unmarshal(answers["/api/v1/executions/{id}"], &d); err != nil {
		t.Fatalf("%s: execution: %v", order, err)
	}
	if d.Audit.State != "critical" {
		t.Errorf("%s: audit: got %q, want critical", order, d.Audit.State)
	}
	step := ""
	if len(d.Steps) != 1 || d.Steps[0].Tool != "charge_customer" || len(d.Steps[0].Attempts) != 2 ||
		d.Steps[0].Attempts[0].Outcome != "timeout" || d.Steps[0].Attempts[1].Outcome != "ok" {
		t.Errorf("%s: steps: got %+v, want one charge_customer step: attempt 1 timeout, attempt 2 ok", order, d.Steps)
	} else {
		step = d.Steps[0].StepID
	}
	var chargeIDs, keys []string
	for _, e := range d.Effects {
		if e.Provider == "stripe" && strings.HasPrefix(e.EffectID, "ch_") {
			chargeIDs = append(chargeIDs, e.EffectID)
			keys = append(keys, e.Key)
		}
	}
	slices.Sort(keys)
	wantKeys := slices.Sorted(slices.Values(a.keys))
	if len(chargeIDs) != 2 || !slices.Contains(chargeIDs, charge) || !slices.Equal(keys, wantKeys) {
		t.Errorf("%s: effects: got %+v, want the two charges (one of them %s) with the keys %v", order, d.Effects, charge, wantKeys)
	}
	var fl struct {
		Findings []struct {
			Rule        string `json:"rule"`
			Severity    string `json:"severity"`
			ExecutionID string `json:"execution_id"`
			StepID      string `json:"step_id"`
			Effects     []struct {
				Provider string `json:"provider"`
				EffectID string `json:"effect_id"`
			} `json:"effects"`
			Message string `json:"message"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(answers["/api/v1/findings"], &fl); err != nil {
		t.Fatalf("%s: findings: %v", order, err)
	}
	var dup, unstable bool
	for _, f := range fl.Findings {
		if f.Severity != "critical" || f.ExecutionID != a.traceHex() {
			continue
		}
		switch f.Rule {
		case "duplicate_effect":
			var named []string
			for _, e := range f.Effects {
				if e.Provider == "stripe" {
					named = append(named, e.EffectID)
				}
			}
			slices.Sort(named)
			dup = dup || (step != "" && f.StepID == step && len(chargeIDs) == 2 && slices.Equal(named, slices.Sorted(slices.Values(chargeIDs))))
		case "unstable_key":
			unstable = unstable || (step != "" && f.StepID == step && strings.Contains(f.Message, a.keys[0]) && strings.Contains(f.Message, a.keys[1]) &&
				strings.Contains(f.Message, "as the provider received it"))
		}
	}
	if !dup {
		t.Errorf("%s: no critical duplicate_effect on step %q naming both charges %v; findings:\n%s", order, step, chargeIDs, indentJSON(answers["/api/v1/findings"]))
	}
	if !unstable {
		t.Errorf("%s: no critical unstable_key on step %q naming both keys %v as the provider received them; findings:\n%s", order, step, a.keys, indentJSON(answers["/api/v1/findings"]))
	}
}

func indentJSON(b []byte) string {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return string(b)
	}
	return out.String()
}

// lineDiff is a unified-style diff of two short texts ("-" want, "+" got),
// with two lines of context.
func lineDiff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	// lcs[i][j]: the longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte
		text string
	}
	var lines []line
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			lines = append(lines, line{' ', a[i]})
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			lines = append(lines, line{'+', b[j]})
			j++
		default:
			lines = append(lines, line{'-', a[i]})
			i++
		}
	}
	var out strings.Builder
	last := -1
	for k, l := range lines {
		near := false
		for d := max(0, k-2); d <= min(len(lines)-1, k+2); d++ {
			near = near || lines[d].op != ' '
		}
		if !near {
			continue
		}
		if last >= 0 && k > last+1 {
			out.WriteString("  ...\n")
		}
		fmt.Fprintf(&out, "%c %s\n", l.op, l.text)
		last = k
	}
	return cmp.Or(out.String(), "(no line differs)")
}
