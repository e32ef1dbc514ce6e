package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeStripe is an API that keeps Stripe's idempotency contract
// (https://docs.stripe.com/api/idempotent_requests): the first request
// with a key runs and its response is stored; a repeat with the same
// parameters gets the stored response with Idempotent-Replayed: true; the
// same key with other parameters is 400; a repeat while the first is still
// running is 409. Each run creates a charge, {"id":"ch_…"}.
type fakeStripe struct {
	mu       sync.Mutex
	keys     map[string]*stripeKey
	requests int
	charges  int
	sawFault bool
	// slow holds a request whose parameters include "slow" until closed.
	slow chan struct{}
}

type stripeKey struct {
	params   string
	inFlight bool
	body     []byte
}

func newFakeStripe() *fakeStripe {
	return &fakeStripe{keys: map[string]*stripeKey{}, slow: make(chan struct{})}
}

func stripeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"type": typ, "message": msg}})
}

func (s *fakeStripe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		stripeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "POST only")
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var params map[string]any
	if err := json.Unmarshal(raw, &params); err != nil {
		form, _ := url.ParseQuery(string(raw))
		params = map[string]any{}
		for k := range form {
			params[k] = form.Get(k)
		}
	}
	canonical, _ := json.Marshal(params) // sorted keys
	key := r.Header.Get("Idempotency-Key")
	w.Header().Set("Request-Id", "req_"+randomHex(7))
	if key != "" {
		w.Header().Set("Idempotency-Key", key)
	}

	s.mu.Lock()
	s.requests++
	s.sawFault = s.sawFault || r.Header.Get("X-Oncetrace-Fault") != ""
	if k, ok := s.keys[key]; ok && key != "" {
		s.mu.Unlock()
		switch {
		case k.inFlight:
			stripeError(w, http.StatusConflict, "idempotency_error", "There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): "+key+". Please try again later.")
		case k.params != string(canonical):
			stripeError(w, http.StatusBadRequest, "idempotency_error", "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '"+key+"' if you meant to execute a different request.")
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idempotent-Replayed", "true")
			w.Write(k.body)
		}
		return
	}
	entry := &stripeKey{params: string(canonical), inFlight: true}
	if key != "" {
		s.keys[key] = entry
	}
	s.charges++
	s.mu.Unlock()

	if _, ok := params["slow"]; ok {
		<-s.slow
	}
	body, _ := json.Marshal(map[string]any{"id": "ch_" + randomHex(12), "object": "charge", "status": "succeeded",
		"livemode": false, "receipt_email": params["to"]})
	s.mu.Lock()
	entry.inFlight, entry.body = false, body
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

func (s *fakeStripe) counts() (requests, charges int, sawFault bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.charges, s.sawFault
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// tapProcess is one `oncetrace tap` process a test started.
type tapProcess struct {
	url    string
	pid    int
	logs   string
	exited chan error
}

func (p *tapProcess) logText() string {
	b, _ := os.ReadFile(p.logs)
	return string(b)
}

// startTapProcess runs `oncetrace tap` on a free loopback port with the
// given flags, waits for its status endpoint, and kills that process (by
// its PID) if the test ends with it still running.
func startTapProcess(t *testing.T, flags ...string) *tapProcess {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	logs := filepath.Join(t.TempDir(), "tap.log")
	logFile, err := os.Create(logs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cliBinary, append([]string{"tap", "--listen", addr, "--queue-dir", t.TempDir()}, flags...)...)
	cmd.Env = cliEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start tap: %v", err)
	}
	p := &tapProcess{url: "http://" + addr, pid: cmd.Process.Pid, logs: logs, exited: make(chan error, 1)}
	go func() {
		p.exited <- cmd.Wait()
		logFile.Close()
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL) // only the process this test started
			<-p.exited
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := demoHTTP.Get(p.url + "/_oncetrace/tap"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("tap exited before its status endpoint answered: %v\n%s", err, p.logText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("tap: no status endpoint within 30s\n%s", p.logText())
		}
	}
}

// tapStatus is what the tests read of GET /_oncetrace/tap.
type tapStatus struct {
	Proxied  int            `json:"proxied"`
	Effects  int            `json:"effects"`
	Faults   map[string]int `json:"faults"`
	Recorded int            `json:"recorded"`
	Failed   int            `json:"failed"`
	Queued   int            `json:"queued"`
	Dropped  int            `json:"dropped"`
	Rejected int            `json:"rejected"`
}

// scenarioOutcome is what a test compares between two runs of a scenario.
type scenarioOutcome struct {
	Status   string
	Audit    string
	Critical []string
	Attempts string
	Mail     []string // the states of the mail API's effects, sorted
	Other    []string // any other effect: provider and state
}

func outcomeOf(t *testing.T, server, id, mailProvider string) scenarioOutcome {
	t.Helper()
	var d demoExecution
	getJSON(t, server+"/api/v1/executions/"+id, &d)
	o := scenarioOutcome{Status: d.Execution.Status, Audit: d.Audit.State, Critical: d.critical(), Attempts: d.attempts()}
	for _, e := range d.Effects {
		switch e.Provider {
		case mailProvider:
			o.Mail = append(o.Mail, e.State)
		case demoCRMProvider:
			o.Other = append(o.Other, e.Provider+" "+e.State)
		default:
			o.Other = append(o.Other, e.Provider+" "+e.State+" (unexpected)")
		}
	}
	sort.Strings(o.Mail)
	sort.Strings(o.Other)
	return o
}

// TestTapInFrontOfAStripeLikeAPI is the tap's acceptance test: the demo's
// agent loop runs every scenario twice against one real server, once
// against the sandbox mail API and once through `oncetrace tap` in front
// of an API that keeps Stripe's idempotency contract, the tap injecting
// the lost response and being the only outbox feed. Each scenario must end
// with the same findings, audit and attempts either way: naive and crash
// critical with duplicate_effect, the keyed ones clean.
func TestTapInFrontOfAStripeLikeAPI(t *testing.T) {
	srv := startDemoServer(t, filepath.Join(t.TempDir(), "tap.db"), "serve.log", "--gap-threshold", "1s")
	stripe := newFakeStripe()
	api := httptest.NewServer(stripe)
	defer api.Close()
	tp := startTapProcess(t, "--upstream", api.URL, "--provider", "stripe-test", "--server", srv.url)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	journals := t.TempDir()
	run := func(sc scenario, id string, o demoOptions) {
		t.Helper()
		w := demoWorker{exe: cliBinary, o: o, sc: sc, execution: id, journal: filepath.Join(journals, id+".json")}
		if err := w.play(ctx); err != nil {
			t.Fatalf("%s: %v\n%s\nserver log:\n%s\ntap log:\n%s", id, err, out.String(), srv.logText(), tp.logText())
		}
	}
	base := demoOptions{server: srv.url, gap: 1500 * time.Millisecond, timeout: time.Second, out: &out}
	viaTap := base
	viaTap.mailURL, viaTap.mailProvider = tp.url+"/v1/charges", "stripe-test"
	for _, sc := range scenarios {
		run(sc, "plain-"+sc.name, base)
		run(sc, "tap-"+sc.name, viaTap)
	}

	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			plain := outcomeOf(t, srv.url, "plain-"+sc.name, "sandbox-mail")
			tapped := outcomeOf(t, srv.url, "tap-"+sc.name, "stripe-test")
			t.Logf("through the tap: %+v", tapped)
			if !reflect.DeepEqual(tapped, plain) {
				t.Errorf("through the tap: got %+v, want what the sandbox run gave: %+v", tapped, plain)
			}
			if plain.Status != "completed" || len(plain.Mail) == 0 {
				t.Errorf("sandbox run: got %+v, want a completed execution with its emails", plain)
			}
			wantCritical := sc.name == "naive" || sc.name == "crash"
			if got := slices.Contains(tapped.Critical, "duplicate_effect"); got != wantCritical {
				t.Errorf("duplicate_effect through the tap: got %v, want %v (%+v)", got, wantCritical, tapped)
			}
			if !wantCritical && tapped.Audit != "clean" {
				t.Errorf("audit through the tap: got %q, want clean", tapped.Audit)
			}
		})
	}

	requests, charges, sawFault := stripe.counts()
	if sawFault {
		t.Error("the API received X-Oncetrace-Fault: the fault header is the tap's and must not be forwarded")
	}
	var st tapStatus
	getJSON(t, tp.url+"/_oncetrace/tap", &st)
	// Every answer was 2xx: the lost ones, the retries, and the replays.
	if st.Proxied != requests || st.Effects != requests || st.Recorded != requests || st.Failed+st.Queued+st.Dropped+st.Rejected != 0 {
		t.Errorf("tap status: got %+v, want %d requests proxied and recorded, nothing failed", st, requests)
	}
	if st.Faults["lose-response"] != 2 {
		t.Errorf("faults: got %v, want lose-response twice (naive and safe)", st.Faults)
	}
	// The API's charges are the effects the audit saw: no more, no fewer.
	var effects struct {
		Effects []struct {
			EffectID string `json:"effect_id"`
		} `json:"effects"`
	}
	getJSON(t, srv.url+"/api/v1/effects?provider=stripe-test", &effects)
	if len(effects.Effects) != charges {
		t.Errorf("stripe-test effects: got %d, want the %d charges the API made", len(effects.Effects), charges)
	}

	// The rest of the contract, through the tap: refusals pass through
	// unchanged and record nothing.
	send := func(key, params string) int {
		req, _ := http.NewRequest(http.MethodPost, tp.url+"/v1/charges", strings.NewReader(params))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := demoHTTP.Do(req)
		if err != nil {
			t.Fatalf("POST through the tap: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	first := make(chan int, 1)
	go func() { first <- send("ik_slow", `{"to":"a@b","slow":true}`) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, c, _ := stripe.counts(); c == charges+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow charge never reached the API")
		}
	}
	if got := send("ik_slow", `{"to":"a@b","slow":true}`); got != http.StatusConflict {
		t.Errorf("a repeat while the first runs: got %d, want 409", got)
	}
	close(stripe.slow)
	if got := <-first; got != http.StatusOK {
		t.Errorf("the slow charge: got %d, want 200", got)
	}
	if got := send("ik_slow", `{"to":"someone@else"}`); got != http.StatusBadRequest {
		t.Errorf("the key with other parameters: got %d, want 400", got)
	}
	getJSON(t, tp.url+"/_oncetrace/tap", &st)
	if st.Recorded != requests+1 {
		t.Errorf("recorded after the refusals: got %d, want %d (only the slow charge)", st.Recorded, requests+1)
	}
}

// demoFindings reads, for each scenario of a demo run, what the audit says.
func demoFindings(t *testing.T, server, run string) map[string]scenarioOutcome {
	t.Helper()
	out := map[string]scenarioOutcome{}
	for _, sc := range scenarios {
		out[sc.name] = outcomeOf(t, server, "demo-"+sc.name+"-"+run, "sandbox-mail")
	}
	return out
}

// TestDemoViaTap runs `oncetrace demo` and `oncetrace demo --via tap`
// against one server: each scenario gives the same findings, and every
// email the sandbox delivered was also recorded by the tap, as the same
// effect.
func TestDemoViaTap(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "via.db")
	srv := startDemoServer(t, dbPath, "serve.log", "--gap-threshold", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	demo := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, cliBinary, append([]string{"demo", "--server", srv.url, "--gap", "1500ms", "--journal-dir", t.TempDir()}, args...)...)
		cmd.Env = cliEnv()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("oncetrace demo %s: %v\n%s\nserver log:\n%s", strings.Join(args, " "), err, out, srv.logText())
		}
		return string(out)
	}
	demo("--run", "plain")
	out := demo("--via", "tap", "--run", "tapped")

	plain, tapped := demoFindings(t, srv.url, "plain"), demoFindings(t, srv.url, "tapped")
	for _, sc := range scenarios {
		if !reflect.DeepEqual(tapped[sc.name], plain[sc.name]) {
			t.Errorf("%s via the tap: got %+v, want what the plain demo gave: %+v", sc.name, tapped[sc.name], plain[sc.name])
		}
	}
	if got := tapped["naive"].Critical; !slices.Equal(got, []string{"duplicate_effect"}) {
		t.Errorf("naive via the tap: got critical %v, want [duplicate_effect]", got)
	}
	if got := tapped["safe"].Audit; got != "clean" {
		t.Errorf("safe via the tap: got %q, want clean", got)
	}
	for _, want := range []string{"through oncetrace tap at http://127.0.0.1:", "lost 2 responses on purpose", "recorded 10 emails", "0 failed attempts, 0 queued, 0 dropped, 0 rejected"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo --via tap output: got no %q in\n%s", want, out)
		}
	}

	// Every email has the tap's event beside the sandbox's, under one
	// effect identity; the plain run's have only the sandbox's.
	var effects struct {
		Effects []struct {
			Provider    string `json:"provider"`
			EffectID    string `json:"effect_id"`
			ExecutionID string `json:"execution_id"`
		} `json:"effects"`
	}
	getJSON(t, srv.url+"/api/v1/effects?provider=sandbox-mail", &effects)
	srv.stop(t)
	export, errOut, code := runCLI(t, "export", "--db", dbPath)
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	tapEmails := 0
	for _, e := range effects.Effects {
		tapped := strings.Contains(export, `"id":"tap:sandbox-mail:`+e.EffectID+`"`)
		sandboxed := strings.Contains(export, `"id":"sandbox:sandbox-mail:`+e.EffectID+`"`)
		wantTap := strings.HasSuffix(e.ExecutionID, "-tapped")
		if !sandboxed || tapped != wantTap {
			t.Errorf("email %s of %s: got the sandbox's event %v, the tap's %v; want the sandbox's, and the tap's %v", e.EffectID, e.ExecutionID, sandboxed, tapped, wantTap)
		}
		if tapped {
			tapEmails++
		}
	}
	if tapEmails != 8 {
		t.Errorf("emails the tap recorded: got %d distinct, want 8 (2 naive, 2 crash, 1 of each other scenario)", tapEmails)
	}
}

// TestServeTapRecordsThroughTheWriterAndStopsWithTheServer runs serve
// with --tap: an effect through the tap is in the database, and SIGTERM
// stops the tap with the server.
func TestServeTapRecordsThroughTheWriterAndStopsWithTheServer(t *testing.T) {
	stripe := newFakeStripe()
	api := httptest.NewServer(stripe)
	defer api.Close()
	tapAddr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	dbPath := filepath.Join(t.TempDir(), "serve-tap.db")
	srv := startDemoServer(t, dbPath, "serve.log", "--tap", "stripe-test="+api.URL+"@"+tapAddr)
	waitServeTap(t, srv, tapAddr)

	req, _ := http.NewRequest(http.MethodPost, "http://"+tapAddr+"/v1/charges", strings.NewReader("amount=4900&to=cus_9"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Idempotency-Key", "ik_serve_tap")
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := demoHTTP.Do(req)
	if err != nil {
		t.Fatalf("POST through serve's tap: %v\n%s", err, srv.logText())
	}
	var charge struct {
		ID string `json:"id"`
	}
	json.NewDecoder(resp.Body).Decode(&charge)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(charge.ID, "ch_") {
		t.Fatalf("POST through serve's tap: got %d %q, want 200 and a charge", resp.StatusCode, charge.ID)
	}
	var effects struct {
		Effects []struct {
			EffectID       string `json:"effect_id"`
			IdempotencyKey string `json:"idempotency_key"`
			Target         string `json:"target"`
			TraceID        string `json:"trace_id"`
		} `json:"effects"`
	}
	getJSON(t, srv.url+"/api/v1/effects?provider=stripe-test", &effects)
	if len(effects.Effects) != 1 || effects.Effects[0].EffectID != charge.ID || effects.Effects[0].IdempotencyKey != "ik_serve_tap" ||
		effects.Effects[0].Target != "cus_9" || effects.Effects[0].TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("effects: got %+v, want %s with its key, target and trace, committed before the answer", effects.Effects, charge.ID)
	}

	srv.stop(t)
	if resp, err := http.Get("http://" + tapAddr + "/_oncetrace/tap"); err == nil {
		resp.Body.Close()
		t.Errorf("the tap still answers after serve stopped")
	}
	export, _, _ := runCLI(t, "export", "--db", dbPath)
	if !strings.Contains(export, `"id":"tap:stripe-test:`+charge.ID+`"`) {
		t.Errorf("export: got no tap:stripe-test:%s event", charge.ID)
	}
}

func TestTapCommandLineMistakes(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"tap without an upstream", []string{"tap", "--provider", "x"}, "--upstream"},
		{"tap without a provider", []string{"tap", "--upstream", "http://127.0.0.1:1"}, "--provider"},
		{"tap with a bad fault", []string{"tap", "--upstream", "http://127.0.0.1:1", "--provider", "x", "--fault", "lose-response=2"}, "probability"},
		{"tap on every interface", []string{"tap", "--upstream", "http://127.0.0.1:1", "--provider", "x", "--listen", "0.0.0.0:0"}, "--insecure"},
		{"tap on every interface, even with a token", []string{"tap", "--upstream", "http://127.0.0.1:1", "--provider", "x", "--listen", "0.0.0.0:0", "--token", "t"}, "--insecure"},
		{"tap with a bad --fingerprint-ignore", []string{"tap", "--upstream", "http://127.0.0.1:1", "--provider", "x", "--fingerprint-ignore", "attempt"}, "PROVIDER=field1,field2"},
		{"serve with a bad --fingerprint-ignore", []string{"serve", "--db", filepath.Join(t.TempDir(), "x.db"), "--fingerprint-ignore", "stripe="}, "name at least one field"},
		{"serve with a bad --tap", []string{"serve", "--db", filepath.Join(t.TempDir(), "x.db"), "--tap", "stripe=https://api.stripe.com"}, "NAME=UPSTREAM@LISTEN"},
		{"serve with a tap on every interface", []string{"serve", "--db", filepath.Join(t.TempDir(), "x.db"), "--tap", "stripe=https://api.stripe.com@0.0.0.0:0"}, "--insecure"},
		{"tap without an upstream timeout", []string{"tap", "--upstream", "http://127.0.0.1:1", "--provider", "x", "--upstream-timeout", "0"}, "--upstream-timeout"},
		{"tap giving up before the timeout", []string{"tap", "--upstream", "http://127.0.0.1:1", "--provider", "x", "--upstream-give-up", "10s"}, "--upstream-give-up"},
		{"tap with a negative idle timeout", []string{"tap", "--upstream", "http://127.0.0.1:1", "--provider", "x", "--idle-timeout", "-1s"}, "--idle-timeout"},
		{"tap with a negative connection cap", []string{"tap", "--upstream", "http://127.0.0.1:1", "--provider", "x", "--max-conns", "-1"}, "--max-conns"},
		{"serve with a negative --tap-upstream-max-late", []string{"serve", "--db", filepath.Join(t.TempDir(), "x.db"), "--tap-upstream-max-late", "-1"}, "--tap-upstream-max-late"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, tt.args...)
			if code != 2 || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("got exit %d and %q, want exit 2 mentioning %q", code, errOut, tt.wantErr)
			}
		})
	}
}

// TestTapLimitFlags: the tap's limits default to what docs/security.md
// says; serve's taps take serve's header and idle timeouts and per-address
// cap, and --tap-* for the rest.
func TestTapLimitFlags(t *testing.T) {
	o, err := tapFlags([]string{"--upstream", "http://127.0.0.1:1", "--provider", "x", "--queue-dir", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	want := tapLimits{readHeaderTimeout: 10 * time.Second, idleTimeout: 30 * time.Second, upstreamTimeout: time.Minute,
		upstreamGiveUp: 5 * time.Minute, maxLate: 128, maxConnsPerIP: 64, maxConns: 1024, maxConnsFlag: "max-conns"}
	if o.limits != want {
		t.Errorf("tap's defaults: got %+v, want %+v", o.limits, want)
	}
	c, err := serveFlags([]string{"--db", filepath.Join(t.TempDir(), "x.db"), "--idle-timeout", "0", "--read-timeout", "7s",
		"--read-header-timeout", "3s", "--max-conns-per-ip", "9", "--tap-upstream-timeout", "2s", "--tap-upstream-give-up", "4s",
		"--tap-upstream-max-late", "0", "--tap-max-conns", "99"})
	if err != nil {
		t.Fatal(err)
	}
	want = tapLimits{readHeaderTimeout: 3 * time.Second, idleTimeout: 7 * time.Second, upstreamTimeout: 2 * time.Second,
		upstreamGiveUp: 4 * time.Second, maxLate: 0, maxConnsPerIP: 9, maxConns: 99, maxConnsFlag: "tap-max-conns"}
	if c.tapLimits != want {
		t.Errorf("serve's taps: got %+v, want %+v", c.tapLimits, want)
	}
}

// TestFingerprintIgnoreFlags: --fingerprint-ignore adds to what
// ONCETRACE_FINGERPRINT_IGNORE holds, on tap and on serve.
func TestFingerprintIgnoreFlags(t *testing.T) {
	t.Setenv(fingerprintIgnoreEnv, "stripe=sent_at_ms; sendgrid=batch_id")
	o, err := tapFlags([]string{"--upstream", "http://127.0.0.1:1", "--provider", "stripe", "--queue-dir", t.TempDir(),
		"--fingerprint-ignore", "stripe=attempt,try", "--fingerprint-ignore", "stripe=x"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := o.fingerprintIgnore["stripe"], []string{"sent_at_ms", "attempt", "try", "x"}; !slices.Equal(got, want) {
		t.Errorf("tap: stripe's fields: got %q, want %q", got, want)
	}
	c, err := serveFlags([]string{"--db", filepath.Join(t.TempDir(), "x.db"), "--fingerprint-ignore", "sendgrid=send_at"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.fingerprintIgnore["sendgrid"], []string{"batch_id", "send_at"}; !slices.Equal(got, want) {
		t.Errorf("serve: sendgrid's fields: got %q, want %q", got, want)
	}
	t.Setenv(fingerprintIgnoreEnv, "stripe")
	if _, err := serveFlags([]string{"--db", filepath.Join(t.TempDir(), "x.db")}); err == nil || !strings.Contains(err.Error(), fingerprintIgnoreEnv) {
		t.Errorf("a bad %s: got %v, want an error naming it", fingerprintIgnoreEnv, err)
	}
}

// TestServeTapFingerprint: serve's tap gives two sends of one charge (a
// fresh key each, as stripe-node sends, and a per-send field the provider's
// --fingerprint-ignore names) one fingerprint, another amount another; an
// entry for a provider no tap records is warned about.
func TestServeTapFingerprint(t *testing.T) {
	api := httptest.NewServer(newFakeStripe())
	defer api.Close()
	tapAddr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	srv := startDemoServer(t, filepath.Join(t.TempDir(), "serve-tap.db"), "serve.log", "--tap", "stripe-test="+api.URL+"@"+tapAddr,
		"--fingerprint-ignore", "stripe-test=attempt", "--fingerprint-ignore", "stirpe-test=attempt")
	waitServeTap(t, srv, tapAddr)
	charge := func(body string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+tapAddr+"/v1/charges", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Idempotency-Key", randomHex(16))
		resp, err := demoHTTP.Do(req)
		if err != nil {
			t.Fatalf("POST through serve's tap: %v\n%s", err, srv.logText())
		}
		defer resp.Body.Close()
		var c struct {
			ID string `json:"id"`
		}
		json.NewDecoder(resp.Body).Decode(&c)
		if resp.StatusCode != http.StatusOK || c.ID == "" {
			t.Fatalf("POST through serve's tap: got %d, want 200 and a charge", resp.StatusCode)
		}
		return c.ID
	}
	first := charge("amount=2000&currency=usd&customer=cus_123&metadata[attempt]=1")
	second := charge("customer=cus_123&metadata[attempt]=2&currency=usd&amount=2000")
	other := charge("amount=2500&currency=usd&customer=cus_123&metadata[attempt]=1")
	var effects struct {
		Effects []struct {
			EffectID    string `json:"effect_id"`
			Fingerprint string `json:"fingerprint"`
			Summary     string `json:"summary"`
		} `json:"effects"`
	}
	getJSON(t, srv.url+"/api/v1/effects?provider=stripe-test", &effects)
	fp := map[string]string{}
	for _, e := range effects.Effects {
		fp[e.EffectID] = e.Fingerprint
		if e.EffectID == first && e.Summary != "POST /v1/charges amount=2000 currency=usd customer=cus_123" {
			t.Errorf("summary: got %q", e.Summary)
		}
	}
	if len(fp) != 3 || !strings.HasPrefix(fp[first], "http:") || fp[first] != fp[second] || fp[other] == fp[first] {
		t.Errorf("fingerprints: got %v, want %s and %s alike (http:...), %s another", fp, first, second, other)
	}
	if !strings.Contains(srv.logText(), "no tap here records") || !strings.Contains(srv.logText(), "stirpe-test") {
		t.Errorf("serve's log: got no warning about --fingerprint-ignore stirpe-test:\n%s", srv.logText())
	}
}

// waitServeTap waits for a tap of serve to answer its status endpoint:
// serve starts its taps after its own listener answers /healthz.
func waitServeTap(t *testing.T, srv *demoServer, addr string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := demoHTTP.Get("http://" + addr + "/_oncetrace/tap"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve's tap on %s: no status endpoint within 30s\n%s", addr, srv.logText())
		}
	}
}
