package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// oldAndNewNDJSON is n executions started 40 days before now, each with a
// keyed write attempt carrying a kilobyte of arguments and its effect, and
// one recent execution that reused the first one's key.
func oldAndNewNDJSON(n int, now time.Time) string {
	var b strings.Builder
	old, recent := now.Add(-40*24*time.Hour), now.Add(-24*time.Hour)
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	pad := strings.Repeat("x", 1000)
	for i := range n {
		x, start := fmt.Sprintf("old_%05d", i), old.Add(time.Duration(i)*time.Second)
		fmt.Fprintf(&b, `{"type":"execution","execution_id":%q,"status":"completed","started_at":%q,"ended_at":%q}`+"\n", x, ts(start), ts(start.Add(time.Second)))
		fmt.Fprintf(&b, `{"type":"attempt","execution_id":%q,"step_id":"send","attempt":1,"effect":"write","provider":"mail-api","idempotency_key":"ik_%d",`+
			`"args":{"to":"u%d@example.com","body":%q},"started_at":%q,"ended_at":%q,"outcome":"ok"}`+"\n", x, i, i, pad, ts(start), ts(start.Add(time.Second/2)))
		fmt.Fprintf(&b, `{"type":"effect","provider":"mail-api","effect_id":"m_%d","idempotency_key":"ik_%d","execution_id":%q,"step_id":"send","at":%q}`+"\n",
			i, i, x, ts(start.Add(time.Second/4)))
	}
	fmt.Fprintf(&b, `{"type":"execution","execution_id":"recent_peer","status":"completed","started_at":%q}`+"\n", ts(recent))
	fmt.Fprintf(&b, `{"type":"attempt","execution_id":"recent_peer","step_id":"send","attempt":1,"effect":"write","provider":"mail-api",`+
		`"idempotency_key":"ik_0","started_at":%q,"ended_at":%q,"outcome":"ok","deduplicated":true}`+"\n", ts(recent), ts(recent.Add(time.Second)))
	return b.String()
}

func importNDJSON(t *testing.T, db, ndjson string) {
	t.Helper()
	if _, errOut, code := runCLI(t, "import", "--db", db, "--in", writeFile(t, "in.ndjson", ndjson)); code != 0 {
		t.Fatalf("import: exit %d: %s", code, errOut)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func sqlInt(t *testing.T, path, query string) int64 {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var n int64
	if err := raw.QueryRow(query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func TestPruneCommand(t *testing.T) {
	now := time.Now()
	db := filepath.Join(t.TempDir(), "prune.db")
	importNDJSON(t, db, oldAndNewNDJSON(2000, now))
	before := fileSize(t, db)

	out, errOut, code := runCLI(t, "prune", "--db", db, "--before", "30d")
	if code != 0 {
		t.Fatalf("prune: exit %d: %s", code, errOut)
	}
	if !regexp.MustCompile(`^pruned 2000 executions and 2000 effects before \S+ \(\d+ rows, 6000 of them events\) in \d+ transactions \(longest [^)]+\); ` +
		`re-audited 1 executions; database [\d.]+ MiB -> [\d.]+ MiB \(incremental vacuum\)\n$`).MatchString(out) {
		t.Errorf("prune: got %q, want a summary of 2000 executions, 6000 events, 1 re-audited, incremental vacuum", out)
	}
	after := fileSize(t, db)
	if after > before/4 {
		t.Errorf("file size: got %d bytes after the prune, want under a quarter of the %d before", after, before)
	}
	export, _, code := runCLI(t, "export", "--db", db)
	if code != 0 || strings.Contains(export, "old_") || !strings.Contains(export, "recent_peer") {
		t.Errorf("export after the prune: got exit %d, want recent_peer's events only:\n%.500s", code, export)
	}
	if out, _, _ := runCLI(t, "audit", "--db", db); strings.Contains(out, "old_") {
		t.Errorf("audit after the prune: got %q, want no finding about a pruned execution", out)
	}

	// Nothing more to do: a second run deletes nothing.
	if out, _, code := runCLI(t, "prune", "--db", db, "--before", "30d"); code != 0 || !strings.HasPrefix(out, "pruned 0 executions and 0 effects") {
		t.Errorf("a second prune: got exit %d and %q, want nothing pruned", code, out)
	}
}

// TestPruneCommandConvertsAnOldFile: a database created before incremental
// vacuum is rewritten once, and shrinks.
func TestPruneCommandConvertsAnOldFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "old.db")
	importNDJSON(t, db, oldAndNewNDJSON(1000, time.Now()))
	raw, err := sql.Open("sqlite", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`PRAGMA auto_vacuum = NONE`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`VACUUM`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if got := sqlInt(t, db, `PRAGMA auto_vacuum`); got != 0 {
		t.Fatalf("auto_vacuum of the simulated old file: got %d, want 0", got)
	}
	before := fileSize(t, db)
	out, errOut, code := runCLI(t, "prune", "--db", db, "--before", time.Now().Add(-30*24*time.Hour).UTC().Format(time.DateOnly))
	if code != 0 || !strings.Contains(out, "rewritten once by VACUUM") {
		t.Fatalf("prune: got exit %d and %q (%s), want it rewritten", code, out, errOut)
	}
	if got := sqlInt(t, db, `PRAGMA auto_vacuum`); got != 2 {
		t.Errorf("auto_vacuum after the prune: got %d, want 2 (incremental)", got)
	}
	if after := fileSize(t, db); after > before/4 {
		t.Errorf("file size: got %d after, want under a quarter of %d", after, before)
	}
}

func TestPruneCommandMistakes(t *testing.T) {
	db := filepath.Join(t.TempDir(), "x.db")
	importNDJSON(t, db, oldAndNewNDJSON(1, time.Now()))
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"prune", "--db", db}, "--before is required"},
		{[]string{"prune", "--db", db, "--before", "last tuesday"}, `--before: "last tuesday": want a date`},
		{[]string{"prune", "--db", db, "--before", "30d", "--effects-before", "-3d"}, "--effects-before"},
		{[]string{"prune", "--db", filepath.Join(t.TempDir(), "missing.db"), "--before", "30d"}, "no such database"},
		{[]string{"serve", "--db", db, "--retain", "forever"}, `"forever": want a number of days`},
		{[]string{"serve", "--db", db, "--retain-effects", "7d"}, "--retain-effects needs --retain"},
		{[]string{"serve", "--db", db, "--redact", "ssn,--"}, `--redact: "--": a key needs a letter or a digit`},
	} {
		_, errOut, code := runCLI(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.wantErr) {
			t.Errorf("oncetrace %s: got exit %d and %q, want an error mentioning %q", strings.Join(tc.args, " "), code, errOut, tc.wantErr)
		}
	}
}

func TestParseRetention(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, true}, {"off", 0, true}, {"0", 0, true}, {"30d", 30 * 24 * time.Hour, true}, {"2w", 14 * 24 * time.Hour, true},
		{"1.5d", 36 * time.Hour, true}, {"72h", 72 * time.Hour, true}, {"90m", 90 * time.Minute, true},
		{"-1d", 0, false}, {"d", 0, false}, {"-5m", 0, false}, {"forever", 0, false}, {"1e9d", 0, false},
	} {
		got, err := parseRetention(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseRetention(%q): got %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func atoi(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

// secretEvents carry secrets where redaction must find them: nested in
// args, in arrays of objects, in a result, in labels; and an OTLP tool
// span whose JSON-string arguments hold an API key, with an HTTP client
// span whose URL holds a token and whose headers hold a cookie.
const secretEvents = `{"type":"execution","execution_id":"exec_secret","status":"running","started_at":"2026-06-30T14:02:11Z","labels":{"customer":"acme","deploy_token":"SECRET-LABEL-1"}}
{"type":"attempt","execution_id":"exec_secret","step_id":"login","attempt":1,"effect":"write","args":{"user":"jordan","password":"SECRET-PASSWORD-2","headers":[{"Authorization":"Bearer SECRET-BEARER-3"},{"Accept":"*/*"}],"nested":{"deeper":{"client_secret":"SECRET-CLIENT-4"}}},"result":{"session":{"access_token":"SECRET-TOKEN-5"},"ok":true},"started_at":"2026-06-30T14:02:12Z","ended_at":"2026-06-30T14:02:13Z","outcome":"ok"}
`

func otlpSecretBody() string {
	attr := func(k, v string) string { return fmt.Sprintf(`{"key":%q,"value":{"stringValue":%q}}`, k, v) }
	return `{"resourceSpans":[{"resource":{},"scopeSpans":[{"spans":[` +
		`{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"agent","startTimeUnixNano":"1782828131000000000","endTimeUnixNano":"1782828135000000000"},` +
		`{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"c7ad6b7169203332","parentSpanId":"b7ad6b7169203331","name":"execute_tool charge","kind":1,` +
		`"startTimeUnixNano":"1782828132000000000","endTimeUnixNano":"1782828133000000000","attributes":[` +
		attr("gen_ai.operation.name", "execute_tool") + `,` + attr("gen_ai.tool.name", "charge") + `,` +
		attr("gen_ai.tool.call.arguments", `{"amount":12,"apiKey":"SECRET-OTLP-KEY-6"}`) + `,` +
		attr("http.request.header.authorization", "Bearer SECRET-OTLP-HEADER-7") + `]},` +
		`{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"d7ad6b7169203333","parentSpanId":"c7ad6b7169203332","name":"POST","kind":3,` +
		`"startTimeUnixNano":"1782828132100000000","endTimeUnixNano":"1782828132200000000","attributes":[` +
		attr("http.request.method", "POST") + `,` + attr("url.full", "https://api.pay.dev/v1/charges?token=SECRET-URL-8&currency=eur") + `,` +
		attr("http.request.header.cookie", "sid=SECRET-COOKIE-9") + `]}` +
		`]}]}]}`
}

var secretValues = []string{"SECRET-LABEL-1", "SECRET-PASSWORD-2", "SECRET-BEARER-3", "SECRET-CLIENT-4", "SECRET-TOKEN-5",
	"SECRET-OTLP-KEY-6", "SECRET-OTLP-HEADER-7", "SECRET-URL-8", "SECRET-COOKIE-9"}

// fileBytes is the database as it is on disk: the main file and its WAL.
func fileBytes(t *testing.T, db string) []byte {
	t.Helper()
	var all []byte
	for _, p := range []string{db, db + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

func postSecrets(t *testing.T, s *demoServer) {
	t.Helper()
	for _, req := range []struct{ path, ctype, body string }{
		{"/api/v1/events", "application/x-ndjson", secretEvents},
		{"/v1/traces", "application/json", otlpSecretBody()},
	} {
		resp, err := demoHTTP.Post(s.url+req.path, req.ctype, strings.NewReader(req.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: got %d, want 200", req.path, resp.StatusCode)
		}
	}
}

// TestServeRedactsBeforeStorage: with the default --redact, no secret
// reaches the SQLite file's bytes, what is stored says [redacted], and an
// export imported elsewhere and exported again is the same. With
// redaction off (an empty --redact) the same requests leave the secrets
// in the file, which shows that the search would find them.
func TestServeRedactsBeforeStorage(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "redact.db")
	s := startDemoServer(t, db, "redact.log")
	postSecrets(t, s)
	postSecrets(t, s) // a re-send: every event is a duplicate
	var run struct {
		Execution struct {
			Labels map[string]string `json:"labels"`
		} `json:"execution"`
	}
	getJSON(t, s.url+"/api/v1/executions/exec_secret", &run)
	if got := run.Execution.Labels["deploy_token"]; got != "[redacted]" {
		t.Errorf("label deploy_token: got %q, want [redacted]", got)
	}
	s.stop(t)

	raw := fileBytes(t, db)
	for _, secret := range secretValues {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the database file holds %s", secret)
		}
	}
	if n := bytes.Count(raw, []byte("[redacted]")); n < 6 {
		t.Errorf("the database file: got %d [redacted] masks, want them where the secrets were", n)
	}
	if got := sqlInt(t, db, `SELECT count(*) FROM events`); got != 5 {
		t.Errorf("events stored after sending everything twice: got %d, want 5 (the re-sends are duplicates)", got)
	}

	// Export, import into a new database, export again: the same bytes.
	export1, _, code := runCLI(t, "export", "--db", db)
	if code != 0 || strings.Contains(export1, "SECRET-") {
		t.Fatalf("export: got exit %d, secrets: %v", code, strings.Contains(export1, "SECRET-"))
	}
	db2 := filepath.Join(dir, "reimported.db")
	if _, errOut, code := runCLI(t, "import", "--db", db2, "--in", writeFile(t, "export.ndjson", export1)); code != 0 {
		t.Fatalf("import: exit %d: %s", code, errOut)
	}
	if export2, _, _ := runCLI(t, "export", "--db", db2); export2 != export1 {
		t.Errorf("export after import: differs from the first export\nfirst:  %.300s\nsecond: %.300s", export1, export2)
	}

	// import redacts an export made without redaction.
	plain := filepath.Join(dir, "plain.db")
	s = startDemoServer(t, plain, "plain.log", "--redact", "")
	postSecrets(t, s)
	s.stop(t)
	raw = fileBytes(t, plain)
	for _, secret := range secretValues {
		// The header attributes never become stored fields.
		if secret == "SECRET-OTLP-HEADER-7" || secret == "SECRET-COOKIE-9" {
			continue
		}
		if !bytes.Contains(raw, []byte(secret)) {
			t.Errorf("with --redact '': the database file lacks %s, want it stored as sent", secret)
		}
	}
	plainExport, _, _ := runCLI(t, "export", "--db", plain)
	scrubbed := filepath.Join(dir, "scrubbed.db")
	if _, errOut, code := runCLI(t, "import", "--db", scrubbed, "--in", writeFile(t, "plain.ndjson", plainExport)); code != 0 {
		t.Fatalf("import: exit %d: %s", code, errOut)
	}
	if out, _, _ := runCLI(t, "export", "--db", scrubbed); strings.Contains(out, "SECRET-") {
		t.Errorf("an unredacted export imported with the default --redact: got secrets in %.300s", out)
	}
}
