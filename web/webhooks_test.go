package web_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed/webhook"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// startWebhookServer is a real server on a real SQLite file with the given
// webhook configuration and ingest token.
func startWebhookServer(t *testing.T, cfg web.WebhookConfig, token string, lim ingest.Limits) *testServer {
	t.Helper()
	return startWebhookInstance(t, t.TempDir()+"/oncetrace.db", cfg, token, lim)
}

// startWebhookInstance is startWebhookServer on the SQLite file given: two
// of them on one file are two instances sharing a database.
func startWebhookInstance(t *testing.T, file string, cfg web.WebhookConfig, token string, lim ingest.Limits) *testServer {
	t.Helper()
	db, err := sqlite.Open(context.Background(), file, sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(db, writer.DefaultConfig)
	ts := httptest.NewServer(web.New(web.Config{DB: db, Writer: w, Limits: lim, Analysis: trace.DefaultConfig,
		IngestToken: token, Webhooks: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(func() {
		ts.Close()
		w.Close()
		db.Close()
	})
	return &testServer{name: "webhooks", ts: ts, db: db}
}

type webhookReply struct {
	status     int
	Accepted   int            `json:"accepted"`
	Duplicates int            `json:"duplicates"`
	Ignored    map[string]int `json:"ignored"`
	Error      string         `json:"error"`
}

func (s *testServer) deliver(t *testing.T, provider string, body []byte, h http.Header) webhookReply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.ts.URL+"/api/v1/webhooks/"+provider, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := s.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := webhookReply{status: resp.StatusCode}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("POST /api/v1/webhooks/%s: got %d %s, not JSON", provider, resp.StatusCode, data)
	}
	return r
}

type storedEffect struct {
	Provider       string `json:"provider"`
	EffectID       string `json:"effect_id"`
	IdempotencyKey string `json:"idempotency_key"`
	ExecutionID    string `json:"execution_id"`
	Target         string `json:"target"`
	At             string `json:"at"`
	TraceID        string `json:"trace_id"`
	SpanID         string `json:"span_id"`
	State          string `json:"state"`
	Fingerprint    string `json:"fingerprint"`
	Summary        string `json:"summary"`
}

func (s *testServer) effectsOf(t *testing.T, provider string) []storedEffect {
	t.Helper()
	var out struct {
		Effects []storedEffect `json:"effects"`
	}
	if err := json.Unmarshal(s.get(t, "/api/v1/effects?provider="+provider), &out); err != nil {
		t.Fatal(err)
	}
	return out.Effects
}

// ---- deliveries as each provider sends them ----

// stripeDelivery is a charge.succeeded event as Stripe's docs show it; id
// names the charge and the API request that made it.
func stripeDelivery(id, key string, created time.Time) []byte {
	return fmt.Appendf(nil, `{
  "id": "evt_%[1]s",
  "object": "event",
  "api_version": "2024-06-20",
  "created": %[3]d,
  "data": {
    "object": {
      "id": "ch_%[1]s",
      "object": "charge",
      "amount": 4900,
      "amount_captured": 4900,
      "balance_transaction": "txn_%[1]s",
      "billing_details": {"address": {"country": "US", "postal_code": "94107"}, "email": "jordan@acme.dev", "name": "Jordan Lee", "phone": null},
      "captured": true,
      "created": %[3]d,
      "currency": "usd",
      "customer": "cus_QhXyZ0Acme",
      "description": "June invoice",
      "livemode": false,
      "metadata": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
      "paid": true,
      "payment_intent": null,
      "payment_method": "pm_1PqXyZ2eZvKYlo2CcArd0001",
      "receipt_email": "jordan@acme.dev",
      "refunded": false,
      "status": "succeeded"
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {"id": "req_%[1]s", "idempotency_key": %[2]q},
  "type": "charge.succeeded"
}`, id, key, created.Unix())
}

func stripeSign(secret string, body []byte, at time.Time) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(body)))
	return http.Header{"Stripe-Signature": {"t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))}}
}

// sendGridDelivery is an Event Webhook batch: the message processed, then
// delivered, then opened (not an effect).
func sendGridDelivery(id, key string, at time.Time) []byte {
	return fmt.Appendf(nil, `[
  {"email": "jordan@acme.dev", "timestamp": %[3]d, "smtp-id": "<%[1]s@ismtpd-555>", "event": "processed", "category": ["invoice"],
   "sg_event_id": "p-%[1]s", "sg_message_id": "%[1]s.filter0001.16648.5515E0B88.0", "idempotency_key": %[2]q},
  {"email": "jordan@acme.dev", "timestamp": %[3]d, "smtp-id": "<%[1]s@ismtpd-555>", "event": "delivered", "category": ["invoice"],
   "sg_event_id": "d-%[1]s", "sg_message_id": "%[1]s.filter0001.16648.5515E0B88.0", "response": "250 OK", "idempotency_key": %[2]q},
  {"email": "jordan@acme.dev", "timestamp": %[3]d, "event": "open", "sg_event_id": "o-%[1]s",
   "sg_message_id": "%[1]s.filter0001.16648.5515E0B88.0", "useragent": "Mozilla/4.0", "ip": "255.255.255.255"}
]`, id, key, at.Unix())
}

// postmarkDelivery is a delivery webhook.
func postmarkDelivery(id, key string, at time.Time) []byte {
	return fmt.Appendf(nil, `{
  "RecordType": "Delivery", "ServerID": 23, "MessageStream": "outbound",
  "MessageID": %q, "Recipient": "jordan@acme.dev", "Tag": "invoice",
  "DeliveredAt": %q, "Details": "smtp;250 2.0.0 OK",
  "Metadata": {"idempotency_key": %q}
}`, id, at.UTC().Format("2006-01-02T15:04:05.0000000Z"), key)
}

// mailgunDelivery is a delivered event, signed in its body with key. Each
// signature has its own token, as Mailgun's random 50 characters.
func mailgunDelivery(id, key string, at time.Time, signingKey string) []byte {
	ts := strconv.FormatInt(at.Unix(), 10)
	token := "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0" + id + "-" + ts
	mac := hmac.New(sha256.New, []byte(signingKey))
	mac.Write([]byte(ts + token))
	return fmt.Appendf(nil, `{
  "signature": {"timestamp": %q, "token": %q, "signature": %q},
  "event-data": {
    "event": "delivered", "timestamp": %d.908181, "id": "ev-%s", "log-level": "info",
    "recipient": "jordan@acme.dev", "recipient-domain": "acme.dev",
    "envelope": {"transport": "smtp", "sender": "billing@mg.example.com", "targets": "jordan@acme.dev"},
    "message": {"headers": {"to": "Jordan <jordan@acme.dev>", "message-id": %q, "from": "Billing <billing@mg.example.com>",
      "subject": "Your June invoice"}, "attachments": [], "size": 4211},
    "user-variables": {"idempotency_key": %q},
    "delivery-status": {"code": 250, "message": "OK", "description": ""}
  }
}`, ts, token, hex.EncodeToString(mac.Sum(nil)), at.Unix(), id, id, key)
}

func basicAuth(creds string) http.Header {
	return http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(creds))}}
}

// webhookProvider is one built-in mapping as the tests drive it.
type webhookProvider struct {
	name   string
	secret string // what serve --webhook-secret holds for it
	// deliver is one delivery of the effect id, carrying key, signed with
	// secret at the time at ("" : unsigned).
	deliver  func(id, key, secret string, at time.Time) ([]byte, http.Header)
	effectID func(id string) string
	// refused is the status of a wrong signature, naming field.
	refused int
	field   string
	stale   bool // whether the signature carries a time
}

func webhookProviders(t *testing.T) []webhookProvider {
	sgKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&sgKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return []webhookProvider{
		{
			name: "stripe", secret: "whsec_test_4eC39HqLyjWDarjtT1zdp7dc",
			deliver: func(id, key, secret string, at time.Time) ([]byte, http.Header) {
				body := stripeDelivery(id, key, at)
				if secret == "" {
					return body, nil
				}
				return body, stripeSign(secret, body, at)
			},
			effectID: func(id string) string { return "req_" + id },
			refused:  http.StatusBadRequest, field: "Stripe-Signature", stale: true,
		},
		{
			name: "sendgrid", secret: base64.StdEncoding.EncodeToString(der),
			deliver: func(id, key, secret string, at time.Time) ([]byte, http.Header) {
				body := sendGridDelivery(id, key, at)
				if secret == "" {
					return body, nil
				}
				signer := sgKey
				if secret != "right" {
					signer = otherKey
				}
				ts := strconv.FormatInt(at.Unix(), 10)
				digest := sha256.Sum256(append([]byte(ts), body...))
				sig, err := ecdsa.SignASN1(rand.Reader, signer, digest[:])
				if err != nil {
					t.Fatal(err)
				}
				return body, http.Header{"X-Twilio-Email-Event-Webhook-Signature": {base64.StdEncoding.EncodeToString(sig)},
					"X-Twilio-Email-Event-Webhook-Timestamp": {ts}}
			},
			effectID: func(id string) string { return id + ".filter0001.16648.5515E0B88.0" },
			refused:  http.StatusBadRequest, field: "X-Twilio-Email-Event-Webhook-Signature", stale: true,
		},
		{
			name: "postmark", secret: "postmark:9f2b7c1e",
			deliver: func(id, key, secret string, at time.Time) ([]byte, http.Header) {
				body := postmarkDelivery(id, key, at)
				if secret == "" {
					return body, nil
				}
				return body, basicAuth(secret)
			},
			effectID: func(id string) string { return id },
			refused:  http.StatusUnauthorized, field: "Authorization",
		},
		{
			name: "mailgun", secret: "key-3ax6xnjp29jd6fds4gc373sgvjxteol0",
			deliver: func(id, key, secret string, at time.Time) ([]byte, http.Header) {
				if secret == "" {
					secret = "a key nobody configured"
				}
				return mailgunDelivery(id, key, at, secret), nil
			},
			effectID: func(id string) string { return id },
			refused:  http.StatusBadRequest, field: "signature.signature", stale: true,
		},
	}
}

// signWith is the secret a test signs with: SendGrid's is a public key,
// so the test's delivery function knows the private one as "right".
func (p webhookProvider) signWith(right bool) string {
	switch {
	case p.name == "sendgrid" && right:
		return "right"
	case p.name == "sendgrid":
		return "wrong"
	case right:
		return p.secret
	}
	return p.secret + "-wrong"
}

// TestWebhooks drives each built-in mapping through a real server: an
// unsigned delivery where no secret is configured, a signed one and its
// re-delivery (one effect), and the refusals where a secret is configured
// (no signature, a wrong one, a stale one), after which nothing is stored.
func TestWebhooks(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	for _, p := range webhookProviders(t) {
		t.Run(p.name, func(t *testing.T) {
			t.Run("unsigned, no secret configured", func(t *testing.T) {
				srv := startWebhookServer(t, web.WebhookConfig{}, "", ingest.DefaultLimits)
				body, h := p.deliver("m1", "ik_unsigned", "", now)
				if r := srv.deliver(t, p.name, body, h); r.status != http.StatusOK || r.Accepted != 1 {
					t.Fatalf("got %d %+v, want 200 accepted 1", r.status, r)
				}
				effects := srv.effectsOf(t, p.name)
				if len(effects) != 1 || effects[0].EffectID != p.effectID("m1") || effects[0].IdempotencyKey != "ik_unsigned" ||
					effects[0].Target == "" || effects[0].At == "" {
					t.Errorf("stored %+v, want one effect %s with key ik_unsigned, a target and a time", effects, p.effectID("m1"))
				}
			})
			t.Run("signed, then re-delivered", func(t *testing.T) {
				srv := startWebhookServer(t, web.WebhookConfig{Secrets: map[string]string{p.name: p.secret}}, "", ingest.DefaultLimits)
				body, h := p.deliver("m2", "ik_signed", p.signWith(true), now)
				first := srv.deliver(t, p.name, body, h)
				// A provider re-delivers the same event, signed anew.
				body, h = p.deliver("m2", "ik_signed", p.signWith(true), now.Add(time.Second))
				again := srv.deliver(t, p.name, body, h)
				if first.status != http.StatusOK || first.Accepted != 1 || again.status != http.StatusOK || again.Accepted != 0 || again.Duplicates < 1 {
					t.Fatalf("got %d %+v then %d %+v, want 200 accepted 1, then 200 accepted 0 and a duplicate", first.status, first, again.status, again)
				}
				if effects := srv.effectsOf(t, p.name); len(effects) != 1 || effects[0].EffectID != p.effectID("m2") {
					t.Errorf("stored %+v, want the one effect %s", effects, p.effectID("m2"))
				}
			})
			type refusal struct {
				name   string
				secret string // signed with; "" unsigned
				at     time.Time
				want   string
			}
			refusals := []refusal{
				{name: "wrong signature", secret: p.signWith(false), at: now, want: p.field + ": "},
				{name: "no signature", secret: "", at: now, want: p.field + ": missing"},
			}
			if p.stale {
				refusals = append(refusals, refusal{name: "stale signature", secret: p.signWith(true), at: now.Add(-10 * time.Minute), want: "more than the tolerance of 5m0s"})
			}
			for _, rc := range refusals {
				t.Run(rc.name, func(t *testing.T) {
					srv := startWebhookServer(t, web.WebhookConfig{Secrets: map[string]string{p.name: p.secret}}, "", ingest.DefaultLimits)
					body, h := p.deliver("m3", "ik_refused", rc.secret, rc.at)
					if p.name == "mailgun" && rc.secret == "" { // Mailgun signs in the body: take the signature out
						body = bytes.Replace(body, []byte(`"signature": {`), []byte(`"unsigned": {`), 1)
					}
					r := srv.deliver(t, p.name, body, h)
					want := p.refused
					if rc.name == "stale signature" {
						want = http.StatusBadRequest
					}
					if r.status != want || !strings.Contains(r.Error, rc.want) {
						t.Errorf("got %d %q, want %d naming %q", r.status, r.Error, want, rc.want)
					}
					if effects := srv.effectsOf(t, p.name); len(effects) != 0 {
						t.Errorf("stored %+v after a refused delivery, want nothing", effects)
					}
				})
			}
		})
	}
}

// TestWebhookSendGridBatch posts one Event Webhook batch of several
// messages: each processed-and-delivered message is one effect, the other
// events are counted as ignored, and the custom args carry the trace
// context through the same parser as the sandbox's traceparent header.
func TestWebhookSendGridBatch(t *testing.T) {
	srv := startWebhookServer(t, web.WebhookConfig{}, "", ingest.DefaultLimits)
	batch := `[
  {"email": "jordan@acme.dev", "timestamp": 1751292131, "event": "processed", "sg_message_id": "msgA.filter0001.0", "idempotency_key": "ik_a",
   "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
  {"email": "sam@acme.dev", "timestamp": 1751292131, "event": "processed", "sg_message_id": "msgB.filter0001.0", "idempotency_key": "ik_b",
   "traceparent": "00-zzzz-00f067aa0ba902b7-01"},
  {"email": "jordan@acme.dev", "timestamp": 1751292133, "event": "delivered", "sg_message_id": "msgA.filter0001.0", "idempotency_key": "ik_a",
   "response": "250 OK"},
  {"email": "sam@acme.dev", "timestamp": 1751292134, "event": "deferred", "sg_message_id": "msgB.filter0001.0", "attempt": "1"},
  {"email": "alex@acme.dev", "timestamp": 1751292135, "event": "delivered", "sg_message_id": "msgC.filter0001.0"},
  {"email": "jordan@acme.dev", "timestamp": 1751292190, "event": "open", "sg_message_id": "msgA.filter0001.0"},
  {"email": "jordan@acme.dev", "timestamp": 1751292195, "event": "click", "sg_message_id": "msgA.filter0001.0", "url": "https://acme.dev/invoice"}
]`
	r := srv.deliver(t, "sendgrid", []byte(batch), nil)
	wantIgnored := map[string]int{"deferred": 1, "open": 1, "click": 1}
	if r.status != http.StatusOK || r.Accepted != 3 || r.Duplicates != 1 || fmt.Sprint(r.Ignored) != fmt.Sprint(wantIgnored) {
		t.Fatalf("got %d %+v, want 200, 3 accepted, 1 duplicate (msgA delivered after processed), ignored %v", r.status, r, wantIgnored)
	}
	effects := srv.effectsOf(t, "sendgrid")
	byID := map[string]storedEffect{}
	for _, e := range effects {
		byID[e.EffectID] = e
	}
	a, b, c := byID["msgA.filter0001.0"], byID["msgB.filter0001.0"], byID["msgC.filter0001.0"]
	if len(effects) != 3 || a.Target != "jordan@acme.dev" || a.IdempotencyKey != "ik_a" || b.Target != "sam@acme.dev" || c.Target != "alex@acme.dev" {
		t.Fatalf("stored %+v, want msgA, msgB and msgC with their recipients", effects)
	}
	if a.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || a.SpanID != "00f067aa0ba902b7" || a.At != "2025-06-30T14:02:11Z" {
		t.Errorf("msgA: got trace %q span %q at %q, want the traceparent's and the processed time", a.TraceID, a.SpanID, a.At)
	}
	if b.TraceID != "" || b.SpanID != "" {
		t.Errorf("msgB: a broken traceparent gave trace %q span %q, want none", b.TraceID, b.SpanID)
	}
}

// TestWebhookRefusals covers what is refused before anything is stored:
// an unknown provider, a payload without its mapped field, a body that is
// not JSON, the wrong content type, a body over the limit, and the ingest
// token where a provider has no secret.
func TestWebhookRefusals(t *testing.T) {
	lim := ingest.DefaultLimits
	lim.BodyBytes = 4 << 10
	lim.IDBytes = 64
	srv := startWebhookServer(t, web.WebhookConfig{}, "", lim)
	now := time.Now()
	for _, tc := range []struct {
		name, provider, contentType, body string
		status                            int
		want                              string
	}{
		{"unknown provider", "sendgird", "", `[]`, 404, `provider: no webhook mapping named "sendgird"; known: mailgun, postmark, sendgrid, stripe`},
		{"a payload without the mapped effect id", "postmark", "", `{"RecordType": "Delivery", "Recipient": "jordan@acme.dev"}`, 400, "MessageID: missing"},
		{"a stripe event without created", "stripe", "", strings.Replace(string(stripeDelivery("x", "k", now)), `"created"`, `"kreated"`, 1), 400, "created: missing"},
		{"an effect id over the id limit", "postmark", "", `{"RecordType": "Delivery", "MessageID": "` + strings.Repeat("m", 65) + `"}`, 400,
			"MessageID (effect_id): must be 1 to 64 bytes"},
		{"not JSON", "stripe", "", `{"type":`, 400, "body: invalid JSON"},
		{"a form post", "stripe", "application/x-www-form-urlencoded", `type=charge.succeeded`, 415, "Content-Type"},
		{"too large", "sendgrid", "", `[` + strings.Repeat(`{"event": "open"},`, 400) + `{}]`, 413, "body: larger than the limit of 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.contentType != "" {
				h.Set("Content-Type", tc.contentType)
			}
			r := srv.deliver(t, tc.provider, []byte(tc.body), h)
			if r.status != tc.status || !strings.Contains(r.Error, tc.want) {
				t.Errorf("got %d %q, want %d containing %q", r.status, r.Error, tc.status, tc.want)
			}
		})
	}
	if n := len(srv.effectsOf(t, "")); n != 0 {
		t.Errorf("stored %d effects after refusals, want none", n)
	}
	ignored := srv.deliver(t, "stripe", []byte(`{"id": "evt_1", "type": "customer.updated", "created": 1751292131, "data": {"object": {"id": "cus_1"}}}`), nil)
	if ignored.status != http.StatusOK || ignored.Accepted != 0 || ignored.Ignored["customer.updated"] != 1 {
		t.Errorf("customer.updated: got %d %+v, want 200 with it ignored", ignored.status, ignored)
	}

	t.Run("the ingest token guards a provider without a secret", func(t *testing.T) {
		const token = "s3cret-ingest-token"
		srv := startWebhookServer(t, web.WebhookConfig{Secrets: map[string]string{"stripe": "whsec_test"}}, token, ingest.DefaultLimits)
		body := postmarkDelivery("m-token", "ik_t", now)
		for _, tc := range []struct {
			name   string
			h      http.Header
			status int
		}{
			{"no credentials", nil, 401},
			{"a wrong token", http.Header{"Authorization": {"Bearer nope"}}, 401},
			{"the token as a bearer", http.Header{"Authorization": {"Bearer " + token}}, 200},
			{"the token as the password of the webhook URL", basicAuth("oncetrace:" + token), 200},
		} {
			if r := srv.deliver(t, "postmark", body, tc.h); r.status != tc.status {
				t.Errorf("postmark, %s: got %d %q, want %d", tc.name, r.status, r.Error, tc.status)
			}
		}
		// A provider with a secret is authenticated by its signature alone.
		signed := stripeDelivery("c-token", "ik_t", now)
		if r := srv.deliver(t, "stripe", signed, stripeSign("whsec_test", signed, now)); r.status != 200 || r.Accepted != 1 {
			t.Errorf("stripe, signed, no token: got %d %+v, want 200 accepted 1", r.status, r)
		}
		if r := srv.deliver(t, "stripe", signed, http.Header{"Authorization": {"Bearer " + token}}); r.status != 400 {
			t.Errorf("stripe, the token but no signature: got %d %q, want 400: a secret makes the signature required", r.status, r.Error)
		}
	})
}

// TestWebhookAudit is the point of the feed: a step that charged with key
// K, and Stripe's webhook for the charge made with K, is matched and
// clean; when Stripe made two charges for that key (the key expired
// before the retry, so the second request was not recognised), the step
// has a critical duplicate_effect.
func TestWebhookAudit(t *testing.T) {
	start := time.Date(2026, 6, 30, 14, 2, 11, 0, time.UTC)
	attempts := fmt.Sprintf(`{"events": [
  {"type": "execution", "execution_id": "exec_pay", "name": "billing-agent", "status": "completed", "started_at": %[1]q, "ended_at": %[3]q},
  {"type": "attempt", "execution_id": "exec_pay", "step_id": "step-2", "attempt": 1, "tool": "charge_card", "effect": "write",
   "provider": "stripe", "args": {"customer": "cus_QhXyZ0Acme", "amount": 4900}, "idempotency_key": "ik_pay_june",
   "started_at": %[1]q, "ended_at": %[2]q, "outcome": "ok"}]}`,
		start.Format(time.RFC3339Nano), start.Add(800*time.Millisecond).Format(time.RFC3339Nano), start.Add(5*time.Second).Format(time.RFC3339Nano))
	type view struct {
		Audit struct {
			State string `json:"state"`
		} `json:"audit"`
		Effects  []storedEffect  `json:"effects"`
		Findings []trace.Finding `json:"findings"`
	}
	for _, tc := range []struct {
		name    string
		charges []string // ids of the charges (and requests) Stripe reports for the key
		state   string
		effect  string
		rules   []string
	}{
		{"one charge for the key", []string{"3PqJune01"}, "clean", "matched", nil},
		{"two charges for one key", []string{"3PqJune01", "3PqJune02"}, "critical", "duplicate", []string{"critical duplicate_effect"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startWebhookServer(t, web.WebhookConfig{Secrets: map[string]string{"stripe": "whsec_audit"}}, "", ingest.DefaultLimits)
			srv.post(t, body{kind: "json", contentType: "application/json", data: []byte(attempts)})
			for i, id := range tc.charges {
				delivery := stripeDelivery(id, "ik_pay_june", start.Add(time.Duration(400+i)*time.Millisecond))
				if r := srv.deliver(t, "stripe", delivery, stripeSign("whsec_audit", delivery, time.Now())); r.status != 200 || r.Accepted != 1 {
					t.Fatalf("charge %s: got %d %+v, want 200 accepted 1", id, r.status, r)
				}
			}
			var v view
			if err := json.Unmarshal(srv.get(t, "/api/v1/executions/exec_pay"), &v); err != nil {
				t.Fatal(err)
			}
			var rules []string
			for _, f := range v.Findings {
				rules = append(rules, string(f.Severity)+" "+string(f.Rule))
			}
			if v.Audit.State != tc.state || !slices.Equal(rules, tc.rules) || len(v.Effects) != len(tc.charges) {
				t.Fatalf("got state %q, findings %v, %d effects; want %q, %v, %d", v.Audit.State, rules, len(v.Effects), tc.state, tc.rules, len(tc.charges))
			}
			for _, e := range v.Effects {
				if e.State != tc.effect || e.IdempotencyKey != "ik_pay_june" || e.Provider != "stripe" {
					t.Errorf("effect %+v, want a stripe effect of key ik_pay_june, %s", e, tc.effect)
				}
			}
		})
	}
}

// TestWebhookMapFile serves a user's mapping, in the same form as the
// presets, next to the built-in ones.
func TestWebhookMapFile(t *testing.T) {
	mine, err := webhook.ParseMap([]byte(`{"crm": {
	  "events": "data",
	  "filter": {"action": ["contact.created"]},
	  "effect_id": "contact.id", "key": "meta.request_key", "target": "contact.email", "at": "occurred_at",
	  "trace_id": "meta.trace_id", "span_id": "meta.span_id",
	  "signature": {"scheme": "hmac-sha256", "header": "X-CRM-Signature", "encoding": "base64"}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	mappings := webhook.Builtin()
	for name, m := range mine {
		mappings[name] = m
	}
	srv := startWebhookServer(t, web.WebhookConfig{Mappings: mappings, Secrets: map[string]string{"crm": "crm-secret"}}, "", ingest.DefaultLimits)
	payload := []byte(`{"data": [{"action": "contact.created", "occurred_at": "2026-06-30T14:02:11.350Z",
	  "contact": {"id": 81723, "email": "jordan@acme.dev"},
	  "meta": {"request_key": "ik_crm_1", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"}}]}`)
	mac := hmac.New(sha256.New, []byte("crm-secret"))
	mac.Write(payload)
	r := srv.deliver(t, "crm", payload, http.Header{"X-Crm-Signature": {base64.StdEncoding.EncodeToString(mac.Sum(nil))}})
	if r.status != 200 || r.Accepted != 1 {
		t.Fatalf("got %d %+v, want 200 accepted 1", r.status, r)
	}
	effects := srv.effectsOf(t, "crm")
	if len(effects) != 1 || effects[0].EffectID != "81723" || effects[0].IdempotencyKey != "ik_crm_1" || effects[0].TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("stored %+v, want contact 81723 with its key and trace", effects)
	}
	if r := srv.deliver(t, "crm", payload, http.Header{"X-Crm-Signature": {"bm9wZQ=="}}); r.status != 400 || !strings.Contains(r.Error, "X-CRM-Signature") {
		t.Errorf("a wrong signature: got %d %q, want 400 naming X-CRM-Signature", r.status, r.Error)
	}
}

// TestWebhookMailgunFingerprint: the mailgun preset's fingerprint is the
// message's To and Subject, so two messages of one email (two Message-Ids,
// two keys) reach the API with one fingerprint; SendGrid's events carry no
// subject, so its effects get none rather than one made up.
func TestWebhookMailgunFingerprint(t *testing.T) {
	const key = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0"
	srv := startWebhookServer(t, web.WebhookConfig{Secrets: map[string]string{"mailgun": key}}, "", ingest.DefaultLimits)
	now := time.Now()
	for i, id := range []string{"20260630140211.1@mg.example.com", "20260630140221.2@mg.example.com"} {
		if r := srv.deliver(t, "mailgun", mailgunDelivery(id, fmt.Sprint("ik_", i), now, key), nil); r.status != 200 || r.Accepted != 1 {
			t.Fatalf("mailgun delivery %s: got %d %+v, want 200 accepted 1", id, r.status, r)
		}
	}
	effects := srv.effectsOf(t, "mailgun")
	if len(effects) != 2 || !strings.HasPrefix(effects[0].Fingerprint, "webhook:") || effects[0].Fingerprint != effects[1].Fingerprint {
		t.Fatalf("mailgun effects: got %+v, want two with one webhook: fingerprint", effects)
	}
	if want := "email to Jordan <jordan@acme.dev>, subject 'Your June invoice'"; effects[0].Summary != want {
		t.Errorf("mailgun summary: got %q, want %q", effects[0].Summary, want)
	}
	if r := srv.deliver(t, "sendgrid", sendGridDelivery("sg_1", "ik_sg", now), nil); r.status != 200 || r.Accepted != 1 {
		t.Fatalf("sendgrid delivery: got %d %+v", r.status, r)
	}
	if sg := srv.effectsOf(t, "sendgrid"); len(sg) != 1 || sg[0].Fingerprint != "" || sg[0].Summary != "" {
		t.Errorf("sendgrid effects: got %+v, want one without a fingerprint", sg)
	}
}

// relayMapping is a user's mapping of a sender that signs, as Mailgun does,
// only a time and a one-time token in the body, not the event.
const relayMapping = `{"relay": {
  "effect_id": "event.id", "target": "event.to",
  "signature": {"scheme": "hmac-sha256", "field": "auth.signature", "signed": ["auth.timestamp", "auth.token"],
    "timestamp": "auth.timestamp", "replay_token": "auth.token"}
}}`

// relayDelivery is one event of relayMapping, signed with key and token.
func relayDelivery(id, token string, at time.Time, key string) []byte {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(ts + token))
	return fmt.Appendf(nil, `{"auth": {"timestamp": %s, "token": %q, "signature": %q}, "event": {"id": %q, "to": "jordan@acme.dev"}}`,
		ts, token, hex.EncodeToString(mac.Sum(nil)), id)
}

// pasteSignature is what an attacker who captured delivery makes of it: its
// signature block (the object at block) on the event data of forged.
func pasteSignature(t *testing.T, delivery, forged []byte, block string) []byte {
	t.Helper()
	var captured, invented map[string]json.RawMessage
	if err := json.Unmarshal(delivery, &captured); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(forged, &invented); err != nil {
		t.Fatal(err)
	}
	invented[block] = captured[block]
	out, err := json.Marshal(invented)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWebhookReplay is issue 22's forged Mailgun webhook, for Mailgun and a
// generic mapping that signs a token the same way: a signature block
// captured from a real delivery and pasted onto invented event data is
// refused 401 with nothing stored, on the instance that saw the delivery
// and on another sharing its database; the same delivery sent again (a
// provider's retry) is answered 200 with its effect a duplicate, so that
// the provider stops retrying.
func TestWebhookReplay(t *testing.T) {
	const key = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0"
	relay, err := webhook.ParseMap([]byte(relayMapping))
	if err != nil {
		t.Fatal(err)
	}
	mappings := webhook.Builtin()
	mappings["relay"] = relay["relay"]
	cfg := web.WebhookConfig{Mappings: mappings, Secrets: map[string]string{"mailgun": key, "relay": key}}
	for _, tc := range []struct {
		provider string
		block    string // the signature block's field
		// deliver is a delivery of the effect id, signed at at.
		deliver  func(id string, at time.Time) []byte
		effectID func(id string) string
	}{
		{"mailgun", "signature", func(id string, at time.Time) []byte { return mailgunDelivery(id, "ik_"+id, at, key) },
			func(id string) string { return id }},
		{"relay", "auth", func(id string, at time.Time) []byte { return relayDelivery(id, "tok-"+id, at, key) },
			func(id string) string { return id }},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			file := t.TempDir() + "/oncetrace.db"
			one := startWebhookInstance(t, file, cfg, "", ingest.DefaultLimits)
			other := startWebhookInstance(t, file, cfg, "", ingest.DefaultLimits)
			now := time.Now()
			real := tc.deliver("20260630140211.1@mg.example.com", now)
			if r := one.deliver(t, tc.provider, real, nil); r.status != http.StatusOK || r.Accepted != 1 {
				t.Fatalf("the real delivery: got %d %+v, want 200 accepted 1", r.status, r)
			}
			forged := pasteSignature(t, real, tc.deliver("forged-1@mg.example.com", now), tc.block)
			for _, srv := range []*testServer{one, other} {
				r := srv.deliver(t, tc.provider, forged, nil)
				if r.status != http.StatusUnauthorized || !strings.Contains(r.Error, "already used by a delivery with another body") {
					t.Errorf("the signature on invented data: got %d %q, want 401 naming the reused token", r.status, r.Error)
				}
			}
			again := other.deliver(t, tc.provider, real, nil)
			if again.status != http.StatusOK || again.Accepted != 0 || again.Duplicates != 1 {
				t.Errorf("the same delivery again: got %d %+v, want 200, accepted 0, 1 duplicate", again.status, again)
			}
			effects := one.effectsOf(t, tc.provider)
			if len(effects) != 1 || effects[0].EffectID != tc.effectID("20260630140211.1@mg.example.com") {
				t.Errorf("stored %+v, want only the real delivery's effect", effects)
			}
		})
	}

	// Mailgun signs the timestamp and the token concatenated: the
	// timestamp's last digit moved to the front of the token signs the
	// same text, a token never seen. With any age accepted the shorter
	// timestamp is not refused as stale, so only the replay check stands.
	t.Run("a digit moved from the timestamp to the token", func(t *testing.T) {
		anyAge := cfg
		anyAge.Tolerance = -1
		srv := startWebhookServer(t, anyAge, "", ingest.DefaultLimits)
		real := mailgunDelivery("20260630140211.1@mg.example.com", "ik_1", time.Now(), key)
		if r := srv.deliver(t, "mailgun", real, nil); r.status != http.StatusOK || r.Accepted != 1 {
			t.Fatalf("the real delivery: got %d %+v, want 200 accepted 1", r.status, r)
		}
		var block struct {
			Signature struct{ Timestamp, Token, Signature string } `json:"signature"`
		}
		if err := json.Unmarshal(real, &block); err != nil {
			t.Fatal(err)
		}
		sig := block.Signature
		moved := fmt.Sprintf(`{"timestamp": %q, "token": %q, "signature": %q}`, sig.Timestamp[:len(sig.Timestamp)-1],
			sig.Timestamp[len(sig.Timestamp)-1:]+sig.Token, sig.Signature)
		forged := pasteSignature(t, []byte(`{"signature": `+moved+`}`), mailgunDelivery("forged-2@mg.example.com", "ik_2", time.Now(), key), "signature")
		if r := srv.deliver(t, "mailgun", forged, nil); r.status != http.StatusUnauthorized {
			t.Errorf("the moved digit on invented data: got %d %+v %q, want 401", r.status, r, r.Error)
		}
		if effects := srv.effectsOf(t, "mailgun"); len(effects) != 1 {
			t.Errorf("stored %+v, want only the real delivery's effect", effects)
		}
	})

	t.Run("at the limit of remembered tokens", func(t *testing.T) {
		limited := cfg
		limited.MaxTokens = 1
		srv := startWebhookServer(t, limited, "", ingest.DefaultLimits)
		now := time.Now()
		first := relayDelivery("e-1", "tok-1", now, key)
		if r := srv.deliver(t, "relay", first, nil); r.status != http.StatusOK || r.Accepted != 1 {
			t.Fatalf("the first token: got %d %+v, want 200 accepted 1", r.status, r)
		}
		if r := srv.deliver(t, "relay", relayDelivery("e-2", "tok-2", now, key), nil); r.status != http.StatusServiceUnavailable ||
			!strings.Contains(r.Error, "auth.token: 1 unexpired one-time tokens") {
			t.Errorf("a new token at the limit: got %d %q, want 503 naming the field and the limit", r.status, r.Error)
		}
		if r := srv.deliver(t, "relay", first, nil); r.status != http.StatusOK || r.Duplicates != 1 {
			t.Errorf("the remembered token at the limit: got %d %+v, want 200 and a duplicate", r.status, r)
		}
		if effects := srv.effectsOf(t, "relay"); len(effects) != 1 {
			t.Errorf("stored %+v, want only e-1", effects)
		}
	})
}
