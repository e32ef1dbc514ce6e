package webhook

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stripePayload is a Stripe event as Stripe's docs show it, trimmed to the
// fields a reader of it might look at.
func stripePayload(typ, request, object string) string {
	return `{
  "id": "evt_3PqXyZ2eZvKYlo2C1gQ0Abcd",
  "object": "event",
  "api_version": "2024-06-20",
  "created": 1751292131,
  "data": {"object": ` + object + `},
  "livemode": false,
  "pending_webhooks": 1,
  "request": ` + request + `,
  "type": "` + typ + `"
}`
}

const (
	stripeRequest   = `{"id": "req_Nk3xQ2aBcD", "idempotency_key": "ik_a94a0b1d"}`
	stripeNoRequest = `{"id": null, "idempotency_key": null}`
	stripeCharge    = `{
    "id": "ch_3PqXyZ2eZvKYlo2C1xYz0001", "object": "charge", "amount": 4900, "currency": "usd",
    "billing_details": {"email": "billing@acme.dev", "name": "Jordan Lee"},
    "customer": "cus_QhXyZ0Acme", "receipt_email": "jordan@acme.dev",
    "metadata": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "execution_id": "exec_01H8"},
    "paid": true, "payment_intent": "pi_3PqXyZ2eZvKYlo2C1pI00001", "status": "succeeded"}`
	stripeLegacyCharge = `{"id": "ch_1LegacyCharge", "object": "charge", "amount": 900, "receipt_email": "jordan@acme.dev",
    "metadata": {}, "payment_intent": null, "status": "succeeded"}`
	stripeIntent = `{"id": "pi_3PqXyZ2eZvKYlo2C1pI00001", "object": "payment_intent", "amount": 4900,
    "customer": "cus_QhXyZ0Acme", "metadata": {}, "status": "succeeded"}`
	stripeRefund        = `{"id": "re_3PqXyZ2eZvKYlo2C1rE00001", "object": "refund", "amount": 4900, "charge": "ch_3PqXyZ2eZvKYlo2C1xYz0001", "metadata": {}}`
	stripeRefundedNew   = `{"id": "ch_3PqXyZ2eZvKYlo2C1xYz0001", "object": "charge", "amount_refunded": 4900, "refunded": true, "metadata": {}}`
	stripeRefundedOlder = `{"id": "ch_3PqXyZ2eZvKYlo2C1xYz0001", "object": "charge", "amount_refunded": 4900, "refunded": true, "metadata": {},
    "refunds": {"object": "list", "data": [{"id": "re_3PqXyZ2eZvKYlo2C1rE00001", "object": "refund", "amount": 4900}], "has_more": false}}`
	stripeInvoice = `{"id": "in_1PqXyZ2eZvKYlo2CInv00001", "object": "invoice", "customer": "cus_QhXyZ0Acme",
    "customer_email": "jordan@acme.dev", "payment_intent": "pi_3PqXyZ2eZvKYlo2C1pI00001", "metadata": {}}`
	stripeCustomer = `{"id": "cus_QhXyZ0Acme", "object": "customer", "email": "jordan@acme.dev", "metadata": {}}`
)

func TestStripeMapping(t *testing.T) {
	created := time.Unix(1751292131, 0).UTC()
	for _, tc := range []struct {
		name, body              string
		id, key, target, traced string
		ignored                 string
	}{
		{name: "a charge caused by a request is that request", body: stripePayload("charge.succeeded", stripeRequest, stripeCharge),
			id: "req_Nk3xQ2aBcD", key: "ik_a94a0b1d", target: "cus_QhXyZ0Acme", traced: "4bf92f3577b34da6a3ce929d0e0e4736/00f067aa0ba902b7"},
		{name: "so is its payment intent", body: stripePayload("payment_intent.succeeded", stripeRequest, stripeIntent),
			id: "req_Nk3xQ2aBcD", key: "ik_a94a0b1d", target: "cus_QhXyZ0Acme"},
		{name: "a charge no request caused is its payment intent", body: stripePayload("charge.succeeded", stripeNoRequest, stripeCharge),
			id: "pi_3PqXyZ2eZvKYlo2C1pI00001", target: "cus_QhXyZ0Acme", traced: "4bf92f3577b34da6a3ce929d0e0e4736/00f067aa0ba902b7"},
		{name: "as is an invoice paid by it", body: stripePayload("invoice.paid", stripeNoRequest, stripeInvoice),
			id: "pi_3PqXyZ2eZvKYlo2C1pI00001", target: "cus_QhXyZ0Acme"},
		{name: "a charge of the Charges API is itself", body: stripePayload("charge.succeeded", stripeNoRequest, stripeLegacyCharge),
			id: "ch_1LegacyCharge", target: "jordan@acme.dev"},
		{name: "an invoice sent without a request is the event", body: stripePayload("invoice.sent", stripeNoRequest, stripeInvoice),
			id: "evt_3PqXyZ2eZvKYlo2C1gQ0Abcd", target: "cus_QhXyZ0Acme"},
		{name: "a refund", body: stripePayload("refund.created", stripeNoRequest, stripeRefund),
			id: "re_3PqXyZ2eZvKYlo2C1rE00001", target: "ch_3PqXyZ2eZvKYlo2C1xYz0001"},
		{name: "a refunded charge listing its refunds", body: stripePayload("charge.refunded", stripeNoRequest, stripeRefundedOlder),
			id: "re_3PqXyZ2eZvKYlo2C1rE00001", target: "ch_3PqXyZ2eZvKYlo2C1xYz0001"},
		{name: "a refunded charge of a newer API version", body: stripePayload("charge.refunded", stripeNoRequest, stripeRefundedNew),
			ignored: "charge.refunded without data.object.refunds"},
		{name: "a customer", body: stripePayload("customer.created", stripeRequest, stripeCustomer),
			id: "req_Nk3xQ2aBcD", key: "ik_a94a0b1d", target: "jordan@acme.dev"},
		{name: "not a side effect", body: stripePayload("customer.updated", stripeRequest, stripeCustomer), ignored: "customer.updated"},
		{name: "a request id of an old API version", body: stripePayload("charge.succeeded", `"req_Old"`, stripeLegacyCharge),
			id: "ch_1LegacyCharge", target: "jordan@acme.dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Builtin()["stripe"].Map([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.ignored != "" {
				if len(res.Effects) != 0 || res.Ignored[tc.ignored] != 1 {
					t.Fatalf("got %d effects, ignored %v; want none, %q ignored", len(res.Effects), res.Ignored, tc.ignored)
				}
				return
			}
			if len(res.Effects) != 1 {
				t.Fatalf("got %d effects, want 1", len(res.Effects))
			}
			e := res.Effects[0]
			traced := ""
			if e.TraceID != "" {
				traced = e.TraceID + "/" + e.SpanID
			}
			if e.Provider != "stripe" || e.ID != tc.id || e.IdempotencyKey != tc.key || e.Target != tc.target || !e.At.Equal(created) || traced != tc.traced {
				t.Errorf("got %s %s key %q target %q at %s traced %q, want stripe %s key %q target %q at %s traced %q",
					e.Provider, e.ID, e.IdempotencyKey, e.Target, e.At, traced, tc.id, tc.key, tc.target, created, tc.traced)
			}
		})
	}
}

func TestMappingNamesTheMissingField(t *testing.T) {
	for _, tc := range []struct {
		provider, body, want string
	}{
		{"stripe", `{"id": "evt_1", "created": 1751292131, "data": {"object": {}}}`, "type: missing"},
		{"stripe", stripePayload("refund.created", stripeNoRequest, `{"object": "refund"}`), "request.id or data.object.id: missing"},
		{"stripe", strings.Replace(stripePayload("charge.succeeded", stripeRequest, stripeCharge), `"created": 1751292131,`, "", 1), "created: missing"},
		{"stripe", strings.Replace(stripePayload("charge.succeeded", stripeRequest, stripeCharge), `"created": 1751292131`, `"created": "yesterday"`, 1),
			`created: must be a Unix time in seconds, not "yesterday"`},
		{"stripe", `{"type": "charge.succeeded"`, "body: invalid JSON"},
		{"sendgrid", `[{"event": "delivered", "email": "a@b"}]`, "[0].sg_message_id: missing"},
		{"sendgrid", `[{"event": "open"}, {"event": "delivered", "sg_message_id": {"x": 1}}]`, "[1].sg_message_id: must be a string or a number, not an object"},
		{"sendgrid", `{"event": "delivered"}`, "$: must be an array of events"},
		{"postmark", `{"RecordType": "Delivery", "MessageID": "m1", "DeliveredAt": "tuesday"}`, `DeliveredAt: must be an RFC 3339 time`},
		{"mailgun", `{"event-data": {"event": "delivered", "message": {"headers": {}}}}`, "event-data.message.headers.message-id: missing"},
	} {
		_, err := Builtin()[tc.provider].Map([]byte(tc.body))
		var fe *FieldError
		if !errors.As(err, &fe) || !strings.HasPrefix(fe.Error(), tc.want) {
			t.Errorf("%s %s: got %v, want a field error starting %q", tc.provider, tc.body, err, tc.want)
		}
	}
}

// The presets, with payloads shaped as the providers' docs show them.
const (
	sendGridBatch = `[
  {"email": "jordan@acme.dev", "timestamp": 1751292131, "smtp-id": "<14c5d75ce93.dfd.64b469@ismtpd-555>", "event": "processed",
   "category": ["invoice"], "sg_event_id": "rbtnWrG1DVDGGGFHFyun0A", "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0",
   "idempotency_key": "ik_a94a0b1d", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
  {"email": "jordan@acme.dev", "timestamp": 1751292133, "smtp-id": "<14c5d75ce93.dfd.64b469@ismtpd-555>", "event": "delivered",
   "category": ["invoice"], "sg_event_id": "rWVYmVk90MjZJ9iohOBa3w", "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0",
   "response": "250 OK", "idempotency_key": "ik_a94a0b1d", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
  {"email": "sam@acme.dev", "timestamp": 1751292135, "event": "open", "sg_event_id": "FOTFFO0ecsBE-zxFXfs6WA",
   "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.1", "useragent": "Mozilla/4.0", "ip": "255.255.255.255"}
]`
	postmarkDelivery = `{
  "RecordType": "Delivery", "ServerID": 23, "MessageStream": "outbound",
  "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483", "Recipient": "jordan@acme.dev", "Tag": "invoice",
  "DeliveredAt": "2026-06-30T14:02:11.9070259Z", "Details": "Test delivery webhook details",
  "Metadata": {"idempotency_key": "ik_a94a0b1d", "execution_id": "exec_01H8", "step_id": "step-4"}
}`
	mailgunDelivered = `{
  "signature": {"timestamp": "1529006854", "token": "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0",
    "signature": "d2271d12299f6592d9d44cd9d250f0704e4674c30d79d07c47a66f95ce71cf55"},
  "event-data": {
    "event": "delivered", "timestamp": 1521472262.908181, "id": "CPgfbmQMTCKtHW6uIWtuVe",
    "recipient": "alice@example.com", "recipient-domain": "example.com", "log-level": "info",
    "envelope": {"transport": "smtp", "sender": "bob@sandbox.mailgun.org", "targets": "alice@example.com"},
    "message": {"headers": {"to": "Alice <alice@example.com>", "message-id": "20130503182626.18666.16540@sandbox.mailgun.org",
      "from": "Bob <bob@sandbox.mailgun.org>", "subject": "Your June invoice"}, "attachments": [], "size": 111},
    "user-variables": {"idempotency_key": "ik_a94a0b1d", "execution_id": "exec_01H8"},
    "delivery-status": {"code": 250, "message": "OK", "description": ""}
  }
}`
)

func TestPresets(t *testing.T) {
	ms := Builtin()
	for name, scheme := range map[string]string{"stripe": SchemeStripe, "sendgrid": SchemeSendGrid, "postmark": SchemeBasic, "mailgun": SchemeMailgun} {
		if m, ok := ms[name]; !ok || m.Provider != name || m.Signature.Scheme != scheme || m.Description == "" {
			t.Errorf("%s: got %+v, want provider %s, scheme %s and a description", name, m, name, scheme)
		}
	}

	sg, err := ms["sendgrid"].Map([]byte(sendGridBatch))
	if err != nil {
		t.Fatal(err)
	}
	if len(sg.Effects) != 2 || sg.Ignored["open"] != 1 {
		t.Fatalf("sendgrid: got %d effects, ignored %v; want processed and delivered, the open ignored", len(sg.Effects), sg.Ignored)
	}
	for _, e := range sg.Effects { // one message to one recipient: one effect twice, so one event id
		if e.ID != "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0" || e.Target != "jordan@acme.dev" || e.IdempotencyKey != "ik_a94a0b1d" ||
			e.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || e.SpanID != "00f067aa0ba902b7" {
			t.Errorf("sendgrid: got %+v", e.Effect)
		}
	}
	if got := sg.Effects[1].Paths["effect_id"]; got != "[1].sg_message_id" {
		t.Errorf("sendgrid: effect_id read from %q, want [1].sg_message_id", got)
	}

	pm, err := ms["postmark"].Map([]byte(postmarkDelivery))
	if err != nil || len(pm.Effects) != 1 {
		t.Fatalf("postmark: got %+v, %v", pm, err)
	}
	if e := pm.Effects[0]; e.ID != "883953f4-6105-42a2-a16a-77a8eac79483" || e.Target != "jordan@acme.dev" || e.ExecutionID != "exec_01H8" ||
		e.StepID != "step-4" || e.At.Format(time.RFC3339Nano) != "2026-06-30T14:02:11.9070259Z" {
		t.Errorf("postmark: got %+v", e.Effect)
	}
	bounce, err := ms["postmark"].Map([]byte(`{"RecordType": "Bounce", "MessageID": "m"}`))
	if err != nil || len(bounce.Effects) != 0 || bounce.Ignored["Bounce"] != 1 {
		t.Errorf("postmark bounce: got %+v, %v; want it ignored", bounce, err)
	}

	mg, err := ms["mailgun"].Map([]byte(mailgunDelivered))
	if err != nil || len(mg.Effects) != 1 {
		t.Fatalf("mailgun: got %+v, %v", mg, err)
	}
	if e := mg.Effects[0]; e.ID != "20130503182626.18666.16540@sandbox.mailgun.org" || e.Target != "alice@example.com" ||
		e.At.Format(time.RFC3339Nano) != "2018-03-19T15:11:02.908181Z" || e.IdempotencyKey != "ik_a94a0b1d" {
		t.Errorf("mailgun: got %+v", e.Effect)
	}
}

// TestPresetFingerprints: the mail presets fingerprint what their payloads
// say of the message. Mailgun's carry its To and Subject headers: an
// accepted and a delivered event, or another message with another key, id
// and recipient event of one email, share a fingerprint; another subject
// does not. SendGrid's and Postmark's carry no subject: no fingerprint.
func TestPresetFingerprints(t *testing.T) {
	ms := Builtin()
	mailgun := func(payload string) Effect {
		t.Helper()
		res, err := ms["mailgun"].Map([]byte(payload))
		if err != nil || len(res.Effects) != 1 {
			t.Fatalf("mailgun: got %+v, %v", res, err)
		}
		return res.Effects[0]
	}
	first := mailgun(mailgunDelivered)
	if !strings.HasPrefix(first.Fingerprint, "webhook:") || first.Summary != "email to Alice <alice@example.com>, subject 'Your June invoice'" {
		t.Fatalf("mailgun: got fingerprint %q, summary %q", first.Fingerprint, first.Summary)
	}
	for name, edit := range map[string]*strings.Replacer{
		"the accepted event":         strings.NewReplacer(`"event": "delivered"`, `"event": "accepted"`),
		"another message, key, time": strings.NewReplacer("20130503182626.18666.16540", "20130503182699.1.1", "ik_a94a0b1d", "ik_other", "1521472262.908181", "1521472272.1"),
		"another recipient's event":  strings.NewReplacer(`"recipient": "alice@example.com"`, `"recipient": "carol@example.com"`),
	} {
		if got := mailgun(edit.Replace(mailgunDelivered)); got.Fingerprint != first.Fingerprint {
			t.Errorf("mailgun, %s: got fingerprint %s, want %s", name, got.Fingerprint, first.Fingerprint)
		}
	}
	if got := mailgun(strings.Replace(mailgunDelivered, "Your June invoice", "Your July invoice", 1)); got.Fingerprint == first.Fingerprint {
		t.Errorf("mailgun, another subject: got the same fingerprint %s", got.Fingerprint)
	}
	if got := mailgun(strings.Replace(mailgunDelivered, `, "subject": "Your June invoice"`, "", 1)); got.Fingerprint != "" ||
		got.Summary != "email to Alice <alice@example.com>, subject '?'" {
		t.Errorf("mailgun without a subject: got fingerprint %q, summary %q; want none, and ? in the summary", got.Fingerprint, got.Summary)
	}
	sg, _ := ms["sendgrid"].Map([]byte(sendGridBatch))
	pm, _ := ms["postmark"].Map([]byte(postmarkDelivery))
	for _, e := range append(sg.Effects, pm.Effects...) {
		if e.Fingerprint != "" || e.Summary != "" {
			t.Errorf("%s: got fingerprint %q, summary %q; want none: its payload does not say what was sent", e.Provider, e.Fingerprint, e.Summary)
		}
	}
}

// TestMappingFingerprint: a user's mapping names the fields of its
// fingerprint in the path syntax, all of which must be present, and a
// summary template; without a template the summary lists the fields.
func TestMappingFingerprint(t *testing.T) {
	ms, err := ParseMap([]byte(`{
	  "notify": {"effect_id": "id", "fingerprint": ["$.recipient", "$.subject"], "summary": "notice to {recipient}: {subject} {tags}"},
	  "plain": {"effect_id": "id", "fingerprint": "order.lines"}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	read := func(mapping, payload string) Effect {
		t.Helper()
		res, err := ms[mapping].Map([]byte(payload))
		if err != nil || len(res.Effects) != 1 {
			t.Fatalf("%s %s: got %+v, %v", mapping, payload, res, err)
		}
		return res.Effects[0]
	}
	a := read("notify", `{"id": "n1", "recipient": "a@x", "subject": "Hi", "sent_at": 1, "tags": ["x", 2]}`)
	b := read("notify", `{"id": "n2", "subject": "Hi", "recipient": "a@x", "sent_at": 2}`)
	c := read("notify", `{"id": "n3", "recipient": "b@x", "subject": "Hi"}`)
	if !strings.HasPrefix(a.Fingerprint, "webhook:") || a.Fingerprint != b.Fingerprint || a.Fingerprint == c.Fingerprint {
		t.Errorf("got fingerprints %q %q %q, want the first two alike, the third another", a.Fingerprint, b.Fingerprint, c.Fingerprint)
	}
	if a.Summary != `notice to a@x: Hi ["x",2]` || b.Summary != "notice to a@x: Hi ?" {
		t.Errorf("summaries: got %q and %q", a.Summary, b.Summary)
	}
	if d := read("notify", `{"id": "n4", "recipient": "a@x", "subject": null}`); d.Fingerprint != "" {
		t.Errorf("a field null: got fingerprint %q, want none", d.Fingerprint)
	}
	p := read("plain", `{"id": "o1", "order": {"lines": [{"sku": "A", "qty": 2}]}}`)
	if !strings.HasPrefix(p.Fingerprint, "webhook:") || p.Summary != `order.lines=[{"qty":2,"sku":"A"}]` {
		t.Errorf("a mapping without a summary: got %q, %q", p.Fingerprint, p.Summary)
	}
	deep := `{"id": "o2", "order": {"lines": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}`
	if q := read("plain", deep); q.Fingerprint != "" {
		t.Errorf("a value nested 100 deep: got fingerprint %q, want none", q.Fingerprint)
	}
	for _, tc := range []struct{ file, want string }{
		{`{"x": {"effect_id": "id", "fingerprint": ["a..b"]}}`, "empty segment"},
		{`{"x": {"effect_id": "id", "fingerprint": 3}}`, "must be a path or a list of paths"},
		{`{"x": {"effect_id": "id", "summary": "to {recipient"}}`, "summary: \"to {recipient\": a '{' without its '}'"},
		{`{"x": {"effect_id": "id", "summary": "to {}"}}`, "summary: {}: empty path"},
		{`{"x": {"effect_id": "id", "summary": "no fields"}}`, "summary: name at least one field"},
	} {
		if _, err := ParseMap([]byte(tc.file)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseMap(%s): got %v, want an error containing %q", tc.file, err, tc.want)
		}
	}
}

func TestParseMap(t *testing.T) {
	ms, err := ParseMap([]byte(`{"billing-api": {
	  "provider": "billing",
	  "events": "data.items",
	  "filter": {"kind": ["invoice.emailed"], "live": [true]},
	  "effect_id": ["delivery_id", "id"],
	  "key": "headers.Idempotency-Key",
	  "at": "sent_ms", "at_format": "unix_ms",
	  "trace_id": "otel.trace_id", "span_id": "otel.span_id",
	  "required": ["key"],
	  "signature": {"scheme": "hmac-sha256", "header": "X-Billing-Signature", "prefix": "sha256="}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	m := ms["billing-api"]
	res, err := m.Map([]byte(`{"data": {"items": [
	  {"kind": "invoice.emailed", "live": true, "id": 42, "headers": {"Idempotency-Key": "ik_1"}, "sent_ms": 1751292131123.5,
	   "otel": {"trace_id": "4BF92F3577B34DA6A3CE929D0E0E4736", "span_id": "00F067AA0BA902B7"}},
	  {"kind": "invoice.emailed", "live": false, "id": 43},
	  {"kind": "invoice.viewed", "live": true, "id": 44}
	]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Effects) != 1 || res.Ignored["false"] != 1 || res.Ignored["invoice.viewed"] != 1 {
		t.Fatalf("got %d effects, ignored %v; want one, a test event and a view ignored", len(res.Effects), res.Ignored)
	}
	e := res.Effects[0]
	if e.Provider != "billing" || e.ID != "42" || e.IdempotencyKey != "ik_1" || e.At.Format(time.RFC3339Nano) != "2025-06-30T14:02:11.1235Z" ||
		e.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || e.SpanID != "00f067aa0ba902b7" {
		t.Errorf("got %+v", e.Effect)
	}
	_, err = m.Map([]byte(`{"data": {"items": [{"kind": "invoice.emailed", "live": true, "id": 45}]}}`))
	if err == nil || err.Error() != "data.items[0].headers.Idempotency-Key: missing; the mapping requires it (key)" {
		t.Errorf("a required key missing: got %v", err)
	}

	for _, tc := range []struct{ file, want string }{
		{`[]`, "must be a JSON object"},
		{`{"a/b": {"effect_id": "id"}}`, `"a/b": a name is`},
		{`{"x": {"key": "k"}}`, "x: effect_id: required"},
		{`{"x": {"effect_id": "id", "efect_id": "id"}}`, `unknown field "efect_id"`},
		{`{"x": {"effect_id": "a..b"}}`, "empty segment"},
		{`{"x": {"effect_id": "id", "at_format": "unix_s"}}`, "at_format: must be"},
		{`{"x": {"effect_id": "id", "trace_id": "t"}}`, "give both or neither"},
		{`{"x": {"effect_id": "id", "required": ["target"]}}`, "required: target has no path"},
		{`{"x": {"effect_id": "id", "required": ["colour"]}}`, `required: "colour" is not one of`},
		{`{"x": {"effect_id": "id", "filter": {"event": []}}}`, "filter: event: list the values"},
		{`{"x": {"effect_id": "id", "signature": {"scheme": "md5"}}}`, "signature: scheme: must be one of"},
		{`{"x": {"effect_id": "id", "signature": {"scheme": "hmac-sha256"}}}`, "signature: header, field: give one"},
		{`{"x": {"effect_id": "id", "signature": {"scheme": "hmac-sha256", "header": "X", "field": "s"}}}`, "signature: header, field: give one"},
		{`{"x": {"effect_id": "id", "signature": {"scheme": "stripe", "header": "X"}}}`, "for scheme hmac-sha256 only"},
		{`{"x": {"effect_id": "id", "signature": {"scheme": "mailgun", "replay_token": "t"}}}`, "for scheme hmac-sha256 only"},
		{`{"x": {"effect_id": "id", "signature": {"scheme": "hmac-sha256", "field": "s"}}}`, "signature: field: a signature inside the body cannot sign the body"},
		{`{"x": {"effect_id": "id", "signature": {"scheme": "hmac-sha256", "field": "s", "signed": ["ts"], "timestamp": "ts"}}}`,
			"signature: replay_token: required, and listed in signed"},
		{`{"x": {"effect_id": "id", "signature": {"scheme": "hmac-sha256", "field": "s", "signed": ["ts"], "timestamp": "ts", "replay_token": "tok"}}}`,
			"signature: replay_token: required, and listed in signed"},
		{`{"x": {"effect_id": "id", "signature": {"scheme": "hmac-sha256", "field": "s", "signed": ["tok"], "replay_token": "tok"}}}`,
			"signature: timestamp: required, and listed in signed"},
		{`{"x": {"effect_id": "id", "signature": {"scheme": "hmac-sha256", "header": "X", "replay_token": "a..b"}}}`, "signature: replay_token: "},
	} {
		if _, err := ParseMap([]byte(tc.file)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseMap(%s): got %v, want an error containing %q", tc.file, err, tc.want)
		}
	}
}

func TestUnixTime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		unit time.Duration
		want string
	}{
		{"1521472262.908181", time.Second, "2018-03-19T15:11:02.908181Z"},
		{"1521472262", time.Second, "2018-03-19T15:11:02Z"},
		{"1751292131123.5", time.Millisecond, "2025-06-30T14:02:11.1235Z"},
		{"1.521472262e9", time.Second, "2018-03-19T15:11:02Z"},
		{"-1", time.Second, ""},
		{"99999999999999", time.Second, ""},
		{"12.x", time.Second, ""},
	} {
		got, ok := unixTime(tc.in, tc.unit)
		if s := got.Format(time.RFC3339Nano); (tc.want == "" && ok) || (tc.want != "" && s != tc.want) {
			t.Errorf("unixTime(%s, %s): got %s %v, want %q", tc.in, tc.unit, s, ok, tc.want)
		}
	}
}

func TestVerify(t *testing.T) {
	now := time.Unix(1751292131, 0)
	body := []byte(stripePayload("charge.succeeded", stripeRequest, stripeCharge))
	stripeSig := func(secret string, at time.Time, body []byte) http.Header {
		ts := strconv.FormatInt(at.Unix(), 10)
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "." + string(body)))
		return http.Header{"Stripe-Signature": {"t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil)) + ",v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39"}}
	}
	sgKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&sgKey.PublicKey)
	sgPublic := base64.StdEncoding.EncodeToString(der)
	sendGridSig := func(key *ecdsa.PrivateKey, at time.Time, body []byte) http.Header {
		ts := strconv.FormatInt(at.Unix(), 10)
		digest := sha256.Sum256(append([]byte(ts), body...))
		sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		return http.Header{sendGridSignatureHeader: {base64.StdEncoding.EncodeToString(sig)}, sendGridTimestampHeader: {ts}}
	}
	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	mailgunBody := func(secret string, at time.Time) []byte {
		ts, token := strconv.FormatInt(at.Unix(), 10), "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0"
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + token))
		return fmt.Appendf(nil, `{"signature": {"timestamp": %q, "token": %q, "signature": %q}, "event-data": {}}`, ts, token, hex.EncodeToString(mac.Sum(nil)))
	}
	basic := func(creds string) http.Header {
		return http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(creds))}}
	}
	hmacSig := Signature{Scheme: SchemeHMAC, Header: "X-Hub-Signature-256", Prefix: "sha256="}
	hmacHeader := func(secret string) http.Header {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		return http.Header{"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(mac.Sum(nil))}}
	}
	stale := now.Add(-6 * time.Minute)
	mailgunToken := replayKey(strconv.FormatInt(now.Unix(), 10), "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0")
	// fieldSig signs fields of the body, as Mailgun does, in the generic form.
	fieldSig := Signature{Scheme: SchemeHMAC, Field: "auth.sig", SignedFields: []string{"auth.ts", "auth.nonce"}, Timestamp: "auth.ts", ReplayToken: "auth.nonce"}
	fieldBody := func(secret string, at time.Time, nonce string) []byte {
		ts := strconv.FormatInt(at.Unix(), 10)
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + nonce))
		return fmt.Appendf(nil, `{"auth": {"ts": %s, "nonce": %q, "sig": %q}, "id": "x"}`, ts, nonce, hex.EncodeToString(mac.Sum(nil)))
	}

	for _, tc := range []struct {
		name   string
		sig    Signature
		secret string
		d      Delivery
		want   string // the SignatureError's start; "" for none
		token  string // the Replay's token when verified
	}{
		{"stripe", Signature{Scheme: SchemeStripe}, "whsec_test", Delivery{body, stripeSig("whsec_test", now, body)}, "", ""},
		{"stripe, rolled secret", Signature{Scheme: SchemeStripe}, "whsec_test", Delivery{body, http.Header{"Stripe-Signature": {
			stripeSig("whsec_old", now, body).Get("Stripe-Signature") + "," + strings.Split(stripeSig("whsec_test", now, body).Get("Stripe-Signature"), ",")[1]}}}, "", ""},
		{"stripe, missing", Signature{Scheme: SchemeStripe}, "whsec_test", Delivery{body, http.Header{}}, "Stripe-Signature: missing", ""},
		{"stripe, other secret", Signature{Scheme: SchemeStripe}, "whsec_test", Delivery{body, stripeSig("whsec_other", now, body)}, "Stripe-Signature: does not match", ""},
		{"stripe, body changed", Signature{Scheme: SchemeStripe}, "whsec_test", Delivery{append([]byte(" "), body...), stripeSig("whsec_test", now, body)}, "Stripe-Signature: does not match", ""},
		{"stripe, stale", Signature{Scheme: SchemeStripe}, "whsec_test", Delivery{body, stripeSig("whsec_test", stale, body)}, "Stripe-Signature: timestamp", ""},
		{"stripe, malformed", Signature{Scheme: SchemeStripe}, "whsec_test", Delivery{body, http.Header{"Stripe-Signature": {"v1=abc"}}}, "Stripe-Signature: must be", ""},
		{"sendgrid", Signature{Scheme: SchemeSendGrid}, sgPublic, Delivery{body, sendGridSig(sgKey, now, body)}, "", ""},
		{"sendgrid, other key", Signature{Scheme: SchemeSendGrid}, sgPublic, Delivery{body, sendGridSig(otherKey, now, body)}, sendGridSignatureHeader + ": does not match", ""},
		{"sendgrid, stale", Signature{Scheme: SchemeSendGrid}, sgPublic, Delivery{body, sendGridSig(sgKey, stale, body)}, sendGridTimestampHeader + ": timestamp", ""},
		{"sendgrid, missing", Signature{Scheme: SchemeSendGrid}, sgPublic, Delivery{body, http.Header{}}, sendGridSignatureHeader + ": missing", ""},
		{"mailgun", Signature{Scheme: SchemeMailgun}, "key-signing", Delivery{mailgunBody("key-signing", now), nil}, "", mailgunToken},
		{"mailgun, other key", Signature{Scheme: SchemeMailgun}, "key-signing", Delivery{mailgunBody("key-other", now), nil}, "signature.signature: does not match", ""},
		{"mailgun, stale", Signature{Scheme: SchemeMailgun}, "key-signing", Delivery{mailgunBody("key-signing", stale), nil}, "signature.timestamp: timestamp", ""},
		{"mailgun, unsigned", Signature{Scheme: SchemeMailgun}, "key-signing", Delivery{[]byte(`{"event-data": {}}`), nil}, "signature.signature: missing", ""},
		{"basic", Signature{Scheme: SchemeBasic}, "postmark:hunter2", Delivery{body, basic("postmark:hunter2")}, "", ""},
		{"basic, password only", Signature{Scheme: SchemeBasic}, "hunter2", Delivery{body, basic("anyone:hunter2")}, "", ""},
		{"basic, wrong", Signature{Scheme: SchemeBasic}, "postmark:hunter2", Delivery{body, basic("postmark:hunter3")}, "Authorization: the Basic credentials", ""},
		{"basic, missing", Signature{Scheme: SchemeBasic}, "postmark:hunter2", Delivery{body, http.Header{}}, "Authorization: missing", ""},
		{"hmac", hmacSig, "s3cret", Delivery{body, hmacHeader("s3cret")}, "", ""},
		{"hmac, other secret", hmacSig, "s3cret", Delivery{body, hmacHeader("other")}, "X-Hub-Signature-256: does not match", ""},
		{"hmac, no prefix", hmacSig, "s3cret", Delivery{body, http.Header{"X-Hub-Signature-256": {"abc"}}}, `X-Hub-Signature-256: must start with "sha256="`, ""},
		{"hmac of fields", fieldSig, "s3cret", Delivery{fieldBody("s3cret", now, "n-1"), nil}, "", replayKey(strconv.FormatInt(now.Unix(), 10), "n-1")},
		{"hmac of fields, written as Mailgun's scheme", Signature{Scheme: SchemeHMAC, Field: "signature.signature",
			SignedFields: []string{"signature.timestamp", "signature.token"}, Timestamp: "signature.timestamp", ReplayToken: "signature.token"},
			"key-signing", Delivery{mailgunBody("key-signing", now), nil}, "", mailgunToken},
		{"hmac of fields, other secret", fieldSig, "s3cret", Delivery{fieldBody("other", now, "n-1"), nil}, "auth.sig: does not match", ""},
		{"hmac of fields, token changed", fieldSig, "s3cret", Delivery{bytes.Replace(fieldBody("s3cret", now, "n-1"), []byte(`"n-1"`), []byte(`"n-2"`), 1), nil},
			"auth.sig: does not match", ""},
		{"hmac of fields, stale", fieldSig, "s3cret", Delivery{fieldBody("s3cret", stale, "n-1"), nil}, "auth.ts: timestamp", ""},
		{"hmac of fields, no token", fieldSig, "s3cret", Delivery{[]byte(`{"auth": {"ts": 1751292131, "sig": "00"}}`), nil}, "auth.nonce: missing", ""},
		{"hmac of fields, not JSON", fieldSig, "s3cret", Delivery{[]byte(`nope`), nil}, "auth.sig: missing", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replay, err := tc.sig.Verify(tc.d, tc.secret, now, 5*time.Minute)
			var se *SignatureError
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want it verified", err)
			case tc.want != "" && (!errors.As(err, &se) || !strings.HasPrefix(se.Error(), tc.want)):
				t.Errorf("got %v, want a signature error starting %q", err, tc.want)
			case tc.want == "" && replay.Token != tc.token:
				t.Errorf("got replay token %q, want %q", replay.Token, tc.token)
			case tc.token != "" && !replay.SignedAt.Equal(now):
				t.Errorf("got signed at %s, want %s", replay.SignedAt, now)
			}
		})
	}

	if err := (Signature{Scheme: SchemeSendGrid}).CheckSecret("bm90IGEga2V5"); err == nil {
		t.Error("CheckSecret: a SendGrid key that is not one was accepted")
	}
	if err := (Signature{}).CheckSecret("s"); err == nil {
		t.Error("CheckSecret: a secret for a mapping that cannot be signed was accepted")
	}
}
