package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oncetrace/oncetrace/trace"
)

// fieldsOf lists the fields each event type may carry; anything else is
// rejected, so that a misspelt field is an error rather than silently lost.
var fieldsOf = map[trace.EventType][]string{
	trace.EventExecution: {"type", "id", "execution_id", "name", "name_source", "status", "started_at", "ended_at", "idempotency_key", "labels"},
	trace.EventAttempt: {"type", "id", "execution_id", "step_id", "attempt", "tool", "effect", "provider", "args", "result",
		"idempotency_key", "worker", "started_at", "ended_at", "outcome", "error", "deduplicated", "trace_id", "span_id", "recognised_by"},
	trace.EventEffect: {"type", "id", "provider", "effect_id", "idempotency_key", "execution_id", "step_id", "target", "at",
		"trace_id", "span_id", "fingerprint", "summary"},
	trace.EventSpan: {"type", "id", "execution_id", "trace_id", "span_id", "parent_span_id", "role", "name", "started_at", "ended_at",
		"error", "model", "input_tokens", "output_tokens", "http_method", "http_url", "http_status", "idempotency_key"},
}

// earliest and latest bound accepted times: Unix nanoseconds must fit in int64.
var (
	earliest = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	latest   = time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)
)

// ParseEvent validates one event and returns it with its id (sent or
// derived) and its canonical body. Errors read "field: problem".
func ParseEvent(raw []byte, lim Limits) (trace.Event, error) {
	if _, err := precheckEvent(raw, lim); err != nil {
		return trace.Event{}, err
	}
	return parseChecked(raw, lim)
}

// precheckEvent is what ParseEvent checks before it decodes anything: the
// event is UTF-8, and its shape is within the limits (jsonscan.go). The
// stats say what decoding it will cost.
func precheckEvent(raw []byte, lim Limits) (jsonStats, error) {
	if !utf8.Valid(raw) {
		return jsonStats{}, errors.New("event: not valid UTF-8")
	}
	return checkEventShape(raw, lim)
}

// parseChecked is ParseEvent after precheckEvent passed.
func parseChecked(raw []byte, lim Limits) (trace.Event, error) {
	obj, err := decodeObject(raw)
	if err != nil {
		return trace.Event{}, err
	}
	// null means absent, in the id hash and the stored body too: the same
	// event with and without "name": null is one event.
	for k, v := range obj {
		if v == nil {
			delete(obj, k)
		}
	}
	// Secrets are masked before anything is derived from the event: its
	// id and its stored body hold the redacted form only (redact.go).
	lim.Redact.redactEvent(obj)
	f := fields{obj: obj, lim: lim}
	typ := trace.EventType(f.enum("type", true, "execution", "attempt", "effect", "span"))
	if f.err != nil {
		return trace.Event{}, f.err
	}
	allowed := fieldsOf[typ]
	for _, name := range sortedKeys(obj) {
		if !contains(allowed, name) {
			return trace.Event{}, fmt.Errorf("%s: unknown field for %s event; allowed: %s", name, article(string(typ)), strings.Join(allowed, ", "))
		}
	}
	ev := trace.Event{Type: typ, ID: f.id("id", false)}
	switch typ {
	case trace.EventExecution:
		ev.Execution = parseExecution(&f)
	case trace.EventAttempt:
		ev.Attempt = parseAttempt(&f)
	case trace.EventEffect:
		ev.Effect = parseEffect(&f)
	case trace.EventSpan:
		ev.Span = parseSpan(&f)
	}
	if f.err != nil {
		return trace.Event{}, f.err
	}
	if ev.ID == "" {
		canon, err := canonicalJSON(obj)
		if err != nil {
			return trace.Event{}, err
		}
		sum := sha256.Sum256(canon)
		ev.ID = "evt_" + hex.EncodeToString(sum[:16])
		obj["id"] = ev.ID
	}
	ev.Body, err = canonicalJSON(obj)
	return ev, err
}

func parseExecution(f *fields) *trace.Execution {
	x := &trace.Execution{
		ID:             f.id("execution_id", true),
		Name:           f.text("name"),
		NameSource:     f.enum("name_source", false, trace.NameSources[1:]...),
		Status:         trace.Status(f.enum("status", false, "running", "completed", "failed", "cancelled")),
		StartedAt:      f.time("started_at"),
		EndedAt:        f.time("ended_at"),
		IdempotencyKey: f.id("idempotency_key", false),
		Labels:         f.labels("labels"),
	}
	f.order("started_at", x.StartedAt, "ended_at", x.EndedAt)
	return x
}

func parseAttempt(f *fields) *trace.Attempt {
	a := &trace.Attempt{
		ExecutionID:    f.id("execution_id", true),
		StepID:         f.id("step_id", true),
		TraceID:        f.id("trace_id", false),
		SpanID:         f.id("span_id", false),
		Tool:           f.text("tool"),
		Effect:         trace.EffectClass(f.enum("effect", false, "read", "write", "unsafe", "unknown")),
		Provider:       f.id("provider", false),
		Args:           f.json("args"),
		Result:         f.json("result"),
		IdempotencyKey: f.id("idempotency_key", false),
		Worker:         f.id("worker", false),
		StartedAt:      f.time("started_at"),
		EndedAt:        f.time("ended_at"),
		Outcome:        trace.Outcome(f.enum("outcome", false, "ok", "error", "timeout", "replayed")),
		Error:          f.text("error"),
		Deduplicated:   f.bool("deduplicated"),
		RecognisedBy:   f.id("recognised_by", false),
	}
	// An attempt identified by its span may leave its number to be derived.
	if _, sent := f.get("attempt"); sent || a.SpanID == "" {
		a.Number = f.attemptNumber("attempt")
	}
	f.order("started_at", a.StartedAt, "ended_at", a.EndedAt)
	if f.err == nil && !a.EndedAt.IsZero() && a.Outcome == "" {
		f.fail("outcome: required when ended_at is set (ok, error, timeout or replayed)")
	}
	return a
}

func parseEffect(f *fields) *trace.Effect {
	return &trace.Effect{
		Provider:       f.id("provider", true),
		ID:             f.id("effect_id", true),
		IdempotencyKey: f.id("idempotency_key", false),
		ExecutionID:    f.id("execution_id", false),
		StepID:         f.id("step_id", false),
		Target:         f.text("target"),
		At:             f.time("at"),
		TraceID:        f.id("trace_id", false),
		SpanID:         f.id("span_id", false),
		Fingerprint:    f.id("fingerprint", false),
		Summary:        f.text("summary"),
	}
}

func parseSpan(f *fields) *trace.Span {
	roles := make([]string, len(trace.SpanRoles))
	for i, r := range trace.SpanRoles {
		roles[i] = string(r)
	}
	s := &trace.Span{
		ExecutionID:    f.id("execution_id", true),
		TraceID:        f.id("trace_id", true),
		SpanID:         f.id("span_id", true),
		ParentSpanID:   f.id("parent_span_id", false),
		Role:           trace.SpanRole(f.enum("role", true, roles...)),
		Name:           f.text("name"),
		StartedAt:      f.time("started_at"),
		EndedAt:        f.time("ended_at"),
		Error:          f.text("error"),
		Model:          f.text("model"),
		InputTokens:    f.count("input_tokens"),
		OutputTokens:   f.count("output_tokens"),
		HTTPMethod:     f.id("http_method", false),
		HTTPURL:        f.text("http_url"),
		HTTPStatus:     int(f.count("http_status")),
		IdempotencyKey: f.id("idempotency_key", false),
	}
	f.order("started_at", s.StartedAt, "ended_at", s.EndedAt)
	return s
}

// decodeObject decodes an event whose shape was checked (precheckEvent):
// an event nested too deep, with too many elements or a key twice is
// refused before it costs the memory of decoding it.
func decodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("event: invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("event: invalid JSON: data after the object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("event: must be a JSON object")
	}
	return obj, nil
}

// canonicalJSON is compact JSON with sorted keys and numbers as sent: the
// same event always gives the same bytes, whatever its formatting.
func canonicalJSON(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("event: %v", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// fields reads typed values out of a decoded event, keeping the first error.
type fields struct {
	obj map[string]any
	lim Limits
	err error
}

func (f *fields) fail(format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf(format, args...)
	}
}

// get returns the field's value, treating null as absent.
func (f *fields) get(name string) (any, bool) {
	v, ok := f.obj[name]
	if v == nil {
		return nil, false
	}
	return v, ok
}

func (f *fields) string(name string) (string, bool) {
	v, ok := f.get(name)
	if !ok {
		return "", false
	}
	s, isString := v.(string)
	if !isString {
		f.fail("%s: must be a string", name)
		return "", false
	}
	return s, true
}

func (f *fields) id(name string, required bool) string {
	s, ok := f.string(name)
	if !ok {
		if required && f.err == nil {
			f.fail("%s: required", name)
		}
		return ""
	}
	if s == "" || len(s) > f.lim.IDBytes || !printable(s) {
		f.fail("%s: must be 1 to %d bytes of printable UTF-8", name, f.lim.IDBytes)
		return ""
	}
	return s
}

func (f *fields) text(name string) string {
	s, _ := f.string(name)
	if len(s) > f.lim.TextBytes {
		f.fail("%s: %d bytes, limit %d", name, len(s), f.lim.TextBytes)
	}
	return s
}

func (f *fields) enum(name string, required bool, allowed ...string) string {
	s, ok := f.string(name)
	if !ok {
		if required && f.err == nil {
			f.fail("%s: required, one of %s", name, strings.Join(allowed, ", "))
		}
		return ""
	}
	if !contains(allowed, s) {
		f.fail("%s: must be one of %s, not %q", name, strings.Join(allowed, ", "), s)
		return ""
	}
	return s
}

func (f *fields) bool(name string) bool {
	v, ok := f.get(name)
	if !ok {
		return false
	}
	b, isBool := v.(bool)
	if !isBool {
		f.fail("%s: must be true or false", name)
	}
	return b
}

func (f *fields) attemptNumber(name string) int {
	v, ok := f.get(name)
	if !ok {
		f.fail("%s: required, an integer ≥ 1", name)
		return 0
	}
	num, isNumber := v.(json.Number)
	n, err := num.Int64()
	if !isNumber || err != nil {
		f.fail("%s: must be an integer ≥ 1", name)
		return 0
	}
	if n < 1 {
		f.fail("%s: must be ≥ 1", name)
		return 0
	}
	if n > int64(f.lim.AttemptNumber) {
		f.fail("%s: %d is over the limit of %d", name, n, f.lim.AttemptNumber)
		return 0
	}
	return int(n)
}

// count reads a non-negative integer such as a token count.
func (f *fields) count(name string) int64 {
	v, ok := f.get(name)
	if !ok {
		return 0
	}
	num, isNumber := v.(json.Number)
	n, err := num.Int64()
	if !isNumber || err != nil || n < 0 || n > math.MaxInt32*int64(1024) {
		f.fail("%s: must be an integer from 0 to %d", name, math.MaxInt32*int64(1024))
		return 0
	}
	return n
}

// time accepts RFC 3339 (fractional seconds allowed) or Unix milliseconds.
func (f *fields) time(name string) time.Time {
	v, ok := f.get(name)
	if !ok {
		return time.Time{}
	}
	var t time.Time
	switch v := v.(type) {
	case string:
		parsed, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			f.fail("%s: must be an RFC 3339 time such as 2026-06-30T14:02:11.120Z or Unix milliseconds, not %q", name, v)
			return time.Time{}
		}
		t = parsed
	case json.Number:
		ms, err := v.Float64()
		if err != nil || math.IsNaN(ms) {
			f.fail("%s: must be an RFC 3339 time or Unix milliseconds", name)
			return time.Time{}
		}
		if ms < 0 || ms > float64(latest.UnixMilli()) {
			f.fail("%s: must be between %s and %s", name, earliest.Format(time.RFC3339), latest.Format(time.RFC3339))
			return time.Time{}
		}
		t = unixMillis(string(v), ms)
	default:
		f.fail("%s: must be an RFC 3339 time or Unix milliseconds", name)
		return time.Time{}
	}
	if t.Before(earliest) || !t.Before(latest) {
		f.fail("%s: must be between %s and %s", name, earliest.Format(time.RFC3339), latest.Format(time.RFC3339))
		return time.Time{}
	}
	return t.UTC()
}

// unixMillis converts Unix milliseconds, already range-checked as ms. A
// plain decimal is converted digit by digit, because a float64 near 1.8e12
// resolves only about a quarter of a microsecond; a number with an exponent
// goes through the float.
func unixMillis(s string, ms float64) time.Time {
	whole, frac, _ := strings.Cut(s, ".")
	n, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || strings.ContainsAny(frac, "eE") {
		return time.UnixMilli(int64(ms)).Add(time.Duration((ms - math.Floor(ms)) * float64(time.Millisecond)))
	}
	ns, _ := strconv.Atoi((frac + "000000")[:6]) // JSON fractions are digits only
	return time.UnixMilli(n).Add(time.Duration(ns))
}

func (f *fields) order(startName string, start time.Time, endName string, end time.Time) {
	if !start.IsZero() && !end.IsZero() && end.Before(start) {
		f.fail("%s: before %s", endName, startName)
	}
}

func (f *fields) json(name string) json.RawMessage {
	v, ok := f.get(name)
	if !ok {
		return nil
	}
	canon, err := canonicalJSON(v)
	if err != nil {
		f.fail("%s: %v", name, err)
		return nil
	}
	if len(canon) > f.lim.JSONBytes {
		f.fail("%s: %d bytes of JSON, limit %d", name, len(canon), f.lim.JSONBytes)
		return nil
	}
	return canon
}

func (f *fields) labels(name string) map[string]string {
	v, ok := f.get(name)
	if !ok {
		return nil
	}
	m, isObject := v.(map[string]any)
	if !isObject {
		f.fail("%s: must be an object of strings", name)
		return nil
	}
	if len(m) > f.lim.Labels {
		f.fail("%s: %d entries, limit %d", name, len(m), f.lim.Labels)
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range sortedKeys(m) { // sorted, so the first error is always the same one
		s, isString := m[k].(string)
		switch {
		case !isString:
			f.fail("%s.%s: must be a string", name, k)
		case k == "" || len(k) > f.lim.LabelBytes || len(s) > f.lim.LabelBytes:
			f.fail("%s.%s: keys must be 1 to %d bytes and values at most %d", name, k, f.lim.LabelBytes, f.lim.LabelBytes)
		}
		out[k] = s
	}
	return out
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ParseStored reads back an event from the raw log: what was accepted once
// is read whatever the limits are today.
func ParseStored(body []byte) (trace.Event, error) { return ParseEvent(body, storedLimits) }

// storedLimits re-reads the raw log: what was accepted once is read back
// whatever the limits are today.
var storedLimits = Limits{BodyBytes: math.MaxInt64, Events: math.MaxInt, IDBytes: math.MaxInt, JSONBytes: math.MaxInt,
	TextBytes: math.MaxInt, Labels: math.MaxInt, LabelBytes: math.MaxInt, AttemptNumber: math.MaxInt}

func article(noun string) string {
	if strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}
