package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// The otlp suite measures OTLP/HTTP ingest: concurrent clients post
// protobuf ExportTraceServiceRequests of 100 spans each, as an
// OpenTelemetry SDK's batch span processor would, to a real server over a
// fresh database, and it prints spans a second. Requests are encoded
// before the clock starts: the figure is the server's.

type otlpConfig struct {
	runFlags
	spans, batch, clients int
	gzip                  bool
	shape                 string // oncetrace, framework or both
	sequentialIDs         bool
}

// A shape is how one agent run's ten spans look: agentRun's carry
// oncetrace.* attributes, frameworkRun's only what the Vercel AI SDK and
// the HTTP instrumentation export on their own.
var shapes = map[string]shape{"oncetrace": agentRun, "framework": frameworkRun}

// A shape appends agent run n's spans, with ids as its trace and span ids,
// and returns its effect events.
type shape func(out ptrace.SpanSlice, n uint64, ids runIDs, start time.Time) int

// runIDs are one agent run's trace id and the first seven bytes of each of
// its span ids (the eighth numbers the span within the run).
type runIDs struct {
	trace pcommon.TraceID
	span  [7]byte
}

// randomIDs draws a run's ids at random, as OpenTelemetry SDKs do: stores
// keyed by trace id then see keys scattered over the index, not appended.
func randomIDs(uint64) runIDs {
	var ids runIDs
	binary.BigEndian.PutUint64(ids.trace[:8], rand.Uint64())
	binary.BigEndian.PutUint64(ids.trace[8:], rand.Uint64())
	var span [8]byte
	binary.BigEndian.PutUint64(span[:], rand.Uint64())
	copy(ids.span[:], span[:7])
	return ids
}

// sequentialIDs numbers runs in order, as oncebench did before issue 14;
// it about doubles oncetrace's figure over what real SDKs get (-sequential-ids).
func sequentialIDs(n uint64) runIDs {
	var ids runIDs
	ids.trace[0] = 0x0b
	binary.BigEndian.PutUint64(ids.trace[8:], n)
	ids.span = [7]byte{0x5e, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	return ids
}

// Each trace is one agent run of spansPerTrace spans, so a request of 100
// spans holds whole traces: the mapping resolves parents and attempt ranks
// within one export, as it would for an SDK that flushes at the end of a
// run.
const spansPerTrace = 10

func otlpFlags(args []string) (otlpConfig, error) {
	var c otlpConfig
	fs := flag.NewFlagSet("oncebench otlp", flag.ContinueOnError)
	fs.IntVar(&c.spans, "spans", 50_000, "spans to send in all")
	fs.IntVar(&c.batch, "batch", 100, "spans a request (a multiple of 10: whole agent runs)")
	fs.IntVar(&c.clients, "clients", 8, "concurrent clients")
	fs.BoolVar(&c.gzip, "gzip", false, "gzip request bodies, as an exporter with compression does")
	fs.BoolVar(&c.sequentialIDs, "sequential-ids", false, "number trace ids in order (the figure before issue 14) instead of drawing them at random as SDKs do")
	fs.StringVar(&c.shape, "shape", "both", "span shape: oncetrace (oncetrace.* attributes), framework (the Vercel AI SDK's own attributes and HTTP client spans), or both, interleaved, with their ratio")
	c.register(fs, "synchronous setting: normal or full", "a CI-sized run of a few seconds: -spans divided by 10")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if err := c.check(); err != nil {
		return c, err
	}
	if c.quick {
		c.spans /= 10
	}
	if _, ok := shapes[c.shape]; !ok && c.shape != "both" {
		return c, fmt.Errorf("-shape: want oncetrace, framework or both, not %q", c.shape)
	}
	if c.spans < 1 || c.clients < 1 || c.batch < spansPerTrace || c.batch%spansPerTrace != 0 {
		return c, fmt.Errorf("-spans and -clients must be ≥ 1 and -batch a multiple of %d", spansPerTrace)
	}
	return c, nil
}

// runOTLP sends every request on a new file in dir and prints the table;
// with -shape both it runs the two shapes in turn, twice each, and prints
// the framework-shaped figure over the oncetrace-shaped one.
func runOTLP(c otlpConfig, dir string, out io.Writer) error {
	if c.sequentialIDs {
		fmt.Fprintln(out, "trace ids: sequential (-sequential-ids); real SDKs send random ones")
	} else {
		fmt.Fprintln(out, "trace ids: random, as SDKs send them (-sequential-ids for the old figure)")
	}
	fmt.Fprintln(out)
	order := []string{c.shape}
	if c.shape == "both" {
		order = []string{"oncetrace", "framework", "oncetrace", "framework"}
	}
	fmt.Fprintf(out, "%-10s %-15s %-6s %8s %7s %6s %8s %9s %10s %11s\n", "shape", "encoding", "sync", "spans", "clients", "batch", "seconds", "spans/s", "requests/s", "CPU µs/span")
	best := map[string]float64{}
	for i, shape := range order {
		rate, err := runOTLPShape(c, shape, filepath.Join(dir, fmt.Sprintf("otlp-%d.db", i)), out)
		if err != nil {
			return fmt.Errorf("%s-shaped: %w", shape, err)
		}
		best[shape] = max(best[shape], rate)
	}
	if c.shape == "both" {
		ratio := best["framework"] / best["oncetrace"]
		verdict := "within"
		if ratio < 0.8 {
			verdict = "NOT within"
		}
		fmt.Fprintf(out, "\nframework-shaped / oncetrace-shaped spans/s (best of 2 each, interleaved): %.2f — %s 20%% (target ≥ 0.80)\n", ratio, verdict)
	}
	return nil
}

func runOTLPShape(c otlpConfig, shape, path string, out io.Writer) (float64, error) {
	ids := randomIDs
	if c.sequentialIDs {
		ids = sequentialIDs
	}
	bodies, spans, events, err := otlpRequests(c, shapes[shape], ids)
	if err != nil {
		return 0, err
	}
	elapsed, cpuUsed, err := measureOTLP(context.Background(), path, c, bodies, events)
	if err != nil {
		return 0, err
	}
	sent := 0
	for _, client := range bodies {
		sent += len(client)
	}
	encoding := "protobuf"
	if c.gzip {
		encoding += "+gzip"
	}
	cpu := "n/a"
	if cpuUsed >= 0 {
		cpu = fmt.Sprintf("%.1f", float64(cpuUsed)/float64(time.Microsecond)/float64(spans))
	}
	rate := float64(spans) / elapsed.Seconds()
	fmt.Fprintf(out, "%-10s %-15s %-6s %8d %7d %6d %8.2f %9.0f %10.0f %11s\n", shape, encoding, c.sync, spans, c.clients, c.batch,
		elapsed.Seconds(), rate, float64(sent)/elapsed.Seconds(), cpu)
	return rate, nil
}

// otlpRequests builds each client's request bodies: whole agent runs, each a
// root invoke_agent span, two model calls, three reads, and two writes
// retried once after a timeout with one idempotency key, each write's
// final attempt reporting its email as a span event.
func otlpRequests(c otlpConfig, run shape, ids func(n uint64) runIDs) (bodies [][][]byte, spans, events int, err error) {
	traces := (c.spans + spansPerTrace - 1) / spansPerTrace
	perRequest := c.batch / spansPerTrace
	bodies = make([][][]byte, c.clients)
	base := time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC)
	for first := 0; first < traces; first += perRequest {
		req := ptraceotlp.NewExportRequest()
		rs := req.Traces().ResourceSpans().AppendEmpty()
		client := (first / perRequest) % c.clients
		rs.Resource().Attributes().PutStr("service.name", "billing-agent")
		rs.Resource().Attributes().PutStr("service.instance.id", fmt.Sprintf("worker-%d", client))
		out := rs.ScopeSpans().AppendEmpty().Spans()
		for i := first; i < min(first+perRequest, traces); i++ {
			e := run(out, uint64(i), ids(uint64(i)), base.Add(time.Duration(i)*time.Second))
			spans += spansPerTrace
			events += spansPerTrace + e
		}
		b, err := req.MarshalProto()
		if err != nil {
			return nil, 0, 0, err
		}
		if c.gzip {
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			zw.Write(b)
			zw.Close()
			b = z.Bytes()
		}
		bodies[client] = append(bodies[client], b)
	}
	return bodies, spans, events, nil
}

// agentRun appends one trace's spans and returns its effect events.
func agentRun(out ptrace.SpanSlice, n uint64, ids runIDs, start time.Time) int {
	spanSeq := byte(0)
	at := start
	add := func(parent pcommon.SpanID, name string, d time.Duration) ptrace.Span {
		spanSeq++
		sp := out.AppendEmpty()
		sp.SetTraceID(ids.trace)
		sp.SetSpanID(spanID(ids, spanSeq))
		sp.SetParentSpanID(parent)
		sp.SetName(name)
		sp.SetKind(ptrace.SpanKindInternal)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(d)))
		at = at.Add(d + time.Millisecond)
		return sp
	}
	root := add(pcommon.SpanID{}, "invoke_agent billing-agent", 0)
	root.Attributes().PutStr("gen_ai.operation.name", "invoke_agent")
	root.Attributes().PutStr("gen_ai.agent.name", "billing-agent")
	root.Attributes().PutStr("gen_ai.conversation.id", fmt.Sprintf("conv_%d", n%997))
	at = start.Add(time.Millisecond)
	for i := range 2 {
		chat := add(root.SpanID(), "chat gpt-4o", 800*time.Millisecond)
		chat.Attributes().PutStr("gen_ai.operation.name", "chat")
		chat.Attributes().PutInt("gen_ai.usage.input_tokens", int64(1200+i))
	}
	for i := range 3 {
		read := add(root.SpanID(), "execute_tool lookup_customer", 40*time.Millisecond)
		a := read.Attributes()
		a.PutStr("gen_ai.operation.name", "execute_tool")
		a.PutStr("gen_ai.tool.name", "lookup_customer")
		a.PutStr("gen_ai.tool.call.id", fmt.Sprintf("call_read_%d", i))
		a.PutStr("http.request.method", "GET")
		a.PutStr("gen_ai.tool.call.arguments", `{"customer":"acme","page":`+strconv.Itoa(i)+`}`)
		a.PutStr("gen_ai.tool.call.result", `{"email":"jordan@acme.dev"}`)
	}
	effects := 0
	for w := range 2 {
		for attempt := 1; attempt <= 2; attempt++ {
			d := 120 * time.Millisecond
			if attempt == 1 {
				d = 10 * time.Second
			}
			sp := add(root.SpanID(), "execute_tool send_invoice_email", d)
			a := sp.Attributes()
			a.PutStr("gen_ai.operation.name", "execute_tool")
			a.PutStr("gen_ai.tool.name", "send_invoice_email")
			a.PutStr("gen_ai.tool.call.id", fmt.Sprintf("call_write_%d", w))
			a.PutStr("gen_ai.tool.call.arguments", `{"to":"jordan@acme.dev","subject":"Your June invoice"}`)
			a.PutStr("oncetrace.idempotency.key", fmt.Sprintf("ik_%d_%d", n, w))
			a.PutStr("oncetrace.effect", "write")
			a.PutStr("oncetrace.provider", "mail-api")
			if attempt == 1 {
				sp.Status().SetCode(ptrace.StatusCodeError)
				sp.Status().SetMessage("network timeout after 10s")
				a.PutStr("oncetrace.outcome", "timeout")
				continue
			}
			a.PutBool("oncetrace.deduplicated", true)
			ev := sp.Events().AppendEmpty()
			ev.SetName("oncetrace.effect")
			ev.SetTimestamp(sp.StartTimestamp())
			ev.Attributes().PutStr("oncetrace.effect.provider", "mail-api")
			ev.Attributes().PutStr("oncetrace.effect.id", fmt.Sprintf("msg_%d_%d", n, w))
			ev.Attributes().PutStr("oncetrace.effect.target", "jordan@acme.dev")
			effects++
		}
	}
	root.SetEndTimestamp(pcommon.NewTimestampFromTime(at))
	return effects
}

// frameworkRun appends one trace as the Vercel AI SDK exports an agent run
// with the undici instrumentation loaded, and returns its effect events
// (none: its outbox is fed apart): a root ai.generateText span with the
// function id, two model calls each with its HTTP client span, one read
// tool call with its HTTP client span, and one write tool call that timed out and was called again by the
// model with a new call id and the same arguments, its second HTTP call
// carrying the request's Idempotency-Key header. Ten spans.
func frameworkRun(out ptrace.SpanSlice, n uint64, ids runIDs, start time.Time) int {
	sum := sha256.Sum256([]byte(strconv.FormatUint(n, 10)))
	spanSeq := byte(0)
	at := start
	add := func(parent pcommon.SpanID, name string, kind ptrace.SpanKind, d time.Duration) ptrace.Span {
		spanSeq++
		sp := out.AppendEmpty()
		sp.SetTraceID(ids.trace)
		sp.SetSpanID(spanID(ids, spanSeq))
		sp.SetParentSpanID(parent)
		sp.SetName(name)
		sp.SetKind(kind)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(d)))
		at = at.Add(d + time.Millisecond)
		return sp
	}
	common := func(a pcommon.Map, operation string) {
		a.PutStr("operation.name", operation+" billing-agent")
		a.PutStr("ai.operationId", operation)
		a.PutStr("ai.telemetry.functionId", "billing-agent")
		a.PutStr("ai.model.id", "gpt-4o")
		a.PutStr("ai.model.provider", "openai.responses")
	}
	root := add(pcommon.SpanID{}, "ai.generateText", ptrace.SpanKindInternal, 0)
	common(root.Attributes(), "ai.generateText")
	root.Attributes().PutStr("ai.prompt", `{"prompt":"Email Jordan the June invoice INV-0612."}`)
	at = start.Add(time.Millisecond)
	http := func(parent pcommon.SpanID, url string, d time.Duration, key string) {
		sp := add(parent, "POST", ptrace.SpanKindClient, d)
		a := sp.Attributes()
		a.PutStr("http.request.method", "POST")
		a.PutStr("url.full", url)
		a.PutStr("server.address", "127.0.0.1")
		a.PutInt("http.response.status_code", 200)
		if key != "" {
			a.PutEmptySlice("http.request.header.idempotency-key").AppendEmpty().SetStr(key)
		}
	}
	for i := range 2 {
		chat := add(root.SpanID(), "ai.generateText.doGenerate", ptrace.SpanKindInternal, 800*time.Millisecond)
		common(chat.Attributes(), "ai.generateText.doGenerate")
		chat.Attributes().PutInt("ai.usage.inputTokens", int64(1200+i))
		chat.Attributes().PutInt("ai.usage.outputTokens", 40)
		at = chat.StartTimestamp().AsTime().Add(time.Millisecond)
		http(chat.SpanID(), "https://api.openai.com/v1/responses", 790*time.Millisecond, "")
	}
	tool := func(name, callID, args string, d time.Duration) ptrace.Span {
		sp := add(root.SpanID(), "ai.toolCall", ptrace.SpanKindInternal, d)
		a := sp.Attributes()
		common(a, "ai.toolCall")
		a.PutStr("ai.toolCall.name", name)
		a.PutStr("ai.toolCall.id", callID)
		a.PutStr("ai.toolCall.args", args)
		return sp
	}
	read := tool("lookup_customer", "call_read", `{"customer":"acme"}`, 40*time.Millisecond)
	read.Attributes().PutStr("ai.toolCall.result", `{"email":"jordan@acme.dev"}`)
	at = read.StartTimestamp().AsTime().Add(time.Millisecond)
	http(read.SpanID(), "http://127.0.0.1:9000/customers/acme", 30*time.Millisecond, "")
	key := fmt.Sprintf("ik_%x", sum[24:32])
	for attempt := 1; attempt <= 2; attempt++ {
		d := 120 * time.Millisecond
		if attempt == 1 {
			d = time.Second
		}
		sp := tool("send_invoice_email", fmt.Sprintf("call_write_%d", attempt), `{"to":"jordan@acme.dev","subject":"Your June invoice"}`, d)
		if attempt == 1 {
			sp.Status().SetCode(ptrace.StatusCodeError)
			sp.Status().SetMessage("The operation was aborted due to timeout")
			ev := sp.Events().AppendEmpty()
			ev.SetName("exception")
			ev.Attributes().PutStr("exception.type", "TimeoutError")
			ev.Attributes().PutStr("exception.message", "The operation was aborted due to timeout")
			continue
		}
		sp.Attributes().PutStr("ai.toolCall.result", `{"id":"msg_1","status":"sent"}`)
		at = sp.StartTimestamp().AsTime().Add(time.Millisecond)
		http(sp.SpanID(), "http://127.0.0.1:8080/sandbox/mail/v1/send", 100*time.Millisecond, key)
	}
	root.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Second)))
	return 0
}

// spanID is span seq of the run with ids.
func spanID(ids runIDs, seq byte) pcommon.SpanID {
	var id pcommon.SpanID
	copy(id[:7], ids.span[:])
	id[7] = seq
	return id
}

// measureOTLP has each client post its bodies in order to a real server
// over a fresh database, and times from the first request to the last
// answer (each comes after its commit). It returns the wall time and the
// process's CPU (-1 when unknown), then checks that every span was stored.
func measureOTLP(ctx context.Context, path string, c otlpConfig, clients [][][]byte, events int) (elapsed, cpu time.Duration, err error) {
	srv, err := startServer(ctx, path, c.sync, true, 1024)
	if err != nil {
		return 0, 0, err
	}
	defer srv.Close()
	// One kept-alive connection per client, as an exporter keeps.
	httpClient := keepAliveClient(len(clients), 2*time.Minute)
	defer httpClient.CloseIdleConnections()
	endpoint := "http://" + srv.addr + "/v1/traces"

	elapsed, cpu, err = postConcurrently(clients, func(body []byte) error {
		data, err := post(httpClient, endpoint, "application/x-protobuf", c.gzip, body)
		if err != nil {
			return err
		}
		answer := ptraceotlp.NewExportResponse()
		if err := answer.UnmarshalProto(data); err != nil {
			return fmt.Errorf("answer: %w", err)
		}
		if n := answer.PartialSuccess().RejectedSpans(); n != 0 {
			return fmt.Errorf("POST: got %d rejected spans (%s), want 0", n, answer.PartialSuccess().ErrorMessage())
		}
		return nil
	})
	if err != nil {
		return elapsed, cpu, err
	}
	stored := 0
	if err := srv.db.ExportEvents(ctx, func(int64, []byte) error { stored++; return nil }); err != nil {
		return elapsed, cpu, err
	}
	if stored != events {
		return elapsed, cpu, fmt.Errorf("events stored: got %d, want %d", stored, events)
	}
	return elapsed, cpu, nil
}
