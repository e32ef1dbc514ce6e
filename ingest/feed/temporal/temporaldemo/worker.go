package temporaldemo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// WorkerConfig configures one worker process.
type WorkerConfig struct {
	HostPort, Namespace, TaskQueue string
	Scenario                       string
	MailURL                        string // the sandbox's send URL
	OTLPURL                        string // where spans go: an OTLP/HTTP traces URL (…/v1/traces)
	Token                          string // the oncetrace server's ingest token, for both
	// Out receives the worker's events, one JSON line each (WorkerEvent).
	Out io.Writer
	// Log receives the SDK's warnings and errors.
	Log io.Writer
}

// Identity is the worker identity the Go SDK gives by default, PID@HOST@:
// what ActivityTaskStarted.identity records. Worker spans carry it as the
// resource's service.instance.id.
func Identity() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%d@%s@", os.Getpid(), host)
}

// RunWorker runs a worker for InvoiceWorkflow and SendInvoiceEmail until
// ctx ends, then stops it and flushes its spans.
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	if cfg.HostPort == "" || cfg.TaskQueue == "" || cfg.MailURL == "" || cfg.OTLPURL == "" {
		return errors.New("temporaldemo: the worker needs an address, a task queue, a mail URL and an OTLP URL")
	}
	if err := CheckScenario(cfg.Scenario); err != nil {
		return fmt.Errorf("temporaldemo: %w", err)
	}
	out := &lineWriter{w: cfg.Out}
	identity := Identity()
	tp, err := newTracerProvider(ctx, "invoice-worker", identity, cfg.OTLPURL, cfg.Token, out)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}()
	c, err := dial(ctx, cfg.HostPort, cfg.Namespace, identity, tp, cfg.Log)
	if err != nil {
		return err
	}
	defer c.Close()
	acts := &Activities{
		MailURL: cfg.MailURL, Token: cfg.Token, Scenario: cfg.Scenario,
		HTTP: &http.Client{Transport: otelhttp.NewTransport(recordKeyHeader{http.DefaultTransport},
			otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{}))},
		Report: out.event,
	}
	w := worker.New(c, cfg.TaskQueue, worker.Options{
		// A killed worker's sticky queue would hold the workflow's next
		// task for the default 5 s before another worker may take it.
		StickyScheduleToStartTimeout: time.Second,
	})
	w.RegisterWorkflowWithOptions(InvoiceWorkflow, workflow.RegisterOptions{Name: WorkflowName})
	w.RegisterActivityWithOptions(acts.SendInvoiceEmail, activity.RegisterOptions{Name: ActivityName})
	if err := w.Start(); err != nil {
		return fmt.Errorf("temporaldemo: worker: %w", err)
	}
	out.event(WorkerEvent{Event: "ready", Identity: identity, PID: os.Getpid()})
	<-ctx.Done()
	w.Stop()
	return nil
}

// newTracerProvider exports spans to otlpURL in batches every 200 ms, so
// that a run's spans arrive in several requests, as in real life, and a
// worker killed a second after a send has exported the send's HTTP span.
func newTracerProvider(ctx context.Context, service, instance, otlpURL, token string, out *lineWriter) (*sdktrace.TracerProvider, error) {
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(otlpURL)}
	if token != "" {
		opts = append(opts, otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + token}))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("temporaldemo: OTLP exporter: %w", err)
	}
	host, _ := os.Hostname()
	res := resource.NewSchemaless(
		attribute.String("service.name", service),
		attribute.String("service.instance.id", instance),
		attribute.Int("process.pid", os.Getpid()),
		attribute.String("host.name", host),
	)
	var se sdktrace.SpanExporter = exp
	if out != nil {
		se = reportingExporter{SpanExporter: exp, out: out}
	}
	return sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		sdktrace.WithBatcher(se, sdktrace.WithBatchTimeout(200*time.Millisecond))), nil
}

// dial connects a client that traces with the SDK's OpenTelemetry
// interceptor: the workflow's trace context travels in the _tracer-data
// header of its history events.
func dial(ctx context.Context, hostPort, namespace, identity string, tp *sdktrace.TracerProvider, logTo io.Writer) (client.Client, error) {
	ti, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: tp.Tracer("temporal-sdk-go")})
	if err != nil {
		return nil, fmt.Errorf("temporaldemo: tracing interceptor: %w", err)
	}
	if logTo == nil {
		logTo = io.Discard
	}
	c, err := client.DialContext(ctx, client.Options{
		HostPort: hostPort, Namespace: namespace, Identity: identity,
		Interceptors: []interceptor.ClientInterceptor{ti},
		Logger:       log.NewStructuredLogger(slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	})
	if err != nil {
		return nil, fmt.Errorf("temporaldemo: connecting to Temporal at %s: %w", hostPort, err)
	}
	return c, nil
}

// reportingExporter tells Run when an export went out, and how many of its
// spans were otelhttp's: the crash scenario kills the worker only once its
// send's HTTP span has left.
type reportingExporter struct {
	sdktrace.SpanExporter
	out *lineWriter
}

func (e reportingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		n := 0
		for _, s := range spans {
			if s.InstrumentationScope().Name == otelhttp.ScopeName {
				n++
			}
		}
		e.out.event(WorkerEvent{Event: "exported", HTTPSpans: n})
	}
	return err
}

// lineWriter writes whole JSON lines from many goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) event(ev WorkerEvent) {
	if l == nil || l.w == nil {
		return
	}
	b, _ := json.Marshal(ev)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Write(append(b, '\n'))
}

// recordKeyHeader records the request's Idempotency-Key on otelhttp's
// client span as the semantic conventions name a captured request header
// (http.request.header.idempotency-key), as a worker whose instrumentation
// captures that header does: the span then says which key each attempt
// sent, also for a retry the provider answered from its key store, which
// leaves no effect of its own to say it.
type recordKeyHeader struct{ next http.RoundTripper }

func (r recordKeyHeader) RoundTrip(req *http.Request) (*http.Response, error) {
	if key := req.Header.Get("Idempotency-Key"); key != "" {
		oteltrace.SpanFromContext(req.Context()).SetAttributes(attribute.StringSlice("http.request.header.idempotency-key", []string{key}))
	}
	return r.next.RoundTrip(req)
}
