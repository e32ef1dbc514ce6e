package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/trace"
)

// path is a dotted field path into a JSON payload: "data.object.id",
// "event-data.message.headers.message-id"; a segment of digits indexes an
// array ("refunds.data.0.id"); "$" is the payload itself and "$." may
// prefix any path.
type path struct {
	text string
	segs []string
}

func parsePath(s string) (path, error) {
	t := strings.TrimSpace(s)
	if t == "$" {
		return path{text: "$"}, nil
	}
	t = strings.TrimPrefix(t, "$.")
	if t == "" {
		return path{}, errors.New("empty path")
	}
	segs := strings.Split(t, ".")
	for _, seg := range segs {
		if seg == "" {
			return path{}, fmt.Errorf("%q: empty segment", s)
		}
	}
	return path{text: t, segs: segs}, nil
}

// lookup is the value at p, absent when a segment is missing, indexes
// something that is not an object or array, or the value is null.
func (p path) lookup(v any) (any, bool) {
	for _, s := range p.segs {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[s]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, v != nil
}

// field is where one effect field is read from: paths tried in order, the
// first present one wins. A mapping file writes it as a string or a list.
type field []path

func (f *field) UnmarshalJSON(data []byte) error {
	var one string
	var many []string
	if err := json.Unmarshal(data, &one); err == nil {
		many = []string{one}
	} else if err := json.Unmarshal(data, &many); err != nil {
		return errors.New("must be a path or a list of paths")
	}
	*f = nil
	for _, s := range many {
		p, err := parsePath(s)
		if err != nil {
			return err
		}
		*f = append(*f, p)
	}
	return nil
}

func mustField(paths ...string) field {
	var f field
	for _, s := range paths {
		p, err := parsePath(s)
		if err != nil {
			panic(err)
		}
		f = append(f, p)
	}
	return f
}

// item is one event of a payload and the prefix every error about it
// names: "" for a payload that is one event, "[2]." for the third of a
// top-level array, "events[2]." for the third of an array under "events".
type item struct {
	v      any
	prefix string
}

// where names f's paths in an error: "data.object.payment_intent or data.object.id".
func (it item) where(f field) string {
	names := make([]string, len(f))
	for i, p := range f {
		names[i] = it.prefix + p.text
	}
	return strings.Join(names, " or ")
}

// text reads the first present path of f as text: strings as they are,
// numbers as written. Empty strings count as absent.
func (it item) text(f field) (s, at string, present bool, err error) {
	for _, p := range f {
		v, ok := p.lookup(it.v)
		if !ok {
			continue
		}
		switch x := v.(type) {
		case string:
			s = x
		case json.Number:
			s = x.String()
		default:
			return "", "", false, &FieldError{Path: it.prefix + p.text, Problem: "must be a string or a number, not " + kindOf(v)}
		}
		if s == "" {
			continue
		}
		return s, it.prefix + p.text, true, nil
	}
	return "", "", false, nil
}

// scalar is a value as a filter compares it: text, or true/false.
func scalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// Time formats of a mapping's "at".
const (
	timeAuto    = ""        // strings RFC 3339, numbers (and numeric strings) Unix seconds
	timeRFC3339 = "rfc3339" // strings only
	timeUnix    = "unix"    // Unix seconds, fractions allowed
	timeUnixMS  = "unix_ms" // Unix milliseconds, fractions allowed
)

// time reads the first present path of f as a time in the given format.
func (it item) time(f field, format string) (t time.Time, at string, present bool, err error) {
	s, at, present, err := it.text(f)
	if err != nil || !present {
		return time.Time{}, at, present, err
	}
	bad := func(want string) error {
		return &FieldError{Path: at, Problem: fmt.Sprintf("must be %s, not %q", want, s)}
	}
	if format == timeRFC3339 || format == timeAuto {
		if parsed, perr := time.Parse(time.RFC3339Nano, s); perr == nil {
			return parsed.UTC(), at, true, nil
		}
		if format == timeRFC3339 {
			return time.Time{}, at, true, bad("an RFC 3339 time such as 2026-06-30T14:02:11.120Z")
		}
	}
	unit, want := time.Second, "a Unix time in seconds"
	switch format {
	case timeUnixMS:
		unit, want = time.Millisecond, "a Unix time in milliseconds"
	case timeAuto:
		want = "an RFC 3339 time or Unix seconds"
	}
	t, ok := unixTime(s, unit)
	if !ok {
		return time.Time{}, at, true, bad(want)
	}
	return t, at, true, nil
}

// unixTime reads a decimal Unix time in unit (seconds or milliseconds). Digits are converted as
// digits, since a float64 near 1.5e9 seconds resolves only about a quarter
// of a microsecond; exponent forms go through the float. Times before 1970
// or after 2262 are refused.
func unixTime(s string, unit time.Duration) (time.Time, bool) {
	maxWhole := int64(math.MaxInt64/int64(unit)) - 1
	whole, frac, hasFrac := strings.Cut(s, ".")
	n, err := strconv.ParseInt(whole, 10, 64)
	if err == nil && n >= 0 && n <= maxWhole && (!hasFrac || digitsOnly(frac)) {
		ns := int64(0)
		if hasFrac {
			digits := 9 // the fraction's digits that are nanoseconds
			if unit == time.Millisecond {
				digits = 6
			}
			f := (frac + strings.Repeat("0", digits))[:digits]
			ns, _ = strconv.ParseInt(f, 10, 64)
		}
		return time.Unix(0, 0).Add(time.Duration(n) * unit).Add(time.Duration(ns)).UTC(), true
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(x) || x < 0 || x > float64(maxWhole) {
		return time.Time{}, false
	}
	return time.Unix(0, 0).Add(time.Duration(x * float64(unit))).UTC(), true
}

func digitsOnly(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// fields says where each of an effect's fields is read from.
type fields struct {
	effectID, key, target, at, executionID, stepID field
	traceparent, traceID, spanID                   field
	atFormat                                       string
	// required names the effect fields besides effect_id that a payload
	// must carry ("key", "at", ...).
	required []string
	// fingerprint are the paths whose values make the fingerprint, all of
	// them (not the first present); summary, when set, says it in a line.
	fingerprint []path
	summary     *summaryTemplate
}

// effect reads one event as an effect of provider.
func (f *fields) effect(provider string, it item) (Effect, error) {
	e := Effect{Effect: trace.Effect{Provider: provider}, Paths: map[string]string{}}
	id, at, ok, err := it.text(f.effectID)
	if err != nil {
		return Effect{}, err
	}
	if !ok {
		return Effect{}, &FieldError{Path: it.where(f.effectID), Problem: "missing; it is the effect id"}
	}
	e.ID, e.Paths["effect_id"] = id, at
	for _, s := range []struct {
		name string
		from field
		dst  *string
	}{
		{"idempotency_key", f.key, &e.IdempotencyKey},
		{"target", f.target, &e.Target},
		{"execution_id", f.executionID, &e.ExecutionID},
		{"step_id", f.stepID, &e.StepID},
	} {
		v, at, ok, err := it.text(s.from)
		if err != nil {
			return Effect{}, err
		}
		if ok {
			*s.dst, e.Paths[s.name] = v, at
		}
	}
	t, at, ok, err := it.time(f.at, f.atFormat)
	if err != nil {
		return Effect{}, err
	}
	if ok {
		e.At, e.Paths["at"] = t, at
	}
	// A traceparent wins over separate ids; either is kept only when valid,
	// as the request header is (feed.TraceContext).
	if tp, at, ok, err := it.text(f.traceparent); err != nil {
		return Effect{}, err
	} else if ok {
		e.TraceID, e.SpanID = feed.ParseTraceContext(tp)
		e.Paths["traceparent"] = at
	}
	if e.TraceID == "" {
		tid, atT, okT, err := it.text(f.traceID)
		if err != nil {
			return Effect{}, err
		}
		sid, atS, okS, err := it.text(f.spanID)
		if err != nil {
			return Effect{}, err
		}
		if okT && okS {
			e.TraceID, e.SpanID = feed.TraceIDs(tid, sid)
			e.Paths["trace_id"], e.Paths["span_id"] = atT, atS
		}
	}
	for _, name := range f.required {
		if err := f.checkRequired(name, e, it); err != nil {
			return Effect{}, err
		}
	}
	e.Fingerprint, e.Summary = f.readFingerprint(it)
	return e, nil
}

// requirable are the fields a mapping may require, and where each is read.
var requirable = map[string]func(*fields) field{
	"key":          func(f *fields) field { return f.key },
	"target":       func(f *fields) field { return f.target },
	"at":           func(f *fields) field { return f.at },
	"execution_id": func(f *fields) field { return f.executionID },
	"step_id":      func(f *fields) field { return f.stepID },
	"traceparent":  func(f *fields) field { return f.traceparent },
}

func (f *fields) checkRequired(name string, e Effect, it item) error {
	present := map[string]bool{
		"key": e.IdempotencyKey != "", "target": e.Target != "", "at": !e.At.IsZero(),
		"execution_id": e.ExecutionID != "", "step_id": e.StepID != "", "traceparent": e.Paths["traceparent"] != "",
	}
	if present[name] {
		return nil
	}
	return &FieldError{Path: it.where(requirable[name](f)), Problem: "missing; the mapping requires it (" + name + ")"}
}
