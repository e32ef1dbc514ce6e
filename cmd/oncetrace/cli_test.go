package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cliBinary is the oncetrace binary TestMain builds once; the CLI tests run
// it as a real process, as a user or a CI job would.
var cliBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "oncetrace-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cliBinary = filepath.Join(dir, "oncetrace")
	if out, err := exec.Command("go", "build", "-o", cliBinary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	stopPostgres()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cliEnv is the environment without ONCETRACE_ variables, so that a
// developer's settings cannot change what the tests see.
func cliEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ONCETRACE_") {
			env = append(env, kv)
		}
	}
	return env
}

// runCLI runs the binary to completion and returns its output and exit code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLIWithin(t, time.Minute, args...)
}

// runCLIWithin is runCLI with another deadline, for commands that run
// others (chaos) and may take minutes on a loaded machine.
func runCLIWithin(t *testing.T, limit time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliBinary, args...)
	cmd.Env = cliEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("oncetrace %s: still running after %s\n%s", strings.Join(args, " "), limit, errOut.String())
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("oncetrace %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// roundTripInput is an NDJSON trace of 2,400 lines, so that import's
// batches of 1,000 are crossed: half the events carry an id and half rely
// on the derived one, formatting varies, some times are Unix milliseconds,
// one line is a re-send and one is blank.
func roundTripInput() (ndjson string, distinct int) {
	var b strings.Builder
	t0 := time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) string { return t0.Add(d).Format("2006-01-02T15:04:05.000Z") }
	lines := 0
	line := func(s string) {
		b.WriteString(s)
		b.WriteByte('\n')
		lines++
	}
	for i := 0; lines < 2400; i++ {
		x := fmt.Sprintf("exec_%04d", i)
		start := time.Duration(i) * time.Minute
		line(fmt.Sprintf(`{"type":"execution","id":"x-%d","execution_id":%q,"name":"billing-agent","status":"running","started_at":%q,"labels":{"n":"%d"}}`, i, x, ts(start), i))
		line(fmt.Sprintf(`{ "type": "attempt", "execution_id": %q, "step_id": "send", "attempt": 1, "effect": "write", "provider": "mail-api", `+
			`"idempotency_key": "ik_%d", "args": {"to": "u%d@example.com", "b": [1, 2.50, "x"]}, "started_at": %q }`,
			x, i, i, ts(start+time.Second)))
		line(fmt.Sprintf(`{"type":"attempt","id":"a-%d","execution_id":%q,"step_id":"send","attempt":1,"ended_at":%d,"outcome":"ok","result":{"id":"m%d"}}`,
			i, x, t0.Add(start+2*time.Second).UnixMilli(), i))
		line(fmt.Sprintf(`{"type":"effect","provider":"mail-api","effect_id":"m%d","idempotency_key":"ik_%d","target":"u%d@example.com","at":%q}`, i, i, i, ts(start+1500*time.Millisecond)))
		line(fmt.Sprintf(`{"type":"execution","execution_id":%q,"status":"completed","ended_at":%q}`, x, ts(start+3*time.Second)))
	}
	distinct = lines
	// A re-send of an event without an id, after the first batch of 1,000.
	first := strings.SplitN(b.String(), "\n", 1300)[1298]
	line(first)
	b.WriteString("\n")
	return b.String(), distinct
}

func TestImportExportRoundTrip(t *testing.T) {
	input, distinct := roundTripInput()
	in := writeFile(t, "in.ndjson", input)
	dir := t.TempDir()
	db1, db2 := filepath.Join(dir, "one.db"), filepath.Join(dir, "two.db")

	out, errOut, code := runCLI(t, "import", "--db", db1, "--in", in)
	if code != 0 {
		t.Fatalf("import: got exit %d, want 0: %s", code, errOut)
	}
	if want := fmt.Sprintf("imported %d events, 1 duplicates, 0 rejected\n", distinct); out != want {
		t.Errorf("import: got %q, want %q", out, want)
	}
	export1, errOut, code := runCLI(t, "export", "--db", db1)
	if code != 0 {
		t.Fatalf("export: got exit %d, want 0: %s", code, errOut)
	}
	reimport := writeFile(t, "export1.ndjson", export1)
	if _, errOut, code := runCLI(t, "import", "--db", db2, "--in", reimport); code != 0 {
		t.Fatalf("import of the export: got exit %d, want 0: %s", code, errOut)
	}
	exportPath := filepath.Join(dir, "export2.ndjson")
	if _, errOut, code := runCLI(t, "export", "--db", db2, "--out", exportPath); code != 0 {
		t.Fatalf("second export: got exit %d, want 0: %s", code, errOut)
	}
	export2, err := os.ReadFile(exportPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(export2, []byte(export1)) {
		t.Errorf("export of the re-import: got %d bytes, want the first export's %d bytes, byte for byte", len(export2), len(export1))
	}

	// Every input event is in the export, as sent plus, when it had none,
	// the id derived from it.
	decode := func(s string) map[string]any {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return m
	}
	exported := map[string]map[string]any{}
	outLines := strings.Split(strings.TrimSuffix(export1, "\n"), "\n")
	for _, l := range outLines {
		m := decode(l)
		id, _ := m["id"].(string)
		exported[id] = m
	}
	if len(outLines) != distinct || len(exported) != distinct {
		t.Errorf("export: got %d lines with %d ids, want %d distinct events", len(outLines), len(exported), distinct)
	}
	byContent := map[string]string{} // the export without ids -> id
	for id, m := range exported {
		rest := map[string]any{}
		for k, v := range m {
			if k != "id" {
				rest[k] = v
			}
		}
		js, _ := json.Marshal(rest)
		byContent[string(js)] = id
	}
	for n, l := range strings.Split(input, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		m := decode(l)
		if id, ok := m["id"].(string); ok {
			if !reflect.DeepEqual(exported[id], m) {
				t.Errorf("input line %d: got %v in the export, want %v", n+1, exported[id], m)
			}
			continue
		}
		js, _ := json.Marshal(m)
		id, ok := byContent[string(js)]
		if !ok || !strings.HasPrefix(id, "evt_") {
			t.Errorf("input line %d: got no exported event with its content and a derived evt_ id (found id %q): %s", n+1, id, l)
		}
	}
}

// auditTrace is exec_1's step "send": attempt 1 ok, its retry ok too (the
// API answered it from its key store), one email by key; with a second
// email for the same key it is a green duplicate.
const auditTrace = `{"type":"execution","execution_id":"exec_1","name":"billing-agent","status":"running","started_at":"2026-06-30T14:00:00.000Z"}
{"type":"attempt","execution_id":"exec_1","step_id":"send","attempt":1,"tool":"send_email","effect":"write","provider":"mail-api","idempotency_key":"ik_1","worker":"w1","started_at":"2026-06-30T14:00:00.100Z","ended_at":"2026-06-30T14:00:00.600Z","outcome":"ok"}
{"type":"attempt","execution_id":"exec_1","step_id":"send","attempt":2,"tool":"send_email","effect":"write","provider":"mail-api","idempotency_key":"ik_1","worker":"w1","started_at":"2026-06-30T14:00:01.000Z","ended_at":"2026-06-30T14:00:01.200Z","outcome":"ok","deduplicated":true}
{"type":"effect","provider":"mail-api","effect_id":"msg_1","idempotency_key":"ik_1","execution_id":"exec_1","step_id":"send","at":"2026-06-30T14:00:00.300Z"}
{"type":"execution","execution_id":"exec_1","status":"completed","ended_at":"2026-06-30T14:00:02.000Z"}
`

const secondEffect = `{"type":"effect","provider":"mail-api","effect_id":"msg_2","idempotency_key":"ik_1","execution_id":"exec_1","step_id":"send","at":"2026-06-30T14:00:01.100Z"}
`

func TestAuditExitCodes(t *testing.T) {
	tests := []struct {
		name      string
		trace     string
		wantCode  int
		wantClean bool
		wantRules []string
	}{
		{"clean", auditTrace, 0, true, nil},
		// A write step whose outbox reported nothing: not critical, not clean.
		{"unverified", strings.Replace(auditTrace, `{"type":"effect","provider":"mail-api","effect_id":"msg_1","idempotency_key":"ik_1","execution_id":"exec_1","step_id":"send","at":"2026-06-30T14:00:00.300Z"}
`, "", 1), 0, false, nil},
		{"duplicate effect", auditTrace + secondEffect, 1, false, []string{"duplicate_effect"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "audit.db")
			if _, errOut, code := runCLI(t, "import", "--db", db, "--in", writeFile(t, "trace.ndjson", tt.trace)); code != 0 {
				t.Fatalf("import: got exit %d, want 0: %s", code, errOut)
			}

			out, errOut, code := runCLI(t, "audit", "--db", db)
			if code != tt.wantCode {
				t.Errorf("audit --db: got exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, out, errOut)
			}
			if got := strings.Contains(out, "clean: no critical findings"); got != tt.wantClean {
				t.Errorf("audit --db output says clean: got %v, want %v:\n%s", got, tt.wantClean, out)
			}

			out, errOut, code = runCLI(t, "audit", "--db", db, "--json")
			if code != tt.wantCode {
				t.Errorf("audit --db --json: got exit %d, want %d: %s", code, tt.wantCode, errOut)
			}
			var report struct {
				Clean    *bool `json:"clean"`
				Critical int   `json:"critical"`
				Findings []struct {
					Rule     string `json:"rule"`
					Severity string `json:"severity"`
					Message  string `json:"message"`
				} `json:"findings"`
			}
			if err := json.Unmarshal([]byte(out), &report); err != nil {
				t.Fatalf("audit --json: %v:\n%s", err, out)
			}
			if report.Clean == nil || *report.Clean != tt.wantClean {
				t.Errorf("audit --json clean: got %v, want %v:\n%s", report.Clean, tt.wantClean, out)
			}
			var rules []string
			for _, f := range report.Findings {
				rules = append(rules, f.Rule)
			}
			if !reflect.DeepEqual(rules, tt.wantRules) {
				t.Errorf("audit --json rules: got %v, want %v", rules, tt.wantRules)
			}
			if tt.wantRules != nil && !strings.Contains(report.Findings[0].Message, "green duplicate") {
				t.Errorf("duplicate_effect message: got %q, want it to call this a green duplicate", report.Findings[0].Message)
			}
		})
	}
}

func TestCommandLineMistakes(t *testing.T) {
	db := filepath.Join(t.TempDir(), "x.db")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string // in stderr
	}{
		{"audit without a source", []string{"audit"}, 2, "--db"},
		{"audit with two sources", []string{"audit", "--db", db, "--server", "http://127.0.0.1:1"}, 2, "exactly one"},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		// Refused before it listens, so nothing is ever exposed.
		{"serve on every interface without a token", []string{"serve", "--addr", "0.0.0.0:0", "--db", db}, 2, "--ingest-token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("got exit %d, want %d; stderr: %s", code, tt.wantCode, errOut)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr: got %q, want it to mention %q", errOut, tt.wantErr)
			}
		})
	}
}

// TestServeInsecureGetsPastTheExposureCheck asks for every interface with
// --insecure on a port this test already holds on 127.0.0.1: serve must get
// past the token check and fail only at listening, so the test shows that
// --insecure lifts the refusal without exposing anything.
func TestServeInsecureGetsPastTheExposureCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	_, errOut, code := runCLI(t, "serve", "--addr", fmt.Sprintf("0.0.0.0:%d", port), "--insecure", "--db", filepath.Join(t.TempDir(), "x.db"))
	if code == 0 {
		t.Errorf("got exit 0, want a listen error on a port in use")
	}
	if strings.Contains(errOut, "ingest-token") || !strings.Contains(errOut, "listen") {
		t.Errorf("stderr: got %q, want a listen error, not the token refusal", errOut)
	}
}

func TestServeStartsAndStopsOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	db, logPath := filepath.Join(dir, "serve.db"), filepath.Join(dir, "serve.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(cliBinary, "serve", "--addr", "127.0.0.1:0", "--insecure", "--db", db)
	cmd.Env = cliEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL) // only the process this test started
			<-exited
		}
	}()
	logText := func() string { b, _ := os.ReadFile(logPath); return string(b) }

	// Port 0: the address to use is the one serve logs.
	urlRE := regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+)`)
	var base string
	for deadline := time.Now().Add(30 * time.Second); base == ""; time.Sleep(20 * time.Millisecond) {
		if m := urlRE.FindStringSubmatch(logText()); m != nil {
			base = m[1]
		}
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("serve exited before logging its address: %v\n%s", err, logText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve logged no url= within 30s:\n%s", logText())
		}
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz: got %d, want 200", resp.StatusCode)
	}
	resp, err = http.Post(base+"/api/v1/events", "application/json", strings.NewReader(secondEffect))
	if err != nil {
		t.Fatalf("POST /api/v1/events: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/v1/events: got %d, want 200", resp.StatusCode)
	}

	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("serve after SIGTERM: got %v, want exit 0\n%s", err, logText())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("serve (pid %d) still running 10s after SIGTERM\n%s", cmd.Process.Pid, logText())
	}
	// What was acknowledged before the signal is in the database after it.
	out, errOut, code := runCLI(t, "export", "--db", db)
	if code != 0 || !strings.Contains(out, `"effect_id":"msg_2"`) {
		t.Errorf("export after shutdown: got exit %d and %q (%s), want the posted effect", code, out, errOut)
	}
}
