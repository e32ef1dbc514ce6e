package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/oncetrace/oncetrace/trace"
)

// A span becomes its event directly, without writing the event as JSON and
// parsing it back (a seventh of the CPU of OTLP ingest once). eventBuilder
// gives what ParseEvent gives for that JSON: every string as JSON would
// carry it (invalid UTF-8 as U+FFFD), the same redaction, the same checks
// with the same messages in the same order (the first error wins), and the
// same canonical body, written once. TestMapOTLPDirectIsTheRoundTrip and
// FuzzMapOTLPDirect hold it to the old path.

// eventBuilder makes one event of a span. Checks are called in the order
// of ParseEvent's fields (parseAttempt and the others), so that the first
// failure is the one ParseEvent names.
type eventBuilder struct {
	lim    Limits
	err    error
	fields []bodyField
	vals   []byte // the fields' values, one after the other
}

// bodyField is one member of the event's canonical body.
type bodyField struct {
	key        string
	start, end int // its JSON value in vals
}

func newEventBuilder(lim Limits) *eventBuilder {
	return &eventBuilder{lim: lim, fields: make([]bodyField, 0, 20), vals: make([]byte, 0, 1024)}
}

// start begins an event of type typ, reusing the space of the last one
// (its body was copied out).
func (b *eventBuilder) start(typ trace.EventType) *eventBuilder {
	b.err, b.fields, b.vals = nil, b.fields[:0], b.vals[:0]
	b.addString("type", string(typ))
	return b
}

func (b *eventBuilder) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf(format, args...)
	}
}

func (b *eventBuilder) add(key string, val []byte) {
	start := len(b.vals)
	b.vals = append(b.vals, val...)
	b.fields = append(b.fields, bodyField{key: key, start: start, end: len(b.vals)})
}

// addString adds s, valid UTF-8, as a JSON string.
func (b *eventBuilder) addString(key, s string) {
	start := len(b.vals)
	b.vals = appendJSONString(b.vals, s)
	b.fields = append(b.fields, bodyField{key: key, start: start, end: len(b.vals)})
}

// str adds a string field and returns it as the event holds it.
func (b *eventBuilder) str(key, s string) string {
	s = jsonUTF8(s)
	b.addString(key, s)
	return s
}

// id is fields.id for a field that is sent.
func (b *eventBuilder) id(key, s string) string {
	s = b.str(key, s)
	if s == "" || len(s) > b.lim.IDBytes || !printable(s) {
		b.fail("%s: must be 1 to %d bytes of printable UTF-8", key, b.lim.IDBytes)
		return ""
	}
	return s
}

// text is fields.text for a field that is sent, masked as redactEvent
// masks the text fields.
func (b *eventBuilder) text(key, s string) string {
	s = jsonUTF8(s)
	if slices.Contains(textFields, key) {
		s, _ = b.lim.Redact.Text(s)
	}
	s = b.str(key, s)
	if len(s) > b.lim.TextBytes {
		b.fail("%s: %d bytes, limit %d", key, len(s), b.lim.TextBytes)
	}
	return s
}

// enum is fields.enum for a field that is sent.
func (b *eventBuilder) enum(key, s string, allowed ...string) string {
	s = b.str(key, s)
	if !slices.Contains(allowed, s) {
		b.fail("%s: must be one of %s, not %q", key, strings.Join(allowed, ", "), s)
		return ""
	}
	return s
}

// time is fields.time for a timestamp sent as timestamp() writes it.
func (b *eventBuilder) time(key string, ts pcommon.Timestamp) time.Time {
	b.addString(key, timestamp(ts))
	t := ts.AsTime()
	if t.Before(earliest) || !t.Before(latest) {
		b.fail("%s: must be between %s and %s", key, earliest.Format(time.RFC3339), latest.Format(time.RFC3339))
		return time.Time{}
	}
	return t
}

func (b *eventBuilder) addInt(key string, n int64) {
	start := len(b.vals)
	b.vals = strconv.AppendInt(b.vals, n, 10)
	b.fields = append(b.fields, bodyField{key: key, start: start, end: len(b.vals)})
}

// count is fields.count for a number that is sent.
func (b *eventBuilder) count(key string, n int64) int64 {
	b.addInt(key, n)
	if n < 0 || n > math.MaxInt32*int64(1024) {
		b.fail("%s: must be an integer from 0 to %d", key, math.MaxInt32*int64(1024))
		return 0
	}
	return n
}

// attemptNumber is fields.attemptNumber for a number that is sent.
func (b *eventBuilder) attemptNumber(key string, n int64) int {
	b.addInt(key, n)
	switch {
	case n < 1:
		b.fail("%s: must be ≥ 1", key)
		return 0
	case n > int64(b.lim.AttemptNumber):
		b.fail("%s: %d is over the limit of %d", key, n, b.lim.AttemptNumber)
		return 0
	}
	return int(n)
}

// json is fields.json for a value prepared by prepareJSON.
func (b *eventBuilder) json(key string, canon json.RawMessage) json.RawMessage {
	if canon == nil {
		return nil // null: absent
	}
	b.add(key, canon)
	if len(canon) > b.lim.JSONBytes {
		b.fail("%s: %d bytes of JSON, limit %d", key, len(canon), b.lim.JSONBytes)
		return nil
	}
	return canon
}

func (b *eventBuilder) order(startKey string, start time.Time, endKey string, end time.Time) {
	if !start.IsZero() && !end.IsZero() && end.Before(start) {
		b.fail("%s: before %s", endKey, startKey)
	}
}

// jsonField is a field that holds any JSON (args, result), as mapped.
type jsonField struct {
	key string
	v   any
	// rawRedacted: v is raw JSON that the mapping used to redact, so
	// decode, before the event was written (arguments, before their step
	// id is derived): when that changed anything, the event held them
	// decoded, and so with their keys sorted.
	rawRedacted bool
}

// prepareJSON readies the JSON fields of an event, sorted by key, as
// ParseEvent read them from the event's JSON: what json.Marshal refuses
// fails first, then a shape over the limits (jsonscan.go); each value is
// decoded, redacted and made canonical, nil for a null.
func (b *eventBuilder) prepareJSON(fields ...jsonField) []json.RawMessage {
	raws := make([][]byte, len(fields))
	for i, f := range fields {
		raw, err := json.Marshal(f.v)
		if err != nil {
			b.failWith(err)
			return nil
		}
		raws[i] = raw
	}
	values := make([]any, len(fields))
	for i, raw := range raws {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			b.fail("event: invalid JSON: %v", err)
			return nil
		}
		redacted, changed := b.lim.Redact.Value(v)
		if changed && fields[i].rawRedacted {
			raws[i], _ = json.Marshal(redacted) // decoded values always encode
		}
		values[i] = redacted
	}
	// The shape limits count across an event's fields, so the fields are
	// scanned together, as members of one object.
	obj := []byte{'{'}
	for i, f := range fields {
		if i > 0 {
			obj = append(obj, ',')
		}
		obj = append(appendJSONString(obj, f.key), ':')
		obj = append(obj, raws[i]...)
	}
	obj = append(obj, '}')
	if err := b.shape(obj); err != nil {
		return nil
	}
	out := make([]json.RawMessage, len(fields))
	for i, v := range values {
		if v == nil {
			continue
		}
		out[i] = appendCanonical(nil, v)
	}
	return out
}

// shape is checkEventShape for the members of an event that are objects
// or arrays; the rest cannot be over a shape limit.
func (b *eventBuilder) shape(obj []byte) error {
	_, err := scanJSON(obj, eventShape(b.lim), nil)
	if err != nil && !errors.Is(err, errJSONSyntax) {
		b.failWith(err)
		return err
	}
	return nil
}

// failWith keeps err, unless an earlier failure is kept already.
func (b *eventBuilder) failWith(err error) {
	if b.err == nil {
		b.err = err
	}
}

// sessionLabel adds an execution's labels, a session only, as
// fields.labels reads them after redaction. Their shape is checked first,
// with the event's other JSON (executionEvent).
func (b *eventBuilder) sessionLabel(session string) map[string]string {
	session = jsonUTF8(session)
	if session != RedactedValue && b.lim.Redact.Matches("session") {
		session = RedactedValue
	} else {
		session, _ = b.lim.Redact.Text(session)
	}
	start := len(b.vals)
	b.vals = append(appendJSONString(append(b.vals, `{"session":`...), session), '}')
	b.fields = append(b.fields, bodyField{key: "labels", start: start, end: len(b.vals)})
	if b.lim.Labels < 1 {
		b.fail("labels: 1 entries, limit %d", b.lim.Labels)
		return nil
	}
	if len("session") > b.lim.LabelBytes || len(session) > b.lim.LabelBytes {
		b.fail("labels.session: keys must be 1 to %d bytes and values at most %d", b.lim.LabelBytes, b.lim.LabelBytes)
	}
	return map[string]string{"session": session}
}

// event is the event made, or the first failure. Its body is the
// canonical JSON ParseEvent would store: its members sorted by key.
func (b *eventBuilder) event(ev trace.Event) (trace.Event, error) {
	if b.err != nil {
		return trace.Event{}, b.err
	}
	slices.SortFunc(b.fields, func(x, y bodyField) int { return strings.Compare(x.key, y.key) })
	size := 2
	for _, f := range b.fields {
		size += len(f.key) + f.end - f.start + 4
	}
	body := make([]byte, 0, size)
	body = append(body, '{')
	for i, f := range b.fields {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, '"')
		body = append(body, f.key...)
		body = append(body, '"', ':')
		body = append(body, b.vals[f.start:f.end]...)
	}
	ev.Body = append(body, '}')
	return ev, nil
}

// appendCanonical appends a decoded JSON value (UseNumber) as
// canonicalJSON writes it: keys sorted, numbers as sent.
func appendCanonical(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case string:
		return appendJSONString(dst, x)
	case json.Number:
		if x == "" {
			break // encoding/json's rules for it
		}
		return append(dst, x...)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonical(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendJSONString(dst, k), ':')
			dst = appendCanonical(dst, x[k])
		}
		return append(dst, '}')
	}
	return appendEncoded(dst, v)
}

// jsonUTF8 is s as it comes out of JSON: json.Marshal writes each byte
// that is not UTF-8 as \ufffd.
func jsonUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			out.WriteRune(utf8.RuneError)
		} else {
			out.WriteString(s[i : i+size])
		}
		i += size
	}
	return out.String()
}

// appendJSONString appends s, valid UTF-8, as canonicalJSON writes it.
// Strings that need no escaping (ids, names, times) are copied; the rest
// go through encoding/json.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return appendEncoded(dst, s)
		}
	}
	if strings.ContainsRune(s, '\u2028') || strings.ContainsRune(s, '\u2029') {
		return appendEncoded(dst, s)
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendEncoded appends a decoded JSON value through encoding/json.
func appendEncoded(dst []byte, v any) []byte {
	canon, err := canonicalJSON(v)
	if err != nil { // decoded JSON always encodes
		panic(err)
	}
	return append(dst, canon...)
}
