package web_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// metricsServer is a server wired as serve wires it: the writer reports
// its batches to the same Metrics the server exposes.
type metricsServer struct {
	ts      *httptest.Server
	db      *store.DB
	path    string
	hub     *web.Hub
	metrics *web.Metrics
}

func startMetricsServer(t *testing.T, hubBuffer int) *metricsServer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "oncetrace.db")
	db, err := sqlite.Open(context.Background(), path, sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	metrics := web.NewMetrics()
	hub := web.NewHub(hubBuffer)
	wcfg := writer.DefaultConfig
	wcfg.OnCommit, wcfg.OnBatch = hub.Publish, metrics.ObserveBatch
	w := writer.New(db, wcfg)
	srv := web.New(web.Config{DB: db, Writer: w, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig, Hub: hub, Metrics: metrics})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		w.Close()
		db.Close()
	})
	return &metricsServer{ts: ts, db: db, path: path, hub: hub, metrics: metrics}
}

// scrape reads /metrics into series → value, a series named as the text
// format prints it: name{label="value",...} with labels in name order.
func (ms *metricsServer) scrape(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := ms.ts.Client().Get(ms.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: got %d %s, want 200 in the text format", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func (ms *metricsServer) post(t *testing.T, path, contentType, body string) int {
	t.Helper()
	resp, err := ms.ts.Client().Post(ms.ts.URL+path, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func (ms *metricsServer) count(t *testing.T, query string) float64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+ms.path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n float64
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkDeltas compares after−before of each series with what it must have
// moved by.
func checkDeltas(t *testing.T, before, after map[string]float64, want map[string]float64) {
	t.Helper()
	for series, d := range want {
		a, ok := after[series]
		if !ok {
			t.Errorf("%s: not in the scrape", series)
			continue
		}
		if got := a - before[series]; got != d {
			t.Errorf("%s: moved by %v (from %v to %v), want %v", series, got, before[series], a, d)
		}
	}
}

const (
	metricsGood = `{"type":"execution","execution_id":"exec_m","name":"billing-agent","status":"running","started_at":"2026-06-30T14:02:11.120Z"}
{"type":"attempt","execution_id":"exec_m","step_id":"step-4","attempt":1,"tool":"send_invoice_email","effect":"write","provider":"mail-api","idempotency_key":"ik_m","started_at":"2026-06-30T14:02:11.200Z","ended_at":"2026-06-30T14:02:12.200Z","outcome":"ok"}
{"type":"effect","provider":"mail-api","effect_id":"msg_m1","idempotency_key":"ik_m","execution_id":"exec_m","step_id":"step-4","at":"2026-06-30T14:02:11.350Z"}
{"type":"effect","provider":"mail-api","effect_id":"msg_m2","idempotency_key":"ik_m","execution_id":"exec_m","step_id":"step-4","at":"2026-06-30T14:02:12.350Z"}
`
	metricsBad = `{"type":"attempt","execution_id":"exec_m","step_id":"s","attempt":1,"bogus":1}
{"type":"execution"}
`
)

// TestMetricsCountIngestExactly scrapes /metrics around known requests and
// checks every series they touch moved by exactly what they did.
func TestMetricsCountIngestExactly(t *testing.T) {
	ms := startMetricsServer(t, 0)
	before := ms.scrape(t)
	if got := ms.post(t, "/api/v1/events", "application/x-ndjson", metricsGood+metricsBad); got != http.StatusMultiStatus {
		t.Fatalf("POST 4 good and 2 bad events: got %d, want 207", got)
	}
	if got := ms.post(t, "/api/v1/events", "application/x-ndjson", metricsGood); got != http.StatusOK {
		t.Fatalf("POST the 4 again: got %d, want 200", got)
	}
	if got := ms.post(t, "/api/v1/events", "text/plain", metricsGood); got != http.StatusUnsupportedMediaType {
		t.Fatalf("POST text/plain: got %d, want 415", got)
	}
	if got := ms.post(t, "/api/v1/events", "application/json", `{`); got != http.StatusBadRequest {
		t.Fatalf("POST {: got %d, want 400", got)
	}
	storedNative := ms.count(t, `SELECT count(*) FROM events`)
	const traceID = "5b8efff798038103d269b633813fc60c"
	otlp := `{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"spans":[` +
		otlpJSONSpan(traceID, "eee19b7ec3c1b174", "", "invoke_agent billing-agent", 1, 1_751_292_131_000_000_000, 1_751_292_132_000_000_000,
			map[string]string{"gen_ai.operation.name": "invoke_agent"}, "") + `,` +
		`{"spanId":"eee19b7ec3c1b175","name":"no trace id","startTimeUnixNano":"1751292131000000000"}` + `]}]}]}`
	if got := ms.post(t, "/v1/traces", "application/json", otlp); got != http.StatusOK {
		t.Fatalf("POST /v1/traces: got %d, want 200", got)
	}
	resp, err := ms.ts.Client().Get(ms.ts.URL + "/api/v1/executions/exec_m")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ms.metrics.ObservePrune(nil)
	ms.metrics.ObservePrune(errors.New("disk full"))
	otlpEvents := ms.count(t, `SELECT count(*) FROM events`) - storedNative
	if storedNative != 4 || otlpEvents < 1 {
		t.Fatalf("stored: %v native events and %v from OTLP, want 4 and at least 1", storedNative, otlpEvents)
	}
	after := ms.scrape(t)

	checkDeltas(t, before, after, map[string]float64{
		`oncetrace_ingest_events_total{api="native",result="accepted"}`:                         4,
		`oncetrace_ingest_events_total{api="native",result="duplicate"}`:                        4,
		`oncetrace_ingest_events_total{api="native",result="rejected"}`:                         2,
		`oncetrace_ingest_rejected_total{api="native",reason="unknown_field"}`:                  1,
		`oncetrace_ingest_rejected_total{api="native",reason="missing_field"}`:                  1,
		`oncetrace_ingest_spans_total{result="accepted"}`:                                       1,
		`oncetrace_ingest_spans_total{result="rejected"}`:                                       1,
		`oncetrace_ingest_rejected_total{api="otlp",reason="unmappable_span"}`:                  1,
		`oncetrace_ingest_events_total{api="otlp",result="accepted"}`:                           otlpEvents,
		`oncetrace_ingest_events_total{api="otlp",result="duplicate"}`:                          0,
		`oncetrace_ingest_requests_refused_total{api="native",reason="unsupported_media_type"}`: 1,
		`oncetrace_ingest_requests_refused_total{api="native",reason="bad_request"}`:            1,
		`oncetrace_writer_events_total{result="accepted"}`:                                      4 + otlpEvents,
		`oncetrace_writer_events_total{result="duplicate"}`:                                     4,
		// Three transactions: the two native requests and the OTLP one
		// (sent one after another, so none is grouped with another).
		`oncetrace_writer_batch_events_count`:   3,
		`oncetrace_writer_batch_events_sum`:     4 + 4 + otlpEvents,
		`oncetrace_writer_batch_requests_count`: 3,
		`oncetrace_writer_batch_requests_sum`:   3,
		`oncetrace_writer_commit_seconds_count`: 3,
		`oncetrace_writer_commit_errors_total`:  0,
		`oncetrace_http_request_duration_seconds_count{code="207",method="POST",route="/api/v1/events"}`:        1,
		`oncetrace_http_request_duration_seconds_count{code="200",method="POST",route="/api/v1/events"}`:        1,
		`oncetrace_http_request_duration_seconds_count{code="415",method="POST",route="/api/v1/events"}`:        1,
		`oncetrace_http_request_duration_seconds_count{code="400",method="POST",route="/api/v1/events"}`:        1,
		`oncetrace_http_request_duration_seconds_count{code="200",method="POST",route="/v1/traces"}`:            1,
		`oncetrace_http_request_duration_seconds_count{code="200",method="GET",route="/api/v1/executions/:id"}`: 1,
		`oncetrace_http_request_duration_seconds_count{code="200",method="GET",route="/metrics"}`:               1, // the first scrape
		`oncetrace_prune_runs_total{result="ok"}`:                                                               1,
		`oncetrace_prune_runs_total{result="error"}`:                                                            1,
	})
	// A series per route pattern, never per raw path.
	for series := range after {
		if strings.Contains(series, "exec_m") {
			t.Errorf("series %s names an execution: routes must be patterns", series)
		}
	}
	// Findings are what the store holds: one duplicate_effect, 0 for a
	// rule with none, and the sum is the table's.
	if got := after[`oncetrace_findings{rule="duplicate_effect",severity="critical"}`]; got != 1 {
		t.Errorf(`oncetrace_findings{rule="duplicate_effect"}: got %v, want 1`, got)
	}
	if got, ok := after[`oncetrace_findings{rule="unsafe_retried",severity="critical"}`]; !ok || got != 0 {
		t.Errorf(`oncetrace_findings{rule="unsafe_retried"}: got %v (present %v), want 0`, got, ok)
	}
	var sum float64
	for series, v := range after {
		if strings.HasPrefix(series, "oncetrace_findings{") {
			sum += v
		}
	}
	if want := ms.count(t, `SELECT count(*) FROM findings`); sum != want {
		t.Errorf("sum of oncetrace_findings: got %v, want the %v rows of the findings table", sum, want)
	}
	st, err := os.Stat(ms.path)
	if err != nil {
		t.Fatal(err)
	}
	if got := after[`oncetrace_db_size_bytes{file="main"}`]; got != float64(st.Size()) || got == 0 {
		t.Errorf(`oncetrace_db_size_bytes{file="main"}: got %v, want the file's %d bytes`, got, st.Size())
	}
	if got := after[`oncetrace_writer_queue_capacity`]; got != float64(writer.DefaultConfig.QueueLength) {
		t.Errorf("oncetrace_writer_queue_capacity: got %v, want %d", got, writer.DefaultConfig.QueueLength)
	}
	if got, ok := after[`oncetrace_writer_queue_requests`]; !ok || got != 0 {
		t.Errorf("oncetrace_writer_queue_requests at rest: got %v (present %v), want 0", got, ok)
	}
	if _, ok := after["process_resident_memory_bytes"]; !ok {
		t.Errorf("process_resident_memory_bytes: not in the scrape, want the process collector's series")
	}
}

// TestMetricsLiveSubscribersAndDrops: two subscribers that never read are
// counted, then dropped for falling behind, and counted as dropped.
func TestMetricsLiveSubscribersAndDrops(t *testing.T) {
	ms := startMetricsServer(t, 2)
	before := ms.scrape(t)
	a, b := ms.hub.Subscribe(web.LiveFilter{}), ms.hub.Subscribe(web.LiveFilter{})
	if a == nil || b == nil {
		t.Fatal("Subscribe: got nil")
	}
	mid := ms.scrape(t)
	if got := mid["oncetrace_live_subscribers"]; got != 2 {
		t.Errorf("oncetrace_live_subscribers with 2 subscribed: got %v, want 2", got)
	}
	// Two of room each. A subscriber that has taken everything may take
	// one commit of any size (the hub cannot tell it from a fast one), so
	// the four events of the first commit are handed over; the second
	// commit finds them still there, and both fall behind.
	if got := ms.post(t, "/api/v1/events", "application/x-ndjson", metricsGood); got != http.StatusOK {
		t.Fatalf("POST: got %d, want 200", got)
	}
	more := `{"type":"effect","provider":"mail-api","effect_id":"msg_m3","execution_id":"exec_m","at":"2026-06-30T14:02:13.350Z"}` + "\n"
	if got := ms.post(t, "/api/v1/events", "application/x-ndjson", more); got != http.StatusOK {
		t.Fatalf("POST: got %d, want 200", got)
	}
	for deadline := time.Now().Add(10 * time.Second); ms.hub.Subscribers() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a subscriber that never reads was not dropped within 10s")
		}
	}
	after := ms.scrape(t)
	checkDeltas(t, before, after, map[string]float64{"oncetrace_live_dropped_total": 2})
	if got := after["oncetrace_live_subscribers"]; got != 0 {
		t.Errorf("oncetrace_live_subscribers after the drops: got %v, want 0", got)
	}
}
