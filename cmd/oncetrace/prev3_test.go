package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"flag"
	"html"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// writePreV3Fixture regenerates testdata/pre-v3.db and pre-v3.jsonl:
//
//	go test ./cmd/oncetrace -run TestWritePreV3Fixture -write-pre-v3-fixture
var writePreV3Fixture = flag.Bool("write-pre-v3-fixture", false, "rewrite testdata/pre-v3.db and testdata/pre-v3.jsonl")

const (
	preV3Fixture = "testdata/pre-v3.db"
	preV3Export  = "testdata/pre-v3.jsonl"
	// frameworkFixtures are the recorded OTLP exports and sandbox mail of
	// agents on real frameworks (web/frameworks_test.go replays them too).
	frameworkFixtures = "../../ingest/testdata/frameworks"
)

// preV3Webhook is a SendGrid delivery of two messages for one key of
// exec_webhook: effects from a provider's webhook, a green duplicate.
const preV3Webhook = `[
 {"event":"processed","sg_message_id":"sg_1.filter","email":"jordan@acme.dev","timestamp":1782820801,"idempotency_key":"ik_wh","execution_id":"exec_webhook","step_id":"send"},
 {"event":"delivered","sg_message_id":"sg_2.filter","email":"jordan@acme.dev","timestamp":1782820803,"idempotency_key":"ik_wh","execution_id":"exec_webhook","step_id":"send"},
 {"event":"open","sg_message_id":"sg_1.filter","email":"jordan@acme.dev","timestamp":1782820900}
]`

const preV3WebhookExecution = `{"type":"execution","execution_id":"exec_webhook","name":"sendgrid-agent","status":"completed","started_at":"2026-06-30T12:00:00Z","ended_at":"2026-06-30T12:00:05Z","labels":{"customer":"acme"}}
{"type":"attempt","execution_id":"exec_webhook","step_id":"send","attempt":1,"tool":"send_email","effect":"write","provider":"sendgrid","idempotency_key":"ik_wh","started_at":"2026-06-30T12:00:00.500Z","ended_at":"2026-06-30T12:00:02Z","outcome":"timeout"}
{"type":"attempt","execution_id":"exec_webhook","step_id":"send","attempt":2,"tool":"send_email","effect":"write","provider":"sendgrid","idempotency_key":"ik_wh","started_at":"2026-06-30T12:00:02.500Z","ended_at":"2026-06-30T12:00:03.500Z","outcome":"ok"}
`

// TestWritePreV3Fixture makes the database a user of the binary before the
// v3 storage changes would have: serve on a new file, fed through its own
// endpoints with the demo's six scenarios, the recorded framework traces
// and their sandbox mail, the web tests' history of 60 executions (every
// audit rule), native events and a SendGrid webhook delivery; then its
// export, the journal switched to DELETE and the file VACUUMed.
func TestWritePreV3Fixture(t *testing.T) {
	if !*writePreV3Fixture {
		t.Skip("only with -write-pre-v3-fixture")
	}
	path := filepath.Join(t.TempDir(), "pre-v3.db")
	s := startDemoServer(t, path, "serve.log")
	if out, errOut, code := runCLIWithin(t, 5*time.Minute, "demo", "--server", s.url, "--run", "fixture"); code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out, errOut)
	}
	replayFrameworks(t, s.url)
	history := historyPart(t)
	for i := 0; i < len(history); i += 500 {
		if _, err := postEvents(s.url, history[i:min(len(history), i+500)], true); err != nil {
			t.Fatal(err)
		}
	}
	var native []json.RawMessage
	for line := range strings.Lines(derivationEvents + auditTrace + secondEffect + preV3WebhookExecution) {
		native = append(native, json.RawMessage(strings.TrimSuffix(line, "\n")))
	}
	if _, err := postEvents(s.url, native, true); err != nil {
		t.Fatal(err)
	}
	resp, err := multiHTTP.Post(s.url+"/api/v1/webhooks/sendgrid", "application/json", strings.NewReader(preV3Webhook))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"accepted":2`) {
		t.Fatalf("webhook: got %d %s, want 200 and 2 effects accepted", resp.StatusCode, body)
	}
	s.stop(t)

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, table := range []string{"events", "executions", "steps", "attempts", "spans", "effects", "findings", "search_terms"} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil || n == 0 {
			t.Fatalf("%s: got %d rows (%v), want some", table, n, err)
		}
		t.Logf("%s: %d rows", table, n)
	}
	for _, q := range []string{`PRAGMA journal_mode = DELETE`, `VACUUM`} { // one self-contained file
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, "export", "--db", path, "--out", preV3Export); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(preV3Fixture, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d bytes", preV3Fixture, len(b))
}

// historyPart is the part of web's history about 13 of its executions,
// exec_000 to exec_011 and exec_017, which between them break every audit
// rule, and the orphan effects that name none: the whole history would
// make the fixture 2 MB. An effect without an execution id belongs to the
// execution its effect id or key names.
func historyPart(t *testing.T) []json.RawMessage {
	t.Helper()
	events, _ := readHistory(t)
	execution := regexp.MustCompile(`exec_(\d{3})`)
	var part []json.RawMessage
	for _, raw := range events {
		m := execution.FindSubmatch(raw)
		if m == nil || string(m[1]) <= "011" || string(m[1]) == "017" {
			part = append(part, raw)
		}
	}
	return part
}

// replayFrameworks posts the recorded framework runs to the server, each in
// the order it was recorded: OTLP exports to /v1/traces, mail to the
// sandbox with the agent's headers (traceparent, the fault asked for).
// Every framework's naive run and the keyed ones but LangGraph's, whose
// 90 kB each would take the fixture over 1 MB.
func replayFrameworks(t *testing.T, serverURL string) {
	t.Helper()
	manifests, err := filepath.Glob(filepath.Join(frameworkFixtures, "*", "*", "manifest.json"))
	if err != nil || len(manifests) < 9 {
		t.Fatalf("got %d framework recordings under %s (%v), want every framework's", len(manifests), frameworkFixtures, err)
	}
	slices.Sort(manifests)
	for _, m := range manifests {
		dir := filepath.Dir(m)
		if strings.HasPrefix(filepath.Base(filepath.Dir(dir)), "langgraph") && filepath.Base(dir) == "keyed" {
			continue
		}
		if filepath.Base(filepath.Dir(dir)) == "temporal" {
			continue // recorded after pre-v3 (issue 26)
		}
		lines, err := os.ReadFile(filepath.Join(dir, "requests.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(bytes.TrimSpace(lines)) {
			var q struct {
				Kind            string            `json:"kind"`
				ContentType     string            `json:"content_type"`
				ContentEncoding string            `json:"content_encoding"`
				BodyFile        string            `json:"body_file"`
				Method          string            `json:"method"`
				Path            string            `json:"path"`
				Headers         map[string]string `json:"headers"`
				Body            string            `json:"body"`
			}
			if err := json.Unmarshal(line, &q); err != nil {
				t.Fatalf("%s: %v", dir, err)
			}
			var req *http.Request
			switch q.Kind {
			case "otlp":
				data, err := os.ReadFile(filepath.Join(dir, q.BodyFile))
				if err != nil {
					t.Fatal(err)
				}
				req, _ = http.NewRequest(http.MethodPost, serverURL+"/v1/traces", bytes.NewReader(data))
				req.Header.Set("Content-Type", q.ContentType)
				if q.ContentEncoding != "" {
					req.Header.Set("Content-Encoding", q.ContentEncoding)
				}
			case "mail":
				req, _ = http.NewRequest(q.Method, serverURL+q.Path, strings.NewReader(q.Body))
				for k, v := range q.Headers {
					switch strings.ToLower(k) {
					case "host", "content-length", "connection", "transfer-encoding", "accept-encoding":
						continue
					case "x-oncetrace-fault":
						// Lost at once, rather than held for the agent's timeout.
						if strings.HasPrefix(v, "lose-response") && !strings.Contains(v, "mode=504") {
							v += ";mode=504"
						}
					}
					req.Header.Set(k, v)
				}
			default:
				t.Fatalf("%s: unknown kind %q", dir, q.Kind)
			}
			resp, err := multiHTTP.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if q.Kind == "otlp" && resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %s: got %d, want 200: %s", dir, q.BodyFile, resp.StatusCode, body)
			}
		}
	}
}

// TestPreV3DatabaseAnswersAsBefore holds every later binary to a database
// written before the v3 storage changes (issue 23): serve on a copy of it
// (migrating and rebuilding as it must), serve on a copy rebuilt from its
// event log, and serve on a new database imported from its export must
// answer every page and every read of the API byte for byte alike, with
// as many executions, effects and findings as the old binary derived; and
// the export of the opened copy is the committed export.
func TestPreV3DatabaseAnswersAsBefore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three servers as processes and crawls each")
	}
	fixture, err := os.ReadFile(preV3Fixture)
	if err != nil {
		t.Fatal(err)
	}
	wantExport, err := os.ReadFile(preV3Export)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	opened, rebuilt, imported := filepath.Join(dir, "opened.db"), filepath.Join(dir, "rebuilt.db"), filepath.Join(dir, "imported.db")
	for _, p := range []string{opened, rebuilt} {
		if err := os.WriteFile(p, fixture, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// What the old binary derived, read from the copy before serve opens it: the
	// rows every page must still count.
	stored := map[string]int{}
	for _, table := range []string{"executions", "effects", "findings"} {
		stored[table] = int(sqlInt(t, opened, `SELECT count(*) FROM `+table))
	}
	// The rebuilt copy: there is no rebuild command, so the copy says its
	// rows were derived by version 1, and serve derives them all again
	// from the event log, as after an upgrade.
	db, err := sql.Open("sqlite", rebuilt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE derivation SET version = 1`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, "import", "--db", imported, "--in", preV3Export); code != 0 {
		t.Fatalf("import %s: exit %d\n%s", preV3Export, code, errOut)
	}

	// All three at once, so that each page is asked of them within
	// milliseconds: a running execution's page shows the time of asking.
	var bases []string
	var stops []func() string
	for _, p := range []string{opened, rebuilt, imported} {
		base, _, stop := startServeOn(t, p)
		bases, stops = append(bases, base), append(stops, stop)
	}
	all := everyAnswer(t, bases, stored)
	answers := map[string]map[string][]byte{"opened": all[0], "rebuilt": all[1], "imported": all[2]}
	if log := stops[1](); !strings.Contains(log, "derived cache rebuilt") {
		t.Errorf("rebuilt: serve did not rebuild the derived cache:\n%s", log)
	}
	stops[0]()
	stops[2]()
	size := 0
	for _, data := range answers["imported"] {
		size += len(data)
	}
	t.Logf("%d answers, %d bytes, from each server", len(answers["imported"]), size)
	compareAnswers(t, "the opened fixture", answers["opened"], "the import of its export", answers["imported"])
	compareAnswers(t, "the rebuilt fixture", answers["rebuilt"], "the import of its export", answers["imported"])

	// Export and import stay byte-compatible: the opened fixture exports
	// what the old binary exported.
	export, errOut, code := runCLI(t, "export", "--db", opened)
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, errOut)
	}
	if !bytes.Equal([]byte(export), wantExport) {
		i := 0
		for i < len(export) && i < len(wantExport) && export[i] == wantExport[i] {
			i++
		}
		t.Errorf("export of the opened fixture: got %d bytes, want %s's %d, byte for byte; first difference at byte %d", len(export), preV3Export, len(wantExport), i)
	}
}

// clockRE is a time as the pages write it.
var clockRE = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? UTC`)

// piecesRE is a timeline overview's pieces: "x0 x1 ms0 ms1" each, since
// the start, the last ending at the execution's end, or at the time of
// asking for an execution still running.
var piecesRE = regexp.MustCompile(`data-pieces="([^"]*)"`)

// atTheTime writes as NOW what a page shows of the clock: the page of an
// execution still running draws its timeline up to the time of asking
// (its last tick, its open gap, its overview's end and zoom range), the
// one thing in the pages that legitimately differs between two servers.
// Times after since (the crawl's start) are the clock's, as the fixture
// holds none; the timeline's end of an ended execution is its end, in the
// page's header and its JSON twin too, which are compared as they are.
func atTheTime(page []byte, since time.Time) []byte {
	page = clockRE.ReplaceAllFunc(page, func(b []byte) []byte {
		at, err := time.Parse("2006-01-02 15:04:05.999999999 MST", string(b))
		if err == nil && !at.Before(since) {
			return []byte("NOW")
		}
		return b
	})
	m := piecesRE.FindSubmatch(page)
	if m == nil {
		return page
	}
	fields := strings.Fields(string(m[1]))
	ms, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
	if err != nil {
		return page
	}
	// The end in milliseconds in the pieces, in seconds (rounded apart
	// from the pieces' milliseconds) in the zoom form.
	page = regexp.MustCompile(`\b`+strconv.FormatInt(ms, 10)+`\b`).ReplaceAll(page, []byte("END"))
	return secondsRE.ReplaceAllFunc(page, func(b []byte) []byte {
		if s, err := strconv.ParseFloat(string(b), 64); err == nil && math.Abs(s*1000-float64(ms)) <= 1 {
			return []byte("END")
		}
		return b
	})
}

var secondsRE = regexp.MustCompile(`\b\d+\.\d{3}\b`)

// everyAnswer is every read the servers answer about their data, by
// server: the API's lists in pages and each execution (apiAnswers), the
// lists under each filter, every idempotency key, every pair of adjacent
// executions compared, and every page reachable by links from the list
// and the outbox, each asked of every server in turn. The health, metrics
// and login pages are left out: they carry sizes, times and counters of
// the process, not the data. stored are the old binary's row counts,
// which the lists must match.
func everyAnswer(t *testing.T, servers []string, stored map[string]int) []map[string][]byte {
	t.Helper()
	since := time.Now().Add(-time.Second)
	answers := make([]map[string][]byte, len(servers))
	for i, s := range servers {
		answers[i] = apiAnswers(t, s, stored["executions"])
	}
	// get asks every server and returns the links of the first answer and
	// of any other that differs from it.
	get := func(path string) [][]byte {
		var bodies [][]byte
		for i, s := range servers {
			resp, err := multiHTTP.Get(s + path)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			// A link that answers an error must answer it on all.
			answers[i][path] = append([]byte(resp.Status+"\n"), atTheTime(data, since)...)
			if i == 0 || !bytes.Equal(answers[i][path], answers[0][path]) {
				bodies = append(bodies, data)
			}
		}
		return bodies
	}
	for i, s := range servers {
		checkListed(t, s, answers[i], stored)
	}
	// The ids and keys of the first server; another's that differ show as
	// answers the first lacks.
	var ids, keys []string
	seenKey := map[string]bool{}
	keyRE := regexp.MustCompile(`"idempotency_key":"((?:[^"\\]|\\.)*)"`)
	for path, data := range answers[0] {
		if strings.HasPrefix(path, "/api/v1/executions/") {
			ids = append(ids, strings.TrimPrefix(path, "/api/v1/executions/"))
		}
		for _, m := range keyRE.FindAllSubmatch(data, -1) {
			var k string
			if json.Unmarshal([]byte(`"`+string(m[1])+`"`), &k) == nil && k != "" && !seenKey[k] {
				seenKey[k] = true
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(ids)
	slices.Sort(keys)
	for _, k := range keys {
		get("/api/v1/keys/" + url.PathEscape(k))
	}
	for i := 1; i < len(ids); i++ {
		a, _ := url.PathUnescape(ids[i-1])
		b, _ := url.PathUnescape(ids[i])
		get("/api/v1/compare?a=" + url.QueryEscape(a) + "&b=" + url.QueryEscape(b))
	}
	var starts []string
	for _, f := range []string{"status=completed", "status=running", "status=failed", "audit=critical", "audit=unverified", "audit=clean",
		"has_findings=true", "has_findings=false", "name=billing-agent", "q=acme", "q=send_invoice_email", "q=exec_01", "q=ik_",
		"from=2026-06-30T09:00:00Z&to=2026-07-01T00:00:00Z"} {
		get("/api/v1/executions?limit=1000&" + f)
		starts = append(starts, "/?"+f)
	}
	for _, f := range []string{"state=matched", "state=orphan", "state=duplicate", "provider=sandbox-mail", "provider=mail-api", "provider=sendgrid"} {
		get("/api/v1/effects?limit=1000&" + f)
		starts = append(starts, "/outbox?"+f)
	}
	for _, f := range []string{"severity=critical", "severity=warning", "rule=duplicate_effect", "rule=orphan_effect", "execution_id=exec_webhook"} {
		get("/api/v1/findings?limit=1000&" + f)
	}

	// Every page linked from the list and the outbox, breadth first.
	hrefRE := regexp.MustCompile(`href="(/[^"]*)"`)
	queue := append([]string{"/", "/outbox", "/live"}, starts...)
	seen := map[string]bool{}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		if seen[path] {
			continue
		}
		seen[path] = true
		if len(seen) > 5000 {
			t.Fatalf("over 5,000 pages linked; the crawl is following something endless")
		}
		for _, body := range get(path) {
			for _, m := range hrefRE.FindAllSubmatch(body, -1) {
				link := html.UnescapeString(string(m[1]))
				if i := strings.IndexByte(link, '#'); i >= 0 {
					link = link[:i]
				}
				switch {
				case link == "", strings.HasPrefix(link, "/static/"), strings.HasPrefix(link, "/api/v1/stream"), strings.HasPrefix(link, "/api/v1/live"),
					link == "/metrics", link == "/healthz", strings.HasPrefix(link, "/login"), link == "/favicon.ico":
					continue
				}
				queue = append(queue, link)
			}
		}
	}
	return answers
}

// checkListed: the API's full lists hold as many executions, effects and
// findings as the old binary stored.
func checkListed(t *testing.T, serverURL string, answers map[string][]byte, stored map[string]int) {
	t.Helper()
	count := map[string]int{}
	for path, data := range answers {
		var page struct {
			Executions []json.RawMessage `json:"executions"`
			Effects    []json.RawMessage `json:"effects"`
			Findings   []json.RawMessage `json:"findings"`
		}
		switch {
		case strings.HasPrefix(path, "/api/v1/executions?"):
			json.Unmarshal(data, &page)
			count["executions"] += len(page.Executions)
		case strings.HasPrefix(path, "/api/v1/effects?"):
			json.Unmarshal(data, &page)
			count["effects"] += len(page.Effects)
		case strings.HasPrefix(path, "/api/v1/findings?"):
			json.Unmarshal(data, &page)
			count["findings"] += len(page.Findings)
		}
	}
	for table, n := range stored {
		if count[table] != n {
			t.Errorf("%s: the API lists %d %s, want the %d the old binary stored", serverURL, count[table], table, n)
		}
	}
}
