package feed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
)

var fingerprintFormat = regexp.MustCompile(`^(mail|http|webhook):[0-9a-f]{32}$`)

func mailFP(t *testing.T, m Mail) string {
	t.Helper()
	fp, _ := m.Fingerprint()
	if !fingerprintFormat.MatchString(fp) {
		t.Fatalf("fingerprint %q: want mail:<32 hex>", fp)
	}
	return fp
}

func TestMailFingerprint(t *testing.T) {
	base := Mail{Recipients: []string{"jordan@acme.dev"}, Subject: "Your June invoice", Body: []string{"Hello Jordan,\n\nYour invoice is attached.\n"}}
	for _, tc := range []struct {
		name string
		m    Mail
		same bool
	}{
		{"the same message", base, true},
		{"CRLF line endings and trailing spaces", Mail{Recipients: []string{"jordan@acme.dev"}, Subject: "Your June invoice",
			Body: []string{"Hello Jordan,  \r\n\r\nYour invoice is attached.\t\r\n\r\n"}}, true},
		{"a display name and upper case", Mail{Recipients: []string{"Jordan <Jordan@ACME.dev>"}, Subject: "Your June invoice", Body: base.Body}, true},
		{"the subject folded", Mail{Recipients: base.Recipients, Subject: " Your  June\r\n invoice ", Body: base.Body}, true},
		{"another recipient", Mail{Recipients: []string{"sam@acme.dev"}, Subject: base.Subject, Body: base.Body}, false},
		{"one more recipient", Mail{Recipients: []string{"jordan@acme.dev", "sam@acme.dev"}, Subject: base.Subject, Body: base.Body}, false},
		{"another subject", Mail{Recipients: base.Recipients, Subject: "Your July invoice", Body: base.Body}, false},
		{"another body", Mail{Recipients: base.Recipients, Subject: base.Subject, Body: []string{"Hello Jordan,\n\nYour invoice is overdue.\n"}}, false},
		{"the body split otherwise", Mail{Recipients: base.Recipients, Subject: base.Subject, Body: []string{"Hello Jordan,", "\nYour invoice is attached.\n"}}, false},
		{"the subject as the body", Mail{Recipients: base.Recipients, Body: []string{base.Subject}}, false},
	} {
		if got := mailFP(t, tc.m) == mailFP(t, base); got != tc.same {
			t.Errorf("%s: same fingerprint %v, want %v", tc.name, got, tc.same)
		}
	}
	// Recipients as a set: order, duplicates and lists do not count.
	a := mailFP(t, Mail{Recipients: []string{"b@y.example", "A@x.example"}, Subject: "s"})
	b := mailFP(t, Mail{Recipients: []string{"a@x.example, B@y.example", "a@x.example"}, Subject: "s"})
	if a != b {
		t.Errorf("recipients in another order, case and grouping: got %s and %s, want one fingerprint", a, b)
	}
}

// The canonical encoding is a contract between instances and versions: a
// change to it must be deliberate (and change fingerprintVersion). The
// value was computed apart from this code, from the encoding's
// description: SHA-256 of "oncetrace-fingerprint-v1\nmail\n" and
// o3:s4:body a1:s64:<sha256 of Hi> s7:subject s17:Your June invoice s2:to
// a1:s15:jordan@acme.dev (without the spaces).
func TestFingerprintIsStable(t *testing.T) {
	fp, summary := Mail{Recipients: []string{"jordan@acme.dev"}, Subject: "Your June invoice", Body: []string{"Hi"}}.Fingerprint()
	if want := "mail:f7e72175d66aa67ad8dfe772c85c46bd"; fp != want {
		t.Errorf("got %s, want %s", fp, want)
	}
	if want := "email to jordan@acme.dev, subject 'Your June invoice'"; summary != want {
		t.Errorf("summary: got %q, want %q", summary, want)
	}
}

func TestMailSummary(t *testing.T) {
	for _, tc := range []struct {
		m    Mail
		want string
	}{
		{Mail{Recipients: []string{"jordan@acme.dev"}, Subject: "Your June invoice"}, "email to jordan@acme.dev, subject 'Your June invoice'"},
		{Mail{Recipients: []string{"d@x", "c@x", "b@x", "a@x"}, Subject: "Hi"}, "email to a@x, b@x (+2 more), subject 'Hi'"},
		{Mail{Recipients: []string{"a@x"}}, "email to a@x"},
		{Mail{Recipients: []string{"a@x"}, Subject: "line\r\nbreak"}, "email to a@x, subject 'line break'"},
	} {
		if _, got := tc.m.Fingerprint(); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.m, got, tc.want)
		}
	}
	_, long := Mail{Recipients: []string{strings.Repeat("a", 300) + "@x", strings.Repeat("b", 300) + "@x"}, Subject: strings.Repeat("é", 500)}.Fingerprint()
	if len(long) > MaxSummaryBytes || !strings.Contains(long, "…") || !strings.HasPrefix(long, "email to aaa") {
		t.Errorf("a long summary: got %d bytes %q, want at most %d, clipped", len(long), long, MaxSummaryBytes)
	}
}

func httpFP(t *testing.T, r HTTPRequest, ignore IgnoredFields) string {
	t.Helper()
	fp, _ := r.Fingerprint(ignore, nil)
	if !fingerprintFormat.MatchString(fp) || !strings.HasPrefix(fp, "http:") {
		t.Fatalf("fingerprint %q: want http:<32 hex>", fp)
	}
	return fp
}

const formType = "application/x-www-form-urlencoded"

func TestHTTPFingerprint(t *testing.T) {
	ignore := NewIgnoredFields()
	form := HTTPRequest{Method: "POST", Path: "/v1/charges", ContentType: formType,
		Body: []byte("amount=2000&currency=usd&customer=cus_123&metadata[order]=42&metadata[idempotency_key]=ik_1")}
	jsonReq := HTTPRequest{Method: "POST", Path: "/v1/send", ContentType: "application/json; charset=utf-8",
		Body: []byte(`{"to":"jordan@acme.dev","subject":"Invoice","meta":{"requestId":"r1","nonce":"n1","sent_at":"2026-06-30T14:02:11Z"},"ts":1}`)}
	for _, tc := range []struct {
		name    string
		a, b    HTTPRequest
		same    bool
		ignored []string // fields added to the default list
	}{
		{"form: fields in another order, another key in the body", form, HTTPRequest{Method: "post", Path: "/v1/charges", ContentType: formType,
			Body: []byte("metadata[idempotency_key]=ik_2&customer=cus_123&metadata[order]=42&currency=usd&amount=2000")}, true, nil},
		{"form: another amount", form, HTTPRequest{Method: "POST", Path: "/v1/charges", ContentType: formType,
			Body: []byte("amount=2001&currency=usd&customer=cus_123&metadata[order]=42")}, false, nil},
		{"form: another path", form, HTTPRequest{Method: "POST", Path: "/v1/refunds", ContentType: formType, Body: form.Body}, false, nil},
		{"form: another method", form, HTTPRequest{Method: "PUT", Path: "/v1/charges", ContentType: formType, Body: form.Body}, false, nil},
		{"form: a repeated field's values in another order", HTTPRequest{Method: "POST", Path: "/p", ContentType: formType, Body: []byte("expand[]=a&expand[]=b")},
			HTTPRequest{Method: "POST", Path: "/p", ContentType: formType, Body: []byte("expand[]=b&expand[]=a")}, false, nil},
		{"json: keys in another order, other key, time and nonce at any depth", jsonReq, HTTPRequest{Method: "POST", Path: "/v1/send", ContentType: "application/json",
			Body: []byte(`{"ts":2,"subject":"Invoice","meta":{"Nonce":"n2","request_id":"r2","sentAt":"2026-06-30T14:02:21Z"},"to":"jordan@acme.dev", "idempotencyKey":"k"}`)}, true, nil},
		{"json: another recipient", jsonReq, HTTPRequest{Method: "POST", Path: "/v1/send", ContentType: "application/json",
			Body: []byte(`{"to":"sam@acme.dev","subject":"Invoice","meta":{"requestId":"r1","nonce":"n1"},"ts":1}`)}, false, nil},
		{"json: a number as a string", HTTPRequest{Method: "POST", Path: "/p", ContentType: "application/json", Body: []byte(`{"amount":2000}`)},
			HTTPRequest{Method: "POST", Path: "/p", ContentType: "application/json", Body: []byte(`{"amount":"2000"}`)}, false, nil},
		{"json: white space", HTTPRequest{Method: "POST", Path: "/p", ContentType: "application/vnd.api+json", Body: []byte(`{"a":[1,2]}`)},
			HTTPRequest{Method: "POST", Path: "/p", ContentType: "application/vnd.api+json", Body: []byte("{ \"a\" : [ 1 , 2 ] }\n")}, true, nil},
		{"json against form with the same fields", HTTPRequest{Method: "POST", Path: "/p", ContentType: "application/json", Body: []byte(`{"a":["1"]}`)},
			HTTPRequest{Method: "POST", Path: "/p", ContentType: formType, Body: []byte(`a=1`)}, false, nil},
		{"query: parameters in another order, a timestamp", HTTPRequest{Method: "POST", Path: "/p", RawQuery: "b=2&a=1&timestamp=1"},
			HTTPRequest{Method: "POST", Path: "/p", RawQuery: "a=1&b=2&timestamp=2"}, true, nil},
		{"query: another value", HTTPRequest{Method: "POST", Path: "/p", RawQuery: "a=1"}, HTTPRequest{Method: "POST", Path: "/p", RawQuery: "a=2"}, false, nil},
		{"query against body", HTTPRequest{Method: "POST", Path: "/p", RawQuery: "a=1"},
			HTTPRequest{Method: "POST", Path: "/p", ContentType: formType, Body: []byte("a=1")}, false, nil},
		{"a field the provider adds: not ignored by default", HTTPRequest{Method: "POST", Path: "/p", ContentType: formType, Body: []byte("a=1&attempt_no=1")},
			HTTPRequest{Method: "POST", Path: "/p", ContentType: formType, Body: []byte("a=1&attempt_no=2")}, false, nil},
		{"a field the provider adds: ignored with the flag", HTTPRequest{Method: "POST", Path: "/p", ContentType: formType, Body: []byte("a=1&attempt_no=1")},
			HTTPRequest{Method: "POST", Path: "/p", ContentType: formType, Body: []byte("a=1&attempt_no=2")}, true, []string{"AttemptNo"}},
		{"the flag's field in JSON at depth", HTTPRequest{Method: "POST", Path: "/p", ContentType: "application/json", Body: []byte(`{"x":[{"attempt_no":1,"a":1}]}`)},
			HTTPRequest{Method: "POST", Path: "/p", ContentType: "application/json", Body: []byte(`{"x":[{"attempt_no":2,"a":1}]}`)}, true, []string{"attempt_no"}},
		{"raw bytes: the same", HTTPRequest{Method: "POST", Path: "/p", ContentType: "text/plain", Body: []byte("hello")},
			HTTPRequest{Method: "POST", Path: "/p", ContentType: "text/plain", Body: []byte("hello")}, true, nil},
		{"raw bytes: others", HTTPRequest{Method: "POST", Path: "/p", ContentType: "text/plain", Body: []byte("hello")},
			HTTPRequest{Method: "POST", Path: "/p", ContentType: "text/plain", Body: []byte("hello!")}, false, nil},
		{"JSON that does not parse is raw bytes", HTTPRequest{Method: "POST", Path: "/p", ContentType: "application/json", Body: []byte(`{"a":1,"ts":1`)},
			HTTPRequest{Method: "POST", Path: "/p", ContentType: "application/json", Body: []byte(`{"a":1,"ts":2`)}, false, nil},
		{"multipart: another boundary", multipartRequest(t, "boundary-one", "hello"), multipartRequest(t, "boundary-two", "hello"), true, nil},
		{"multipart: another file", multipartRequest(t, "boundary-one", "hello"), multipartRequest(t, "boundary-one", "hullo"), false, nil},
	} {
		ig := ignore
		if tc.ignored != nil {
			ig = NewIgnoredFields(tc.ignored...)
		}
		if got := httpFP(t, tc.a, ig) == httpFP(t, tc.b, ig); got != tc.same {
			t.Errorf("%s: same fingerprint %v, want %v", tc.name, got, tc.same)
		}
	}
}

func multipartRequest(t *testing.T, boundary, file string) HTTPRequest {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.SetBoundary(boundary); err != nil {
		t.Fatal(err)
	}
	w.WriteField("to", "jordan@acme.dev")
	w.WriteField("nonce", boundary) // ignored
	fw, _ := w.CreateFormFile("attachment", "invoice.pdf")
	fw.Write([]byte(file))
	w.Close()
	return HTTPRequest{Method: "POST", Path: "/v3/acme/messages", ContentType: w.FormDataContentType(), Body: b.Bytes()}
}

func TestHTTPSummary(t *testing.T) {
	redact := ingest.NewRedactor(ingest.DefaultRedactKeys)
	for _, tc := range []struct {
		r    HTTPRequest
		want string
	}{
		{HTTPRequest{Method: "POST", Path: "/v1/charges", ContentType: formType, Body: []byte("customer=cus_123&currency=usd&amount=2000&idempotency_key=k")},
			"POST /v1/charges amount=2000 currency=usd customer=cus_123"},
		{HTTPRequest{Method: "POST", Path: "/v1/charges", ContentType: formType, Body: []byte("a=1&b=2&c=3&d=4&e=5&f=6")},
			"POST /v1/charges a=1 b=2 c=3 d=4 …"},
		{HTTPRequest{Method: "POST", Path: "/send", ContentType: "application/json", Body: []byte(`{"to":"a@x","meta":{"n":[1,true]},"password":"hunter2"}`)},
			"POST /send meta.n.0=1 meta.n.1=true password=[redacted] to=a@x"},
		{HTTPRequest{Method: "POST", Path: "/send", ContentType: "application/json", Body: []byte(`{"subject":"Your June invoice","body":""}`)},
			`POST /send body="" subject="Your June invoice"`},
		{HTTPRequest{Method: "PUT", Path: "/files/a", ContentType: "application/pdf", Body: []byte("%PDF")}, "PUT /files/a (application/pdf, 4 bytes)"},
		{HTTPRequest{Method: "DELETE", Path: "/v1/customers/cus_1", RawQuery: "api_key=secret"}, "DELETE /v1/customers/cus_1"},
	} {
		if _, got := tc.r.Fingerprint(NewIgnoredFields(), redact); got != tc.want {
			t.Errorf("%s %s: got %q, want %q", tc.r.Method, tc.r.Path, got, tc.want)
		}
	}
	_, long := HTTPRequest{Method: "POST", Path: "/" + strings.Repeat("p", 500), ContentType: formType,
		Body: []byte("a=" + strings.Repeat("v", 500) + "&b=line%0Abreak")}.Fingerprint(NewIgnoredFields(), nil)
	if len(long) > MaxSummaryBytes || strings.ContainsAny(long, "\n\r") {
		t.Errorf("a long summary: got %d bytes %q, want at most %d on one line", len(long), long, MaxSummaryBytes)
	}
}

// Hostile bodies are bounded by what the feed read: deep nesting falls
// back to the raw bytes, a big body is hashed once, nothing panics.
func TestHTTPFingerprintOfHostileBodies(t *testing.T) {
	deep := func(leaf string) []byte {
		return []byte(strings.Repeat(`{"a":`, 200) + leaf + strings.Repeat("}", 200))
	}
	ig := NewIgnoredFields()
	a := httpFP(t, HTTPRequest{Method: "POST", Path: "/p", ContentType: "application/json", Body: deep(`{"ts":1}`)}, ig)
	b := httpFP(t, HTTPRequest{Method: "POST", Path: "/p", ContentType: "application/json", Body: deep(`{"ts":2}`)}, ig)
	if a == b {
		t.Errorf("a body deeper than %d levels: got one fingerprint, want its raw bytes compared (nothing left out)", MaxFingerprintDepth)
	}
	veryDeep := []byte(strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000))
	httpFP(t, HTTPRequest{Method: "POST", Path: "/p", ContentType: "application/json", Body: veryDeep}, ig)

	big := bytes.Repeat([]byte("x"), 1<<20)
	_, summary := HTTPRequest{Method: "POST", Path: "/p", ContentType: formType, Body: append([]byte("a="), big...)}.Fingerprint(ig, nil)
	if len(summary) > MaxSummaryBytes {
		t.Errorf("a 1 MiB field: summary of %d bytes", len(summary))
	}
	var parts bytes.Buffer
	w := multipart.NewWriter(&parts)
	for i := range maxFormParts + 1 {
		w.WriteField(fmt.Sprint("f", i), "v")
	}
	w.Close()
	httpFP(t, HTTPRequest{Method: "POST", Path: "/p", ContentType: w.FormDataContentType(), Body: parts.Bytes()}, ig)
}

func TestWebhookFingerprint(t *testing.T) {
	decode := func(s string) any {
		v, err := decodeSingleJSON([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	a, ok := WebhookFingerprint(map[string]any{"to": "a@x", "subject": "Hi"})
	b, _ := WebhookFingerprint(map[string]any{"subject": "Hi", "to": "a@x"})
	c, _ := WebhookFingerprint(map[string]any{"to": "a@x", "subject": "Ho"})
	d, _ := WebhookFingerprint(map[string]any{"to": "a@x", "subject": decode(`{"x":[1,2]}`)})
	if !ok || !fingerprintFormat.MatchString(a) || !strings.HasPrefix(a, "webhook:") || a != b || a == c || a == d {
		t.Errorf("got %s %s %s %s, want one webhook fingerprint for the same values, another for others", a, b, c, d)
	}
	// Field names are part of it: the same values at other paths differ.
	if e, _ := WebhookFingerprint(map[string]any{"recipient": "a@x", "subject": "Hi"}); e == a {
		t.Errorf("values at other paths: got the same fingerprint %s", e)
	}
	deep := decode(strings.Repeat("[", MaxFingerprintDepth+2) + strings.Repeat("]", MaxFingerprintDepth+2))
	if fp, ok := WebhookFingerprint(map[string]any{"x": deep}); ok || fp != "" {
		t.Errorf("a value nested too deep: got %q, %v, want none", fp, ok)
	}
}

func TestIgnoredFields(t *testing.T) {
	f := NewIgnoredFields("X-Sent-At")
	for _, name := range []string{"idempotency_key", "idempotencyKey", "Idempotency-Key", "IDEMPOTENCY_KEY", "requestId", "Request-ID", "ts", "nonce", "xSentAt", "x_sent_at"} {
		if !f.Ignores(name) {
			t.Errorf("Ignores(%q): got false, want true", name)
		}
	}
	for _, name := range []string{"amount", "to", "tsx", "id", "created_by", "key"} {
		if f.Ignores(name) {
			t.Errorf("Ignores(%q): got true, want false", name)
		}
	}
	if (IgnoredFields{}).Ignores("nonce") {
		t.Error("the zero IgnoredFields: want nothing ignored")
	}
}

func TestParseFingerprintIgnore(t *testing.T) {
	got, err := ParseFingerprintIgnore(" stripe = expand , metadata[sent] ; sendgrid=send_at;stripe=x;")
	want := map[string][]string{"stripe": {"expand", "metadata[sent]", "x"}, "sendgrid": {"send_at"}}
	if err != nil || len(got) != len(want) || !slices.Equal(got["stripe"], want["stripe"]) || !slices.Equal(got["sendgrid"], want["sendgrid"]) {
		t.Errorf("got %v, %v, want %v", got, err, want)
	}
	for _, bad := range []string{"stripe", "=a", "stripe=", "stripe= , "} {
		if _, err := ParseFingerprintIgnore(bad); err == nil {
			t.Errorf("%q: got no error", bad)
		}
	}
}

// A summary is what ingest accepts as text, and a fingerprint as an id.
func TestFingerprintsAreValidEffectFields(t *testing.T) {
	fp, summary := HTTPRequest{Method: "POST", Path: "/p\x00\n", ContentType: formType, Body: []byte("a=%FF%00")}.Fingerprint(NewIgnoredFields(), nil)
	raw, _ := json.Marshal(map[string]any{"type": "effect", "provider": "p", "effect_id": "e", "fingerprint": fp, "summary": summary})
	if _, err := ingest.ParseEvent(raw, ingest.DefaultLimits); err != nil {
		t.Errorf("an effect with fingerprint %q and summary %q: %v", fp, summary, err)
	}
	if strings.ContainsAny(summary, "\x00\n") {
		t.Errorf("summary %q: want control characters replaced", summary)
	}
}
