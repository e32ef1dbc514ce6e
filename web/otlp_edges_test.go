package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/web"
)

// postTo sends a body to any path of the server and returns the answer.
func (s *otlpServer) postTo(t *testing.T, path, contentType, encoding string, body []byte, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.ts.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := s.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

// dropped is /healthz's otlp_dropped.
type dropped struct {
	LogRecords   int64 `json:"log_records"`
	MetricPoints int64 `json:"metric_points"`
}

func (s *otlpServer) dropped(t *testing.T) dropped {
	t.Helper()
	var health struct {
		Status       string   `json:"status"`
		GapThreshold string   `json:"gap_threshold"`
		OTLPDropped  *dropped `json:"otlp_dropped"`
	}
	data := s.get(t, "/healthz")
	if err := json.Unmarshal(data, &health); err != nil {
		t.Fatalf("/healthz: %s: %v", data, err)
	}
	if health.Status != "ok" || health.GapThreshold == "" || health.OTLPDropped == nil {
		t.Fatalf("/healthz: got %s, want status ok, a gap_threshold and otlp_dropped", data)
	}
	return *health.OTLPDropped
}

// fiveLogRecords is an export request of five log records over two
// resources and three scopes.
func fiveLogRecords() plogotlp.ExportRequest {
	logs := plog.NewLogs()
	for r, scopes := range [][]int{{2, 1}, {2}} {
		rl := logs.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", fmt.Sprint("svc-", r))
		for _, n := range scopes {
			sl := rl.ScopeLogs().AppendEmpty()
			for i := range n {
				lr := sl.LogRecords().AppendEmpty()
				lr.Body().SetStr(fmt.Sprint("line ", i))
				lr.SetSeverityNumber(plog.SeverityNumberInfo)
			}
		}
	}
	return plogotlp.NewExportRequestFromLogs(logs)
}

// sevenMetricPoints is an export request of seven data points: a gauge of
// two, a sum of three, a histogram of one, a summary of one.
func sevenMetricPoints() pmetricotlp.ExportRequest {
	metrics := pmetric.NewMetrics()
	sm := metrics.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	g := sm.Metrics().AppendEmpty()
	g.SetName("queue.depth")
	g.SetEmptyGauge()
	for i := range 2 {
		g.Gauge().DataPoints().AppendEmpty().SetIntValue(int64(i))
	}
	sum := sm.Metrics().AppendEmpty()
	sum.SetName("requests")
	sum.SetEmptySum().SetIsMonotonic(true)
	for i := range 3 {
		sum.Sum().DataPoints().AppendEmpty().SetIntValue(int64(i))
	}
	h := sm.Metrics().AppendEmpty()
	h.SetName("latency")
	h.SetEmptyHistogram().DataPoints().AppendEmpty().SetCount(4)
	s := sm.Metrics().AppendEmpty()
	s.SetName("sizes")
	s.SetEmptySummary().DataPoints().AppendEmpty().SetCount(2)
	return pmetricotlp.NewExportRequestFromMetrics(metrics)
}

// Hand-written OTLP/JSON, as an SDK's http/json exporter sends it: two log
// records, and three data points (a gauge of one, a sum of two).
const (
	logsJSON = `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"node-agent"}}]},
		"scopeLogs":[{"scope":{"name":"app"},"logRecords":[
			{"timeUnixNano":"1751295731100000000","severityNumber":9,"severityText":"INFO","body":{"stringValue":"started"}},
			{"timeUnixNano":"1751295731200000000","severityNumber":17,"body":{"stringValue":"failed"},"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"eee19b7ec3c1b174"}]}]}]}`
	metricsJSON = `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[
		{"name":"queue.depth","gauge":{"dataPoints":[{"timeUnixNano":"1751295731100000000","asInt":"3"}]}},
		{"name":"requests","sum":{"aggregationTemporality":2,"isMonotonic":true,"dataPoints":[
			{"startTimeUnixNano":"1751295730000000000","timeUnixNano":"1751295731100000000","asInt":"7"},
			{"startTimeUnixNano":"1751295730000000000","timeUnixNano":"1751295731100000000","asDouble":1.5}]}}]}]}]}`
)

// TestOTLPLogsAndMetricsAreDropped: an SDK pointed at the base endpoint
// also posts logs and metrics. They are answered 200 with an empty export
// response in the request's encoding, counted in /healthz to the record or
// point, and not stored.
func TestOTLPLogsAndMetricsAreDropped(t *testing.T) {
	srv := startOTLPServer(t, ingest.DefaultLimits, "")
	if got := srv.dropped(t); got != (dropped{}) {
		t.Fatalf("otlp_dropped at start: got %+v, want zeros", got)
	}
	logsProto, err := fiveLogRecords().MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	logsSDKJSON, err := fiveLogRecords().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	metricsProto, err := sevenMetricPoints().MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	metricsSDKJSON, err := sevenMetricPoints().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	type post struct {
		name, path, contentType string
		body                    []byte
		want                    dropped
	}
	posts := []post{
		{"logs protobuf", "/v1/logs", "application/x-protobuf", logsProto, dropped{LogRecords: 5}},
		{"logs JSON", "/v1/logs", "application/json", logsSDKJSON, dropped{LogRecords: 5}},
		{"logs hand-written JSON", "/v1/logs", "application/json; charset=utf-8", []byte(logsJSON), dropped{LogRecords: 2}},
		{"metrics protobuf", "/v1/metrics", "application/x-protobuf", metricsProto, dropped{MetricPoints: 7}},
		{"metrics JSON", "/v1/metrics", "application/json", metricsSDKJSON, dropped{MetricPoints: 7}},
		{"metrics hand-written JSON", "/v1/metrics", "application/json", []byte(metricsJSON), dropped{MetricPoints: 3}},
		{"empty logs protobuf", "/v1/logs", "application/x-protobuf", nil, dropped{}},
		{"empty metrics JSON", "/v1/metrics", "application/json", []byte(`{}`), dropped{}},
	}
	total := dropped{}
	for _, enc := range []string{"", "gzip"} {
		for _, p := range posts {
			name := p.name + " " + enc
			body := p.body
			if enc == "gzip" {
				body = gzipBytes(t, body)
			}
			resp, data := srv.postTo(t, p.path, p.contentType, enc, body, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: got status %d, want 200: %q", name, resp.StatusCode, data)
			}
			wantCT, wantBody := "application/json", "{}"
			if p.contentType == "application/x-protobuf" {
				wantCT, wantBody = "application/x-protobuf", ""
			}
			if ct := resp.Header.Get("Content-Type"); ct != wantCT {
				t.Errorf("%s: Content-Type: got %q, want %q", name, ct, wantCT)
			}
			// The empty ExportLogsServiceResponse / ExportMetricsServiceResponse:
			// no bytes in protobuf, {} in JSON; and it decodes as one.
			if string(data) != wantBody {
				t.Errorf("%s: body: got %q, want %q", name, data, wantBody)
			}
			checkEmptyExportResponse(t, name, p.path, wantCT, data)
			total.LogRecords += p.want.LogRecords
			total.MetricPoints += p.want.MetricPoints
			if got := srv.dropped(t); got != total {
				t.Fatalf("%s: otlp_dropped: got %+v, want %+v", name, got, total)
			}
		}
	}
	if total != (dropped{LogRecords: 24, MetricPoints: 34}) {
		t.Fatalf("the test's own sum: got %+v", total)
	}
	if _, n := srv.eventLog(t); n != 0 {
		t.Errorf("events stored from logs and metrics: got %d, want none", n)
	}
}

// checkEmptyExportResponse decodes an answer as the SDKs do and checks it
// reports no partial success.
func checkEmptyExportResponse(t *testing.T, name, path, contentType string, data []byte) {
	t.Helper()
	type response interface {
		UnmarshalProto([]byte) error
		UnmarshalJSON([]byte) error
	}
	var resp response
	var rejected func() int64
	switch path {
	case "/v1/logs":
		r := plogotlp.NewExportResponse()
		resp, rejected = r, func() int64 { return r.PartialSuccess().RejectedLogRecords() }
	case "/v1/metrics":
		r := pmetricotlp.NewExportResponse()
		resp, rejected = r, func() int64 { return r.PartialSuccess().RejectedDataPoints() }
	default:
		r := ptraceotlp.NewExportResponse()
		resp, rejected = r, func() int64 { return r.PartialSuccess().RejectedSpans() }
	}
	var err error
	if contentType == "application/x-protobuf" {
		err = resp.UnmarshalProto(data)
	} else {
		err = resp.UnmarshalJSON(data)
	}
	if err != nil {
		t.Errorf("%s: answer %q does not decode as an export response: %v", name, data, err)
	} else if n := rejected(); n != 0 {
		t.Errorf("%s: answer %q rejects %d, want none", name, data, n)
	}
}

// TestOTLPLogsAndMetricsRefusals: the two paths refuse what /v1/traces
// refuses, with the same statuses and OTLP Status bodies, and count
// nothing when they do.
func TestOTLPLogsAndMetricsRefusals(t *testing.T) {
	lim := ingest.DefaultLimits
	lim.BodyBytes = 4096
	srv := startOTLPServer(t, lim, "")
	big := append([]byte(`{"resourceLogs":[],"padding":"`), bytes.Repeat([]byte("x"), 5000)...)
	big = append(big, `"}`...)
	for _, path := range []string{"/v1/logs", "/v1/metrics"} {
		message := map[string]string{"/v1/logs": "ExportLogsServiceRequest", "/v1/metrics": "ExportMetricsServiceRequest"}[path]
		for _, tc := range []struct {
			name, contentType, encoding string
			body                        []byte
			wantStatus, wantCode        int
			wantMessage                 string
		}{
			{"text/plain", "text/plain", "", []byte("hello"), 415, 3, "Content-Type"},
			{"no Content-Type", "", "", []byte(`{}`), 415, 3, "Content-Type"},
			{"form", "application/x-www-form-urlencoded", "", []byte("a=b"), 415, 3, "Content-Type"},
			{"an unknown Content-Encoding", "application/x-protobuf", "br", []byte("x"), 415, 3, "Content-Encoding"},
			{"truncated JSON", "application/json", "", []byte(`{"resourceLogs":[{"resource":`), 400, 3, "not a valid OTLP " + message},
			{"protobuf that is not protobuf", "application/x-protobuf", "", []byte("\xff\xff\xff\xff"), 400, 3, "not a valid OTLP " + message},
			{"gzip that is not gzip", "application/json", "gzip", []byte("plain"), 400, 3, "gzip"},
			{"over the body limit", "application/json", "", big, 413, 3, "limit of 4096 bytes"},
			{"over the body limit after gunzip", "application/x-protobuf", "gzip", gzipBytes(t, big), 413, 3, "limit of 4096 bytes"},
		} {
			t.Run(path+" "+tc.name, func(t *testing.T) {
				resp, data := srv.postTo(t, path, tc.contentType, tc.encoding, tc.body, nil)
				if resp.StatusCode != tc.wantStatus {
					t.Fatalf("status: got %d, want %d: %q", resp.StatusCode, tc.wantStatus, data)
				}
				if tc.contentType == "application/x-protobuf" {
					checkProtoStatus(t, resp, data, int32(tc.wantCode), tc.wantMessage)
				} else {
					checkJSONStatus(t, resp, data, tc.wantCode, tc.wantMessage)
				}
			})
		}
		t.Run(path+" GET", func(t *testing.T) {
			resp, err := srv.ts.Client().Get(srv.ts.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Fatalf("status: got %d, want 405: %q", resp.StatusCode, data)
			}
			checkJSONStatus(t, resp, data, 3, "")
		})
	}
	if got := srv.dropped(t); got != (dropped{}) {
		t.Errorf("otlp_dropped after refusals: got %+v, want zeros", got)
	}
}

// TestOTLPLogsAndMetricsToken: the ingest token guards logs and metrics as
// it guards traces; a refusal is an OTLP Status and counts nothing.
func TestOTLPLogsAndMetricsToken(t *testing.T) {
	srv := startOTLPServer(t, ingest.DefaultLimits, "s3cret")
	logsProto, err := fiveLogRecords().MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, contentType, auth string
		body                          []byte
		want                          int
		wantDropped                   dropped
	}{
		{"logs JSON, no token", "/v1/logs", "application/json", "", []byte(logsJSON), 401, dropped{}},
		{"logs protobuf, no token", "/v1/logs", "application/x-protobuf", "", logsProto, 401, dropped{}},
		{"metrics JSON, a wrong token", "/v1/metrics", "application/json", "Bearer nope", []byte(metricsJSON), 401, dropped{}},
		{"metrics JSON, the token", "/v1/metrics", "application/json", "Bearer s3cret", []byte(metricsJSON), 200, dropped{MetricPoints: 3}},
		{"logs protobuf, lower-case bearer", "/v1/logs", "application/x-protobuf", "bearer s3cret", logsProto, 200, dropped{LogRecords: 5, MetricPoints: 3}},
		{"logs JSON, upper-case BEARER", "/v1/logs", "application/json", "BEARER s3cret", []byte(logsJSON), 200, dropped{LogRecords: 7, MetricPoints: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.auth != "" {
				h.Set("Authorization", tc.auth)
			}
			resp, data := srv.postTo(t, tc.path, tc.contentType, "", tc.body, h)
			if resp.StatusCode != tc.want {
				t.Fatalf("status: got %d, want %d: %q", resp.StatusCode, tc.want, data)
			}
			if tc.want == http.StatusUnauthorized {
				if resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("WWW-Authenticate: got none, want a Bearer challenge")
				}
				if tc.contentType == "application/x-protobuf" {
					checkProtoStatus(t, resp, data, 16, "Authorization")
				} else {
					checkJSONStatus(t, resp, data, 16, "Authorization")
				}
			}
			if got := srv.dropped(t); got != tc.wantDropped {
				t.Errorf("otlp_dropped: got %+v, want %+v", got, tc.wantDropped)
			}
		})
	}
}

// TestBearerSchemeIsCaseInsensitive: RFC 7235 makes the auth scheme
// case-insensitive, so every endpoint the token guards takes "bearer" and
// "BEARER" (and extra spaces before the token) as it takes "Bearer".
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	srv := startOTLPServer(t, ingest.DefaultLimits, "s3cret")
	logsProto, err := fiveLogRecords().MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	endpoints := []struct {
		name, method, path, contentType string
		body                            []byte
		want                            int // with the token; 0: whatever "Bearer" gets, as long as it is not 401
	}{
		{"traces", http.MethodPost, "/v1/traces", "application/json", readFixture(t, "agent_run.json"), 200},
		{"logs", http.MethodPost, "/v1/logs", "application/x-protobuf", logsProto, 200},
		{"metrics", http.MethodPost, "/v1/metrics", "application/json", []byte(metricsJSON), 200},
		{"native events", http.MethodPost, "/api/v1/events", "application/json", []byte(`[]`), 0},
		{"sandbox send", http.MethodPost, "/sandbox/mail/v1/send", "application/json", []byte(`{}`), 0},
		{"sandbox faults", http.MethodDelete, "/sandbox/faults", "", nil, 0},
	}
	do := func(t *testing.T, method, path, contentType, auth string, body []byte) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, srv.ts.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := srv.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, data
	}
	for _, ep := range endpoints {
		t.Run(ep.name, func(t *testing.T) {
			want, data := do(t, ep.method, ep.path, ep.contentType, "Bearer s3cret", ep.body)
			if want == http.StatusUnauthorized || (ep.want != 0 && want != ep.want) {
				t.Fatalf("Bearer s3cret: got %d: %q", want, data)
			}
			for _, auth := range []string{"bearer s3cret", "BEARER s3cret", "bEaReR s3cret", "Bearer   s3cret"} {
				if got, data := do(t, ep.method, ep.path, ep.contentType, auth, ep.body); got != want {
					t.Errorf("%q: got %d, want %d as with \"Bearer s3cret\": %q", auth, got, want, data)
				}
			}
			for _, auth := range []string{"", "bearer", "bearer ", "bearers3cret", "Bearer s3cretx", "bearer S3CRET", "Basic s3cret", "s3cret", "Token s3cret"} {
				if got, data := do(t, ep.method, ep.path, ep.contentType, auth, ep.body); got != http.StatusUnauthorized {
					t.Errorf("%q: got %d, want 401: %q", auth, got, data)
				}
			}
		})
	}
}

// TestOTLPFullSuccessLeavesPartialSuccessUnset: OTLP asks a server to
// leave partial_success unset when every span was accepted. The answer is
// then the empty message: {} in JSON, no bytes in protobuf. A partial
// success still sets it, in both encodings.
func TestOTLPFullSuccessLeavesPartialSuccessUnset(t *testing.T) {
	srv := startOTLPServer(t, ingest.DefaultLimits, "")
	for _, tc := range []struct {
		name, contentType, encoding string
		body                        []byte
		want                        string
	}{
		{"JSON", "application/json", "", readFixture(t, "agent_run.json"), "{}"},
		{"JSON again (duplicates only)", "application/json", "", readFixture(t, "agent_run.json"), "{}"},
		{"gzipped JSON", "application/json", "gzip", gzipBytes(t, readFixture(t, "durable_workflow.json")), "{}"},
		{"protobuf", "application/x-protobuf", "", fixtureAsProto(t, "durable_workflow.json"), ""},
		{"gzipped protobuf", "application/x-protobuf", "gzip", gzipBytes(t, fixtureAsProto(t, "agent_run.json")), ""},
		{"empty protobuf", "application/x-protobuf", "", nil, ""},
		{"empty JSON", "application/json", "", []byte(`{}`), "{}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := srv.post(t, tc.contentType, tc.encoding, tc.body, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status: got %d, want 200: %q", resp.StatusCode, data)
			}
			if ct := resp.Header.Get("Content-Type"); ct != tc.contentType {
				t.Errorf("Content-Type: got %q, want %q", ct, tc.contentType)
			}
			if string(data) != tc.want {
				t.Errorf("body: got %q, want %q (partial_success unset)", data, tc.want)
			}
			checkEmptyExportResponse(t, tc.name, "/v1/traces", tc.contentType, data)
		})
	}
	// The control: one unmappable span sets partial_success, in protobuf
	// as in JSON.
	for _, contentType := range []string{"application/json", "application/x-protobuf"} {
		body := readFixture(t, "one_unmappable.json")
		if contentType == "application/x-protobuf" {
			body = fixtureAsProto(t, "one_unmappable.json")
		}
		resp, data := srv.post(t, contentType, "", body, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s one_unmappable: got status %d, want 200: %q", contentType, resp.StatusCode, data)
		}
		answer := ptraceotlp.NewExportResponse()
		if contentType == "application/x-protobuf" {
			err := answer.UnmarshalProto(data)
			if err != nil {
				t.Fatal(err)
			}
		} else if err := answer.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		if answer.PartialSuccess().RejectedSpans() != 1 || !strings.Contains(answer.PartialSuccess().ErrorMessage(), "oncetrace.effect.provider") {
			t.Errorf("%s one_unmappable: got %q, want rejected_spans 1 and a reason", contentType, data)
		}
	}
}

// TestIsOTLPPath: the paths a listener reserved for exporters lets through.
func TestIsOTLPPath(t *testing.T) {
	for path, want := range map[string]bool{
		"/v1/traces": true, "/v1/logs": true, "/v1/metrics": true,
		"/": false, "/healthz": false, "/v1/traces/": false, "/v1/profiles": false, "/api/v1/events": false, "/V1/LOGS": false,
	} {
		if got := web.IsOTLPPath(path); got != want {
			t.Errorf("IsOTLPPath(%q): got %v, want %v", path, got, want)
		}
	}
}
