package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// setFileSizeLimit sets the soft RLIMIT_FSIZE of another process (prlimit),
// keeping its hard limit, so that it can be raised again without
// privileges. A write at or past the limit fails with EFBIG, as on a full
// disk; the Go runtime ignores the SIGXFSZ that comes with it.
func setFileSizeLimit(t *testing.T, pid int, bytes uint64) {
	t.Helper()
	var old syscall.Rlimit
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE, 0,
		uintptr(unsafe.Pointer(&old)), 0, 0); errno != 0 {
		t.Fatalf("prlimit %d: read RLIMIT_FSIZE: %v", pid, errno)
	}
	limit := syscall.Rlimit{Cur: min(bytes, old.Max), Max: old.Max}
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE,
		uintptr(unsafe.Pointer(&limit)), 0, 0, 0); errno != 0 {
		t.Fatalf("prlimit %d: set RLIMIT_FSIZE to %d: %v", pid, bytes, errno)
	}
}

const unlimited = ^uint64(0) // RLIM_INFINITY

// diskFullLoad is what the clients of the disk-full test saw.
type diskFullLoad struct {
	mu       sync.Mutex
	acked    map[string]bool // ids of events whose request answered 200
	statuses map[int]int     // status -> requests
	bodies   map[int]string  // one body of each status
}

func (l *diskFullLoad) note(status int, body string, ids []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.statuses[status]++
	if _, ok := l.bodies[status]; !ok {
		l.bodies[status] = body
	}
	if status == http.StatusOK {
		for _, id := range ids {
			l.acked[id] = true
		}
	}
}

func (l *diskFullLoad) count(status int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.statuses[status]
}

// postBatch sends n attempt events with ~1 KiB of arguments each and
// returns the status, the body and the events' ids.
func postBatch(serverURL, prefix string, n int) (int, string, []string, error) {
	pad := strings.Repeat("x", 1024)
	var buf bytes.Buffer
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
		line, _ := json.Marshal(map[string]any{"type": "attempt", "id": ids[i], "execution_id": "exec_" + prefix,
			"step_id": fmt.Sprintf("step-%d", i), "attempt": 1, "tool": "lookup", "effect": "read",
			"args": map[string]string{"pad": pad}, "started_at": "2026-06-30T14:02:11.200Z"})
		buf.Write(line)
		buf.WriteByte('\n')
	}
	resp, err := http.Post(serverURL+"/api/v1/events", "application/x-ndjson", &buf)
	if err != nil {
		return 0, "", ids, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusInsufficientStorage && resp.Header.Get("Retry-After") == "" {
		return resp.StatusCode, "507 without Retry-After: " + string(body), ids, nil
	}
	return resp.StatusCode, string(body), ids, nil
}

// health reads /healthz.
func health(t *testing.T, serverURL string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(serverURL + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("/healthz: %v", err)
	}
	return resp.StatusCode, body
}

// TestAttackDiskFull is the "disk full → 500" attack, against a
// real serve process whose file-size limit the test lowers while four
// clients write: the native API answers 507 with Retry-After, OTLP and the
// sandbox a retryable 503, /healthz says degraded and why; reads go on;
// once the limit is raised the server finds out by itself (a probe, with
// no client writing) and takes writes again; and every event ever
// answered 200 is in the database.
func TestAttackDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process")
	}
	bin := durabilityOncetraceBinary(t)
	dbPath := filepath.Join(t.TempDir(), "oncetrace.db")
	srv := startDurabilityServer(t, bin, dbPath, "normal", "serve.log")
	pid := srv.cmd.Process.Pid

	load := &diskFullLoad{acked: map[string]bool{}, statuses: map[int]int{}, bodies: map[int]string{}}
	for i := range 5 {
		status, body, ids, err := postBatch(srv.url, fmt.Sprintf("warm%d", i), 20)
		if err != nil || status != http.StatusOK {
			t.Fatalf("warm-up: got %d %s %v, want 200", status, body, err)
		}
		load.note(status, body, ids)
	}

	// Room for a little more than what is there: the clients fill it.
	var biggest int64
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(dbPath + suffix); err == nil {
			biggest = max(biggest, fi.Size())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				status, body, ids, err := postBatch(srv.url, fmt.Sprintf("c%d-%d", c, n), 20)
				if err != nil {
					load.note(-1, err.Error(), nil)
					continue
				}
				load.note(status, body, ids)
				if status != http.StatusOK {
					time.Sleep(20 * time.Millisecond) // as a client honouring Retry-After would, faster
				}
			}
		}()
	}
	// The limit comes once every client has written: the disk fills under load.
	warm := load.count(http.StatusOK)
	for deadline := time.Now().Add(20 * time.Second); load.count(http.StatusOK) < warm+4; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			wg.Wait()
			t.Fatalf("the clients' writes: got statuses %v after 20s, want 4 more 200s\n%s", load.statuses, srv.logText())
		}
	}
	setFileSizeLimit(t, pid, uint64(biggest)+256<<10)
	deadline := time.Now().Add(20 * time.Second)
	for load.count(http.StatusInsufficientStorage) < 5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if load.count(http.StatusInsufficientStorage) < 5 {
		cancel()
		wg.Wait()
		t.Fatalf("after the file-size limit: got statuses %v, want 507s\n%s", load.statuses, srv.logText())
	}

	// No room at all now, so that every write below fails whatever the
	// free space left in the WAL.
	setFileSizeLimit(t, pid, 1)
	// A write the clients began before may still have found room; the
	// next one fails, and /healthz says so.
	status, body := health(t, srv.url)
	for deadline := time.Now().Add(10 * time.Second); status != http.StatusServiceUnavailable && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		status, body = health(t, srv.url)
	}
	if status != http.StatusServiceUnavailable || body["status"] != "degraded" || body["reason"] == "" || body["reason"] == nil {
		t.Errorf("/healthz on a full disk: got %d %v, want 503 {status: degraded, reason}", status, body)
	}
	if resp, err := http.Get(srv.url + "/api/v1/executions"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("a read on a full disk: got %v %v, want 200", resp.Status, err)
	} else {
		resp.Body.Close()
	}

	// OTLP: 503 with Retry-After and code UNAVAILABLE (14), which
	// exporters retry; a 500 (code 13) they drop.
	otlp := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174",` +
		`"name":"agent run","kind":1,"startTimeUnixNano":"1782828131000000000","endTimeUnixNano":"1782828132000000000"}]}]}]}`
	resp, err := http.Post(srv.url+"/v1/traces", "application/json", strings.NewReader(otlp))
	if err != nil {
		t.Fatal(err)
	}
	otlpBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rpc struct {
		Code int `json:"code"`
	}
	_ = json.Unmarshal(otlpBody, &rpc)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || rpc.Code != 14 {
		t.Errorf("OTLP on a full disk: got %d Retry-After %q %s, want 503 with Retry-After and code 14",
			resp.StatusCode, resp.Header.Get("Retry-After"), otlpBody)
	}

	// The sandbox: 503 with Retry-After, nothing sent, the key free.
	req, _ := http.NewRequest(http.MethodPost, srv.url+"/sandbox/mail/v1/send", strings.NewReader(`{"to":"jordan@acme.dev","subject":"s","body":"b"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "ik_full_disk")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	boxBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("sandbox on a full disk: got %d Retry-After %q %s, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), boxBody)
	}

	// Space returns; the clients stop first, so that only the server's
	// own probe can find out.
	cancel()
	wg.Wait()
	setFileSizeLimit(t, pid, unlimited)
	start := time.Now()
	for {
		status, body = health(t, srv.url)
		if status == http.StatusOK && body["status"] == "ok" {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("/healthz 20 s after space returned, no client writing: got %d %v, want 200 ok\n%s", status, body, srv.logText())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("/healthz ok again %v after space returned, by the probe alone", time.Since(start).Round(100*time.Millisecond))
	for i := range 3 {
		status, body, ids, err := postBatch(srv.url, fmt.Sprintf("after%d", i), 20)
		if err != nil || status != http.StatusOK {
			t.Fatalf("write after recovery: got %d %s %v, want 200", status, body, err)
		}
		load.note(status, body, ids)
	}
	req, _ = http.NewRequest(http.MethodPost, srv.url+"/sandbox/mail/v1/send", strings.NewReader(`{"to":"jordan@acme.dev","subject":"s","body":"b"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "ik_full_disk")
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the sandbox's retry with the same key after recovery: got %v %v, want 200 (delivered now)", resp.Status, err)
	} else {
		resp.Body.Close()
	}

	for status, n := range load.statuses {
		switch status {
		case http.StatusOK, http.StatusInsufficientStorage:
		default:
			t.Errorf("status %d: got %d requests (%s), want only 200 and 507", status, n, load.bodies[status])
		}
	}
	if b := load.bodies[http.StatusInsufficientStorage]; !strings.Contains(b, `"error"`) || !strings.Contains(b, "cannot be written") {
		t.Errorf("507 body: got %s, want a JSON error saying the database cannot be written", b)
	}
	t.Logf("statuses %v; %d events acknowledged", load.statuses, len(load.acked))

	if err := srv.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, srv.logText())
	}
	stored := exportedIDs(t, bin, dbPath)
	lost := 0
	for id := range load.acked {
		if !stored[id] {
			lost++
			if lost <= 5 {
				t.Errorf("event %s: answered 200, not in the database", id)
			}
		}
	}
	if lost > 0 {
		t.Errorf("lost %d of %d acknowledged events", lost, len(load.acked))
	}
	if logs := srv.logText(); !strings.Contains(logs, "cannot be written") || !strings.Contains(logs, "can be written again") {
		t.Errorf("serve's log: got\n%s\nwant a line when writes began to fail and one when they passed again", logs)
	}
}
