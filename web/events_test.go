package web_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// TestIngestRejectsBadInput sends malformed and over-limit requests to a
// real server holding a known history, and checks that each is refused with
// the documented status and an error naming the field (and the limit), and
// that nothing stored changed.
func TestIngestRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(db, writer.DefaultConfig)
	// Small limits keep the over-limit bodies small and the test fast.
	lim := ingest.DefaultLimits
	lim.BodyBytes = 64 << 10
	lim.Events = 10
	lim.JSONBytes = 1 << 10
	lim.TextBytes = 4 << 10
	lim.Labels = 3
	const token = "s3cret-ingest-token"
	open := httptest.NewServer(web.New(web.Config{DB: db, Writer: w, Limits: lim, Analysis: trace.DefaultConfig}))
	guarded := httptest.NewServer(web.New(web.Config{DB: db, Writer: w, Limits: lim, Analysis: trace.DefaultConfig, IngestToken: token}))
	t.Cleanup(func() {
		open.Close()
		guarded.Close()
		w.Close()
		db.Close()
	})

	// The README's history: exec_01H8, one step, two attempts, one email.
	history := []string{
		`{"type":"execution","id":"evt_1","execution_id":"exec_01H8","name":"billing-agent","status":"running","started_at":"2026-06-30T14:02:11.120Z","idempotency_key":"run_7f3a","labels":{"customer":"acme"}}`,
		`{"type":"attempt","id":"evt_2","execution_id":"exec_01H8","step_id":"step-4","attempt":1,"tool":"send_invoice_email","effect":"write","provider":"mail-api","args":{"to":"jordan@acme.dev","subject":"Your June invoice"},"idempotency_key":"ik_a94a0b1d","worker":"pid-4121","started_at":"2026-06-30T14:02:11.200Z","ended_at":"2026-06-30T14:02:21.200Z","outcome":"timeout","error":"network timeout after 10s"}`,
		`{"type":"attempt","execution_id":"exec_01H8","step_id":"step-4","attempt":2,"tool":"send_invoice_email","effect":"write","idempotency_key":"ik_a94a0b1d","started_at":"2026-06-30T14:02:21.300Z","ended_at":"2026-06-30T14:02:21.410Z","outcome":"ok","deduplicated":true,"result":{"status":"sent","message_id":"msg_41bcc7"}}`,
		`{"type":"effect","provider":"mail-api","effect_id":"msg_41bcc7","idempotency_key":"ik_a94a0b1d","execution_id":"exec_01H8","step_id":"step-4","target":"jordan@acme.dev","at":"2026-06-30T14:02:11.350Z"}`,
		`{"type":"execution","execution_id":"exec_01H8","status":"completed","ended_at":"2026-06-30T14:03:04.000Z"}`,
	}

	get := func(t *testing.T, path string) []byte {
		t.Helper()
		resp, err := http.Get(open.URL + path)
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
	const originalPath = "/api/v1/executions/exec_01H8"
	paths := []string{"/api/v1/executions", originalPath, "/api/v1/effects", "/api/v1/findings"}
	// snapshot is every read the API offers on the history, plus the raw
	// event log as db.ExportEvents gives it.
	type snapshot struct {
		reads  map[string][]byte
		events []string
	}
	snap := func(t *testing.T) snapshot {
		t.Helper()
		s := snapshot{reads: map[string][]byte{}}
		for _, p := range paths {
			s.reads[p] = get(t, p)
		}
		err := db.ExportEvents(ctx, func(seq int64, body []byte) error {
			s.events = append(s.events, fmt.Sprintf("%d %s", seq, body))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sameReads := func(t *testing.T, got, want snapshot, only ...string) {
		t.Helper()
		for _, p := range paths {
			if len(only) > 0 && !slices.Contains(only, p) {
				continue
			}
			if !bytes.Equal(got.reads[p], want.reads[p]) {
				t.Errorf("GET %s changed:\ngot  %s\nwant %s", p, got.reads[p], want.reads[p])
			}
		}
	}

	resp, err := http.Post(open.URL+"/api/v1/events", "application/x-ndjson", strings.NewReader(strings.Join(history, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `{"accepted":5,"duplicates":0,"rejected":[]}`; resp.StatusCode != http.StatusOK || strings.TrimSpace(string(data)) != want {
		t.Fatalf("posting the history: got %d %s, want 200 %s", resp.StatusCode, data, want)
	}
	baseline := snap(t)
	if len(baseline.events) != len(history) {
		t.Fatalf("exported events: got %d, want %d", len(baseline.events), len(history))
	}
	// Reading twice must give the same bytes, or the comparisons below
	// would prove nothing.
	sameReads(t, snap(t), baseline)

	// Builders for event bodies; each bad event names an execution that is
	// not stored, so that storing it by mistake would show.
	attempt := func(fields string) string {
		if !strings.Contains(fields, `"attempt":`) { // a key twice is an error of its own
			fields = `,"attempt":1` + fields
		}
		return `{"type":"attempt","execution_id":"exec_bad","step_id":"step-1"` + fields + `}`
	}
	execution := func(fields string) string {
		return `{"type":"execution","execution_id":"exec_bad"` + fields + `}`
	}
	effect := func(fields string) string {
		return `{"type":"effect","provider":"mail-api","effect_id":"msg_bad"` + fields + `}`
	}
	many := func(n int, sep string) string {
		evs := make([]string, n)
		for i := range evs {
			evs[i] = fmt.Sprintf(`{"type":"execution","execution_id":"exec_many_%d"}`, i)
		}
		return strings.Join(evs, sep)
	}
	gz := func(s string) string {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write([]byte(s))
		zw.Close()
		return buf.String()
	}
	longID := strings.Repeat("x", 257)
	bigArgs := `{"blob":"` + strings.Repeat("a", 1100) + `"}`
	good := func(exec string, n int) string {
		return fmt.Sprintf(`{"type":"attempt","execution_id":%q,"step_id":"step-%d","attempt":1,"tool":"lookup","effect":"read","idempotency_key":"ik_%s_%d","started_at":"2026-07-01T10:00:00Z","ended_at":"2026-07-01T10:00:01Z","outcome":"ok"}`, exec, n, exec, n)
	}

	const (
		ndjson = "application/x-ndjson"
		jsonCT = "application/json"
	)
	type badInput struct {
		name        string
		guarded     bool              // sent to the server that requires the token
		header      map[string]string // besides Content-Type; none means http.Post
		contentType string
		body        string
		status      int
		// errs are fragments of the "error" of a 4xx, and of the rejection
		// at rejected[0] when the response has rejections.
		errs     []string
		rejected []int
		// storesIn names the execution whose good events the request
		// stores (stores of them); "" means nothing may change.
		storesIn string
		stores   int
	}
	cases := []badInput{
		// The body as a whole: 400, nothing stored.
		{name: "bad JSON", contentType: jsonCT, body: `{"type": execution}`, status: 400, errs: []string{"body: invalid JSON"}},
		{name: "truncated JSON", contentType: jsonCT, body: history[1][:120], status: 400, errs: []string{"body: invalid JSON"}},
		{name: "truncated envelope", contentType: jsonCT, body: `{"events":[` + execution(``) + `,`, status: 400, errs: []string{"body: invalid JSON"}},
		{name: "trailing comma", contentType: jsonCT, body: `[` + execution(``) + `,]`, status: 400, errs: []string{"body: invalid JSON"}},
		{name: "two objects as JSON", contentType: jsonCT, body: execution(``) + "\n" + execution(`,"name":"n"`), status: 400, errs: []string{"body: invalid JSON"}},
		{name: "body is a JSON string", contentType: jsonCT, body: `"execution"`, status: 400, errs: []string{"body:", "JSON object"}},
		{name: "body is a JSON number", contentType: jsonCT, body: `42`, status: 400, errs: []string{"body:", "JSON object"}},
		{name: "body is null", contentType: jsonCT, body: `null`, status: 400, errs: []string{"body:"}},
		{name: "empty body", contentType: jsonCT, body: ``, status: 400, errs: []string{"body:", "empty"}},
		{name: "empty body without Content-Type", body: ``, status: 415, errs: []string{"Content-Type:", "required"}},
		{name: "event without Content-Type", body: execution(``), status: 415, errs: []string{"Content-Type:", "required", "application/json"}},
		{name: "empty NDJSON", contentType: ndjson, body: "\n \n\r\n", status: 400, errs: []string{"body:", "no events"}},
		{name: "events is a number", contentType: jsonCT, body: `{"events": 5}`, status: 400, errs: []string{"events:", "array"}},
		{name: "events is an object", contentType: jsonCT, body: `{"events": {"type":"execution"}}`, status: 400, errs: []string{"events:", "array"}},
		{name: "events is empty", contentType: jsonCT, body: `{"events": []}`, status: 400, errs: []string{"events:", "empty"}},
		{name: "empty array", contentType: jsonCT, body: `[]`, status: 400, errs: []string{"events:", "empty"}},
		{name: "bad gzip", header: map[string]string{"Content-Encoding": "gzip"}, contentType: jsonCT, body: execution(``),
			status: 400, errs: []string{"body:", "gzip"}},
		{name: "truncated gzip", header: map[string]string{"Content-Encoding": "gzip"}, contentType: jsonCT, body: gz(execution(``))[:20],
			status: 400, errs: []string{"body:", "gzip"}},

		// Limits of the request: 413, nothing stored.
		{name: "oversize body", contentType: jsonCT, body: execution(`,"name":"` + strings.Repeat("n", 70<<10) + `"`),
			status: 413, errs: []string{"body:", "65536"}},
		{name: "oversize body after gunzip", header: map[string]string{"Content-Encoding": "gzip"}, contentType: jsonCT,
			body: gz(execution(`,"name":"` + strings.Repeat("n", 1<<20) + `"`)), status: 413, errs: []string{"body:", "65536"}},
		{name: "too many events in an array", contentType: jsonCT, body: `[` + many(11, ",") + `]`, status: 413, errs: []string{"events:", "10"}},
		{name: "too many events in an envelope", contentType: jsonCT, body: `{"events":[` + many(11, ",") + `]}`, status: 413, errs: []string{"events:", "10"}},
		{name: "too many NDJSON lines", contentType: ndjson, body: many(11, "\n"), status: 413, errs: []string{"events:", "10"}},

		// Headers: 415 and 401, nothing stored.
		{name: "Content-Encoding br", header: map[string]string{"Content-Encoding": "br"}, contentType: jsonCT, body: execution(``),
			status: 415, errs: []string{"Content-Encoding:", "br"}},
		{name: "Content-Encoding deflate", header: map[string]string{"Content-Encoding": "deflate"}, contentType: jsonCT, body: execution(``),
			status: 415, errs: []string{"Content-Encoding:", "deflate"}},
		{name: "Content-Type text/plain", contentType: "text/plain", body: execution(``), status: 415, errs: []string{"Content-Type:", "text/plain"}},
		{name: "Content-Type form", contentType: "application/x-www-form-urlencoded", body: execution(``),
			status: 415, errs: []string{"Content-Type:", "application/x-www-form-urlencoded"}},
		{name: "Content-Type unparseable", contentType: "application/json; =", body: execution(``), status: 415, errs: []string{"Content-Type:"}},
		{name: "missing token", guarded: true, contentType: jsonCT, body: execution(``), status: 401, errs: []string{"Authorization:"}},
		{name: "wrong token", guarded: true, header: map[string]string{"Authorization": "Bearer " + token + "x"}, contentType: jsonCT,
			body: execution(``), status: 401, errs: []string{"Authorization:"}},
		{name: "token without Bearer", guarded: true, header: map[string]string{"Authorization": token}, contentType: jsonCT,
			body: execution(``), status: 401, errs: []string{"Authorization:"}},
		{name: "Basic instead of Bearer", guarded: true, header: map[string]string{"Authorization": "Basic " + token}, contentType: jsonCT,
			body: execution(``), status: 401, errs: []string{"Authorization:"}},
		// The control: the right token gets through (a known event, so a
		// duplicate that changes nothing).
		{name: "right token", guarded: true, header: map[string]string{"Authorization": "Bearer " + token}, contentType: jsonCT,
			body: history[0], status: 200},

		// Every event rejected by index: 400 with the rejections, nothing
		// accepted (a 2xx would read as success).
		{name: "attempt as a string", body: attempt(`,"attempt":"1"`), status: 400, rejected: []int{0}, errs: []string{"attempt:", "integer"}},
		{name: "attempt 0", body: attempt(`,"attempt":0`), status: 400, rejected: []int{0}, errs: []string{"attempt:", "≥ 1"}},
		{name: "attempt -1", body: attempt(`,"attempt":-1`), status: 400, rejected: []int{0}, errs: []string{"attempt:", "≥ 1"}},
		{name: "attempt 1.5", body: attempt(`,"attempt":1.5`), status: 400, rejected: []int{0}, errs: []string{"attempt:", "integer"}},
		{name: "attempt over the limit", body: attempt(`,"attempt":1000001`), status: 400, rejected: []int{0}, errs: []string{"attempt:", "1000000"}},
		{name: "deduplicated as a string", body: attempt(`,"deduplicated":"true"`), status: 400, rejected: []int{0}, errs: []string{"deduplicated:"}},
		{name: "labels as an array", body: execution(`,"labels":["customer","acme"]`), status: 400, rejected: []int{0}, errs: []string{"labels:", "object"}},
		{name: "label value not a string", body: execution(`,"labels":{"n":1}`), status: 400, rejected: []int{0}, errs: []string{"labels.n:"}},
		{name: "started_at as a bool", body: execution(`,"started_at":true`), status: 400, rejected: []int{0}, errs: []string{"started_at:"}},
		{name: "unknown type", body: `{"type":"trace","execution_id":"exec_bad"}`, status: 400, rejected: []int{0}, errs: []string{"type:", `"trace"`}},
		{name: "span without its trace", body: `{"type":"span","execution_id":"exec_bad"}`, status: 400, rejected: []int{0}, errs: []string{"trace_id:", "required"}},
		{name: "missing type", body: `{"execution_id":"exec_bad"}`, status: 400, rejected: []int{0}, errs: []string{"type:", "required"}},
		{name: "type as a number", body: `{"type":1,"execution_id":"exec_bad"}`, status: 400, rejected: []int{0}, errs: []string{"type:"}},
		{name: "unknown field", body: execution(`,"colour":"red"`), status: 400, rejected: []int{0}, errs: []string{"colour:", "unknown field"}},
		{name: "missing execution_id", body: `{"type":"attempt","step_id":"step-1","attempt":1}`, status: 400, rejected: []int{0},
			errs: []string{"execution_id:", "required"}},
		{name: "missing step_id", body: `{"type":"attempt","execution_id":"exec_bad","attempt":1}`, status: 400, rejected: []int{0},
			errs: []string{"step_id:", "required"}},
		{name: "missing attempt", body: `{"type":"attempt","execution_id":"exec_bad","step_id":"step-1"}`, status: 400, rejected: []int{0},
			errs: []string{"attempt:", "required"}},
		{name: "missing provider", body: `{"type":"effect","effect_id":"msg_bad","execution_id":"exec_bad"}`, status: 400, rejected: []int{0},
			errs: []string{"provider:", "required"}},
		{name: "missing effect_id", body: `{"type":"effect","provider":"mail-api","execution_id":"exec_bad"}`, status: 400, rejected: []int{0},
			errs: []string{"effect_id:", "required"}},
		{name: "execution_id null", body: `{"type":"execution","execution_id":null}`, status: 400, rejected: []int{0},
			errs: []string{"execution_id:", "required"}},
		{name: "empty execution_id", body: `{"type":"execution","execution_id":""}`, status: 400, rejected: []int{0},
			errs: []string{"execution_id:", "256"}},
		{name: "empty step_id", body: `{"type":"attempt","execution_id":"exec_bad","step_id":"","attempt":1}`, status: 400, rejected: []int{0},
			errs: []string{"step_id:", "256"}},
		{name: "empty effect_id", body: `{"type":"effect","provider":"mail-api","effect_id":""}`, status: 400, rejected: []int{0},
			errs: []string{"effect_id:", "256"}},
		{name: "execution_id over the id limit", body: `{"type":"execution","execution_id":"` + longID + `"}`, status: 400, rejected: []int{0},
			errs: []string{"execution_id:", "256"}},
		{name: "provider over the id limit", body: `{"type":"effect","provider":"` + longID + `","effect_id":"msg_bad"}`, status: 400, rejected: []int{0},
			errs: []string{"provider:", "256"}},
		{name: "event id over the id limit", body: execution(`,"id":"` + longID + `"`), status: 400, rejected: []int{0}, errs: []string{"id:", "256"}},
		{name: "non-printable execution_id", body: `{"type":"execution","execution_id":"exec\u0007bad"}`, status: 400, rejected: []int{0},
			errs: []string{"execution_id:", "printable"}},
		{name: "non-printable idempotency_key", body: attempt(`,"idempotency_key":"ik\nbad"`), status: 400, rejected: []int{0},
			errs: []string{"idempotency_key:", "printable"}},
		{name: "oversize args", body: attempt(`,"args":` + bigArgs), status: 400, rejected: []int{0}, errs: []string{"args:", "1024"}},
		{name: "oversize result", body: attempt(`,"result":` + bigArgs), status: 400, rejected: []int{0}, errs: []string{"result:", "1024"}},
		{name: "oversize name", body: execution(`,"name":"` + strings.Repeat("n", 5000) + `"`), status: 400, rejected: []int{0},
			errs: []string{"name:", "4096"}},
		{name: "too many labels", body: execution(`,"labels":{"a":"1","b":"2","c":"3","d":"4"}`), status: 400, rejected: []int{0},
			errs: []string{"labels:", "limit 3"}},
		{name: "oversize label value", body: execution(`,"labels":{"a":"` + strings.Repeat("v", 1025) + `"}`), status: 400, rejected: []int{0},
			errs: []string{"labels.a:", "1024"}},
		{name: "bad time", body: execution(`,"started_at":"yesterday"`), status: 400, rejected: []int{0}, errs: []string{"started_at:", "RFC 3339"}},
		{name: "time without zone", body: execution(`,"started_at":"2026-06-30T14:02:11"`), status: 400, rejected: []int{0},
			errs: []string{"started_at:", "RFC 3339"}},
		{name: "time before 1970", body: effect(`,"at":-1`), status: 400, rejected: []int{0}, errs: []string{"at:", "1970"}},
		{name: "time after 2262", body: effect(`,"at":"2262-01-01T00:00:00Z"`), status: 400, rejected: []int{0}, errs: []string{"at:", "2262"}},
		{name: "ended_at before started_at", body: execution(`,"started_at":"2026-06-30T14:02:11Z","ended_at":"2026-06-30T14:02:10Z"`),
			status: 400, rejected: []int{0}, errs: []string{"ended_at:", "before started_at"}},
		{name: "attempt ended_at before started_at", body: attempt(`,"started_at":1782828131000,"ended_at":1782828130999,"outcome":"ok"`),
			status: 400, rejected: []int{0}, errs: []string{"ended_at:", "before started_at"}},
		{name: "ended_at without outcome", body: attempt(`,"ended_at":"2026-06-30T14:02:10Z"`), status: 400, rejected: []int{0},
			errs: []string{"outcome:", "required"}},
		{name: "outcome running", body: attempt(`,"outcome":"running"`), status: 400, rejected: []int{0}, errs: []string{"outcome:", `"running"`}},
		{name: "outcome lost", body: attempt(`,"outcome":"lost"`), status: 400, rejected: []int{0}, errs: []string{"outcome:", `"lost"`}},
		{name: "effect class", body: attempt(`,"effect":"delete"`), status: 400, rejected: []int{0}, errs: []string{"effect:", `"delete"`}},
		{name: "status done", body: execution(`,"status":"done"`), status: 400, rejected: []int{0}, errs: []string{"status:", `"done"`}},
		{name: "non-UTF-8 bytes", body: execution(`,"name":"bad ` + "\xff\xfe" + `"`), status: 400, rejected: []int{0}, errs: []string{"event:", "UTF-8"}},
		{name: "non-UTF-8 bytes in NDJSON", contentType: ndjson, body: attempt(`,"tool":"` + "\xc3\x28" + `"`), status: 400, rejected: []int{0},
			errs: []string{"event:", "UTF-8"}},
		{name: "data after the event", contentType: ndjson, body: execution(``) + ` {}`, status: 400, rejected: []int{0}, errs: []string{"event:", "invalid JSON"}},
		{name: "every event of an array bad", contentType: jsonCT, body: `[5,"x",null,` + execution(`,"status":"done"`) + `]`,
			status: 400, rejected: []int{0, 1, 2, 3}, errs: []string{"event:", "JSON object"}},

		// Bad events among good ones: the good ones are stored.
		{name: "NDJSON with one bad line", contentType: ndjson,
			body:   good("exec_ndjson", 1) + "\n" + attempt(`,"attempt":0`) + "\n" + good("exec_ndjson", 2) + "\n",
			status: 207, rejected: []int{1}, errs: []string{"attempt:", "≥ 1"}, storesIn: "exec_ndjson", stores: 2},
		{name: "array with one bad event", contentType: jsonCT,
			body:   `[` + attempt(`,"outcome":"running"`) + `,` + good("exec_array", 1) + `]`,
			status: 207, rejected: []int{0}, errs: []string{"outcome:"}, storesIn: "exec_array", stores: 1},
		{name: "envelope with one bad event", contentType: jsonCT,
			body:   `{"events":[` + good("exec_envelope", 1) + `,` + attempt(`,"args":`+bigArgs) + `]}`,
			status: 207, rejected: []int{1}, errs: []string{"args:", "1024"}, storesIn: "exec_envelope", stores: 1},
	}

	for _, tc := range cases {
		// A case without a Content-Type sends JSON, unless it is about
		// the header's absence (a body without one is refused).
		if tc.contentType == "" && tc.status != http.StatusUnsupportedMediaType {
			tc.contentType = jsonCT
		}
		t.Run(tc.name, func(t *testing.T) {
			srv := open
			if tc.guarded {
				srv = guarded
			}
			var resp *http.Response
			var err error
			if len(tc.header) == 0 {
				resp, err = http.Post(srv.URL+"/api/v1/events", tc.contentType, strings.NewReader(tc.body))
			} else {
				req, rerr := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/events", strings.NewReader(tc.body))
				if rerr != nil {
					t.Fatal(rerr)
				}
				req.Header.Set("Content-Type", tc.contentType)
				for k, v := range tc.header {
					req.Header.Set(k, v)
				}
				resp, err = http.DefaultClient.Do(req)
			}
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Errorf("status: got %d, want %d (body %s)", resp.StatusCode, tc.status, data)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type: got %q, want application/json", ct)
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(data, &obj); err != nil {
				t.Fatalf("response: got %s, want a JSON object (%v)", data, err)
			}

			switch {
			case tc.status >= 400 && tc.rejected == nil:
				var msg string
				if len(obj) != 1 || json.Unmarshal(obj["error"], &msg) != nil || msg == "" {
					t.Fatalf("response: got %s, want {\"error\": \"...\"} alone", data)
				}
				for _, frag := range tc.errs {
					if !strings.Contains(msg, frag) {
						t.Errorf("error: got %q, want it to contain %q", msg, frag)
					}
				}
				if tc.status == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("WWW-Authenticate: got none, want a Bearer challenge")
				}
			default:
				if tc.status == http.StatusBadRequest {
					// All rejected: the error every error has, beside the rejections.
					var msg string
					if json.Unmarshal(obj["error"], &msg) != nil || !strings.Contains(msg, "nothing was stored") {
						t.Errorf("error: got %s, want one saying nothing was stored", obj["error"])
					}
				}
				var res struct {
					Accepted   *int                         `json:"accepted"`
					Duplicates *int                         `json:"duplicates"`
					Rejected   []map[string]json.RawMessage `json:"rejected"`
				}
				if err := json.Unmarshal(data, &res); err != nil || res.Accepted == nil || res.Duplicates == nil || obj["rejected"] == nil {
					t.Fatalf("response: got %s, want accepted, duplicates and rejected", data)
				}
				wantAccepted, wantDuplicates := tc.stores, 0
				if tc.status == http.StatusOK {
					wantDuplicates = 1 // the control re-sends a known event
				}
				if *res.Accepted != wantAccepted || *res.Duplicates != wantDuplicates {
					t.Errorf("accepted, duplicates: got %d, %d, want %d, %d", *res.Accepted, *res.Duplicates, wantAccepted, wantDuplicates)
				}
				var gotIdx []int
				for i, r := range res.Rejected {
					var idx int
					var msg string
					if len(r) != 2 || json.Unmarshal(r["index"], &idx) != nil || json.Unmarshal(r["error"], &msg) != nil || msg == "" {
						t.Fatalf("rejected[%d]: got %v, want {\"index\": i, \"error\": \"...\"}", i, r)
					}
					gotIdx = append(gotIdx, idx)
					for _, frag := range tc.errs {
						if i == 0 && !strings.Contains(msg, frag) {
							t.Errorf("rejected[0].error: got %q, want it to contain %q", msg, frag)
						}
					}
				}
				if !slices.Equal(gotIdx, tc.rejected) {
					t.Errorf("rejected indexes: got %v, want %v (body %s)", gotIdx, tc.rejected, data)
				}
			}

			after := snap(t)
			// Later cases compare with what is stored now, so that one
			// failure is reported once rather than by every case after it.
			defer func() { baseline = after }()
			if tc.storesIn == "" {
				sameReads(t, after, baseline)
				if !slices.Equal(after.events, baseline.events) {
					t.Errorf("event log: got %d events, want the %d stored before, unchanged", len(after.events), len(baseline.events))
				}
				return
			}
			// The good events are stored, in their own execution; the
			// original one reads as before.
			sameReads(t, after, baseline, originalPath)
			if got, want := len(after.events), len(baseline.events)+tc.stores; got != want {
				t.Errorf("event log: got %d events, want %d", got, want)
			}
			if !slices.Equal(after.events[:min(len(after.events), len(baseline.events))], baseline.events) {
				t.Errorf("event log: the events stored before changed")
			}
			var shown struct {
				Execution struct {
					ID string `json:"execution_id"`
				} `json:"execution"`
				Steps []struct {
					StepID string `json:"step_id"`
				} `json:"steps"`
			}
			if err := json.Unmarshal(get(t, "/api/v1/executions/"+tc.storesIn), &shown); err != nil {
				t.Fatal(err)
			}
			if shown.Execution.ID != tc.storesIn || len(shown.Steps) != tc.stores {
				t.Errorf("GET %s: got execution %q with %d steps, want %q with %d", tc.storesIn, shown.Execution.ID, len(shown.Steps), tc.storesIn, tc.stores)
			}
		})
	}
	if len(cases) < 25 {
		t.Errorf("cases: got %d, want at least 25", len(cases))
	}
}
