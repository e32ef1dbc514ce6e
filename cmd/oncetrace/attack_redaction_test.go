package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// redactedNames are the names issue 22's attack found stored in plain
// text, the rest of the default list's spellings, and ssn, which the test
// adds with --redact +ssn.
var redactedNames = []string{
	"passwd", "pwd", "private_key", "credentials", "session_id", "auth", "bearer",
	"secret", "token", "api_key", "apikey", "authorization", "cookie", "set-cookie", "password",
	"client_secret", "refresh_token", "access_token", "id_token", "x-api-key", "signature", "sig",
	"x-amz-signature", "x-amz-credential", "x-amz-security-token", "sessionid", "jwt", "otp",
	"userPassword", "X-Api-Key", "stripe_api_key", "http.request.header.authorization", "ssn",
}

// redactionLoad is what the test posts: every secret is unique, so that
// finding one anywhere names the path that leaked it; every neighbour is
// a value redaction must keep.
type redactionLoad struct {
	secrets    []string
	neighbours []string
	native     []map[string]any
	otlp       string
}

func newRedactionLoad() *redactionLoad {
	l := &redactionLoad{}
	secret := func(where string) string {
		s := fmt.Sprintf("SECRETv%02d%s", len(l.secrets), strings.NewReplacer(".", "", "-", "", "_", "").Replace(where))
		l.secrets = append(l.secrets, s)
		return s
	}
	neighbour := func(s string) string { l.neighbours = append(l.neighbours, s); return s }

	top := map[string]any{}
	deep := map[string]any{}
	for _, name := range redactedNames {
		top[name] = secret("top" + name)
		deep[name] = secret("deep" + name)
	}
	top["author"] = neighbour("NEIGHBOURauthorJo")
	top["max_tokens"] = json.Number(neighbour("987654"))
	top["token_count"] = json.Number(neighbour("876543"))
	top["keyboard"] = neighbour("NEIGHBOURkeyboardUK")
	top["signature_required"] = true
	top["nested"] = map[string]any{"deeper": []any{deep, map[string]any{"passage": neighbour("NEIGHBOURpassage")}}}
	top["download"] = "https://" + neighbour("files.neighbour-host.example") + "/dl?" + neighbour("keepme=NEIGHBOURq") + "&token=" + secret("urltoken") +
		"&sig=" + secret("urlsig") + "&ssn=" + secret("urlssn")
	top["db"] = "postgres://dbuser:" + secret("userinfo") + "@" + neighbour("db.neighbour-host.example") + "/app"
	top["form"] = "grant_type=refresh_token&refresh_token=" + secret("form") + "&" + neighbour("scope=NEIGHBOURscope")
	top["raw_json"] = `{"user":"` + neighbour("NEIGHBOURuser") + `","pwd":"` + secret("jsoninstring") + `"}`
	top["headers"] = "Host: " + neighbour("NEIGHBOURhost.example") + "\r\nAuthorization: Bearer " + secret("headerline") + "\r\n"

	const x = "exec_redaction"
	l.native = []map[string]any{
		{"type": "execution", "execution_id": x, "status": "running", "labels": map[string]any{"customer": neighbour("NEIGHBOURacme"), "deploy_token": secret("label")}},
		{"type": "attempt", "execution_id": x, "step_id": "login", "attempt": 1, "tool": "login", "effect": "write",
			"started_at": "2026-06-30T14:02:11Z", "ended_at": "2026-06-30T14:02:12Z", "outcome": "error",
			"args": top, "result": map[string]any{"session": map[string]any{"accessToken": secret("result")}, "status": neighbour("NEIGHBOURstatus")},
			"error": "401 Client Error for url: https://api.example.dev/v1?api_key=" + secret("error") + "&" + neighbour("page=NEIGHBOURpage")},
		{"type": "effect", "provider": "mail", "effect_id": "m_1", "execution_id": x, "target": "https://hooks.example.dev/in?sig=" + secret("target"),
			"summary": "POST /v1/send?access_token=" + secret("summary") + " to=" + neighbour("NEIGHBOURto")},
	}

	// OpenTelemetry: a tool call whose arguments hold secrets, with a
	// header attribute, and the HTTP call below it to a presigned URL.
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	start := time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC).UnixNano()
	str := func(k, v string) string { return fmt.Sprintf(`{"key":%q,"value":{"stringValue":%q}}`, k, v) }
	strs := func(k, v string) string {
		return fmt.Sprintf(`{"key":%q,"value":{"arrayValue":{"values":[{"stringValue":%q}]}}}`, k, v)
	}
	span := func(id, parent, name string, kind int, status string, attrs ...string) string {
		p := ""
		if parent != "" {
			p = fmt.Sprintf(`"parentSpanId":%q,`, parent)
		}
		return fmt.Sprintf(`{"traceId":%q,"spanId":%q,%s"name":%q,"kind":%d,"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[%s],"status":%s}`,
			traceID, id, p, name, kind, start, start+int64(time.Second), strings.Join(attrs, ","), status)
	}
	args, _ := json.Marshal(map[string]any{"to": neighbour("NEIGHBOURotlpto"), "private_key": secret("otlpargs"), "pwd": secret("otlppwd"), "author": neighbour("NEIGHBOURotlpauthor")})
	presigned := "https://" + neighbour("bucket.neighbour-s3.example") + "/k.pdf?" + neighbour("X-Amz-Algorithm=AWS4-HMAC-SHA256") +
		"&X-Amz-Credential=" + secret("amzcred") + "&X-Amz-Signature=" + secret("amzsig") + "&" + neighbour("X-Amz-Expires=600") + "&sig=" + secret("sassig")
	spans := []string{
		span("00000000000000a0", "", "invoke_agent billing-agent", 1, `{}`, str("gen_ai.operation.name", "invoke_agent"), str("gen_ai.agent.name", "billing-agent")),
		span("00000000000000c1", "00000000000000a0", "execute_tool fetch_invoice", 1, `{}`, str("gen_ai.operation.name", "execute_tool"),
			str("gen_ai.tool.name", "fetch_invoice"), str("gen_ai.tool.call.arguments", string(args)),
			strs("http.request.header.authorization", "Bearer "+secret("otlptoolheader"))),
		span("00000000000000d1", "00000000000000c1", "GET", 3,
			fmt.Sprintf(`{"code":2,"message":%q}`, "GET https://api.example.dev/x?access_token="+secret("otlperror")+" failed"),
			str("http.request.method", "GET"), str("url.full", presigned), strs("http.request.header.authorization", "Bearer "+secret("otlpheader")),
			strs("http.response.header.set-cookie", "sid="+secret("otlpcookie")), str("http.response.status_code", "403")),
	}
	l.otlp = `{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"spans":[` + strings.Join(spans, ",") + `]}]}]}`
	return l
}

// post sends the load to a server: the native events, then the spans.
func (l *redactionLoad) post(t *testing.T, serverURL string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"events": l.native})
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []struct{ path, body string }{{"/api/v1/events", string(body)}, {"/v1/traces", l.otlp}} {
		resp, err := demoHTTP.Post(serverURL+req.path, "application/json", strings.NewReader(req.body))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: got %d %s, want 200", req.path, resp.StatusCode, answer)
		}
	}
}

// check fails for every secret found in what, and every neighbour missing.
func (l *redactionLoad) check(t *testing.T, what string, data []byte) {
	t.Helper()
	for _, s := range l.secrets {
		if bytes.Contains(data, []byte(s)) {
			t.Errorf("%s: holds the secret %s, want it redacted", what, s)
		}
	}
	for _, n := range l.neighbours {
		if !bytes.Contains(data, []byte(n)) {
			t.Errorf("%s: lacks %q, want it kept (redaction must not hide what is no secret)", what, n)
		}
	}
}

func exportLog(t *testing.T, db string) []byte {
	t.Helper()
	stdout, stderr, code := runCLI(t, "export", "--db", db)
	if code != 0 || stdout == "" {
		t.Fatalf("oncetrace export: exit %d, %d bytes\n%s", code, len(stdout), stderr)
	}
	return []byte(stdout)
}

// TestAttackRedaction is issue 22's redaction attack: each secret name,
// posted with a unique value through the native API (top level, nested,
// inside a URL, a form and a JSON string, in a label, an error, an
// effect's target and summary) and through OTLP (tool arguments, header
// attributes, url.full with sig= and X-Amz-Signature=, a status message),
// to a real server, is found nowhere afterwards: not in the SQLite file
// or its WAL, not in the export; while the names and values that only
// look alike (author, max_tokens, the URL's host and other parameters)
// are all there. It is a test of the binary because the default list and
// --redact are the command's: what a user runs is what is checked.
func TestAttackRedaction(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "redact.db")
		load := newRedactionLoad()
		s := startDemoServer(t, db, "redact.log", "--redact", "+ssn")
		load.post(t, s.url)
		// While the server runs, the recent pages are in the WAL.
		var files []byte
		for _, f := range []string{db, db + "-wal"} {
			data, err := os.ReadFile(f)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			files = append(files, data...)
		}
		load.check(t, "the SQLite file and its WAL, serving", files)
		s.stop(t)
		data, err := os.ReadFile(db)
		if err != nil {
			t.Fatal(err)
		}
		load.check(t, "the SQLite file, stopped", data)
		load.check(t, "oncetrace export", exportLog(t, db))
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := postgresDatabase(t)
		pgDump := findPgDump(t)
		load := newRedactionLoad()
		s := startDemoServer(t, dsn, "redact.log", "--redact", "+ssn")
		load.post(t, s.url)
		s.stop(t)
		dump, err := exec.Command(pgDump, "--no-owner", "--dbname", dsn).Output()
		if err != nil {
			t.Fatalf("pg_dump: %v", err)
		}
		load.check(t, "pg_dump of the database", dump)
		load.check(t, "oncetrace export", exportLog(t, dsn))
	})
}

// findPgDump is pg_dump from PATH or Debian's versioned directories.
func findPgDump(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("pg_dump"); err == nil {
		return p
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_dump")
	if len(found) == 0 {
		t.Fatal("pg_dump: not found on PATH or in /usr/lib/postgresql/*/bin (PostgreSQL's client tools)")
	}
	return found[len(found)-1]
}
