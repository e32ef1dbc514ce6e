package web_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// ---- the server, with every /v1/traces answer recorded ----

type otlpServer struct {
	ts     *httptest.Server
	db     *store.DB
	writer *writer.Writer
	mu     sync.Mutex
	posts  []otlpPost
}

// otlpPost is one answer to POST /v1/traces, as the client saw it.
type otlpPost struct {
	status      int
	contentType string
	body        []byte
}

func startOTLPServer(t *testing.T, lim ingest.Limits, token string) *otlpServer {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	s := &otlpServer{db: db, writer: writer.New(db, writer.DefaultConfig)}
	handler := web.New(web.Config{DB: db, Writer: s.writer, Limits: lim, Analysis: trace.DefaultConfig, IngestToken: token})
	s.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			handler.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, r)
		s.mu.Lock()
		s.posts = append(s.posts, otlpPost{status: rec.Code, contentType: rec.Header().Get("Content-Type"), body: rec.Body.Bytes()})
		s.mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(func() {
		s.ts.Close()
		s.writer.Close()
		db.Close()
	})
	return s
}

func (s *otlpServer) recordedPosts() []otlpPost {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.posts)
}

// post sends a body to /v1/traces and returns the answer.
func (s *otlpServer) post(t *testing.T, contentType, encoding string, body []byte, header http.Header) (*http.Response, []byte) {
	t.Helper()
	return s.postTo(t, "/v1/traces", contentType, encoding, body, header)
}

func (s *otlpServer) get(t *testing.T, path string) []byte {
	t.Helper()
	resp, err := s.ts.Client().Get(s.ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: got status %d, want 200: %s", path, resp.StatusCode, data)
	}
	return data
}

// state is everything a user can read back, byte for byte, plus the raw
// event log as `oncetrace export` would write it.
func (s *otlpServer) state(t *testing.T, executionID string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, path := range []string{"/api/v1/executions/" + executionID, "/api/v1/executions", "/api/v1/effects", "/api/v1/findings"} {
		out[path] = s.get(t, path)
	}
	log, n := s.eventLog(t)
	out["events"] = log
	out["event count"] = []byte(fmt.Sprint(n))
	return out
}

// eventLog is the raw event log as `oncetrace export` reads it.
func (s *otlpServer) eventLog(t *testing.T) ([]byte, int) {
	t.Helper()
	var log bytes.Buffer
	n := 0
	err := s.db.ExportEvents(context.Background(), func(seq int64, body []byte) error {
		n++
		fmt.Fprintf(&log, "%d %s\n", seq, body)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return log.Bytes(), n
}

// ---- reading an execution back ----

type otlpExecution struct {
	Execution struct {
		ID     string            `json:"execution_id"`
		Name   string            `json:"name"`
		Status string            `json:"status"`
		Labels map[string]string `json:"labels"`
	} `json:"execution"`
	Steps []struct {
		StepID   string `json:"step_id"`
		Tool     string `json:"tool"`
		Effect   string `json:"effect"`
		Provider string `json:"provider"`
		Attempts []struct {
			Attempt        int             `json:"attempt"`
			Outcome        string          `json:"outcome"`
			Deduplicated   bool            `json:"deduplicated"`
			IdempotencyKey string          `json:"idempotency_key"`
			Worker         string          `json:"worker"`
			StartedAt      time.Time       `json:"started_at"`
			EndedAt        time.Time       `json:"ended_at"`
			Args           json.RawMessage `json:"args"`
			Result         json.RawMessage `json:"result"`
			Error          string          `json:"error"`
			Conflicts      json.RawMessage `json:"conflicts"`
		} `json:"attempts"`
	} `json:"steps"`
	Effects []struct {
		Provider       string    `json:"provider"`
		EffectID       string    `json:"effect_id"`
		IdempotencyKey string    `json:"idempotency_key"`
		StepID         string    `json:"step_id"`
		Target         string    `json:"target"`
		At             time.Time `json:"at"`
		State          string    `json:"state"`
	} `json:"effects"`
	Findings []trace.Finding `json:"findings"`
}

func (s *otlpServer) execution(t *testing.T, id string) otlpExecution {
	t.Helper()
	var x otlpExecution
	data := s.get(t, "/api/v1/executions/"+id)
	if err := json.Unmarshal(data, &x); err != nil {
		t.Fatalf("execution %s: %v: %s", id, err, data)
	}
	return x
}

// summary is the execution as lines, so that a fixture's expectation reads
// like what a user would see.
func (x otlpExecution) summary() []string {
	clock := func(t time.Time) string { return t.UTC().Format("15:04:05.000") }
	lines := []string{fmt.Sprintf("execution %s %q %s labels=%v", x.Execution.ID, x.Execution.Name, x.Execution.Status, x.Execution.Labels)}
	for _, st := range x.Steps {
		lines = append(lines, fmt.Sprintf("step %s tool=%s effect=%s provider=%s", st.StepID, st.Tool, st.Effect, st.Provider))
		for _, a := range st.Attempts {
			lines = append(lines, fmt.Sprintf("  attempt %d %s %s-%s dedup=%v key=%s worker=%s error=%q args=%s result=%s conflicts=%s",
				a.Attempt, a.Outcome, clock(a.StartedAt), clock(a.EndedAt), a.Deduplicated, a.IdempotencyKey, a.Worker, a.Error, a.Args, a.Result, a.Conflicts))
		}
	}
	for _, f := range x.Effects {
		lines = append(lines, fmt.Sprintf("effect %s/%s step=%s key=%s target=%s at=%s state=%s", f.Provider, f.EffectID, f.StepID, f.IdempotencyKey, f.Target, clock(f.At), f.State))
	}
	for _, f := range x.Findings {
		lines = append(lines, fmt.Sprintf("finding %s %s step=%s", f.Rule, f.Severity, f.StepID))
	}
	return lines
}

func checkLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	t.Errorf("%s: got\n\t%s\nwant\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
}

// ---- the OpenTelemetry Go SDK, end to end ----

// exportAgentRun records an agent run with the SDK: a root invoke_agent
// span and one tool call tried twice, the first timing out, each attempt
// reporting an email the mail API delivered.
func exportAgentRun(t *testing.T, tp *sdktrace.TracerProvider, t0 time.Time) {
	t.Helper()
	tracer := tp.Tracer("billing-agent/instrumentation")
	ctx, root := tracer.Start(context.Background(), "invoke_agent billing-agent",
		oteltrace.WithTimestamp(t0),
		oteltrace.WithAttributes(
			attribute.String("gen_ai.operation.name", "invoke_agent"),
			attribute.String("gen_ai.agent.name", "billing-agent"),
			attribute.String("gen_ai.conversation.id", "conv_42")))
	for i, a := range []struct {
		start, end time.Duration
		effectID   string
	}{
		{200 * time.Millisecond, 10200 * time.Millisecond, "msg_41bcc7"},
		{10300 * time.Millisecond, 10410 * time.Millisecond, "msg_9d02e1"},
	} {
		_, span := tracer.Start(ctx, "execute_tool send_invoice_email",
			oteltrace.WithSpanKind(oteltrace.SpanKindInternal),
			oteltrace.WithTimestamp(t0.Add(a.start)),
			oteltrace.WithAttributes(
				attribute.String("gen_ai.operation.name", "execute_tool"),
				attribute.String("gen_ai.tool.name", "send_invoice_email"),
				attribute.String("gen_ai.tool.call.id", "call_7f3a"),
				attribute.String("gen_ai.tool.call.arguments", `{"to":"jordan@acme.dev","subject":"Your June invoice"}`),
				attribute.String("oncetrace.idempotency.key", "ik_a94a0b1d"),
				attribute.String("oncetrace.effect", "write"),
				attribute.String("oncetrace.provider", "mail-api")))
		span.AddEvent("oncetrace.effect",
			oteltrace.WithTimestamp(t0.Add(a.start+100*time.Millisecond)),
			oteltrace.WithAttributes(
				attribute.String("oncetrace.effect.provider", "mail-api"),
				attribute.String("oncetrace.effect.id", a.effectID),
				attribute.String("oncetrace.effect.target", "jordan@acme.dev")))
		if i == 0 {
			span.SetAttributes(attribute.String("oncetrace.outcome", "timeout"))
			span.SetStatus(codes.Error, "network timeout after 10s")
		} else {
			span.SetAttributes(attribute.String("gen_ai.tool.call.result", `{"status":"sent","message_id":"msg_9d02e1"}`))
		}
		span.End(oteltrace.WithTimestamp(t0.Add(a.end)))
	}
	root.End(oteltrace.WithTimestamp(t0.Add(11 * time.Second)))
}

func newSDK(t *testing.T, endpoint string, opts ...otlptracehttp.Option) (*otlptrace.Exporter, *tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	t.Helper()
	exporter, err := otlptracehttp.New(context.Background(), append([]otlptracehttp.Option{
		otlptracehttp.WithEndpointURL(endpoint),
		otlptracehttp.WithTimeout(10 * time.Second),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}), // an error must fail the test, not be retried
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(
			attribute.String("service.name", "billing-agent"),
			attribute.String("service.instance.id", "worker-1"))),
		sdktrace.WithSpanProcessor(recorder),
		sdktrace.WithBatcher(exporter))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return exporter, recorder, tp
}

// TestOTLPExportFromTheGoSDK is the acceptance test of OTLP ingest: the
// official SDK's otlptracehttp exporter sends an agent run whose tool call
// was retried with one idempotency key and still reached the mail API
// twice; oncetrace shows one step, two attempts, two effects and a critical
// duplicate_effect. Exporting the same spans three times more changes
// nothing that can be read back.
func TestOTLPExportFromTheGoSDK(t *testing.T) {
	for _, enc := range []struct {
		name        string
		contentType string
		opts        []otlptracehttp.Option
	}{
		{"protobuf", "application/x-protobuf", nil},
		{"protobuf+gzip", "application/x-protobuf", []otlptracehttp.Option{otlptracehttp.WithCompression(otlptracehttp.GzipCompression)}},
		{"json", "application/json", []otlptracehttp.Option{otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON)}},
	} {
		t.Run(enc.name, func(t *testing.T) {
			srv := startOTLPServer(t, ingest.DefaultLimits, "")
			exporter, recorder, tp := newSDK(t, srv.ts.URL+"/v1/traces", enc.opts...)
			t0 := time.Date(2026, 6, 30, 14, 2, 11, 0, time.UTC)
			exportAgentRun(t, tp, t0)
			ctx := context.Background()
			if err := tp.ForceFlush(ctx); err != nil {
				t.Fatalf("ForceFlush: %v", err)
			}
			spans := recorder.Ended()
			if len(spans) != 3 {
				t.Fatalf("recorded spans: got %d, want 3", len(spans))
			}
			traceID := spans[0].SpanContext().TraceID().String()

			x := srv.execution(t, traceID)
			checkLines(t, "execution", x.summary(), []string{
				fmt.Sprintf(`execution %s "billing-agent" completed labels=map[session:conv_42]`, traceID),
				"step tool-7108b0a5f2153537 tool=send_invoice_email effect=write provider=mail-api",
				`  attempt 1 timeout 14:02:11.200-14:02:21.200 dedup=false key=ik_a94a0b1d worker=worker-1 error="network timeout after 10s" args={"subject":"Your June invoice","to":"jordan@acme.dev"} result= conflicts=`,
				`  attempt 2 ok 14:02:21.300-14:02:21.410 dedup=false key=ik_a94a0b1d worker=worker-1 error="" args={"subject":"Your June invoice","to":"jordan@acme.dev"} result={"message_id":"msg_9d02e1","status":"sent"} conflicts=`,
				"effect mail-api/msg_41bcc7 step= key=ik_a94a0b1d target=jordan@acme.dev at=14:02:11.300 state=duplicate",
				"effect mail-api/msg_9d02e1 step= key=ik_a94a0b1d target=jordan@acme.dev at=14:02:21.400 state=duplicate",
				"finding duplicate_effect critical step=tool-7108b0a5f2153537",
			})
			if len(x.Findings) > 0 && (len(x.Findings[0].Effects) != 2 || !slices.Equal(x.Findings[0].Attempts, []int{1, 2})) {
				t.Errorf("duplicate_effect: got attempts %v effects %v, want attempts [1 2] and both effects", x.Findings[0].Attempts, x.Findings[0].Effects)
			}

			before := srv.state(t, traceID)
			if got := string(before["event count"]); got != "5" {
				t.Errorf("events stored: got %s, want 5 (execution, 2 attempts, 2 effects)", got)
			}
			postsBefore := len(srv.recordedPosts())
			for i := range 3 {
				if err := exporter.ExportSpans(ctx, recorder.Ended()); err != nil {
					t.Fatalf("re-export %d: %v", i+1, err)
				}
			}
			after := srv.state(t, traceID)
			for _, name := range slices.Sorted(maps.Keys(before)) {
				if !bytes.Equal(after[name], before[name]) {
					t.Errorf("%s after three re-exports: got\n%s\nwant\n%s", name, after[name], before[name])
				}
			}

			posts := srv.recordedPosts()
			if len(posts)-postsBefore != 3 {
				t.Errorf("re-export requests: got %d, want 3", len(posts)-postsBefore)
			}
			for i, p := range posts {
				if p.status != http.StatusOK || p.contentType != enc.contentType {
					t.Errorf("POST %d: got %d %s, want 200 %s: %s", i, p.status, p.contentType, enc.contentType, p.body)
					continue
				}
				resp := ptraceotlp.NewExportResponse()
				var err error
				if enc.contentType == "application/json" {
					err = resp.UnmarshalJSON(p.body)
				} else {
					err = resp.UnmarshalProto(p.body)
				}
				if err != nil || resp.PartialSuccess().RejectedSpans() != 0 || resp.PartialSuccess().ErrorMessage() != "" {
					t.Errorf("POST %d: got response %q (%v), want a full success", i, p.body, err)
				}
			}
			if err := tp.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
}

// TestOTLPIngestToken: the ingest token guards /v1/traces as it does the
// native API, and a refusal is an OTLP Status in the request's encoding.
func TestOTLPIngestToken(t *testing.T) {
	srv := startOTLPServer(t, ingest.DefaultLimits, "s3cret")
	body := readFixture(t, "agent_run.json")
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a wrong token", "Bearer nope", http.StatusUnauthorized},
		{"not a bearer token", "Basic czNjcmV0", http.StatusUnauthorized},
		{"the token", "Bearer s3cret", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.auth != "" {
				h.Set("Authorization", tc.auth)
			}
			resp, data := srv.post(t, "application/json", "", body, h)
			if resp.StatusCode != tc.want {
				t.Fatalf("status: got %d, want %d: %s", resp.StatusCode, tc.want, data)
			}
			if tc.want == http.StatusUnauthorized {
				checkJSONStatus(t, resp, data, 16, "Authorization")
			}
		})
	}
	resp, data := srv.post(t, "application/x-protobuf", "", fixtureAsProto(t, "agent_run.json"), nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("protobuf without the token: got status %d, want 401", resp.StatusCode)
	}
	checkProtoStatus(t, resp, data, 16, "Authorization")

	// The SDK with and without the header.
	ctx := context.Background()
	_, recorder, tp := newSDK(t, srv.ts.URL+"/v1/traces")
	exportAgentRun(t, tp, time.Date(2026, 6, 30, 15, 0, 0, 0, time.UTC))
	if err := tp.ForceFlush(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("export without the token: got %v, want an error naming 401", err)
	}
	authed, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(srv.ts.URL+"/v1/traces"),
		otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer s3cret"}),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	defer authed.Shutdown(ctx)
	if err := authed.ExportSpans(ctx, recorder.Ended()); err != nil {
		t.Errorf("export with the token: got %v, want success", err)
	}
	if x := srv.execution(t, recorder.Ended()[0].SpanContext().TraceID().String()); x.Execution.Name != "billing-agent" {
		t.Errorf("execution exported with the token: got name %q, want billing-agent", x.Execution.Name)
	}
}

// TestOTLPUnavailable: when the writer refuses work the exporter is told
// to come back later (503 and Retry-After, which OTLP clients retry), never
// a 500.
func TestOTLPUnavailable(t *testing.T) {
	srv := startOTLPServer(t, ingest.DefaultLimits, "")
	srv.writer.Close()
	for _, tc := range []struct {
		contentType string
		body        []byte
	}{
		{"application/json", readFixture(t, "agent_run.json")},
		{"application/x-protobuf", fixtureAsProto(t, "agent_run.json")},
	} {
		resp, data := srv.post(t, tc.contentType, "", tc.body, nil)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("%s: got %d with Retry-After %q, want 503 with Retry-After 1: %q", tc.contentType, resp.StatusCode, resp.Header.Get("Retry-After"), data)
		}
		if tc.contentType == "application/json" {
			checkJSONStatus(t, resp, data, 14, "retry")
		} else {
			checkProtoStatus(t, resp, data, 14, "retry")
		}
	}
}

// fixtureAsProto is a JSON fixture re-encoded as binary protobuf.
func fixtureAsProto(t *testing.T, name string) []byte {
	t.Helper()
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalJSON(readFixture(t, name)); err != nil {
		t.Fatal(err)
	}
	data, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// ---- hand-written JSON, from the OTLP specification ----

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "otlp", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkJSONStatus checks a JSON google.rpc.Status answer.
func checkJSONStatus(t *testing.T, resp *http.Response, data []byte, code int, fragment string) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", ct)
	}
	var st struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatalf("body: got %q, want a JSON Status: %v", data, err)
	}
	if st.Code != code || !strings.Contains(st.Message, fragment) {
		t.Errorf("Status: got code %d message %q, want code %d and a message containing %q", st.Code, st.Message, code, fragment)
	}
}

// checkProtoStatus checks a binary google.rpc.Status answer.
func checkProtoStatus(t *testing.T, resp *http.Response, data []byte, code int32, fragment string) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		t.Errorf("Content-Type: got %q, want application/x-protobuf", ct)
	}
	var st statuspb.Status
	if err := proto.Unmarshal(data, &st); err != nil {
		t.Fatalf("body: got %q, want a protobuf Status: %v", data, err)
	}
	if st.GetCode() != code || !strings.Contains(st.GetMessage(), fragment) {
		t.Errorf("Status: got code %d message %q, want code %d and a message containing %q", st.GetCode(), st.GetMessage(), code, fragment)
	}
}

func gzipBytes(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestOTLPJSONFixtures posts requests written by hand from the OTLP
// specification (hex ids in either case, int64s as strings and once as a
// number, enums as integers, fields this server does not know) and checks
// what they became.
func TestOTLPJSONFixtures(t *testing.T) {
	for _, tc := range []struct {
		file         string
		execution    string
		want         []string
		wantRejected int64
		wantMessage  string // in partialSuccess.errorMessage
	}{
		// Tool calls are steps by tool and arguments (the call id changes
		// when a model retries); nobody classified lookup_customer, so it is
		// unknown; effects join their tool call through the span they hang
		// from, not through a step they name.
		{file: "agent_run.json", execution: "5b8efff798038103d269b633813fc60c", want: []string{
			`execution 5b8efff798038103d269b633813fc60c "billing-agent" completed labels=map[session:conv_42]`,
			"step tool-c7810dc14dfd2ca9 tool=lookup_customer effect=unknown provider=",
			`  attempt 1 ok 14:02:11.100-14:02:11.180 dedup=false key= worker=build-7:4121 error="" args={"customer":"acme","limit":1} result={"email":"jordan@acme.dev"} conflicts=`,
			"step tool-7108b0a5f2153537 tool=send_invoice_email effect=write provider=mail-api",
			`  attempt 1 timeout 14:02:11.200-14:02:21.200 dedup=false key=ik_a94a0b1d worker=build-7:4121 error="TimeoutError: network timeout after 10s" args={"subject":"Your June invoice","to":"jordan@acme.dev"} result= conflicts=`,
			`  attempt 2 ok 14:02:21.300-14:02:21.410 dedup=false key=ik_a94a0b1d worker=build-7:4121 error="" args={"subject":"Your June invoice","to":"jordan@acme.dev"} result={"message_id":"msg_9d02e1","status":"sent"} conflicts=`,
			"effect mail-api/msg_41bcc7 step= key=ik_a94a0b1d target=jordan@acme.dev at=14:02:11.350 state=duplicate",
			"effect mail-api/msg_9d02e1 step= key=ik_a94a0b1d target=jordan@acme.dev at=14:02:21.380 state=duplicate",
			"finding duplicate_effect critical step=tool-7108b0a5f2153537",
		}},
		// Temporal: the activity type (RunActivity:<type>) is the tool, before tool.name.
		// The attempt without a number takes the lowest one its step's sent
		// numbers leave free.
		{file: "durable_workflow.json", execution: "billing-wf-42/3c1a9b52-6f0e-4d7e-9a61-0c2f5d8e7b14", want: []string{
			`execution billing-wf-42/3c1a9b52-6f0e-4d7e-9a61-0c2f5d8e7b14 "BillingWorkflow" completed labels=map[]`,
			"step 5 tool=ChargeCard effect=write provider=payments-api",
			`  attempt 1 error 14:02:11.100-14:02:11.400 dedup=false key=ik_charge_42 worker=worker-a error="ConnectionError: connection reset by peer" args={"amount_cents":4200,"currency":"eur"} result= conflicts=`,
			`  attempt 2 ok 14:02:12.100-14:02:12.150 dedup=true key=ik_charge_42 worker=worker-a error="" args= result={"charge":"ch_3PzK"} conflicts=`,
			"step send-receipt tool=SendReceipt effect=write provider=",
			`  attempt 1 replayed 14:02:12.200-14:02:12.201 dedup=false key= worker=worker-a error="" args= result= conflicts=`,
			"effect payments-api/ch_3PzK step= key=ik_charge_42 target= at=14:02:11.300 state=matched",
		}},
		{file: "one_unmappable.json", execution: "4bf92f3577b34da6a3ce929d0e0e4736", wantRejected: 1,
			wantMessage: "oncetrace.effect.provider and oncetrace.effect.id", want: []string{
				`execution 4bf92f3577b34da6a3ce929d0e0e4736 "support-agent" completed labels=map[session:sess_9]`,
				"step tool-ff8a471865adb5ef tool=search_docs effect=unknown provider=",
				`  attempt 1 ok 14:02:11.100-14:02:11.300 dedup=false key= worker=worker-b error="" args={"query":"refund policy"} result="Refunds within 30 days." conflicts=`,
			}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			srv := startOTLPServer(t, ingest.DefaultLimits, "")
			body := readFixture(t, tc.file)
			for _, enc := range []string{"", "gzip"} {
				data := body
				if enc == "gzip" {
					data = gzipBytes(t, body)
				}
				resp, answer := srv.post(t, "application/json", enc, data, nil)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("POST (%q): got status %d, want 200: %s", enc, resp.StatusCode, answer)
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type: got %q, want application/json", ct)
				}
				var got struct {
					PartialSuccess struct {
						RejectedSpans string `json:"rejectedSpans"` // int64: a string in OTLP JSON
						ErrorMessage  string `json:"errorMessage"`
					} `json:"partialSuccess"`
				}
				if err := json.Unmarshal(answer, &got); err != nil {
					t.Fatalf("answer %s: %v", answer, err)
				}
				wantRejected := ""
				if tc.wantRejected > 0 {
					wantRejected = fmt.Sprint(tc.wantRejected)
				}
				if got.PartialSuccess.RejectedSpans != wantRejected || !strings.Contains(got.PartialSuccess.ErrorMessage, tc.wantMessage) {
					t.Errorf("partialSuccess (%q): got %s, want rejectedSpans %q and a message containing %q", enc, answer, wantRejected, tc.wantMessage)
				}
				checkLines(t, fmt.Sprintf("execution after POST (%q)", enc), srv.execution(t, tc.execution).summary(), tc.want)
			}
		})
	}
}

// TestOTLPEmptyRequests: OTLP asks a server to answer an empty request
// with success.
func TestOTLPEmptyRequests(t *testing.T) {
	srv := startOTLPServer(t, ingest.DefaultLimits, "")
	for _, tc := range []struct{ contentType, body string }{
		{"application/json", `{}`},
		{"application/json", `{"resourceSpans":[]}`},
		{"application/json; charset=utf-8", `{"resourceSpans":[{"scopeSpans":[{"spans":[]}]}]}`},
		{"application/x-protobuf", ""},
	} {
		resp, data := srv.post(t, tc.contentType, "", []byte(tc.body), nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s %q: got status %d, want 200: %s", tc.contentType, tc.body, resp.StatusCode, data)
		}
	}
}

// TestOTLPBadRequests: what cannot be decoded or accepted is refused with
// the status OTLP names and a Status body that says why.
func TestOTLPBadRequests(t *testing.T) {
	lim := ingest.DefaultLimits
	lim.BodyBytes = 4096
	srv := startOTLPServer(t, lim, "")
	big := append([]byte(`{"resourceSpans":[],"padding":"`), bytes.Repeat([]byte("x"), 5000)...)
	big = append(big, `"}`...)
	// An export request whose protobuf is over the limit: one span with a
	// long name.
	bigProto := func() []byte {
		req := ptraceotlp.NewExportRequest()
		sp := req.Traces().ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName(strings.Repeat("n", 5000))
		data, err := req.MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}()
	for _, tc := range []struct {
		name, contentType, encoding string
		body                        []byte
		wantStatus                  int
		wantCode                    int
		wantMessage                 string
	}{
		{"truncated JSON", "application/json", "", []byte(`{"resourceSpans":[{"resource":`), 400, 3, "not a valid OTLP ExportTraceServiceRequest"},
		{"a JSON array", "application/json", "", []byte(`[1,2]`), 400, 3, "not a valid OTLP ExportTraceServiceRequest"},
		{"base64 ids, as plain protojson would send them", "application/json", "",
			[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"W47/95gDgQPSabYzgT/GDA==","spanId":"7uGbfsPBsXQ=","name":"x","startTimeUnixNano":"1"}]}]}]}`),
			400, 3, "not a valid OTLP ExportTraceServiceRequest"},
		{"an id of the wrong length", "application/json", "", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8e","spanId":"eee19b7ec3c1b174"}]}]}]}`),
			400, 3, "not a valid OTLP ExportTraceServiceRequest"},
		{"protobuf that is not protobuf", "application/x-protobuf", "", []byte("\xff\xff\xff\xff"), 400, 3, "not a valid OTLP ExportTraceServiceRequest"},
		{"JSON sent as protobuf", "application/x-protobuf", "", []byte(`{"resourceSpans":[{"scopeSpans":[]}]}`), 400, 3, "not a valid OTLP ExportTraceServiceRequest"},
		{"gzip that is not gzip", "application/x-protobuf", "gzip", []byte("plain"), 400, 3, "gzip"},
		{"text/plain", "text/plain", "", []byte("hello"), 415, 3, "Content-Type"},
		{"no Content-Type", "", "", []byte(`{}`), 415, 3, "Content-Type"},
		{"an unknown Content-Encoding", "application/x-protobuf", "br", []byte("x"), 415, 3, "Content-Encoding"},
		{"JSON over the body limit", "application/json", "", big, 413, 3, "limit of 4096 bytes"},
		{"protobuf over the body limit", "application/x-protobuf", "", bigProto, 413, 3, "limit of 4096 bytes"},
		{"gzip that expands over the body limit", "application/json", "gzip", gzipBytes(t, big), 413, 3, "limit of 4096 bytes"},
		{"a protobuf message cut short", "application/x-protobuf", "", []byte{0x0a, 0x05}, 400, 3, "not a valid OTLP ExportTraceServiceRequest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := srv.post(t, tc.contentType, tc.encoding, tc.body, nil)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status: got %d, want %d: %q", resp.StatusCode, tc.wantStatus, data)
			}
			if strings.HasPrefix(tc.contentType, "application/x-protobuf") {
				checkProtoStatus(t, resp, data, int32(tc.wantCode), tc.wantMessage)
			} else {
				checkJSONStatus(t, resp, data, tc.wantCode, tc.wantMessage)
			}
		})
	}
	if _, n := srv.eventLog(t); n != 0 {
		t.Errorf("events stored after bad requests: got %d, want none", n)
	}
}
