package main

import (
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// writeDerivationFixture regenerates testdata/derivation-v1.db:
//
//	go test ./cmd/oncetrace -run TestWriteDerivationFixture -write-derivation-fixture
var writeDerivationFixture = flag.Bool("write-derivation-fixture", false, "rewrite testdata/derivation-v1.db")

const derivationFixture = "testdata/derivation-v1.db"

// derivationEvents are the fixture's events: a step rerun answered from the
// journal (a retry under derivation 1, none since fc66ffe), and a step
// retried for real (one retry under both).
const derivationEvents = `{"type":"execution","execution_id":"exec_replay","name":"journal-rerun","status":"completed","started_at":"2026-06-30T14:00:00Z","ended_at":"2026-06-30T14:00:05Z"}
{"type":"attempt","execution_id":"exec_replay","step_id":"charge","attempt":1,"tool":"charge_card","effect":"write","provider":"pay-api","idempotency_key":"ik_r","started_at":"2026-06-30T14:00:01Z","ended_at":"2026-06-30T14:00:02Z","outcome":"ok"}
{"type":"attempt","execution_id":"exec_replay","step_id":"charge","attempt":2,"tool":"charge_card","effect":"write","provider":"pay-api","idempotency_key":"ik_r","started_at":"2026-06-30T14:00:03Z","ended_at":"2026-06-30T14:00:03.100Z","outcome":"replayed"}
{"type":"execution","execution_id":"exec_retry","name":"flaky-send","status":"completed","started_at":"2026-06-30T15:00:00Z","ended_at":"2026-06-30T15:00:05Z"}
{"type":"attempt","execution_id":"exec_retry","step_id":"send","attempt":1,"tool":"send_email","effect":"write","provider":"mail-api","idempotency_key":"ik_s","started_at":"2026-06-30T15:00:01Z","ended_at":"2026-06-30T15:00:02Z","outcome":"error"}
{"type":"attempt","execution_id":"exec_retry","step_id":"send","attempt":2,"tool":"send_email","effect":"write","provider":"mail-api","idempotency_key":"ik_s","started_at":"2026-06-30T15:00:03Z","ended_at":"2026-06-30T15:00:04Z","outcome":"ok"}
`

// TestWriteDerivationFixture makes the fixture as a binary of derivation 1
// would have left it: the events are imported by today's binary, then the
// stored counts are rewritten by the old retry rule (attempts beyond the
// first of each step, replays included) and the version set back to 1.
func TestWriteDerivationFixture(t *testing.T) {
	if !*writeDerivationFixture {
		t.Skip("only with -write-derivation-fixture")
	}
	dir := t.TempDir()
	path, in := filepath.Join(dir, "fixture.db"), filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(in, []byte(derivationEvents), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, "import", "--db", path, "--in", in); code != 0 {
		t.Fatalf("import: exit %d\n%s", code, errOut)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`UPDATE executions SET retries = attempts - steps`,
		`UPDATE derivation SET version = 1`,
		`PRAGMA journal_mode = DELETE`, // one self-contained file
		`VACUUM`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(derivationFixture, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestServeRebuildsAnOlderDerivation: a database whose stored counts were
// derived by an older binary shows one retry count on the list and another
// on the execution page; serve rebuilds the cache at start, after which
// both agree for every execution, the database records the binary's
// version, and a second start rebuilds nothing.
func TestServeRebuildsAnOlderDerivation(t *testing.T) {
	t.Run("recorded", func(t *testing.T) { testServeRebuilds(t, nil) })
	// A database from before the version was recorded (before migration
	// 0008) is rebuilt as well.
	t.Run("unrecorded", func(t *testing.T) {
		testServeRebuilds(t, []string{`DROP TABLE derivation`, `DELETE FROM migrations WHERE name = '0008_derivation.sql'`})
	})
}

func testServeRebuilds(t *testing.T, older []string) {
	b, err := os.ReadFile(derivationFixture)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if len(older) > 0 {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range older {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Before the rebuild the stored row (the list's count) says what the
	// old rule counted; the execution page recomputes 0 from the events.
	if v, _ := storedDerivation(t, path); v >= trace.DerivationVersion {
		t.Fatalf("fixture records derivation %d; it must be older than the binary's %d", v, trace.DerivationVersion)
	}
	if _, retries := storedDerivation(t, path); retries["exec_replay"] != 1 {
		t.Fatalf("fixture: exec_replay stores %d retries, want the old rule's 1", retries["exec_replay"])
	}

	for start := 1; start <= 2; start++ {
		base, logText, stop := startServeOn(t, path)
		var list struct {
			Executions []struct {
				ID      string `json:"execution_id"`
				Retries int    `json:"retries"`
				Replays int    `json:"replays"`
			} `json:"executions"`
		}
		getJSON(t, base+"/api/v1/executions", &list)
		if len(list.Executions) != 2 {
			t.Fatalf("start %d: list has %d executions, want 2", start, len(list.Executions))
		}
		for _, x := range list.Executions {
			var page struct {
				Execution struct {
					Retries int `json:"retries"`
					Replays int `json:"replays"`
				} `json:"execution"`
			}
			getJSON(t, base+"/api/v1/executions/"+x.ID, &page)
			if x.Retries != page.Execution.Retries || x.Replays != page.Execution.Replays {
				t.Errorf("start %d: %s: list says %d retries, %d replays; its page %d, %d", start, x.ID,
					x.Retries, x.Replays, page.Execution.Retries, page.Execution.Replays)
			}
			if x.ID == "exec_replay" && x.Retries != 0 {
				t.Errorf("start %d: exec_replay lists %d retries, want 0 (a replay is not a retry)", start, x.Retries)
			}
		}
		log := stop()
		rebuilt := strings.Contains(log, "derived cache rebuilt")
		if start == 1 && (!rebuilt || !strings.Contains(log, "done=6 total=6")) { // the fixture's six events
			t.Errorf("first start: no rebuild with progress in the log:\n%s", logText())
		}
		if start == 2 && rebuilt {
			t.Errorf("second start rebuilt again:\n%s", log)
		}
		if v, _ := storedDerivation(t, path); v != trace.DerivationVersion {
			t.Errorf("start %d: database records derivation %d, want %d", start, v, trace.DerivationVersion)
		}
	}
}

// TestNewerDerivationIsRefused: an older binary on a database a newer one
// derived exits 2 naming both versions, rather than rebuilding the rows
// down to its rules; the version and the rows stay as they were.
func TestNewerDerivationIsRefused(t *testing.T) {
	b, err := os.ReadFile(derivationFixture)
	if err != nil {
		t.Fatal(err)
	}
	newer := trace.DerivationVersion + 1
	want := fmt.Sprintf("derived by a newer oncetrace (derivation version %d; this binary's is %d)", newer, trace.DerivationVersion)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"serve", []string{"serve", "--addr", "127.0.0.1:0", "--insecure", "--db"}},
		{"audit", []string{"audit", "--json", "--db"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "newer.db")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`UPDATE derivation SET version = ?`, newer); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			_, retriesBefore := storedDerivation(t, path)
			_, errOut, code := runCLIWithin(t, 30*time.Second, append(c.args, path)...)
			if code != 2 || !strings.Contains(errOut, want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 and %q", code, errOut, want)
			}
			v, retries := storedDerivation(t, path)
			if v != newer {
				t.Errorf("database records derivation %d after the refusal, want %d still", v, newer)
			}
			if !maps.Equal(retries, retriesBefore) {
				t.Errorf("stored retries %v after the refusal, want %v still (the older rules' rows untouched)", retries, retriesBefore)
			}
		})
	}
}

// TestImportRecordsDerivationOfANewDatabase: a new database gets the
// binary's version without a rebuild.
func TestImportRecordsDerivationOfANewDatabase(t *testing.T) {
	dir := t.TempDir()
	path, in := filepath.Join(dir, "new.db"), filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(in, []byte(derivationEvents), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, "import", "--db", path, "--in", in)
	if code != 0 || strings.Contains(errOut, "rebuild") {
		t.Fatalf("import: exit %d, want 0 and no rebuild\n%s", code, errOut)
	}
	if v, _ := storedDerivation(t, path); v != trace.DerivationVersion {
		t.Errorf("new database records derivation %d, want %d", v, trace.DerivationVersion)
	}
}

// storedDerivation reads the raw rows: the recorded version and each
// execution's stored retry count, as the list page shows it.
func storedDerivation(t *testing.T, path string) (int, map[string]int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	err = db.QueryRow(`SELECT version FROM derivation WHERE id = 1`).Scan(&v)
	if err != nil && !strings.Contains(err.Error(), "no such table") && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT execution_id, retries FROM executions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	retries := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		retries[id] = n
	}
	return v, retries
}

// startServeOn runs the real binary's serve on the database, with any
// extra flags, returning its base URL, a reader of its log so far, and a
// stop that sends SIGTERM and returns the whole log once it has exited.
func startServeOn(t *testing.T, db string, extra ...string) (string, func() string, func() string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "serve.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	cmd := exec.Command(cliBinary, append([]string{"serve", "--addr", "127.0.0.1:0", "--insecure", "--db", db}, extra...)...)
	cmd.Env = cliEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	logText := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	stopped := false
	stop := func() string {
		if !stopped {
			stopped = true
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM) // only the process this test started
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
				<-exited
				t.Errorf("serve still running 20s after SIGTERM")
			}
		}
		return logText()
	}
	t.Cleanup(func() { stop() })
	urlRE := regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+)`)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := urlRE.FindStringSubmatch(logText()); m != nil {
			return m[1], logText, stop
		}
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("serve exited before logging its address: %v\n%s", err, logText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve logged no url= within 60s:\n%s", logText())
		}
	}
}

// TestStartingGateAnswers503UntilReady: while serve rebuilds the derived
// cache, every request gets a 503 with Retry-After saying how far the
// rebuild has come; once ready, the server answers.
func TestStartingGateAnswers503UntilReady(t *testing.T) {
	gate := newStartingGate()
	srv := httptest.NewServer(gate)
	defer srv.Close()
	get := func() (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/api/v1/executions")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	gate.progress(200, 1000)
	resp, body := get()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "200 of 1000 events") {
		t.Fatalf("during the rebuild: got %d, Retry-After %q, %s; want 503 with Retry-After and the progress", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	gate.ready(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "served") }))
	if resp, body := get(); resp.StatusCode != http.StatusOK || body != "served" {
		t.Fatalf("once ready: got %d %q, want the server's answer", resp.StatusCode, body)
	}
}

// TestAuditDBAgreesWithAuditServer: on a database of an older derivation,
// audit --db and audit --server (a server on a copy of it) print the same
// JSON: both read what the writer derived, under this binary's rules.
func TestAuditDBAgreesWithAuditServer(t *testing.T) {
	b, err := os.ReadFile(derivationFixture)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	direct, served := filepath.Join(dir, "direct.db"), filepath.Join(dir, "served.db")
	for _, p := range []string{direct, served} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fromDB, errOut, code := runCLI(t, "audit", "--db", direct, "--json")
	if code > 1 {
		t.Fatalf("audit --db: exit %d: %s", code, errOut)
	}
	base, _, stop := startServeOn(t, served)
	defer stop()
	fromServer, errOut, code2 := runCLI(t, "audit", "--server", base, "--json")
	if code2 != code {
		t.Fatalf("audit --server: exit %d (%s), audit --db exit %d", code2, errOut, code)
	}
	if fromDB != fromServer || !strings.Contains(fromDB, `"findings"`) {
		t.Fatalf("audit --db and --server disagree:\n--db:     %s\n--server: %s", fromDB, fromServer)
	}
}
