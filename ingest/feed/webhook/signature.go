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
	"slices"
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
	// base64) after an optional Prefix such as "sha256=". A sender that
	// signs fields of the body instead (Mailgun's form) is described by
	// Field, SignedFields, Timestamp and ReplayToken.
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
	// Field is the payload path of the signature when the body carries
	// it rather than a header (hmac-sha256 only; needs SignedFields).
	Field string `json:"field,omitempty"`
	// SignedFields lists the payload paths whose values, concatenated in order,
	// are what is signed, instead of the raw body (hmac-sha256 only). The
	// rest of the body is then not signed, so the signature must name a
	// signed Timestamp and a signed ReplayToken: else a captured signature
	// would be valid on any data, for ever.
	SignedFields []string `json:"signed,omitempty"`
	// Timestamp is the payload path of the delivery's Unix time, refused
	// when older than the tolerance (hmac-sha256 only).
	Timestamp string `json:"timestamp,omitempty"`
	// ReplayToken is the payload path of a value the sender makes unique
	// to each delivery (hmac-sha256 only). A token is remembered for the
	// tolerance window; reused on a different body it is a replay.
	ReplayToken string `json:"replay_token,omitempty"`
}

// Replay is what a verified signature says about replays: the one-time
// token it signs and when it was signed. Token is empty when the scheme
// signs none; SignedAt is zero when the signature carries no time.
type Replay struct {
	// Token is what the one-time token is remembered by: a hash of all
	// the signature signs (replayKey), not the token alone.
	Token string
	// Field is the payload path of the token, for messages.
	Field    string
	SignedAt time.Time
}

// replayKey is the Token of a signature over signed: a hash of everything
// it signs. Not the token alone: the values are signed concatenated, so
// the last digit of a timestamp moved to the front of the token signs the
// same text and would be a token never seen.
func replayKey(signed ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(signed, "")))
	return hex.EncodeToString(sum[:])
}

// Signed says whether the provider can sign at all.
func (s Signature) Signed() bool { return s.Scheme != "" }

func (s Signature) validate() error {
	switch s.Scheme {
	case "", SchemeStripe, SchemeSendGrid, SchemeMailgun, SchemeBasic:
		if s.Header != "" || s.Encoding != "" || s.Prefix != "" || s.Field != "" || len(s.SignedFields) > 0 || s.Timestamp != "" || s.ReplayToken != "" {
			return fmt.Errorf("header, field, encoding, prefix, signed, timestamp and replay_token are for scheme %s only", SchemeHMAC)
		}
	case SchemeHMAC:
		if (s.Header == "") == (s.Field == "") {
			return errors.New("header, field: give one: where the signature is, a header or a payload path (scheme " + SchemeHMAC + ")")
		}
		if s.Encoding != "" && s.Encoding != "hex" && s.Encoding != "base64" {
			return fmt.Errorf("encoding: must be hex or base64, not %q", s.Encoding)
		}
		ps, err := s.paths()
		if err != nil {
			return err
		}
		if s.Field != "" && len(s.SignedFields) == 0 {
			return errors.New("field: a signature inside the body cannot sign the body; list the signed fields in signed")
		}
		if len(s.SignedFields) > 0 {
			// Only the listed fields are signed: without a signed token
			// and time, the signature could be pasted onto invented data.
			isSigned := func(p *path) bool {
				return p != nil && slices.ContainsFunc(ps.signed, func(q path) bool { return q.text == p.text })
			}
			for _, need := range []struct {
				name string
				at   *path
			}{{"replay_token", ps.replayToken}, {"timestamp", ps.timestamp}} {
				if !isSigned(need.at) {
					return fmt.Errorf("%s: required, and listed in signed, when signed names fields: only they are signed, "+
						"so without a one-time token and a time a captured signature would be valid on any data, for ever", need.name)
				}
			}
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

// signaturePaths are a signature's payload paths, parsed.
type signaturePaths struct {
	field, timestamp, replayToken *path
	signed                        []path
}

func (s Signature) paths() (signaturePaths, error) {
	var ps signaturePaths
	for _, p := range []struct {
		name string
		at   string
		into **path
	}{{"field", s.Field, &ps.field}, {"timestamp", s.Timestamp, &ps.timestamp}, {"replay_token", s.ReplayToken, &ps.replayToken}} {
		if p.at == "" {
			continue
		}
		parsed, err := parsePath(p.at)
		if err != nil {
			return ps, fmt.Errorf("%s: %w", p.name, err)
		}
		*p.into = &parsed
	}
	for _, at := range s.SignedFields {
		parsed, err := parsePath(at)
		if err != nil {
			return ps, fmt.Errorf("signed: %w", err)
		}
		ps.signed = append(ps.signed, parsed)
	}
	return ps, nil
}

// Verify checks a delivery against secret at now; a signature whose
// timestamp is older than tolerance is refused (tolerance 0: any age).
// As in the providers' own libraries, only age is checked, not a time
// ahead of the clock. A scheme that signs a one-time token (Mailgun, an
// hmac-sha256 with a replay_token) returns it, for the caller to refuse
// its reuse.
func (s Signature) Verify(d Delivery, secret string, now time.Time, tolerance time.Duration) (Replay, error) {
	switch s.Scheme {
	case SchemeStripe:
		return Replay{}, verifyStripe(d, secret, now, tolerance)
	case SchemeSendGrid:
		return Replay{}, verifySendGrid(d, secret, now, tolerance)
	case SchemeMailgun:
		return verifyMailgun(d, secret, now, tolerance)
	case SchemeBasic:
		return Replay{}, verifyBasic(d, secret)
	case SchemeHMAC:
		return s.verifyHMAC(d, secret, now, tolerance)
	}
	return Replay{}, &SignatureError{Field: "signature", Problem: "a secret is configured but the mapping has no signature scheme"}
}

func missing(field string) error {
	return &SignatureError{Field: field, Problem: "missing; a secret is configured for this provider, so every delivery must be signed"}
}

func mismatch(field, what string) error {
	return &SignatureError{Field: field, Problem: "does not match the payload " + what}
}

// checkAge refuses a signed timestamp older than tolerance, and returns
// the time it says.
func checkAge(field, unix string, now time.Time, tolerance time.Duration) (time.Time, error) {
	sec, err := strconv.ParseInt(strings.TrimSpace(unix), 10, 64)
	if err != nil {
		return time.Time{}, &SignatureError{Field: field, Problem: fmt.Sprintf("timestamp %q is not Unix seconds", unix)}
	}
	signed := time.Unix(sec, 0)
	if age := now.Sub(signed); tolerance > 0 && age > tolerance {
		return signed, &SignatureError{Field: field, Problem: fmt.Sprintf("timestamp %s is %s old, more than the tolerance of %s (a replayed delivery, or a clock off)",
			signed.UTC().Format(time.RFC3339), age.Truncate(time.Second), tolerance)}
	}
	return signed, nil
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
	_, err := checkAge(stripeHeader, ts, now, tolerance)
	return err
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
	_, err = checkAge(sendGridTimestampHeader, ts, now, tolerance)
	return err
}

// verifyMailgun checks the signature block Mailgun puts in the body. It
// signs only the timestamp and the token, not the event: the token is
// returned so that the block cannot be pasted onto other event data.
func verifyMailgun(d Delivery, secret string, now time.Time, tolerance time.Duration) (Replay, error) {
	var body struct {
		Signature *struct {
			Timestamp json.Number `json:"timestamp"`
			Token     string      `json:"token"`
			Signature string      `json:"signature"`
		} `json:"signature"`
	}
	_ = json.Unmarshal(d.Body, &body) // a body that is not JSON is missing its signature
	if body.Signature == nil || body.Signature.Signature == "" {
		return Replay{}, missing("signature.signature")
	}
	if body.Signature.Timestamp == "" || body.Signature.Token == "" {
		return Replay{}, &SignatureError{Field: "signature", Problem: "must carry timestamp, token and signature"}
	}
	got, err := hex.DecodeString(body.Signature.Signature)
	if err != nil || !hmac.Equal(got, hmacSHA256(secret, body.Signature.Timestamp.String(), body.Signature.Token)) {
		return Replay{}, mismatch("signature.signature", "timestamp and token signed with the HTTP webhook signing key")
	}
	signed, err := checkAge("signature.timestamp", body.Signature.Timestamp.String(), now, tolerance)
	if err != nil {
		return Replay{}, err
	}
	return Replay{Token: replayKey(body.Signature.Timestamp.String(), body.Signature.Token), Field: "signature.token", SignedAt: signed}, nil
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

// verifyHMAC checks an HMAC-SHA256 of the raw body, or of the values of
// the SignedFields, against the signature in a header or a payload field.
func (s Signature) verifyHMAC(d Delivery, secret string, now time.Time, tolerance time.Duration) (Replay, error) {
	ps, err := s.paths()
	if err != nil {
		return Replay{}, err // validate refuses such a mapping at start-up
	}
	var payload any
	if ps.field != nil || len(ps.signed) > 0 || ps.timestamp != nil || ps.replayToken != nil {
		payload, _ = decodeJSON(d.Body) // a body that is not JSON is missing its fields
	}
	// value is the text at a payload path the signature needs.
	value := func(p *path) (string, error) {
		v, ok := p.lookup(payload)
		text, isScalar := scalar(v)
		if !ok || !isScalar || text == "" {
			return "", missing(p.text)
		}
		return text, nil
	}
	where, sigText := s.Header, d.Header.Get(s.Header)
	if ps.field != nil {
		where = ps.field.text
		if sigText, err = value(ps.field); err != nil {
			return Replay{}, err
		}
	} else if sigText == "" {
		return Replay{}, missing(s.Header)
	}
	encoded, ok := strings.CutPrefix(sigText, s.Prefix)
	if !ok {
		return Replay{}, &SignatureError{Field: where, Problem: fmt.Sprintf("must start with %q", s.Prefix)}
	}
	var got []byte
	if s.Encoding == "base64" {
		got, err = base64.StdEncoding.DecodeString(encoded)
	} else {
		got, err = hex.DecodeString(encoded)
	}
	message := []string{string(d.Body)}
	if len(ps.signed) > 0 {
		message = message[:0]
		for i := range ps.signed {
			v, err := value(&ps.signed[i])
			if err != nil {
				return Replay{}, err
			}
			message = append(message, v)
		}
	}
	if err != nil || !hmac.Equal(got, hmacSHA256(secret, message...)) {
		return Replay{}, mismatch(where, "signed with the configured secret")
	}
	var r Replay
	if ps.timestamp != nil {
		at, err := value(ps.timestamp)
		if err != nil {
			return Replay{}, err
		}
		if r.SignedAt, err = checkAge(ps.timestamp.text, at, now, tolerance); err != nil {
			return Replay{}, err
		}
	}
	if ps.replayToken != nil {
		token, err := value(ps.replayToken)
		if err != nil {
			return Replay{}, err
		}
		if len(ps.signed) == 0 {
			message = []string{token} // the body is signed: the token cannot move
		}
		r.Token, r.Field = replayKey(message...), ps.replayToken.text
	}
	return r, nil
}
