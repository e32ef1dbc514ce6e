package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"unicode"
)

// spec is one mapping of a mapping file, as written.
type spec struct {
	Description string `json:"description"`
	// Provider names the effects' provider; the mapping's name when empty.
	Provider string `json:"provider"`
	// Events is the path of an array of events (SendGrid posts one: "$");
	// empty when the payload is one event.
	Events string `json:"events"`
	// Filter keeps the events whose value at each path is one of the
	// listed ones; the others are ignored, counted by their value at the
	// first such path.
	Filter map[string]filterValues `json:"filter"`

	EffectID    field    `json:"effect_id"`
	Key         field    `json:"key"`
	Target      field    `json:"target"`
	At          field    `json:"at"`
	AtFormat    string   `json:"at_format"`
	ExecutionID field    `json:"execution_id"`
	StepID      field    `json:"step_id"`
	Traceparent field    `json:"traceparent"`
	TraceID     field    `json:"trace_id"`
	SpanID      field    `json:"span_id"`
	Required    []string `json:"required"`
	// Fingerprint names the fields that say what was asked, all of which
	// make the effect's fingerprint; Summary says it in a line, {path}
	// standing for a field's value.
	Fingerprint field  `json:"fingerprint"`
	Summary     string `json:"summary"`

	Signature Signature `json:"signature"`
}

// generic reads payloads with a spec's paths.
type generic struct {
	provider string
	events   *path // nil: the payload is one event
	filters  []filter
	fields   fields
}

type filter struct {
	at   path
	keep []string
}

// filterValues are the values a filter keeps, written as JSON strings,
// numbers or booleans and compared as text (scalar).
type filterValues []string

func (f *filterValues) UnmarshalJSON(data []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return errors.New("filter: each path lists the values to keep")
	}
	*f = nil
	for _, r := range raw {
		v, err := decodeJSON(r)
		s, ok := scalar(v)
		if err != nil || !ok {
			return fmt.Errorf("filter: %s is not a string, number or boolean", r)
		}
		*f = append(*f, s)
	}
	return nil
}

func parseGeneric(name string, data []byte) (Mapping, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s spec
	if err := dec.Decode(&s); err != nil {
		return Mapping{}, err
	}
	if len(s.EffectID) == 0 {
		return Mapping{}, errors.New("effect_id: required: the path of the provider's id of the effect (a message id, a charge id)")
	}
	if s.Provider == "" {
		s.Provider = name
	}
	if !printable(s.Provider) || len(s.Provider) > 256 {
		return Mapping{}, fmt.Errorf("provider: must be 1 to 256 bytes of printable text, not %q", s.Provider)
	}
	switch s.AtFormat {
	case timeAuto, timeRFC3339, timeUnix, timeUnixMS:
	default:
		return Mapping{}, fmt.Errorf("at_format: must be rfc3339, unix or unix_ms, not %q", s.AtFormat)
	}
	if (len(s.TraceID) == 0) != (len(s.SpanID) == 0) {
		return Mapping{}, errors.New("trace_id, span_id: give both or neither")
	}
	if err := s.Signature.validate(); err != nil {
		return Mapping{}, fmt.Errorf("signature: %w", err)
	}
	summary, err := parseSummary(s.Summary)
	if err != nil {
		return Mapping{}, fmt.Errorf("summary: %w", err)
	}
	g := &generic{provider: s.Provider, fields: fields{effectID: s.EffectID, key: s.Key, target: s.Target, at: s.At, atFormat: s.AtFormat,
		executionID: s.ExecutionID, stepID: s.StepID, traceparent: s.Traceparent, traceID: s.TraceID, spanID: s.SpanID,
		required: s.Required, fingerprint: []path(s.Fingerprint), summary: summary}}
	for _, r := range s.Required {
		from, ok := requirable[r]
		if !ok {
			return Mapping{}, fmt.Errorf("required: %q is not one of %v", r, slices.Sorted(maps.Keys(requirable)))
		}
		if len(from(&g.fields)) == 0 {
			return Mapping{}, fmt.Errorf("required: %s has no path", r)
		}
	}
	if s.Events != "" {
		p, err := parsePath(s.Events)
		if err != nil {
			return Mapping{}, fmt.Errorf("events: %w", err)
		}
		g.events = &p
	}
	for _, at := range slices.Sorted(maps.Keys(s.Filter)) {
		p, err := parsePath(at)
		if err != nil {
			return Mapping{}, fmt.Errorf("filter: %w", err)
		}
		if len(s.Filter[at]) == 0 {
			return Mapping{}, fmt.Errorf("filter: %s: list the values to keep", at)
		}
		g.filters = append(g.filters, filter{at: p, keep: s.Filter[at]})
	}
	return Mapping{Provider: s.Provider, Description: s.Description, Signature: s.Signature, read: g.read}, nil
}

func (g *generic) read(payload any) (Result, error) {
	items, err := g.items(payload)
	if err != nil {
		return Result{}, err
	}
	var res Result
	for _, it := range items {
		if kind, keep := g.keep(it); !keep {
			res.ignore(kind)
			continue
		}
		e, err := g.fields.effect(g.provider, it)
		if err != nil {
			return Result{}, err
		}
		res.Effects = append(res.Effects, e)
	}
	return res, nil
}

// items are the payload's events: the payload itself, or the elements of
// the array at the events path.
func (g *generic) items(payload any) ([]item, error) {
	if g.events == nil {
		return []item{{v: payload}}, nil
	}
	v, ok := payload, true
	prefix := ""
	if g.events.text != "$" {
		v, ok = g.events.lookup(payload)
		prefix = g.events.text
	}
	list, isList := v.([]any)
	if !ok || !isList {
		return nil, &FieldError{Path: g.events.text, Problem: "must be an array of events"}
	}
	items := make([]item, len(list))
	for i, v := range list {
		items[i] = item{v: v, prefix: prefix + "[" + strconv.Itoa(i) + "]."}
	}
	return items, nil
}

// keep says whether an event passes every filter; when it does not, kind
// is its value at the first failing path (how the response counts it).
func (g *generic) keep(it item) (kind string, keep bool) {
	for _, f := range g.filters {
		v, ok := f.at.lookup(it.v)
		s, isScalar := scalar(v)
		if !ok || !isScalar {
			return f.at.text + " missing", false
		}
		if !slices.Contains(f.keep, s) {
			return s, false
		}
	}
	return "", true
}

func printable(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
