package webhook

import (
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Signature schemes. Each one is what its provider documents; hmac-sha256
// is the common "HMAC of the raw body in a header" for any other sender.
const (
	// SchemeStripe: Stripe-Signature "t=<unix>,v1=<hex>", HMAC-SHA256 of
	// "<t>.<body>" with the endpoint secret (whsec_...); several v1 while
	// a secret is being rolled.
	SchemeStripe = "stripe"
	// SchemeSendGrid: ECDSA P-256 over SHA-256 of "<timestamp><body>";
	// signature and timestamp in X-Twilio-Email-Event-Webhook-Signature
	// and -Timestamp; the secret is the verification (public) key shown in
	// SendGrid's settings, base64 DER or PEM.
	SchemeSendGrid = "sendgrid"
	// SchemeMailgun: in the body, signature.signature is the hex
	// HMAC-SHA256 of signature.timestamp + signature.token with the HTTP
	// webhook signing key.
	SchemeMailgun = "mailgun"
	// SchemeBasic: HTTP Basic credentials in the webhook URL
	// (https://user:password@host/...), the only check Postmark offers;
	// the secret is "user:password" (or a password alone: any user).
	SchemeBasic = "basic"
	// SchemeHMAC: Header carries HMAC-SHA256 of the raw body, hex (or
	// base64) after an optional Prefix such as "sha256=".
	SchemeHMAC = "hmac-sha256"
)

// Headers of the schemes.
const (
	stripeHeader            = "Stripe-Signature"
	sendGridSignatureHeader = "X-Twilio-Email-Event-Webhook-Signature"
	sendGridTimestampHeader = "X-Twilio-Email-Event-Webhook-Timestamp"
)

// Signature says how a provider signs its deliveries. The zero value: it
// does not.
type Signature struct {
	Scheme string `json:"scheme"`
	// Header carries the signature (hmac-sha256 only).
	Header string `json:"header,omitempty"`
	// Encoding of the signature: hex (default) or base64 (hmac-sha256 only).
	Encoding string `json:"encoding,omitempty"`
	// Prefix precedes the signature in the header, e.g. "sha256=" (hmac-sha256 only).
	Prefix string `json:"prefix,omitempty"`
}

// Signed says whether the provider can sign at all.
func (s Signature) Signed() bool { return s.Scheme != "" }

func (s Signature) validate() error {
	switch s.Scheme {
	case "", SchemeStripe, SchemeSendGrid, SchemeMailgun, SchemeBasic:
		if s.Header != "" || s.Encoding != "" || s.Prefix != "" {
			return fmt.Errorf("header, encoding and prefix are for scheme %s only", SchemeHMAC)
		}
	case SchemeHMAC:
		if s.Header == "" {
			return errors.New("header: required for scheme " + SchemeHMAC)
		}
		if s.Encoding != "" && s.Encoding != "hex" && s.Encoding != "base64" {
			return fmt.Errorf("encoding: must be hex or base64, not %q", s.Encoding)
		}
	default:
		return fmt.Errorf("scheme: must be one of %s, %s, %s, %s, %s, not %q",
			SchemeStripe, SchemeSendGrid, SchemeMailgun, SchemeBasic, SchemeHMAC, s.Scheme)
	}
	return nil
}

// CheckSecret tells at start-up whether secret can verify this scheme.
func (s Signature) CheckSecret(secret string) error {
	if !s.Signed() {
		return errors.New("the mapping has no signature scheme, so a secret cannot be checked")
	}
	if secret == "" {
		return errors.New("empty secret")
	}
	if s.Scheme == SchemeSendGrid {
		_, err := sendGridKey(secret)
		return err
	}
	return nil
}

// Verify checks a delivery against secret at now; a signature whose
// timestamp is older than tolerance is refused (tolerance 0: any age).
// As in the providers' own libraries, only age is checked, not a time
// ahead of the clock.
func (s Signature) Verify(d Delivery, secret string, now time.Time, tolerance time.Duration) error {
	switch s.Scheme {
	case SchemeStripe:
		return verifyStripe(d, secret, now, tolerance)
	case SchemeSendGrid:
		return verifySendGrid(d, secret, now, tolerance)
	case SchemeMailgun:
		return verifyMailgun(d, secret, now, tolerance)
	case SchemeBasic:
		return verifyBasic(d, secret)
	case SchemeHMAC:
		return s.verifyHMAC(d, secret)
	}
	return &SignatureError{Field: "signature", Problem: "a secret is configured but the mapping has no signature scheme"}
}

func missing(field string) error {
	return &SignatureError{Field: field, Problem: "missing; a secret is configured for this provider, so every delivery must be signed"}
}

func mismatch(field, what string) error {
	return &SignatureError{Field: field, Problem: "does not match the payload " + what}
}

// checkAge refuses a signed timestamp older than tolerance.
func checkAge(field, unix string, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(strings.TrimSpace(unix), 10, 64)
	if err != nil {
		return &SignatureError{Field: field, Problem: fmt.Sprintf("timestamp %q is not Unix seconds", unix)}
	}
	signed := time.Unix(sec, 0)
	if age := now.Sub(signed); tolerance > 0 && age > tolerance {
		return &SignatureError{Field: field, Problem: fmt.Sprintf("timestamp %s is %s old, more than the tolerance of %s (a replayed delivery, or a clock off)",
			signed.UTC().Format(time.RFC3339), age.Truncate(time.Second), tolerance)}
	}
	return nil
}

func hmacSHA256(secret string, parts ...string) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	for _, p := range parts {
		mac.Write([]byte(p))
	}
	return mac.Sum(nil)
}

func verifyStripe(d Delivery, secret string, now time.Time, tolerance time.Duration) error {
	header := d.Header.Get(stripeHeader)
	if header == "" {
		return missing(stripeHeader)
	}
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if ts == "" || len(sigs) == 0 {
		return &SignatureError{Field: stripeHeader, Problem: "must be t=<timestamp>,v1=<signature>"}
	}
	want := hmacSHA256(secret, ts, ".", string(d.Body))
	matched := false
	for _, sig := range sigs {
		got, err := hex.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			matched = true
		}
	}
	if !matched {
		return mismatch(stripeHeader, "signed with the endpoint secret (is it this endpoint's whsec_..., and is the body passed through unchanged?)")
	}
	return checkAge(stripeHeader, ts, now, tolerance)
}

func sendGridKey(secret string) (*ecdsa.PublicKey, error) {
	der := []byte(nil)
	if block, _ := pem.Decode([]byte(secret)); block != nil {
		der = block.Bytes
	} else {
		var err error
		if der, err = base64.StdEncoding.DecodeString(strings.TrimSpace(secret)); err != nil {
			return nil, fmt.Errorf("the SendGrid verification key must be base64 (as SendGrid shows it) or PEM: %w", err)
		}
	}
	key, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("the SendGrid verification key: %w", err)
	}
	ec, ok := key.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("the SendGrid verification key is a %T, not an ECDSA key", key)
	}
	return ec, nil
}

func verifySendGrid(d Delivery, secret string, now time.Time, tolerance time.Duration) error {
	sig64, ts := d.Header.Get(sendGridSignatureHeader), d.Header.Get(sendGridTimestampHeader)
	if sig64 == "" {
		return missing(sendGridSignatureHeader)
	}
	if ts == "" {
		return missing(sendGridTimestampHeader)
	}
	key, err := sendGridKey(secret)
	if err != nil {
		return err // CheckSecret refuses such a key at start-up
	}
	sig, err := base64.StdEncoding.DecodeString(sig64)
	if err != nil {
		return &SignatureError{Field: sendGridSignatureHeader, Problem: "not base64"}
	}
	digest := sha256.Sum256(append([]byte(ts), d.Body...))
	if !ecdsa.VerifyASN1(key, digest[:], sig) {
		return mismatch(sendGridSignatureHeader, "and "+sendGridTimestampHeader+" signed with SendGrid's key (is the verification key this account's?)")
	}
	return checkAge(sendGridTimestampHeader, ts, now, tolerance)
}

func verifyMailgun(d Delivery, secret string, now time.Time, tolerance time.Duration) error {
	var body struct {
		Signature *struct {
			Timestamp json.Number `json:"timestamp"`
			Token     string      `json:"token"`
			Signature string      `json:"signature"`
		} `json:"signature"`
	}
	_ = json.Unmarshal(d.Body, &body) // a body that is not JSON is missing its signature
	if body.Signature == nil || body.Signature.Signature == "" {
		return missing("signature.signature")
	}
	if body.Signature.Timestamp == "" || body.Signature.Token == "" {
		return &SignatureError{Field: "signature", Problem: "must carry timestamp, token and signature"}
	}
	got, err := hex.DecodeString(body.Signature.Signature)
	if err != nil || !hmac.Equal(got, hmacSHA256(secret, body.Signature.Timestamp.String(), body.Signature.Token)) {
		return mismatch("signature.signature", "timestamp and token signed with the HTTP webhook signing key")
	}
	return checkAge("signature.timestamp", body.Signature.Timestamp.String(), now, tolerance)
}

func verifyBasic(d Delivery, secret string) error {
	auth := d.Header.Get("Authorization")
	scheme, encoded, ok := strings.Cut(auth, " ")
	if auth == "" || !ok || !strings.EqualFold(scheme, "Basic") {
		return missing("Authorization")
	}
	creds, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return &SignatureError{Field: "Authorization", Problem: "Basic credentials are not base64"}
	}
	got := string(creds)
	if !strings.Contains(secret, ":") { // a password alone: any user name
		_, got, _ = strings.Cut(got, ":")
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(secret)) != 1 {
		return &SignatureError{Field: "Authorization", Problem: "the Basic credentials are not the ones configured for this provider"}
	}
	return nil
}

func (s Signature) verifyHMAC(d Delivery, secret string) error {
	value := d.Header.Get(s.Header)
	if value == "" {
		return missing(s.Header)
	}
	encoded, ok := strings.CutPrefix(value, s.Prefix)
	if !ok {
		return &SignatureError{Field: s.Header, Problem: fmt.Sprintf("must start with %q", s.Prefix)}
	}
	var got []byte
	var err error
	if s.Encoding == "base64" {
		got, err = base64.StdEncoding.DecodeString(encoded)
	} else {
		got, err = hex.DecodeString(encoded)
	}
	if err != nil || !hmac.Equal(got, hmacSHA256(secret, string(d.Body))) {
		return mismatch(s.Header, "signed with the configured secret")
	}
	return nil
}
