package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// durabilityBin caches the oncetrace binary the durability test runs as a
// real process. It is rebuilt when the directory it was built into (a
// test's TempDir) is gone, so a later caller never gets a stale path.
var durabilityBin struct {
	mu   sync.Mutex
	path string
}

// durabilityOncetraceBinary builds cmd/oncetrace once per test process. A
// real binary, not `go run`, so that the PID we SIGKILL is the server itself.
func durabilityOncetraceBinary(t *testing.T) string {
	t.Helper()
	durabilityBin.mu.Lock()
	defer durabilityBin.mu.Unlock()
	if durabilityBin.path != "" {
		if _, err := os.Stat(durabilityBin.path); err == nil {
			return durabilityBin.path
		}
	}
	bin := filepath.Join(t.TempDir(), "oncetrace")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	durabilityBin.path = bin
	return bin
}

// durabilityServer is one `oncetrace serve` process the test started.
type durabilityServer struct {
	cmd    *exec.Cmd
	url    string
	logs   string // stderr file, shown on failure
	exited chan error
}

// durabilityEnv drops ONCETRACE_ variables, so that a developer's ingest
// token or database cannot change what the test sees.
func durabilityEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ONCETRACE_") {
			env = append(env, kv)
		}
	}
	return env
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// startDurabilityServer runs serve on dbPath (a SQLite file or a postgres://
// URL) and waits for /healthz. syncMode is SQLite's --sync; "" leaves it
// out. extra are more flags.
func startDurabilityServer(t *testing.T, bin, dbPath, syncMode, logName string, extra ...string) *durabilityServer {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	logs := filepath.Join(t.TempDir(), logName)
	logFile, err := os.Create(logs)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--addr", addr, "--db", dbPath}
	if syncMode != "" {
		args = append(args, "--sync", syncMode)
	}
	args = append(args, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = durabilityEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start serve: %v", err)
	}
	s := &durabilityServer{cmd: cmd, url: "http://" + addr, logs: logs, exited: make(chan error, 1)}
	go func() {
		s.exited <- cmd.Wait()
		logFile.Close()
	}()
	// Never leave our own process behind, whatever the test does.
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
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
			s.exited <- err // keep it for Cleanup
			t.Fatalf("serve exited before /healthz answered: %v\n%s", err, s.logText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve: /healthz did not answer 200 within 30s\n%s", s.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *durabilityServer) logText() string {
	b, _ := os.ReadFile(s.logs)
	return string(b)
}

// signal sends sig to the process we started and waits for it to exit.
func (s *durabilityServer) signal(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	if err := syscall.Kill(s.cmd.Process.Pid, sig); err != nil {
		t.Fatalf("kill -%d %d: %v", sig, s.cmd.Process.Pid, err)
	}
	select {
	case err := <-s.exited:
		s.exited <- err
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("serve (pid %d) did not exit within 30s of signal %v", s.cmd.Process.Pid, sig)
		return nil
	}
}

// ackedAttempt is one acknowledged attempt: the test looks for it in the
// materialised execution after the restart.
type ackedAttempt struct {
	execution, step string
	number          int
}

type ackedEffect struct {
	execution, provider, id string
}

// durabilityLoad is what the clients saw.
type durabilityLoad struct {
	mu            sync.Mutex
	sent          map[string]bool // every event id put in a request
	acked         map[string]bool // ids whose request answered 2xx
	attempts      []ackedAttempt
	effects       []ackedEffect
	requests      int
	ackedRequests int
	inFlightLost  int      // requests sent before the kill that then failed
	earlyErrors   []string // failures before the kill: a bug, not the kill
}

// durabilityClient posts batches of 1 to 20 distinct events until a request
// fails after the kill. Even events are attempts, odd ones the effect of
// the attempt before them.
func durabilityClient(ctx context.Context, client int, serverURL string, killed *atomic.Bool, load *durabilityLoad) {
	httpClient := &http.Client{Timeout: 20 * time.Second}
	rng := rand.New(rand.NewPCG(uint64(client), 42))
	base := time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC)
	n := 0
	for ctx.Err() == nil {
		size := 1 + rng.IntN(20)
		events := make([]map[string]any, 0, size)
		var attempts []ackedAttempt
		var effects []ackedEffect
		var ids []string
		for range size {
			id := fmt.Sprintf("dur-c%d-e%d", client, n)
			execution := fmt.Sprintf("dur-c%d-x%d", client, n/10)
			step := fmt.Sprintf("step-%d", n/2)
			key := fmt.Sprintf("ik-c%d-%d", client, n/2)
			at := base.Add(time.Duration(n) * time.Millisecond)
			if n%2 == 0 {
				events = append(events, map[string]any{
					"type": "attempt", "id": id, "execution_id": execution, "step_id": step, "attempt": 1,
					"tool": "send_email", "effect": "write", "provider": "mail-api", "idempotency_key": key,
					"worker": fmt.Sprintf("pid-%d", client), "started_at": at.Format(time.RFC3339Nano),
					"ended_at": at.Add(time.Millisecond / 2).Format(time.RFC3339Nano), "outcome": "ok",
				})
				attempts = append(attempts, ackedAttempt{execution: execution, step: step, number: 1})
			} else {
				effectID := fmt.Sprintf("msg-c%d-%d", client, n/2)
				events = append(events, map[string]any{
					"type": "effect", "id": id, "provider": "mail-api", "effect_id": effectID,
					"idempotency_key": key, "execution_id": execution, "step_id": step,
					"target": "jordan@acme.dev", "at": at.Format(time.RFC3339Nano),
				})
				effects = append(effects, ackedEffect{execution: execution, provider: "mail-api", id: effectID})
			}
			ids = append(ids, id)
			n++
		}
		body, err := json.Marshal(map[string]any{"events": events})
		if err != nil {
			panic(err)
		}
		load.mu.Lock()
		for _, id := range ids {
			load.sent[id] = true
		}
		load.requests++
		load.mu.Unlock()

		sentBeforeKill := !killed.Load()
		resp, err := httpClient.Post(serverURL+"/api/v1/events", "application/json", bytes.NewReader(body))
		status := 0
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
		}
		load.mu.Lock()
		switch {
		case err == nil && status/100 == 2:
			for _, id := range ids {
				load.acked[id] = true
			}
			load.attempts = append(load.attempts, attempts...)
			load.effects = append(load.effects, effects...)
			load.ackedRequests++
		case killed.Load():
			if sentBeforeKill {
				load.inFlightLost++
			}
		default:
			load.earlyErrors = append(load.earlyErrors, fmt.Sprintf("client %d: status %d, err %v", client, status, err))
		}
		load.mu.Unlock()
		if err != nil || status/100 != 2 {
			if killed.Load() {
				return
			}
		}
	}
}

// TestDurabilityAcrossSIGKILL kills the server mid-ingest and checks that
// every event it acknowledged is still there after a restart, both in the
// raw log and in the materialised executions: on SQLite with each --sync,
// and on PostgreSQL, where durability is the server's (the process killed
// is serve, not postgres).
func TestDurabilityAcrossSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server as a process")
	}
	bin := durabilityOncetraceBinary(t)
	for _, syncMode := range []string{"normal", "full"} {
		t.Run("sqlite/sync="+syncMode, func(t *testing.T) {
			testDurabilityAcrossSIGKILL(t, bin, filepath.Join(t.TempDir(), "oncetrace.db"), syncMode)
		})
	}
	t.Run("postgres", func(t *testing.T) {
		testDurabilityAcrossSIGKILL(t, bin, postgresDatabase(t), "")
	})
}

func testDurabilityAcrossSIGKILL(t *testing.T, bin, dbPath, syncMode string) {
	first := startDurabilityServer(t, bin, dbPath, syncMode, "serve-1.log")

	load := &durabilityLoad{sent: map[string]bool{}, acked: map[string]bool{}}
	var killed atomic.Bool
	ctx, stopClients := context.WithCancel(context.Background())
	defer stopClients()
	var wg sync.WaitGroup
	const clients = 8
	for c := range clients {
		wg.Go(func() { durabilityClient(ctx, c, first.url, &killed, load) })
	}

	time.Sleep(1500 * time.Millisecond) // load pacing: the clients write for a while before the kill
	killed.Store(true)
	waitErr := first.signal(t, syscall.SIGKILL)
	if ws, ok := waitErr.(*exec.ExitError); !ok || ws.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("first serve exit: got %v, want killed by SIGKILL\n%s", waitErr, first.logText())
	}
	// The clients stop at their first failure after the kill; the deadline
	// only guards against one that hangs.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		stopClients()
		t.Fatal("clients did not stop within 30s of the kill")
	}

	load.mu.Lock()
	defer load.mu.Unlock()
	for _, e := range load.earlyErrors {
		t.Errorf("request failed before the kill: %s", e)
	}
	if len(load.acked) == 0 {
		t.Fatalf("acknowledged events: got 0, want > 0 (the server took no load in 1.5s)\n%s", first.logText())
	}
	if load.inFlightLost == 0 {
		t.Errorf("requests in flight when killed that failed: got 0, want ≥ 1 (the kill did not land mid-ingest)")
	}
	t.Logf("%d requests, %d acknowledged (%d events), %d in flight failed at the kill, %d events sent",
		load.requests, load.ackedRequests, len(load.acked), load.inFlightLost, len(load.sent))

	second := startDurabilityServer(t, bin, dbPath, syncMode, "serve-2.log")
	checkMaterialised(t, second.url, load)
	if err := second.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("second serve after SIGTERM: got %v, want a clean exit\n%s", err, second.logText())
	}

	stored := exportedIDs(t, bin, dbPath)
	missing := 0
	for id := range load.acked {
		if !stored[id] {
			if missing < 10 {
				t.Errorf("acknowledged event %s: got absent from the export, want present", id)
			}
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("acknowledged events lost: got %d of %d, want 0", missing, len(load.acked))
	}
	for id := range stored {
		if !load.sent[id] {
			t.Errorf("exported event %s: got present, want only ids the clients sent", id)
		}
	}
	t.Logf("export holds %d events: %d acknowledged, %d from requests whose answer the kill lost",
		len(stored), len(load.acked), len(stored)-len(load.acked))
}

// checkMaterialised asks the restarted server for each execution an
// acknowledged event touched and checks its attempts and effects are there:
// the materialised tables committed with the raw log.
func checkMaterialised(t *testing.T, serverURL string, load *durabilityLoad) {
	t.Helper()
	type detail struct {
		Steps []struct {
			StepID   string `json:"step_id"`
			Attempts []struct {
				Attempt int    `json:"attempt"`
				Outcome string `json:"outcome"`
			} `json:"attempts"`
		} `json:"steps"`
		Effects []struct {
			Provider string `json:"provider"`
			EffectID string `json:"effect_id"`
		} `json:"effects"`
	}
	attempts := map[string]map[ackedAttempt]string{} // execution -> attempt -> outcome
	effects := map[string]map[ackedEffect]bool{}
	fetch := func(execution string) {
		if _, ok := attempts[execution]; ok {
			return
		}
		attempts[execution], effects[execution] = map[ackedAttempt]string{}, map[ackedEffect]bool{}
		resp, err := http.Get(serverURL + "/api/v1/executions/" + url.PathEscape(execution))
		if err != nil {
			t.Fatalf("GET execution %s: %v", execution, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET execution %s: got status %d, want 200", execution, resp.StatusCode)
			return
		}
		var d detail
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
			t.Fatalf("GET execution %s: decode: %v", execution, err)
		}
		for _, s := range d.Steps {
			for _, a := range s.Attempts {
				attempts[execution][ackedAttempt{execution: execution, step: s.StepID, number: a.Attempt}] = a.Outcome
			}
		}
		for _, f := range d.Effects {
			effects[execution][ackedEffect{execution: execution, provider: f.Provider, id: f.EffectID}] = true
		}
	}
	bad := 0
	for _, a := range load.attempts {
		fetch(a.execution)
		if got, ok := attempts[a.execution][a]; !ok || got != "ok" {
			bad++
			if bad <= 10 {
				t.Errorf("attempt %s/%s/%d after restart: got present=%v outcome %q, want present with outcome ok", a.execution, a.step, a.number, ok, got)
			}
		}
	}
	for _, f := range load.effects {
		fetch(f.execution)
		if !effects[f.execution][f] {
			bad++
			if bad <= 10 {
				t.Errorf("effect %s/%s of %s after restart: got absent, want present", f.provider, f.id, f.execution)
			}
		}
	}
	if bad > 0 {
		t.Errorf("acknowledged attempts and effects missing from the materialised state: got %d, want 0", bad)
	}
}

// exportedIDs runs `oncetrace export` and returns the ids of the events it
// writes, failing on any id written twice.
func exportedIDs(t *testing.T, bin, dbPath string) map[string]bool {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "export", "--db", dbPath)
	cmd.Env = durabilityEnv()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("oncetrace export: %v\n%s", err, stderr.String())
	}
	ids := map[string]bool{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("export line %q: %v", sc.Text(), err)
		}
		if ids[ev.ID] {
			t.Errorf("export: event %s got twice, want once", ev.ID)
		}
		ids[ev.ID] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("export: %v", err)
	}
	return ids
}
