package webhook

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// Delivery is one request a provider sent: the body as received (after
// any Content-Encoding is undone) and its headers.
type Delivery struct {
	Body   []byte
	Header http.Header
}

// Effect is one effect read from a delivery, with the payload path each of
// its fields came from, so that a problem found later (an id over the
// limit) names the provider's field rather than oncetrace's.
type Effect struct {
	trace.Effect
	// Paths maps a native effect field ("effect_id", "target") to the
	// payload path it was read from ("[2].sg_message_id").
	Paths map[string]string
}

// Result is what a delivery says.
type Result struct {
	Effects []Effect
	// Ignored counts the events of the delivery that are not side effects
	// (a Stripe customer.updated, a SendGrid open), by their type.
	Ignored map[string]int
}

func (r *Result) ignore(kind string) {
	if r.Ignored == nil {
		r.Ignored = map[string]int{}
	}
	r.Ignored[kind]++
}

// FieldError is a payload that lacks a field its mapping requires, or
// carries one in a form that cannot be read. Path is the payload's path.
type FieldError struct {
	Path    string
	Problem string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Problem }

// SignatureError is a delivery whose signature is missing, does not match
// the configured secret, or is too old. Field names the header (or, for
// Mailgun, the payload field) that carries it.
type SignatureError struct {
	Field   string
	Problem string
}

func (e *SignatureError) Error() string { return e.Field + ": " + e.Problem }

// Mapping reads one provider's deliveries.
type Mapping struct {
	// Provider is the effects' provider: what the agent's attempts name,
	// so that the audit matches keys within it.
	Provider string
	// Description says in a sentence what the mapping records.
	Description string
	// Signature is how the provider signs deliveries; the zero value
	// means it does not.
	Signature Signature
	read      func(payload any) (Result, error)
}

// Map reads a delivery's JSON body as effects. A payload missing a field
// the mapping requires is a *FieldError naming its path.
func (m Mapping) Map(body []byte) (Result, error) {
	payload, err := decodeJSON(body)
	if err != nil {
		return Result{}, &FieldError{Path: "body", Problem: "invalid JSON: " + err.Error()}
	}
	return m.read(payload)
}

// Verify checks a delivery against the provider's secret at now; a
// signature older than tolerance is refused (tolerance 0: any age). The
// Replay names the one-time token the signature signs, if any.
func (m Mapping) Verify(d Delivery, secret string, now time.Time, tolerance time.Duration) (Replay, error) {
	return m.Signature.Verify(d, secret, now, tolerance)
}

// decodeJSON decodes one JSON value keeping numbers as written, so that
// a numeric id or a Unix time with microseconds is read exactly.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty body")
		}
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// Mappings are the webhook mappings by name: the {provider} of
// /api/v1/webhooks/{provider}.
type Mappings map[string]Mapping

// Names are the mappings' names, sorted.
func (ms Mappings) Names() []string { return slices.Sorted(maps.Keys(ms)) }

//go:embed presets.json
var presetsJSON []byte

// Builtin returns the mappings that ship with oncetrace: stripe (Go code)
// and the presets sendgrid, postmark and mailgun, written in the generic
// form of ParseMap (presets.json).
func Builtin() Mappings {
	ms, err := ParseMap(presetsJSON)
	if err != nil {
		panic("webhook: presets.json: " + err.Error()) // a test parses it
	}
	ms["stripe"] = stripeMapping()
	return ms
}

// namePattern is what a mapping's name may be: it is a URL path segment.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ParseMap reads a mapping file: a JSON object from provider name to a
// generic mapping (docs/outbox.md § "Provider webhooks"). Unknown fields
// are errors, so that a misspelt one is not silently ignored.
func ParseMap(data []byte) (Mappings, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("webhook map: must be a JSON object from provider name to mapping: %w", err)
	}
	ms := Mappings{}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		if !namePattern.MatchString(name) {
			return nil, fmt.Errorf("webhook map: %q: a name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
		}
		m, err := parseGeneric(name, raw[name])
		if err != nil {
			return nil, fmt.Errorf("webhook map: %s: %w", name, err)
		}
		ms[name] = m
	}
	return ms, nil
}
