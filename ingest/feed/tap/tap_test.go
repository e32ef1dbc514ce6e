package tap_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/ingest/feed/tap"
	"github.com/oncetrace/oncetrace/trace"
)

func post(t *testing.T, client *http.Client, url, contentType, body string, header map[string]string) (*http.Response, []byte, error) {
	t.Helper()
	return do(t, client, "POST", url, contentType, body, header)
}

func do(t *testing.T, client *http.Client, method, url, contentType, body string, header map[string]string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// TestTapRecordsTheEffect checks each field of the recorded effect.
func TestTapRecordsTheEffect(t *testing.T) {
	up := &echoUpstream{}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	client := rawClient(10 * time.Second)

	tests := []struct {
		name        string
		change      func(*tap.Config)
		method      string
		path        string
		contentType string
		body        string
		header      map[string]string
		want        trace.Effect // ID "req_" means any request hash
	}{
		{name: "the response's id, the key, the target, the trace context and the oncetrace headers",
			method: "POST", path: "/v1/charges", contentType: "application/json", body: `{"to":"jordan@acme.dev","amount":1}`,
			header: map[string]string{"Idempotency-Key": "ik_a94a0b1d", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				sandbox.HeaderExecution: "exec_1", sandbox.HeaderStep: "step-4"},
			want: trace.Effect{Provider: "test-api", ID: "ch_", IdempotencyKey: "ik_a94a0b1d", Target: "jordan@acme.dev",
				ExecutionID: "exec_1", StepID: "step-4", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"}},
		{name: "another key header, a nested target, a form body",
			change: func(c *tap.Config) {
				c.KeyHeaders = []string{"Idempotency-Key", "X-Idempotency-Key"}
				c.TargetField = "metadata[order]"
			},
			method: "POST", path: "/v1/charges", contentType: "application/x-www-form-urlencoded", body: "amount=1&metadata[order]=ord_7",
			header: map[string]string{"X-Idempotency-Key": "xk_1"},
			want:   trace.Effect{Provider: "test-api", ID: "ch_", IdempotencyKey: "xk_1", Target: "ord_7"}},
		{name: "a dotted path with array indexes",
			change: func(c *tap.Config) { c.TargetField = "personalizations.0.to.1.email" },
			method: "POST", path: "/v1/charges", contentType: "application/json",
			body: `{"personalizations":[{"to":[{"email":"a@x"},{"email":"b@x"}]}]}`,
			want: trace.Effect{Provider: "test-api", ID: "ch_", Target: "b@x"}},
		{name: "a step without an execution is left out", method: "POST", path: "/v1/charges", body: `{}`,
			header: map[string]string{sandbox.HeaderStep: "step-4"},
			want:   trace.Effect{Provider: "test-api", ID: "ch_"}},
		{name: "an answer without the id field: a hash of the request", method: "POST", path: "/v1/stream", body: `{"to":"x@y"}`,
			contentType: "application/json", want: trace.Effect{Provider: "test-api", ID: "req_", Target: "x@y"}},
		{name: "an id from a response header, before the body's", change: func(c *tap.Config) { c.EffectIDHeaders = []string{"X-None", "X-Request-Id"} },
			method: "POST", path: "/v1/charges", body: `{}`, want: trace.Effect{Provider: "test-api", ID: "rq_"}},
		{name: "another id field", change: func(c *tap.Config) { c.EffectIDField = "object" },
			method: "POST", path: "/v1/charges", body: `{}`, want: trace.Effect{Provider: "test-api", ID: "charge"}},
		{name: "a gzip answer is read", method: "POST", path: "/v1/gzip", body: `{}`, header: map[string]string{"Accept-Encoding": "gzip"},
			want: trace.Effect{Provider: "test-api", ID: "gz_1"}},
		{name: "bodies past the peek limit: no field is read", change: func(c *tap.Config) { c.MaxPeekBytes = 1024 },
			method: "POST", path: "/v1/big", contentType: "application/json", body: `{"to":"x@y","pad":"` + strings.Repeat("p", 2000) + `"}`,
			want: trace.Effect{Provider: "test-api", ID: "req_"}},
		{name: "PATCH is unsafe", method: "PATCH", path: "/v1/charges", body: `{}`, want: trace.Effect{Provider: "test-api", ID: "ch_"}},
		{name: "a DELETE answered 204", method: "DELETE", path: "/v1/empty", want: trace.Effect{Provider: "test-api", ID: "req_"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &memRecorder{}
			tp, tapURL := startTap(t, upstream.URL, rec, tt.change)
			resp, _, err := do(t, client, tt.method, tapURL+tt.path, tt.contentType, tt.body, tt.header)
			if err != nil || resp.StatusCode/100 != 2 {
				t.Fatalf("request: got %v %v, want 2xx", resp, err)
			}
			got := rec.waitEffects(t, 1)
			if len(got) != 1 {
				t.Fatalf("effects: got %d, want 1", len(got))
			}
			e := got[0]
			if !strings.HasPrefix(e.ID, tt.want.ID) || (tt.want.ID == "req_" && len(e.ID) != 36) {
				t.Errorf("effect id: got %q, want it to start with %q", e.ID, tt.want.ID)
			}
			if e.At.IsZero() || time.Since(e.At) > time.Minute {
				t.Errorf("at: got %v, want the time the upstream answered", e.At)
			}
			e.ID, e.At = tt.want.ID, time.Time{}
			if e.Provider != tt.want.Provider || e.IdempotencyKey != tt.want.IdempotencyKey || e.Target != tt.want.Target ||
				e.ExecutionID != tt.want.ExecutionID || e.StepID != tt.want.StepID || e.TraceID != tt.want.TraceID || e.SpanID != tt.want.SpanID {
				t.Errorf("effect: got %+v, want %+v", e, tt.want)
			}
			st := tp.Status()
			if len(st.Log) != 1 || st.Log[0].Status != resp.StatusCode || st.Log[0].Record != "recorded" || st.Log[0].LatencyMS <= 0 {
				t.Errorf("tap log: got %+v, want one recorded line with the upstream's status and latency", st.Log)
			}
		})
	}
}

// TestTapRecordsOnlyAcknowledgedUnsafeRequests: reads, refusals and
// failures are no effects.
func TestTapRecordsOnlyAcknowledgedUnsafeRequests(t *testing.T) {
	upstream := httptest.NewServer(&echoUpstream{})
	defer upstream.Close()
	rec := &memRecorder{}
	tp, tapURL := startTap(t, upstream.URL, rec, func(c *tap.Config) { c.UnsafeMethods = []string{"POST"} })
	client := rawClient(10 * time.Second)
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/charges/ch_1"}, {"POST", "/v1/declined"}, {"POST", "/v1/moved"}, {"PUT", "/v1/charges"}, {"POST", "/v1/nothing"},
	} {
		if _, _, err := do(t, client, r.method, tapURL+r.path, "", "{}", nil); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if got := rec.all(); len(got) != 0 {
		t.Errorf("effects: got %+v, want none", got)
	}
	if st := tp.Status(); st.Proxied != 5 || st.Effects != 0 {
		t.Errorf("status: got proxied %d, effects %d; want 5 and 0", st.Proxied, st.Effects)
	}
}

// TestTapEffectIdentityOfRepeats: without an id in the answer, a PUT or
// DELETE sent again is the same effect, and a POST or PATCH the API
// answered afresh is another effect, key or no key: an API that ignores
// keys sends twice.
func TestTapEffectIdentityOfRepeats(t *testing.T) {
	upstream := httptest.NewServer(&echoUpstream{})
	defer upstream.Close()
	rec := &memRecorder{}
	_, tapURL := startTap(t, upstream.URL, rec, func(c *tap.Config) { c.EffectIDField = "no_such_field" })
	client := rawClient(10 * time.Second)
	tests := []struct {
		name   string
		method string
		key    string
		same   bool
	}{
		{"POST with a key", "POST", "ik_1", false},
		{"POST without a key", "POST", "", false},
		{"PATCH with a key", "PATCH", "ik_2", false},
		{"PUT without a key", "PUT", "", true},
		{"DELETE without a key", "DELETE", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(rec.all())
			for range 2 {
				if _, _, err := do(t, client, tt.method, tapURL+"/v1/charges", "application/json", `{"a":1}`, map[string]string{"Idempotency-Key": tt.key}); err != nil {
					t.Fatal(err)
				}
			}
			es := rec.waitEffects(t, before+2)[before:]
			if same := es[0].ID == es[1].ID; same != tt.same {
				t.Errorf("ids %q and %q: got same %v, want %v", es[0].ID, es[1].ID, same, tt.same)
			}
		})
	}
}

// countingUpstream answers 200 with an id and counts what reached it.
type countingUpstream struct {
	hits     atomic.Int64
	sawFault atomic.Bool
	replay   bool
	noID     bool // answer {"ok":true}, with the id only in X-Msg
}

func (u *countingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.hits.Add(1)
	if r.Header.Get(sandbox.HeaderFault) != "" {
		u.sawFault.Store(true)
	}
	io.Copy(io.Discard, r.Body)
	if u.replay {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Content-Type", "application/json")
	if u.noID {
		w.Header().Set("X-Msg", fmt.Sprintf("msg_%d", u.hits.Load()))
		io.WriteString(w, `{"ok":true}`)
		return
	}
	io.WriteString(w, `{"id":"msg_1"}`)
}

// TestTapRecordsNoEffectForAReplayWithoutABodyID: an answer marked
// Idempotent-Replayed whose body names no id is passed on and recorded as
// nothing: an id from a header or a hash would name a second effect.
func TestTapRecordsNoEffectForAReplayWithoutABodyID(t *testing.T) {
	for _, headers := range [][]string{nil, {"X-Msg"}} {
		upstream := httptest.NewServer(&countingUpstream{replay: true, noID: true})
		rec := &memRecorder{}
		tp, tapURL := startTap(t, upstream.URL, rec, func(c *tap.Config) { c.EffectIDHeaders = headers })
		resp, body, err := post(t, rawClient(10*time.Second), tapURL+"/v1/send", "application/json", `{}`, map[string]string{"Idempotency-Key": "k"})
		upstream.Close()
		if err != nil || resp.StatusCode != 200 || string(body) != `{"ok":true}` || resp.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay through the tap: got %v %s %v, want it passed on", resp, body, err)
		}
		time.Sleep(20 * time.Millisecond)
		if got := rec.all(); len(got) != 0 {
			t.Errorf("id headers %v: effects of a replay: got %+v, want none", headers, got)
		}
		if st := tp.Status(); len(st.Log) != 1 || !strings.Contains(st.Log[0].Error, "no new effect") {
			t.Errorf("id headers %v: log: got %+v, want the replay noted", headers, st.Log)
		}
	}
}

func TestTapFaults(t *testing.T) {
	tests := []struct {
		name       string
		header     string  // X-Oncetrace-Fault
		standing   string  // standing faults
		rand       float64 // what Rand returns
		replay     bool    // the upstream answers as a replay
		timeout    time.Duration
		wantStatus int      // 0: the client times out
		wantHits   int64    // requests that reached the upstream
		wantIDs    []string // effects recorded
		minElapsed time.Duration
	}{
		{name: "fail-before never reaches the upstream", header: "fail-before", wantStatus: 503, wantHits: 0},
		{name: "lose-response reaches it, records, and the client times out", header: "lose-response",
			timeout: 300 * time.Millisecond, wantStatus: 0, wantHits: 1, wantIDs: []string{"msg_1"}},
		{name: "lose-response;mode=504 answers 504 at once", header: "lose-response;mode=504", wantStatus: 504, wantHits: 1, wantIDs: []string{"msg_1"}},
		{name: "a replay is never lost", header: "lose-response", replay: true, wantStatus: 200, wantHits: 1, wantIDs: []string{"msg_1"}},
		{name: "latency delays the request", header: "latency=200ms", wantStatus: 200, wantHits: 1, wantIDs: []string{"msg_1"},
			minElapsed: 200 * time.Millisecond},
		{name: "a standing fault strikes by its rate", standing: "fail-before=0.5", rand: 0.3, wantStatus: 503, wantHits: 0},
		{name: "a standing fault spares by its rate", standing: "fail-before=0.5", rand: 0.7, wantStatus: 200, wantHits: 1, wantIDs: []string{"msg_1"}},
		{name: "a header replaces the standing faults", standing: "fail-before", header: ",", wantStatus: 200, wantHits: 1, wantIDs: []string{"msg_1"}},
		{name: "a bad header is refused and not forwarded", header: "explode", wantStatus: 400, wantHits: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := &countingUpstream{replay: tt.replay}
			upstream := httptest.NewServer(up)
			defer upstream.Close()
			rec := &memRecorder{}
			tp, tapURL := startTap(t, upstream.URL, rec, func(c *tap.Config) {
				c.Rand = func() float64 { return tt.rand }
				if tt.standing != "" {
					fs, err := tap.ParseFaults(tt.standing)
					if err != nil {
						t.Fatal(err)
					}
					c.Faults = fs
				}
			})
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			header := map[string]string{}
			if tt.header != "" {
				header[sandbox.HeaderFault] = tt.header
			}
			started := time.Now()
			resp, body, err := post(t, rawClient(timeout), tapURL+"/v1/send", "application/json", `{"to":"a@b"}`, header)
			elapsed := time.Since(started)
			switch {
			case tt.wantStatus == 0:
				var ue interface{ Timeout() bool }
				if err == nil || !errors.As(err, &ue) || !ue.Timeout() {
					t.Errorf("client: got %v, want a timeout", err)
				}
			case err != nil:
				t.Fatalf("client: %v", err)
			case resp.StatusCode != tt.wantStatus:
				t.Errorf("status: got %d %s, want %d", resp.StatusCode, body, tt.wantStatus)
			}
			if elapsed < tt.minElapsed {
				t.Errorf("elapsed: got %s, want at least %s", elapsed, tt.minElapsed)
			}
			if got := up.hits.Load(); got != tt.wantHits {
				t.Errorf("requests at the upstream: got %d, want %d", got, tt.wantHits)
			}
			if up.sawFault.Load() {
				t.Errorf("the upstream got %s: it is the tap's, never forwarded", sandbox.HeaderFault)
			}
			var ids []string
			if len(tt.wantIDs) > 0 {
				rec.waitEffects(t, len(tt.wantIDs))
			} else {
				time.Sleep(20 * time.Millisecond)
			}
			for _, e := range rec.all() {
				ids = append(ids, e.ID)
			}
			if strings.Join(ids, ",") != strings.Join(tt.wantIDs, ",") {
				t.Errorf("effects: got %v, want %v", ids, tt.wantIDs)
			}
			if strings.Contains(tt.name, "fault strikes") || tt.header == "fail-before" || tt.header == "lose-response" && !tt.replay {
				if st := tp.Status(); len(st.Faults) == 0 {
					t.Errorf("status faults: got none, want the fault counted")
				}
			}
		})
	}
}

// TestTapHoldEndsOnClose: a response lose-response holds is answered 504
// when the tap closes, so the server it runs in can shut down.
func TestTapHoldEndsOnClose(t *testing.T) {
	upstream := httptest.NewServer(&countingUpstream{})
	defer upstream.Close()
	rec := &memRecorder{}
	tp, tapURL := startTap(t, upstream.URL, rec, nil)
	done := make(chan int, 1)
	go func() {
		resp, _, err := post(t, rawClient(10*time.Second), tapURL+"/v1/send", "application/json", `{}`, map[string]string{sandbox.HeaderFault: "lose-response"})
		if err != nil {
			done <- -1
			return
		}
		done <- resp.StatusCode
	}()
	rec.waitEffects(t, 1)
	tp.Close()
	select {
	case status := <-done:
		if status != http.StatusGatewayTimeout {
			t.Errorf("held response after Close: got %d, want 504", status)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held response still held 5 s after Close")
	}
}

// TestTapStatusEndpoint is answered by the tap and never reaches the upstream.
func TestTapStatusEndpoint(t *testing.T) {
	up := &countingUpstream{}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	rec := &memRecorder{}
	_, tapURL := startTap(t, upstream.URL, rec, nil)
	client := rawClient(10 * time.Second)
	post(t, client, tapURL+"/v1/send", "application/json", `{"to":"a@b"}`, map[string]string{"Idempotency-Key": "k1"})
	rec.waitEffects(t, 1)

	resp, body, err := do(t, client, "GET", tapURL+tap.StatusPath, "", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: got %v %v, want 200", tap.StatusPath, resp, err)
	}
	var st struct {
		Provider string `json:"provider"`
		Proxied  int    `json:"proxied"`
		Effects  int    `json:"effects"`
		Recorded int    `json:"recorded"`
		Failed   *int   `json:"failed"`
		Queued   *int   `json:"queued"`
		Dropped  *int   `json:"dropped"`
		Log      []struct {
			Status         int     `json:"status"`
			LatencyMS      float64 `json:"latency_ms"`
			EffectID       string  `json:"effect_id"`
			IdempotencyKey string  `json:"idempotency_key"`
			Record         string  `json:"record"`
		} `json:"log"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("status body %s: %v", body, err)
	}
	if st.Provider != "test-api" || st.Proxied != 1 || st.Effects != 1 || st.Recorded != 1 || st.Failed == nil || st.Queued == nil || st.Dropped == nil {
		t.Errorf("status: got %s, want provider, proxied 1, effects 1, recorded 1 and the failed, queued, dropped counters", body)
	}
	if len(st.Log) != 1 || st.Log[0].EffectID != "msg_1" || st.Log[0].Status != 200 || st.Log[0].IdempotencyKey != "k1" {
		t.Errorf("status log: got %+v, want the one send", st.Log)
	}
	if up.hits.Load() != 1 {
		t.Errorf("upstream requests: got %d, want 1 (the status endpoint is not proxied)", up.hits.Load())
	}
	if resp, _, _ := do(t, client, "POST", tapURL+tap.StatusPath, "", "", nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: got %d, want 405", tap.StatusPath, resp.StatusCode)
	}
}

func TestTapUpstreamDown(t *testing.T) {
	upstream := httptest.NewServer(http.NotFoundHandler())
	url := upstream.URL
	upstream.Close()
	rec := &memRecorder{}
	_, tapURL := startTap(t, url, rec, nil)
	resp, body, err := post(t, rawClient(10*time.Second), tapURL+"/v1/send", "application/json", `{}`, nil)
	if err != nil || resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "did not answer") {
		t.Errorf("upstream down: got %v %s %v, want 502 saying so", resp, body, err)
	}
	if len(rec.all()) != 0 {
		t.Errorf("effects: got %v, want none", rec.all())
	}
}

func TestNewRefusesABadConfig(t *testing.T) {
	for _, cfg := range []tap.Config{
		{Upstream: "ftp://x", Provider: "p", Recorder: &memRecorder{}},
		{Upstream: "http://x", Provider: "", Recorder: &memRecorder{}},
		{Upstream: "http://x", Provider: "p\x00", Recorder: &memRecorder{}},
		{Upstream: "http://x", Provider: "p"},
	} {
		if _, err := tap.New(cfg); err == nil {
			t.Errorf("New(%+v): got no error", cfg)
		}
	}
}

func TestParseFaults(t *testing.T) {
	tests := []struct {
		spec, want string
		wantErr    bool
	}{
		{spec: "lose-response=0.1", want: "lose-response;p=0.1"},
		{spec: "fail-before=1", want: "fail-before"},
		{spec: "lose-response=0.25;mode=504", want: "lose-response;mode=504;p=0.25"},
		{spec: "lose-response;p=0.3, latency=500ms", want: "lose-response;p=0.3,latency=500ms"},
		{spec: "lose-response=0", wantErr: true},
		{spec: "lose-response=1.5", wantErr: true},
		{spec: "lose-response=0.1;p=0.2", wantErr: true},
		{spec: "latency=0.5", wantErr: true},
		{spec: "boom", wantErr: true},
	}
	for _, tt := range tests {
		fs, err := tap.ParseFaults(tt.spec)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseFaults(%q): got error %v, want error %v", tt.spec, err, tt.wantErr)
			continue
		}
		var got []string
		for _, f := range fs {
			got = append(got, f.String())
		}
		if !tt.wantErr && strings.Join(got, ",") != tt.want {
			t.Errorf("ParseFaults(%q): got %q, want %q", tt.spec, strings.Join(got, ","), tt.want)
		}
	}
}

// TestTapRecordsOnlyWhatItForwards: a header the client's Connection
// header names is hop-by-hop, so the tap does not forward it; nor does it
// record it: a key, trace context or run id the upstream never saw is no
// part of the effect.
func TestTapRecordsOnlyWhatItForwards(t *testing.T) {
	up := &echoUpstream{}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	client := rawClient(10 * time.Second)
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name        string
		header      map[string]string
		want        trace.Effect
		wantKeySeen string // the Idempotency-Key the upstream received
	}{
		{name: "a key named by Connection is neither forwarded nor recorded",
			header: map[string]string{"Connection": "Idempotency-Key", "Idempotency-Key": "k1"},
			want:   trace.Effect{Target: "a@b"}},
		{name: "nor a trace context or run ids",
			header: map[string]string{"Connection": "traceparent, " + sandbox.HeaderExecution + ", Idempotency-Key", "Idempotency-Key": "k1",
				"traceparent": traceparent, sandbox.HeaderExecution: "exec_1", sandbox.HeaderStep: "step-1"},
			want: trace.Effect{Target: "a@b"}},
		{name: "the first key header forwarded wins",
			header: map[string]string{"Connection": "X-Idempotency-Key", "X-Idempotency-Key": "xk", "Idempotency-Key": "k2"},
			want:   trace.Effect{IdempotencyKey: "k2", Target: "a@b"}, wantKeySeen: "k2"},
		{name: "a key with no Connection header is recorded",
			header:      map[string]string{"Idempotency-Key": "k3", "traceparent": traceparent},
			want:        trace.Effect{IdempotencyKey: "k3", Target: "a@b", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"},
			wantKeySeen: "k3"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &memRecorder{}
			_, tapURL := startTap(t, upstream.URL, rec, func(c *tap.Config) { c.KeyHeaders = []string{"X-Idempotency-Key", "Idempotency-Key"} })
			resp, _, err := post(t, client, tapURL+"/v1/charges", "application/json", `{"to":"a@b"}`, tt.header)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("request: got %v %v, want 200", resp, err)
			}
			seen := up.requests()[i]
			if got := seen.Header.Get("Idempotency-Key"); got != tt.wantKeySeen {
				t.Errorf("Idempotency-Key at the upstream: got %q, want %q", got, tt.wantKeySeen)
			}
			e := rec.waitEffects(t, 1)[0]
			if e.IdempotencyKey != tt.want.IdempotencyKey || e.Target != tt.want.Target || e.TraceID != tt.want.TraceID ||
				e.SpanID != tt.want.SpanID || e.ExecutionID != "" || e.StepID != "" {
				t.Errorf("effect: got key %q target %q trace %q/%q run %q/%q, want %+v", e.IdempotencyKey, e.Target, e.TraceID, e.SpanID,
					e.ExecutionID, e.StepID, tt.want)
			}
		})
	}
}
