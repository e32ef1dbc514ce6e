package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// The attack suite's memory part (issue 11, "Why": memory amplification,
// and OTLP requests without a span limit), against a real serve process:
// what a hostile client sends, and the process's peak RSS read from
// /proc/PID/status (VmHWM). docs/performance.md quotes the figures.

// memServer is a serve process of the test binary on a fresh database.
type memServer struct {
	url    string
	pid    int
	logs   string
	exited chan error
}

func startMemServer(t *testing.T, args ...string) *memServer {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	dir := t.TempDir()
	logs := filepath.Join(dir, "serve.log")
	logFile, err := os.Create(logs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cliBinary, append([]string{"serve", "--addr", addr, "--db", filepath.Join(dir, "attack.db")}, args...)...)
	cmd.Env = cliEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start serve: %v", err)
	}
	s := &memServer{url: "http://" + addr, pid: cmd.Process.Pid, logs: logs, exited: make(chan error, 1)}
	go func() {
		s.exited <- cmd.Wait()
		logFile.Close()
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = syscall.Kill(s.pid, syscall.SIGKILL)
			<-s.exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case err := <-s.exited:
			s.exited <- err
			b, _ := os.ReadFile(logs)
			t.Fatalf("serve exited before /healthz answered: %v\n%s", err, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("serve: /healthz did not answer 200 within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// peakRSS is the process's high-water resident set (VmHWM), in bytes.
func (s *memServer) peakRSS(t *testing.T) int64 {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("peak RSS is read from /proc/PID/status, on Linux")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid))
	if err != nil {
		t.Fatalf("read /proc status: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

type attackAnswer struct {
	status     int
	body       string
	retryAfter string
	took       time.Duration
}

func (s *memServer) post(t *testing.T, path, contentType, encoding string, body []byte) attackAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", path, err)
		return attackAnswer{}
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return attackAnswer{status: resp.StatusCode, body: string(data), retryAfter: resp.Header.Get("Retry-After"), took: time.Since(start)}
}

// hugeArgsEvent is the attack: one attempt whose args is an array
// of about four million zeros, filling the 8 MiB body limit.
func hugeArgsEvent() []byte {
	const bodyLimit = 8 << 20
	head := `{"type":"attempt","execution_id":"exec_attack","step_id":"s","attempt":1,"args":[`
	n := (bodyLimit - len(head) - 3) / 2
	var b bytes.Buffer
	b.Grow(bodyLimit)
	b.WriteString(head)
	for i := 0; i < n; i++ {
		b.WriteString("0,")
	}
	b.WriteString(`0]}`)
	return b.Bytes()
}

// ordinaryBatch is 5,000 attempts of one execution in under 8 MiB, each
// with arguments of about 1.3 KB: near the largest request a client may
// send.
func ordinaryBatch(client int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"events":[`)
	args := strings.Repeat("lorem ipsum ", 110)
	for i := 0; i < 5000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"attempt","execution_id":"batch_%d","step_id":"step-%d","attempt":1,"tool":"summarise","effect":"read",`+
			`"args":{"text":%q},"started_at":"2026-06-30T14:02:11.200Z","ended_at":"2026-06-30T14:02:12.200Z","outcome":"ok"}`, client, i, args)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func gzipAll(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return b.Bytes()
}

// otlpOneSpan is an ExportTraceServiceRequest of one span whose own
// fields are extra.
func otlpOneSpan(extra []byte) []byte {
	var span []byte
	span = protowire.AppendTag(span, 1, protowire.BytesType)
	span = protowire.AppendBytes(span, []byte("0123456789abcdef"))
	span = protowire.AppendTag(span, 2, protowire.BytesType)
	span = protowire.AppendBytes(span, []byte("01234567"))
	span = protowire.AppendTag(span, 5, protowire.BytesType)
	span = protowire.AppendBytes(span, []byte("attack"))
	span = protowire.AppendTag(span, 7, protowire.Fixed64Type)
	span = protowire.AppendFixed64(span, uint64(time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC).UnixNano()))
	span = append(span, extra...)
	return otlpWrap(protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), span))
}

// otlpWrap puts encoded spans (field 2 of ScopeSpans, repeated) in a
// request.
func otlpWrap(spans []byte) []byte {
	scope := spans
	rs := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), scope)
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rs)
}

// otlpSpans is a request of n spans of distinct ids in one trace, as an
// SDK exports them.
func otlpSpans(n int) []byte {
	var spans []byte
	start := uint64(time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC).UnixNano())
	for i := 0; i < n; i++ {
		var span []byte
		span = protowire.AppendTag(span, 1, protowire.BytesType)
		span = protowire.AppendBytes(span, []byte("0123456789abcdef"))
		span = protowire.AppendTag(span, 2, protowire.BytesType)
		span = protowire.AppendBytes(span, fmt.Appendf(nil, "%08d", i+1))
		span = protowire.AppendTag(span, 4, protowire.BytesType)
		span = protowire.AppendBytes(span, []byte("00000000"))
		span = protowire.AppendTag(span, 5, protowire.BytesType)
		span = protowire.AppendBytes(span, []byte("GET /"))
		span = protowire.AppendTag(span, 7, protowire.Fixed64Type)
		span = protowire.AppendFixed64(span, start+uint64(i))
		span = protowire.AppendTag(span, 8, protowire.Fixed64Type)
		span = protowire.AppendFixed64(span, start+uint64(i)+1000)
		spans = protowire.AppendTag(spans, 2, protowire.BytesType)
		spans = protowire.AppendBytes(spans, span)
	}
	return otlpWrap(spans)
}

func repeatedEmpty(field protowire.Number, n int) []byte {
	b := make([]byte, 0, 2*n)
	for i := 0; i < n; i++ {
		b = protowire.AppendTag(b, field, protowire.BytesType)
		b = protowire.AppendVarint(b, 0)
	}
	return b
}

// TestAttackMemoryAmplification: eight clients at once, each sending 8 MiB
// bodies made to cost the most memory to decode (the measured
// 2.24 GB), in every encoding that decodes a body; every one is refused
// naming the limit or answered 503 to retry, and the server's peak RSS
// stays under 300 MB.
func TestAttackMemoryAmplification(t *testing.T) {
	if testing.Short() {
		t.Skip("sends some 500 MB of hostile bodies to a real server; -short skips it")
	}
	srv := startMemServer(t)
	idle := srv.peakRSS(t)

	event := hugeArgsEvent()
	emptyAttrs := otlpOneSpan(repeatedEmpty(9, (8<<20)/2-64))
	jsonAttrs := []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0123456789abcdef0123456789abcdef","spanId":"0123456789abcdef","name":"a","startTimeUnixNano":"1","attributes":[` +
		strings.Repeat("{},", (8<<20)/3-100) + `{}]}]}]}]}`)
	webhook := []byte("[" + strings.Repeat("0,", (8<<20)/2-10) + "0]")
	attacks := []struct {
		name, path, contentType, encoding string
		body                              []byte
		want                              int    // the status of a refusal
		wantMsg                           string // in the refusal
	}{
		{"events JSON", "/api/v1/events", "application/json", "", event, 400, "args: array longer than the limit of 10000 elements"},
		{"events JSON gzip", "/api/v1/events", "application/json", "gzip", gzipAll(t, event), 400, "args: array longer than the limit of 10000 elements"},
		{"events NDJSON", "/api/v1/events", "application/x-ndjson", "", event, 400, "args: array longer than the limit of 10000 elements"},
		{"OTLP protobuf, 4M attributes", "/v1/traces", "application/x-protobuf", "", emptyAttrs, 400, "more than the limit of 128 attributes"},
		{"OTLP JSON, 2.8M attributes", "/v1/traces", "application/json", "", jsonAttrs, 413, "decode budget"},
		{"OTLP protobuf logs, 4M records", "/v1/logs", "application/x-protobuf", "", otlpWrap(repeatedEmpty(2, (8<<20)/2-64)), 413, "decode budget"},
		{"webhook, 4M-element array", "/api/v1/webhooks/sendgrid", "application/json", "", webhook, 413, "decode budget"},
	}
	const clients, rounds = 8, 2
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			var wg sync.WaitGroup
			answers := make([]attackAnswer, clients*rounds)
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := 0; r < rounds; r++ {
						answers[c*rounds+r] = srv.post(t, a.path, a.contentType, a.encoding, a.body)
					}
				}()
			}
			wg.Wait()
			refused, busy := 0, 0
			var slowest time.Duration
			for _, ans := range answers {
				slowest = max(slowest, ans.took)
				switch {
				case ans.status == a.want && strings.Contains(ans.body, a.wantMsg):
					refused++
				case ans.status == http.StatusServiceUnavailable && ans.retryAfter != "":
					busy++
				default:
					t.Errorf("answer: got %d %.300s, want %d naming %q (or 503 with Retry-After)", ans.status, ans.body, a.want, a.wantMsg)
				}
			}
			if refused == 0 {
				t.Errorf("refusals: got none of %d, want most refused naming the limit", len(answers))
			}
			t.Logf("%s (%d bytes): %d refused, %d busy; slowest answer %v; peak RSS so far %.0f MB",
				a.name, len(a.body), refused, busy, slowest.Round(time.Millisecond), float64(srv.peakRSS(t))/1e6)
		})
	}

	attackPeak := srv.peakRSS(t)
	if attackPeak >= 300e6 {
		t.Errorf("peak RSS under the attacks: got %.0f MB, want under 300 MB", float64(attackPeak)/1e6)
	}

	// Not an attack, the budget's other side: eight clients each sending
	// 8 MiB of ordinary events at once are all served (some maybe after a
	// 503 and a retry), within the same memory.
	t.Run("ordinary 8 MiB batches", func(t *testing.T) {
		var wg sync.WaitGroup
		retries := make([]int, clients)
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := ordinaryBatch(c)
				for {
					ans := srv.post(t, "/api/v1/events", "application/json", "", body)
					if ans.status == http.StatusServiceUnavailable && ans.retryAfter != "" && retries[c] < 20 {
						retries[c]++
						time.Sleep(500 * time.Millisecond)
						continue
					}
					if ans.status != http.StatusOK || !strings.Contains(ans.body, `"accepted":5000`) {
						t.Errorf("client %d: got %d %.200s, want 200 with 5000 accepted", c, ans.status, ans.body)
					}
					return
				}
			}()
		}
		wg.Wait()
		t.Logf("ordinary batches (%d bytes each): all stored, retries after a 503 %v; peak RSS so far %.0f MB",
			len(ordinaryBatch(0)), retries, float64(srv.peakRSS(t))/1e6)
	})

	// Still serving, and nothing of the attack was stored.
	ok := srv.post(t, "/api/v1/events", "application/json", "", []byte(`{"type":"execution","execution_id":"after_attack"}`))
	if ok.status != http.StatusOK {
		t.Fatalf("an ordinary event after the attack: got %d %s, want 200", ok.status, ok.body)
	}
	resp, err := http.Get(srv.url + "/api/v1/executions")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Executions []struct {
			ID string `json:"execution_id"`
		} `json:"executions"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	stored := map[string]bool{}
	for _, x := range list.Executions {
		stored[x.ID] = true
	}
	if err != nil || len(list.Executions) != clients+1 || !stored["after_attack"] || !stored["batch_0"] {
		t.Fatalf("executions after the attack: got %+v (%v), want after_attack and the %d of the ordinary batches", list.Executions, err, clients)
	}

	peak := srv.peakRSS(t)
	t.Logf("peak RSS: %.0f MB idle, %.0f MB after %d clients × %d rounds of each attack, %.0f MB after the ordinary batches too",
		float64(idle)/1e6, float64(attackPeak)/1e6, clients, rounds, float64(peak)/1e6)
	if peak >= 300e6 {
		t.Fatalf("peak RSS after the ordinary batches: got %.0f MB, want under 300 MB", float64(peak)/1e6)
	}
}

// TestAttackOTLPSpanFlood: the 100,000-span requests (which held
// the writer 7–15 s while other clients waited 5.8 s) from four clients at
// once are each refused 413 before decoding, and a client sending ordinary
// events meanwhile is answered as fast as ever.
func TestAttackOTLPSpanFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a real server for a few seconds; -short skips it")
	}
	srv := startMemServer(t)
	flood := otlpSpans(100_000)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused, other := 0, map[int]int{}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ans := srv.post(t, "/v1/traces", "application/x-protobuf", "", flood)
				mu.Lock()
				if ans.status == http.StatusRequestEntityTooLarge && strings.Contains(ans.body, "more than the limit of 10000 spans") {
					refused++
				} else {
					other[ans.status]++
				}
				mu.Unlock()
			}
		}()
	}
	var slowest time.Duration
	var lat []time.Duration
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		ans := srv.post(t, "/api/v1/events", "application/json", "", fmt.Appendf(nil, `{"type":"execution","execution_id":"bystander_%d"}`, i))
		if ans.status != http.StatusOK {
			t.Fatalf("a bystander's event during the flood: got %d %s, want 200", ans.status, ans.body)
		}
		lat = append(lat, ans.took)
		slowest = max(slowest, ans.took)
	}
	close(stop)
	wg.Wait()
	if len(other) > 0 || refused == 0 {
		t.Fatalf("flood answers: got %d refused naming the span limit and others %v, want every one refused so", refused, other)
	}
	t.Logf("%d floods of %d bytes refused; %d bystander events, slowest answered in %v", refused, len(flood), len(lat), slowest.Round(time.Millisecond))
	if slowest > 2*time.Second {
		t.Errorf("slowest bystander answer during the flood: got %v, want under 2s (the issue measured 5.8s; about 0.1s here on a quiet machine)", slowest)
	}
}
