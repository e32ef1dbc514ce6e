// Command otlpbench measures OTLP/HTTP ingest: concurrent clients post
// protobuf ExportTraceServiceRequests of 100 spans each, as an
// OpenTelemetry SDK's batch span processor would, to a real server on
// 127.0.0.1 over a fresh database, and it prints spans a second. Requests
// are encoded before the clock starts: the figure is the server's. `make
// bench` runs it; -quick is a CI-sized run.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

type config struct {
	spans, batch, clients int
	sync                  store.Sync
	gzip                  bool
	dir, cpuProfile       string
}

// Each trace is one agent run of spansPerTrace spans, so a request of 100
// spans holds whole traces: the mapping resolves parents and attempt ranks
// within one export, as it would for an SDK that flushes at the end of a
// run.
const spansPerTrace = 10

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "otlpbench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("otlpbench", flag.ContinueOnError)
	fs.IntVar(&c.spans, "spans", 50_000, "spans to send in all")
	fs.IntVar(&c.batch, "batch", 100, "spans a request (a multiple of 10: whole agent runs)")
	fs.IntVar(&c.clients, "clients", 8, "concurrent clients")
	syncMode := fs.String("sync", "normal", "synchronous setting: normal or full")
	fs.BoolVar(&c.gzip, "gzip", false, "gzip request bodies, as an exporter with compression does")
	fs.StringVar(&c.dir, "dir", "", "directory for the database file (default: a new temporary directory, removed after)")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	quick := fs.Bool("quick", false, "a CI-sized run of a few seconds: -spans divided by 10")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.sync = store.Sync(*syncMode)
	if c.sync != store.SyncNormal && c.sync != store.SyncFull {
		return c, fmt.Errorf("-sync must be normal or full, not %q", *syncMode)
	}
	if *quick {
		c.spans /= 10
	}
	if c.spans < 1 || c.clients < 1 || c.batch < spansPerTrace || c.batch%spansPerTrace != 0 {
		return c, fmt.Errorf("-spans and -clients must be ≥ 1 and -batch a multiple of %d", spansPerTrace)
	}
	return c, nil
}

func run(args []string, out io.Writer) error {
	c, err := parseFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	dir := c.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "otlpbench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Fprintf(out, "oncetrace OTLP ingest benchmark\nmachine: %d CPUs, %s/%s, %s\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	// Other work on the machine skews every figure; say how much there was.
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fields := strings.Fields(string(load))
		fmt.Fprintf(out, "load average at start: %s\n", strings.Join(fields[:min(3, len(fields))], " "))
	}
	fmt.Fprintln(out)

	bodies, spans, events, err := requests(c)
	if err != nil {
		return err
	}
	m, err := measure(context.Background(), filepath.Join(dir, "otlp.db"), c, bodies, spans, events)
	if err != nil {
		return err
	}
	sent, bytesSent := 0, 0
	for _, client := range bodies {
		sent += len(client)
		for _, b := range client {
			bytesSent += len(b)
		}
	}
	encoding := "protobuf"
	if c.gzip {
		encoding += "+gzip"
	}
	cpu := "n/a"
	if m.cpu >= 0 {
		cpu = fmt.Sprintf("%.1f", float64(m.cpu)/float64(time.Microsecond)/float64(spans))
	}
	fmt.Fprintf(out, "%-15s %-6s %8s %7s %6s %8s %9s %10s %11s\n", "encoding", "sync", "spans", "clients", "batch", "seconds", "spans/s", "requests/s", "CPU µs/span")
	fmt.Fprintf(out, "%-15s %-6s %8d %7d %6d %8.2f %9.0f %10.0f %11s\n", encoding, c.sync, spans, c.clients, c.batch,
		m.elapsed.Seconds(), float64(spans)/m.elapsed.Seconds(), float64(sent)/m.elapsed.Seconds(), cpu)
	fmt.Fprintf(out, "\n%d requests, %.0f bytes a request on average; %d events stored (%d spans and %d effect span events)\n",
		sent, float64(bytesSent)/float64(sent), events, spans, events-spans)
	return nil
}

// requests builds each client's request bodies: whole agent runs, each a
// root invoke_agent span, two model calls, three reads, and two writes
// retried once after a timeout with one idempotency key, each write's
// final attempt reporting its email as a span event.
func requests(c config) (bodies [][][]byte, spans, events int, err error) {
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
			e := agentRun(out, uint64(i), base.Add(time.Duration(i)*time.Second))
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
func agentRun(out ptrace.SpanSlice, n uint64, start time.Time) int {
	var traceID pcommon.TraceID
	for i := range 8 {
		traceID[8+i] = byte(n >> (8 * (7 - i)))
	}
	traceID[0] = 0x0b
	spanSeq := byte(0)
	at := start
	add := func(parent pcommon.SpanID, name string, d time.Duration) ptrace.Span {
		spanSeq++
		sp := out.AppendEmpty()
		sp.SetTraceID(traceID)
		sp.SetSpanID(pcommon.SpanID{0x5e, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n), 0, 0, spanSeq})
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

type measurement struct {
	elapsed time.Duration
	cpu     time.Duration // CPU of the whole process (server and clients); < 0 when unknown
}

// measure serves web.New on 127.0.0.1 over a fresh database, has each
// client post its bodies in order, and times from the first request to the
// last answer (each comes after its commit). It then checks that every
// span was stored.
func measure(ctx context.Context, path string, c config, clients [][][]byte, spans, events int) (measurement, error) {
	var m measurement
	db, err := store.Open(ctx, path, c.sync)
	if err != nil {
		return m, err
	}
	defer db.Close()
	writer := ingest.NewWriter(db, ingest.DefaultWriterConfig)
	defer writer.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	handler := web.New(web.Config{DB: db, Writer: writer, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig, Logger: logger})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return m, err
	}
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go server.Serve(ln)
	defer server.Shutdown(context.Background())

	// One kept-alive connection per client, as an exporter keeps.
	transport := &http.Transport{MaxIdleConns: len(clients), MaxIdleConnsPerHost: len(clients)}
	defer transport.CloseIdleConnections()
	httpClient := &http.Client{Transport: transport, Timeout: 2 * time.Minute}
	endpoint := "http://" + ln.Addr().String() + "/v1/traces"

	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	cpuStart, begin := processCPU(), time.Now()
	for _, bodies := range clients {
		wg.Go(func() {
			if err := postAll(httpClient, endpoint, bodies, c.gzip); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	m.elapsed = time.Since(begin)
	if now := processCPU(); cpuStart >= 0 && now >= 0 {
		m.cpu = now - cpuStart
	} else {
		m.cpu = -1
	}
	if firstErr != nil {
		return m, firstErr
	}
	stored := 0
	if err := db.ExportEvents(ctx, func(int64, []byte) error { stored++; return nil }); err != nil {
		return m, err
	}
	if stored != events {
		return m, fmt.Errorf("events stored: got %d, want %d", stored, events)
	}
	return m, nil
}

func postAll(client *http.Client, endpoint string, bodies [][]byte, gzipped bool) error {
	for _, body := range bodies {
		req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		if gzipped {
			req.Header.Set("Content-Encoding", "gzip")
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("POST: got %s, want 200: %q", resp.Status, data)
		}
		answer := ptraceotlp.NewExportResponse()
		if err := answer.UnmarshalProto(data); err != nil {
			return fmt.Errorf("answer: %w", err)
		}
		if n := answer.PartialSuccess().RejectedSpans(); n != 0 {
			return fmt.Errorf("POST: got %d rejected spans (%s), want 0", n, answer.PartialSuccess().ErrorMessage())
		}
	}
	return nil
}

// processCPU is the user and system CPU this process has used so far, from
// /proc/self/stat (in clock ticks, 100 a second on Linux); -1 elsewhere.
func processCPU() time.Duration {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return -1
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: utime and stime are the 12th and 13th.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return -1
	}
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 13 {
		return -1
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return -1
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100)
}
