package ingest_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

func TestRedactorMatches(t *testing.T) {
	r := ingest.NewRedactor(ingest.DefaultRedactKeys)
	for _, tc := range []struct {
		key  string
		want bool
	}{
		{"password", true}, {"Password", true}, {"PASSWORD", true}, {"db_password", true}, {"passwordHash", true},
		{"secret", true}, {"client_secret", true}, {"clientSecret", true}, {"CLIENT-SECRET", true},
		{"token", true}, {"access_token", true}, {"refreshToken", true}, {"X-Auth-Token", true}, {"OAuthToken", true},
		{"authorization", true}, {"Authorization", true}, {"proxy-authorization", true}, {"http.request.header.authorization", true},
		{"api_key", true}, {"api-key", true}, {"x-api-key", true}, {"apiKey", true}, {"APIKey", true}, {"ApiKey", true},
		{"apikey", true}, {"APIKEY", true}, {"API-KEY", true}, {"cookie", true}, {"Set-Cookie", true}, {"http.response.header.set-cookie", true},
		{"next_page_token", true},
		// The attack's names, and the rest of the default list.
		{"passwd", true}, {"pwd", true}, {"DB_PWD", true}, {"userPassword", true}, {"password2", true}, {"passphrase", true},
		{"private_key", true}, {"privateKey", true}, {"PRIVATE-KEY", true}, {"credentials", true}, {"aws_credentials", true},
		{"session_id", true}, {"sessionId", true}, {"SESSIONID", true}, {"ASP.NET_SessionId", true}, {"JSESSIONID", true}, {"PHPSESSID", true},
		{"auth", true}, {"auth_header", true}, {"authToken", true}, {"bearer", true}, {"bearer_token", true}, {"jwt", true},
		{"stripe_api_key", true}, {"X-Api-Key", true}, {"x-amz-signature", true}, {"X-Amz-Credential", true}, {"X-Amz-Security-Token", true},
		{"sig", true}, {"signature", true}, {"oauth_signature", true}, {"id_token", true}, {"oauth2Token", true}, {"otp", true}, {"cvv2", true},
		{"Stripe-Signature", true}, {"session.id", true}, {"aws_secret_access_key", true}, {"count_token", true},
		{"cookies", true}, {"auth[token]", true}, {"access_key", true}, {"aws_secret_access_key", true},

		// Words, not substrings: token counts and tokenizers are not secrets.
		{"max_tokens", false}, {"input_tokens", false}, {"gen_ai.usage.output_tokens", false}, {"gen_ai.usage.input_tokens", false},
		{"tokens_used", false}, {"tokenizer", false}, {"author", false}, {"authority", false}, {"keyboard", false}, {"passage", false},
		{"secretary", false}, {"signal", false}, {"design", false}, {"session", false}, {"pin", false}, {"pass", false},
		{"idempotency_key", false}, {"key", false}, {"api", false}, {"to", false}, {"", false},
		// A qualifier after the secret's words: a property of it, not it.
		{"token_count", false}, {"llm.token_count.prompt", false}, {"promptTokenCount", false}, {"token_usage", false},
		{"passwords_reset_count", false}, {"password_length", false}, {"auth_type", false}, {"token_url", false},
		{"signature_method", false}, {"auth_url", false}, {"token_type", false}, {"authority", false}, {"oauth_signature_method", false}, {"session_id_expires_at", false},
		// ...but a secret's words after the qualifier still name one.
		{"count_token", true}, {"password_hash", true}, {"signature_required", true},
	} {
		if got := r.Matches(tc.key); got != tc.want {
			t.Errorf("Matches(%q): got %v, want %v", tc.key, got, tc.want)
		}
	}
	// Terms a user adds are matched by the same rule, parts and all.
	custom := ingest.NewRedactor([]string{"ssn", "card-number"})
	for key, want := range map[string]bool{"ssn": true, "customer_SSN": true, "cardNumber": true, "card_number_length": false, "card": false, "ssns": false} {
		if got := custom.Matches(key); got != want {
			t.Errorf("--redact ssn,card-number: Matches(%q): got %v, want %v", key, got, want)
		}
	}
	var none *ingest.Redactor
	if none.Matches("password") {
		t.Errorf("a nil Redactor: got a match, want none")
	}
	if ingest.NewRedactor(nil) != nil || ingest.NewRedactor([]string{" ", "--"}) != nil {
		t.Errorf("NewRedactor of no terms: got a Redactor, want nil")
	}
}

func TestParseRedactKeys(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", []string{}, false},
		{"password,ssn", []string{"password", "ssn"}, false},
		{" password , ssn ,", []string{"password", "ssn"}, false},
		{"+ssn,cookies", append(slices.Clone(ingest.DefaultRedactKeys), "ssn", "cookies"), false},
		{"ssn,--", nil, true},
	} {
		got, err := ingest.ParseRedactKeys(tc.in)
		if (err != nil) != tc.wantErr || (!tc.wantErr && !slices.Equal(got, tc.want)) {
			t.Errorf("ParseRedactKeys(%q): got %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestParseEventRedacts: nested keys, arrays of objects, labels and HTTP
// URLs are masked in the event and in its stored body, and nothing else
// changes.
func TestParseEventRedacts(t *testing.T) {
	for _, tc := range []struct {
		name, raw, want string // want: the stored body without its id
	}{
		{"top-level and nested keys of args and result",
			`{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,` +
				`"args":{"to":"j@acme.dev","password":"hunter2","login":{"api_key":"sk_live_1","user":"j"},"opts":{"max_tokens":5}},` +
				`"result":{"session":{"accessToken":"eyJ.payload.sig"},"status":"sent"}}`,
			`{"args":{"login":{"api_key":"[redacted]","user":"j"},"opts":{"max_tokens":5},"password":"[redacted]","to":"j@acme.dev"},` +
				`"attempt":1,"execution_id":"x","result":{"session":{"accessToken":"[redacted]"},"status":"sent"},"step_id":"s","type":"attempt"}`},
		{"arrays of objects, any value type, nulls kept",
			`{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,` +
				`"args":[{"headers":[{"Authorization":"Bearer abc"},{"Accept":"*/*"}]},{"secret":{"nested":[1,2]}},{"token":12345},{"cookie":null}]}`,
			`{"args":[{"headers":[{"Authorization":"[redacted]"},{"Accept":"*/*"}]},{"secret":"[redacted]"},{"token":"[redacted]"},{"cookie":null}],` +
				`"attempt":1,"execution_id":"x","step_id":"s","type":"attempt"}`},
		{"labels",
			`{"type":"execution","execution_id":"x","labels":{"customer":"acme","deploy_token":"ghp_123","Cookie":"sid=1"}}`,
			`{"execution_id":"x","labels":{"Cookie":"[redacted]","customer":"acme","deploy_token":"[redacted]"},"type":"execution"}`},
		{"HTTP URLs: query parameters and credentials",
			`{"type":"span","execution_id":"x","trace_id":"t","span_id":"p","role":"http",` +
				`"http_url":"https://bob:pw1@api.acme.dev/v1/send?api_key=sk_2&to=j%40acme.dev&access%5Ftoken=t3#frag"}`,
			`{"execution_id":"x","http_url":"https://[redacted]:[redacted]@api.acme.dev/v1/send?api_key=[redacted]&to=j%40acme.dev&access%5Ftoken=[redacted]#frag",` +
				`"role":"http","span_id":"p","trace_id":"t","type":"span"}`},
		{"words: max_tokens and token_count are kept, booleans too",
			`{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,"args":{"to":"j","max_tokens":5,"token_count":2,"signature_required":true,"otp":123456}}`,
			`{"args":{"max_tokens":5,"otp":"[redacted]","signature_required":true,"to":"j","token_count":2},"attempt":1,"execution_id":"x","step_id":"s","type":"attempt"}`},
		{"strings: URLs, query strings and JSON inside values; text fields",
			`{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,` +
				`"args":{"url":"https://s.blob.core.windows.net/c/b?sv=2022&sig=az%2Bsig9&se=2026","form":"grant_type=password&password=pw9&scope=a",` +
				`"body":"{\"user\": \"j\", \"pwd\": \"pw10\"}"},"error":"401 for url: https://api.acme.dev/v1?api_key=sk_11&page=2"}`,
			`{"args":{"body":"{\"user\": \"j\", \"pwd\": \"[redacted]\"}","form":"grant_type=password&password=[redacted]&scope=a",` +
				`"url":"https://s.blob.core.windows.net/c/b?sv=2022&sig=[redacted]&se=2026"},"attempt":1,"error":"401 for url: https://api.acme.dev/v1?api_key=[redacted]&page=2",` +
				`"execution_id":"x","step_id":"s","type":"attempt"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := ingest.ParseEvent([]byte(tc.raw), ingest.DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]any
			if err := json.Unmarshal(ev.Body, &body); err != nil {
				t.Fatal(err)
			}
			delete(body, "id")
			var buf strings.Builder
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(body); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(buf.String()); got != tc.want {
				t.Errorf("stored body:\n got %s\nwant %s", got, tc.want)
			}
			for _, secret := range []string{"hunter2", "sk_live_1", "eyJ", "Bearer abc", "ghp_123", "sid=1", "pw1", "sk_2", "t3", "12345", "az%2Bsig9", "pw9", "pw10", "sk_11"} {
				if strings.Contains(string(ev.Body), secret) {
					t.Errorf("stored body holds %q: %s", secret, ev.Body)
				}
			}
			// The stored body reads back as the same event, and parsing it
			// again (an import) redacts nothing more.
			again, err := ingest.ParseEvent(ev.Body, ingest.DefaultLimits)
			if err != nil || string(again.Body) != string(ev.Body) || again.ID != ev.ID {
				t.Errorf("re-parsed: got %s %s (%v), want the same body and id", again.ID, again.Body, err)
			}
			stored, err := ingest.ParseStored(ev.Body)
			if err != nil || string(stored.Body) != string(ev.Body) {
				t.Errorf("ParseStored: got %s (%v), want the same body", stored.Body, err)
			}
		})
	}
}

// TestParseEventRedactedID: an event without an id gets one derived from
// its redacted form, so a re-send is still a duplicate, and the id is no
// hash of the secret (two events differing only in a secret are one).
func TestParseEventRedactedID(t *testing.T) {
	parse := func(raw string, lim ingest.Limits) trace.Event {
		t.Helper()
		ev, err := ingest.ParseEvent([]byte(raw), lim)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	a := `{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,"args":{"to":"j","password":"hunter2"}}`
	b := `{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,"args":{"to":"j","password":"correct horse"}}`
	masked := `{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,"args":{"to":"j","password":"[redacted]"}}`
	first, resend, other, already := parse(a, ingest.DefaultLimits), parse(a, ingest.DefaultLimits), parse(b, ingest.DefaultLimits), parse(masked, ingest.DefaultLimits)
	if first.ID != resend.ID || first.ID != other.ID || first.ID != already.ID {
		t.Errorf("ids: got %s, %s, %s, %s, want one id for all four", first.ID, resend.ID, other.ID, already.ID)
	}
	// A label must be a string whatever its key: masking does not make a
	// number acceptable.
	if _, err := ingest.ParseEvent([]byte(`{"type":"execution","execution_id":"x","labels":{"token":5}}`), ingest.DefaultLimits); err == nil ||
		!strings.Contains(err.Error(), "labels.token: must be a string") {
		t.Errorf("a number label under a secret's key: got %v, want labels.token: must be a string", err)
	}
	off := ingest.DefaultLimits
	off.Redact = nil
	plain := parse(a, off)
	if plain.ID == first.ID || !strings.Contains(string(plain.Body), "hunter2") {
		t.Errorf("redaction off: got id %s and body %s, want another id and the password kept", plain.ID, plain.Body)
	}
	// The raw log is read back as stored, whatever --redact says now: an
	// event stored without redaction keeps its body and its id.
	if stored, err := ingest.ParseStored(plain.Body); err != nil || stored.ID != plain.ID || string(stored.Body) != string(plain.Body) {
		t.Errorf("ParseStored of an unredacted body: got %s %s (%v), want it as stored", stored.ID, stored.Body, err)
	}
	custom := ingest.DefaultLimits
	custom.Redact = ingest.NewRedactor([]string{"to"})
	if ev := parse(a, custom); !strings.Contains(string(ev.Body), "hunter2") || strings.Contains(string(ev.Body), `"j"`) {
		t.Errorf("--redact to: got %s, want to masked and password kept", ev.Body)
	}
}

// TestMapOTLPRedacts: tool arguments (objects, JSON strings, OpenLLMetry's
// wrapped kwargs) and results, and HTTP URLs, are masked; the step id is
// derived from the masked arguments, so it is no hash of the secret and
// two calls differing only in it are attempts of one step.
func TestMapOTLPRedacts(t *testing.T) {
	events := mapSpans(t, nil,
		testSpan{id: 2, parent: 1, name: "execute_tool login", start: 10, attrs: tool(kv{"gen_ai.tool.name": "login",
			"gen_ai.tool.call.arguments": `{"user":"j","password":"hunter2"}`, "gen_ai.tool.call.result": `{"session_token":"st_1","ok":true}`,
			"http.request.header.authorization": []any{"Bearer abc"}})},
		testSpan{id: 3, parent: 1, name: "execute_tool login", start: 20, attrs: tool(kv{"gen_ai.tool.name": "login",
			"gen_ai.tool.call.arguments": kv{"user": "j", "password": "other"}})},
		testSpan{id: 4, parent: 1, name: "send", start: 30, attrs: kv{"traceloop.span.kind": "tool", "traceloop.entity.name": "send",
			"traceloop.entity.input": `{"args":[],"kwargs":{"to":"j","api_key":"sk_3"}}`}},
		testSpan{id: 5, parent: 2, name: "POST", kind: 3, start: 11, attrs: kv{"http.request.method": "POST",
			"url.full": "https://api.acme.dev/login?token=qt_4&x=1", "http.request.header.cookie": []any{"sid=5"}}},
	)
	a2, a3, a4 := attemptOf(t, events, 2), attemptOf(t, events, 3), attemptOf(t, events, 4)
	if got, want := string(a2.Args), `{"password":"[redacted]","user":"j"}`; got != want {
		t.Errorf("JSON string arguments: got %s, want %s", got, want)
	}
	if got, want := string(a2.Result), `{"ok":true,"session_token":"[redacted]"}`; got != want {
		t.Errorf("result: got %s, want %s", got, want)
	}
	if got, want := string(a3.Args), `{"password":"[redacted]","user":"j"}`; got != want {
		t.Errorf("map arguments: got %s, want %s", got, want)
	}
	if got, want := string(a4.Args), `{"api_key":"[redacted]","to":"j"}`; got != want {
		t.Errorf("OpenLLMetry kwargs: got %s, want %s", got, want)
	}
	if a2.StepID != a3.StepID {
		t.Errorf("step ids: got %s and %s, want one step (the arguments differ only in a secret)", a2.StepID, a3.StepID)
	}
	if got := spanOf(t, events, 5).HTTPURL; got != "https://api.acme.dev/login?token=[redacted]&x=1" {
		t.Errorf("url.full: got %s, want the token masked", got)
	}
	for id, ev := range events {
		for _, secret := range []string{"hunter2", "other", "st_1", "Bearer abc", "sk_3", "qt_4", "sid=5"} {
			if strings.Contains(string(ev.Body), secret) || strings.Contains(ev.ID, secret) {
				t.Errorf("event %s holds %q: %s", id, secret, ev.Body)
			}
		}
	}

	// With redaction off, the same spans keep their secrets: two steps.
	off := defaultOTLPConfig
	off.Limits.Redact = nil
	plain := mapSpansWith(t, off, nil,
		testSpan{id: 2, parent: 1, name: "execute_tool login", start: 10, attrs: tool(kv{"gen_ai.tool.name": "login",
			"gen_ai.tool.call.arguments": `{"user":"j","password":"hunter2"}`})},
		testSpan{id: 3, parent: 1, name: "execute_tool login", start: 20, attrs: tool(kv{"gen_ai.tool.name": "login",
			"gen_ai.tool.call.arguments": kv{"user": "j", "password": "other"}})})
	if p2, p3 := attemptOf(t, plain, 2), attemptOf(t, plain, 3); p2.StepID == p3.StepID || !strings.Contains(string(p2.Args), "hunter2") {
		t.Errorf("redaction off: got steps %s and %s, args %s; want two steps and the password kept", p2.StepID, p3.StepID, p2.Args)
	}
}

// BenchmarkParseEventRedaction: what masking costs an attempt whose
// arguments and result hold no secret (every key is checked) and one
// whose arguments hold two.
func BenchmarkParseEventRedaction(b *testing.B) {
	clean := []byte(`{"type":"attempt","execution_id":"exec_01H8","step_id":"step-4","attempt":1,"tool":"send_invoice_email","effect":"write",` +
		`"provider":"mail-api","args":{"to":"jordan@acme.dev","subject":"Your June invoice","cc":["a@acme.dev","b@acme.dev"],"opts":{"priority":"high","max_tokens":5}},` +
		`"idempotency_key":"ik_a94a0b1d","started_at":"2026-06-30T14:02:11.200Z","ended_at":"2026-06-30T14:02:21.200Z","outcome":"ok","result":{"status":"sent","message_id":"msg_41bcc7"}}`)
	secret := []byte(strings.Replace(string(clean), `"priority":"high"`, `"api_key":"sk_live_1","auth":{"password":"hunter2"}`, 1))
	off := ingest.DefaultLimits
	off.Redact = nil
	for _, bc := range []struct {
		name string
		raw  []byte
		lim  ingest.Limits
	}{{"off", clean, off}, {"on/no-secret", clean, ingest.DefaultLimits}, {"on/two-secrets", secret, ingest.DefaultLimits}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ingest.ParseEvent(bc.raw, bc.lim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRedactText: the secrets inside a string are masked and every other
// byte stays, so a URL keeps its host, path, other parameters and order.
func TestRedactText(t *testing.T) {
	r := ingest.NewRedactor(ingest.DefaultRedactKeys)
	for _, tc := range []struct{ in, want string }{
		// URLs: query parameters, user info; percent-escaped names.
		{"https://api.acme.dev/v1/send?to=j%40acme.dev&token=t1#frag", "https://api.acme.dev/v1/send?to=j%40acme.dev&token=[redacted]#frag"},
		{"https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F2026&X-Amz-Signature=abc123&X-Amz-Expires=60",
			"https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=[redacted]&X-Amz-Signature=[redacted]&X-Amz-Expires=60"},
		{"https://bob:pw1@db.acme.dev:5432/app", "https://[redacted]:[redacted]@db.acme.dev:5432/app"},
		{"https://ghp_tok@github.com/o/r.git", "https://[redacted]@github.com/o/r.git"},
		{"postgres://u:p@h/db?sslmode=disable&password=x", "postgres://[redacted]:[redacted]@h/db?sslmode=disable&password=[redacted]"},
		{"/v1/items?access%5Ftoken=t2&page=3", "/v1/items?access%5Ftoken=[redacted]&page=3"},
		{"token=t3&page=3", "token=[redacted]&page=3"},
		{"sid=1; session_id=s4; theme=dark", "sid=1; session_id=[redacted]; theme=dark"},
		// Prose, JSON and Python dicts inside a string, header lines, Bearer.
		{"login failed: password=hunter2 for j", "login failed: password=[redacted] for j"},
		{`{"user":"j","api_key":"sk_5","n":{"otp":12345},"ok":true,"auth":null}`, `{"user":"j","api_key":"[redacted]","n":{"otp":[redacted]},"ok":true,"auth":null}`},
		{`{'user': 'j', 'client_secret': 'cs\'6', 'max_tokens': 9}`, `{'user': 'j', 'client_secret': '[redacted]', 'max_tokens': 9}`},
		{"POST /v1 HTTP/1.1\r\nHost: acme.dev\r\nX-Api-Key: sk_7\r\nCookie: a=b\r\n\r\n{}", "POST /v1 HTTP/1.1\r\nHost: acme.dev\r\nX-Api-Key: [redacted]\r\nCookie: [redacted]\r\n\r\n{}"},
		{"curl -H 'authorization: Bearer eyJhbGciOi.J9x' https://acme.dev", "curl -H 'authorization: Bearer [redacted]' https://acme.dev"},
		// Kept: nothing secret, byte for byte.
		{"https://api.acme.dev/v1?max_tokens=5&author=j&q=token", "https://api.acme.dev/v1?max_tokens=5&author=j&q=token"},
		{"a bearer of bad news: responsibility", "a bearer of bad news: responsibility"},
		{"Token: ", "Token: "},
		{"mailto:j@acme.dev", "mailto:j@acme.dev"},
		{`{"signature_required": true, "token_count": 3}`, `{"signature_required": true, "token_count": 3}`},
		{"x=1&y=2", "x=1&y=2"},
		{"e=mc²; password", "e=mc²; password"},
		// Masked already: nothing changes, so a stored event parses to itself.
		{"https://[redacted]:[redacted]@h/?token=[redacted]", "https://[redacted]:[redacted]@h/?token=[redacted]"},
		{`{"pwd": "[redacted]"} Authorization: [redacted]`, `{"pwd": "[redacted]"} Authorization: [redacted]`},
	} {
		got, changed := r.Text(tc.in)
		if got != tc.want || changed != (tc.in != tc.want) {
			t.Errorf("Text(%q):\n got %q (changed %v)\nwant %q", tc.in, got, changed, tc.want)
		}
		if again, changed := r.Text(got); again != got || changed {
			t.Errorf("Text of its own output %q: got %q (changed %v), want it unchanged", got, again, changed)
		}
	}
}

// FuzzRedactText: masking is idempotent (a stored event parses to itself)
// and never panics.
func FuzzRedactText(f *testing.F) {
	for _, s := range []string{"https://u:p@h/?token=1&a=2", `{"pwd": "x", 'sig': 5}`, "Cookie: a\r\nbearer abcdefgh1", "a=b;password=c", "https://[redacted]@h"} {
		f.Add(s)
	}
	r := ingest.NewRedactor(ingest.DefaultRedactKeys)
	f.Fuzz(func(t *testing.T, s string) {
		once, _ := r.Text(s)
		if twice, changed := r.Text(once); twice != once || changed {
			t.Errorf("Text(%q) = %q, and again %q (changed %v), want it unchanged", s, once, twice, changed)
		}
	})
}
