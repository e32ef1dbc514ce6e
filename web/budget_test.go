package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// budgetServer is a real server on a real SQLite file with a decode
// budget of budget bytes and a short wait.
type budgetServer struct {
	url string
	db  *store.DB
	srv *web.Server
}

func startBudgetServer(t *testing.T, budget int64, lim ingest.Limits) *budgetServer {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(db, writer.DefaultConfig)
	srv := web.New(web.Config{DB: db, Writer: w, Limits: lim, Analysis: trace.DefaultConfig,
		MaxDecodeBytes: budget, DecodeWait: 100 * time.Millisecond})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		w.Close()
		db.Close()
	})
	return &budgetServer{url: ts.URL, db: db, srv: srv}
}

type budgetAnswer struct {
	status int
	header http.Header
	body   string
}

func (s *budgetServer) post(t *testing.T, path, contentType string, body io.Reader, length int64) budgetAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return budgetAnswer{resp.StatusCode, resp.Header, string(data)}
}

func (s *budgetServer) executions(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(s.url + "/api/v1/executions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Executions []json.RawMessage `json:"executions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	return len(list.Executions)
}

// TestDecodeBudgetBusy: while one upload holds most of the budget, another
// that needs more than is left waits the budget's wait and is answered
// 503 with Retry-After (for OTLP, the retryable code 14); once the first
// is done, the second goes through.
func TestDecodeBudgetBusy(t *testing.T) {
	const budget = 8 << 20
	srv := startBudgetServer(t, budget, ingest.DefaultLimits)
	event := []byte(`{"type":"attempt","execution_id":"exec_slow","step_id":"s","attempt":1,"args":[` + strings.Repeat("0,", 7<<19) + `0]}`)

	// The slow upload: its Content-Length (7 MiB) is reserved at once, and
	// it sends only its first bytes until told to finish.
	pr, pw := io.Pipe()
	slow := make(chan budgetAnswer, 1)
	go func() { slow <- srv.post(t, "/api/v1/events", "application/json", pr, int64(len(event))) }()
	if _, err := pw.Write(event[:10]); err != nil {
		t.Fatal(err)
	}
	// The server has read the header and reserved the Content-Length.
	for deadline := time.Now().Add(10 * time.Second); srv.srv.DecodeBytesInUse() < int64(len(event)); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("decode budget in use: got %d bytes after 10s, want the slow upload's %d reserved", srv.srv.DecodeBytesInUse(), len(event))
		}
	}

	second := []byte(`{"type":"execution","execution_id":"exec_second","name":"` + strings.Repeat("n", 40<<10) + `","labels":{"pad":"` + strings.Repeat("p", 1000) + `"},"idempotency_key":"` + strings.Repeat("k", 200) + `"}`)
	second = append(second, bytes.Repeat([]byte(" "), 1<<20)...) // 1 MiB more than is left
	otlp := otlpTraces(t, 1, func(sp ptrace.Span) {
		sp.Attributes().PutStr("pad", strings.Repeat("p", 600<<10))
		sp.Attributes().PutStr("more", strings.Repeat("p", 600<<10))
	})
	for _, tc := range []struct {
		name, path, contentType string
		body                    []byte
		otlpCode                int
	}{
		{"native", "/api/v1/events", "application/json", second, 0},
		{"OTLP protobuf", "/v1/traces", "application/x-protobuf", otlp, 14},
		{"webhook", "/api/v1/webhooks/sendgrid", "application/json", []byte(`[{"event":"delivered","sg_message_id":"m1","email":"a@x","pad":"` + strings.Repeat("w", 1200<<10) + `"}]`), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			ans := srv.post(t, tc.path, tc.contentType, bytes.NewReader(tc.body), int64(len(tc.body)))
			if ans.status != http.StatusServiceUnavailable || ans.header.Get("Retry-After") == "" {
				t.Fatalf("while the budget is held: got %d %.200s (Retry-After %q), want 503 with Retry-After", ans.status, ans.body, ans.header.Get("Retry-After"))
			}
			if waited := time.Since(start); waited < 100*time.Millisecond {
				t.Errorf("answered after %v, want after the budget's wait of 100ms", waited)
			}
			if tc.otlpCode != 0 && !strings.Contains(ans.body, "memory budget") {
				t.Errorf("OTLP answer: got %q, want a Status naming the memory budget", ans.body)
			}
			if tc.otlpCode == 0 && !strings.Contains(ans.body, "memory budget") {
				t.Errorf("answer: got %q, want an error naming the memory budget", ans.body)
			}
		})
	}

	if _, err := pw.Write(event[10:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if ans := <-slow; ans.status != http.StatusBadRequest || !strings.Contains(ans.body, "array longer than the limit") {
		t.Fatalf("the slow upload: got %d %.200s, want its 400 naming the limit", ans.status, ans.body)
	}
	if ans := srv.post(t, "/api/v1/events", "application/json", bytes.NewReader(second), int64(len(second))); ans.status != http.StatusOK {
		t.Fatalf("the second, retried once the budget is free: got %d %.200s, want 200", ans.status, ans.body)
	}
	if n := srv.executions(t); n != 1 {
		t.Errorf("executions: got %d, want the one stored", n)
	}
}

// otlpTraces is an ExportTraceServiceRequest of n spans of one trace.
func otlpTraces(t *testing.T, n int, span func(ptrace.Span)) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for i := 0; i < n; i++ {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
		id := i + 1
		sp.SetSpanID(pcommon.SpanID{0, 0, 0, 0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)})
		sp.SetParentSpanID(pcommon.SpanID{9})
		sp.SetName(fmt.Sprintf("GET /%d", i))
		sp.SetStartTimestamp(pcommon.Timestamp(time.Date(2026, 6, 30, 14, 0, 0, i, time.UTC).UnixNano()))
		sp.SetEndTimestamp(sp.StartTimestamp() + 1000)
		if span != nil {
			span(sp)
		}
	}
	pb, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return pb
}

// TestOTLPRequestLimits: the request of 100,000 spans (which held
// the writer 7–15 s) is refused 413 naming the limit, in protobuf and in
// JSON, and nothing of it is stored; a span over a per-span limit is a
// 400 naming the span; a request at the limits is stored.
func TestOTLPRequestLimits(t *testing.T) {
	srv := startBudgetServer(t, 0, ingest.DefaultLimits)
	hundredK := otlpTraces(t, 100_000, nil)
	decoded := ptraceotlp.NewExportRequest()
	if err := decoded.UnmarshalProto(otlpTraces(t, 10_001, nil)); err != nil {
		t.Fatal(err)
	}
	overJSON, err := decoded.MarshalJSON() // 100,000 would be over the body limit in JSON
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		status            int
		want              string
	}{
		{"100,000 spans", "application/x-protobuf", hundredK, 413, "spans: more than the limit of 10000 spans in one request"},
		{"10,001 spans in JSON", "application/json", overJSON, 413, "spans: more than the limit of 10000 spans in one request"},
		{"129 attributes", "application/x-protobuf", otlpTraces(t, 2, func(sp ptrace.Span) {
			for i := range 129 {
				sp.Attributes().PutInt(fmt.Sprintf("attr.%d", i), int64(i))
			}
		}), 400, `span 0000000000000001 ("GET /0"): more than the limit of 128 attributes`},
		{"129 events", "application/x-protobuf", otlpTraces(t, 1, func(sp ptrace.Span) {
			for range 129 {
				sp.Events().AppendEmpty().SetName("retry")
			}
		}), 400, "more than the limit of 128 events"},
		{"an attribute of 2 MB", "application/x-protobuf", otlpTraces(t, 1, func(sp ptrace.Span) {
			sp.Attributes().PutStr("gen_ai.prompt", strings.Repeat("p", 2<<20))
		}), 400, `attribute "gen_ai.prompt": 2097152 bytes, more than the limit of 1048576`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			ans := srv.post(t, "/v1/traces", tc.contentType, bytes.NewReader(tc.body), int64(len(tc.body)))
			if ans.status != tc.status || !strings.Contains(ans.body, tc.want) {
				t.Fatalf("got %d %.300q, want %d naming %q", ans.status, ans.body, tc.status, tc.want)
			}
			t.Logf("%d bytes refused in %v", len(tc.body), time.Since(start).Round(time.Millisecond))
		})
	}
	if n := srv.executions(t); n != 0 {
		t.Fatalf("executions after the refusals: got %d, want none stored", n)
	}
	atLimits := otlpTraces(t, 10_000, func(sp ptrace.Span) {
		if sp.Name() != "GET /0" {
			return
		}
		for i := range 128 {
			sp.Attributes().PutBool(fmt.Sprintf("a%d", i), true)
		}
		for range 128 {
			sp.Events().AppendEmpty().SetName("retry")
		}
		sp.Attributes().PutStr("a0", strings.Repeat("p", 1<<20))
	})
	if ans := srv.post(t, "/v1/traces", "application/x-protobuf", bytes.NewReader(atLimits), int64(len(atLimits))); ans.status != http.StatusOK {
		t.Fatalf("10,000 spans, one of 128 attributes and events, an attribute of 1 MiB: got %d %.300q, want 200", ans.status, ans.body)
	}
	if n := srv.executions(t); n != 1 {
		t.Fatalf("executions after the request at the limits: got %d, want its one trace", n)
	}
}

// TestIngestDuplicateKeys: a key twice in an event is that event's
// rejection naming the key, a 400 when it is the only one; the others of
// its request are stored.
func TestIngestDuplicateKeys(t *testing.T) {
	srv := startBudgetServer(t, 0, ingest.DefaultLimits)
	dup := `{"type":"attempt","execution_id":"exec_dup","step_id":"s","attempt":1,"args":{"to":"jordan@acme.dev","to":"attacker@evil.test"}}`
	ans := srv.post(t, "/api/v1/events", "application/json", strings.NewReader(dup), int64(len(dup)))
	if ans.status != http.StatusBadRequest || !strings.Contains(ans.body, "args.to: duplicate key") {
		t.Fatalf("one event with a key twice: got %d %s, want 400 naming args.to", ans.status, ans.body)
	}
	batch := `{"events":[{"type":"execution","execution_id":"exec_ok"},` + dup + `]}`
	ans = srv.post(t, "/api/v1/events", "application/json", strings.NewReader(batch), int64(len(batch)))
	var out struct {
		Accepted int                `json:"accepted"`
		Rejected []ingest.Rejection `json:"rejected"`
	}
	if err := json.Unmarshal([]byte(ans.body), &out); err != nil || ans.status != http.StatusMultiStatus || out.Accepted != 1 ||
		len(out.Rejected) != 1 || out.Rejected[0] != (ingest.Rejection{Index: 1, Error: "args.to: duplicate key"}) {
		t.Fatalf("a batch with a key twice in event 1: got %d %s, want 207 with event 1 rejected naming args.to", ans.status, ans.body)
	}
	// The attack, small: one event whose args is an array over
	// the limit is rejected naming the limit.
	long := `{"type":"attempt","execution_id":"exec_long","step_id":"s","attempt":1,"args":[` + strings.Repeat("0,", 10_000) + `0]}`
	ans = srv.post(t, "/api/v1/events", "application/x-ndjson", strings.NewReader(long), int64(len(long)))
	if ans.status != http.StatusBadRequest || !strings.Contains(ans.body, "args: array longer than the limit of 10000 elements") {
		t.Fatalf("args of 10,001 elements: got %d %.300s, want 400 naming the limit", ans.status, ans.body)
	}
	if n := srv.executions(t); n != 1 {
		t.Errorf("executions: got %d, want only exec_ok", n)
	}
}

// A body whose decoding would take more than the whole budget is refused
// 413 naming it, rather than waited for: it could never be decoded.
func TestDecodeBudgetTooLarge(t *testing.T) {
	srv := startBudgetServer(t, 4<<20, ingest.DefaultLimits)
	attrs := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"a","startTimeUnixNano":"1","attributes":[` +
		strings.Repeat(`{"key":"k","value":{"intValue":"1"}},`, 50_000) + `{}]}]}]}]}`
	ans := srv.post(t, "/v1/traces", "application/json", strings.NewReader(attrs), int64(len(attrs)))
	if ans.status != http.StatusRequestEntityTooLarge || !strings.Contains(ans.body, "decode budget of 4194304 bytes") {
		t.Fatalf("OTLP JSON of 50,000 attributes under a 4 MiB budget: got %d %.300s, want 413 naming the decode budget", ans.status, ans.body)
	}
}
