package ingest

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"
)

// An OTLP export request is checked twice before its spans are mapped:
// before it is decoded, for what decoding it will cost (and, in protobuf,
// for the request limits, so that a request of 100,000 spans is refused
// having cost nothing), and after, for the request limits in either
// encoding. The messages are the same both ways.

// OTLPSignal is what an OTLP/HTTP export request carries.
type OTLPSignal int

const (
	OTLPTraces OTLPSignal = iota
	OTLPLogs
	OTLPMetrics
)

// errWireMalformed: the bytes are not the protobuf message; the decoder
// says what is wrong with them.
var errWireMalformed = errors.New("otlp: malformed protobuf")

// wireRecursionLimit is pdata's own: deeper messages are refused by it.
const wireRecursionLimit = 100

// wireKind marks the messages the limits need to know.
type wireKind int

const (
	wireOther wireKind = iota
	wireSpan
	wireSpanEvent
	wireSpanLink
	wireResource
	wireScope
	wireKeyValue
	wireAnyValue
	wireArray
	wireList
)

// holdsAttributes: the kinds whose attributes the limits count.
func (k wireKind) holdsAttributes() bool { return k >= wireSpan && k <= wireScope }

// wireMsg describes one protobuf message of OTLP, as far as estimating and
// limiting its decoding needs: its sub-messages by field number and what
// one decoded instance costs besides its strings. Fields not listed are
// scalars, strings or bytes.
type wireMsg struct {
	kind   wireKind
	cost   int64
	fields map[protowire.Number]*wireMsg
	packed map[protowire.Number]bool // packed varints: 8 bytes each decoded, and more while the slice grows
}

// What one decoded instance costs, in bytes: about half of what decoding a
// long run of them allocates in all (pdata's structs, the slices they are
// appended to as they grow, the oneof wrapper of a value), the garbage of
// the growing slices being the other half. TestOTLPEstimate checks them
// against measured allocations.
const (
	costSpan       = 160
	costEvent      = 64
	costLink       = 64
	costLogRecord  = 96
	costKeyValue   = 128
	costAnyValue   = 48
	costMessage    = 128 // any other message
	costField      = 16  // a scalar, or a string's header
	costPackedByte = 24  // a byte of packed varints
)

var (
	wireAnyValueMsg = &wireMsg{kind: wireAnyValue, cost: costAnyValue}
	wireKeyValueMsg = &wireMsg{kind: wireKeyValue, cost: costKeyValue, fields: map[protowire.Number]*wireMsg{2: wireAnyValueMsg}}
	wireArrayValue  = &wireMsg{kind: wireArray, cost: costMessage, fields: map[protowire.Number]*wireMsg{1: wireAnyValueMsg}}
	wireKVList      = &wireMsg{kind: wireList, cost: costMessage, fields: map[protowire.Number]*wireMsg{1: wireKeyValueMsg}}
	wireResourceMsg = &wireMsg{kind: wireResource, cost: costMessage, fields: map[protowire.Number]*wireMsg{1: wireKeyValueMsg, 3: {cost: costMessage}}}
	wireScopeMsg    = &wireMsg{kind: wireScope, cost: costMessage, fields: map[protowire.Number]*wireMsg{3: wireKeyValueMsg}}

	wireSpanEventMsg = &wireMsg{kind: wireSpanEvent, cost: costEvent, fields: map[protowire.Number]*wireMsg{3: wireKeyValueMsg}}
	wireSpanLinkMsg  = &wireMsg{kind: wireSpanLink, cost: costLink, fields: map[protowire.Number]*wireMsg{4: wireKeyValueMsg}}
	wireSpanMsg      = &wireMsg{kind: wireSpan, cost: costSpan, fields: map[protowire.Number]*wireMsg{
		9: wireKeyValueMsg, 11: wireSpanEventMsg, 13: wireSpanLinkMsg, 15: {cost: costMessage}}}
	wireScopeSpans = &wireMsg{cost: costMessage, fields: map[protowire.Number]*wireMsg{1: wireScopeMsg, 2: wireSpanMsg}}
	wireTraces     = &wireMsg{cost: costMessage, fields: map[protowire.Number]*wireMsg{1: {cost: costMessage,
		fields: map[protowire.Number]*wireMsg{1: wireResourceMsg, 2: wireScopeSpans, 1000: wireScopeSpans}}}}

	wireLogRecord = &wireMsg{cost: costLogRecord, fields: map[protowire.Number]*wireMsg{5: wireAnyValueMsg, 6: wireKeyValueMsg}}
	wireScopeLogs = &wireMsg{cost: costMessage, fields: map[protowire.Number]*wireMsg{1: wireScopeMsg, 2: wireLogRecord}}
	wireLogs      = &wireMsg{cost: costMessage, fields: map[protowire.Number]*wireMsg{1: {cost: costMessage,
		fields: map[protowire.Number]*wireMsg{1: wireResourceMsg, 2: wireScopeLogs, 1000: wireScopeLogs}}}}

	wireExemplar    = &wireMsg{cost: costMessage, fields: map[protowire.Number]*wireMsg{7: wireKeyValueMsg}}
	wireNumberPoint = &wireMsg{cost: costMessage, fields: map[protowire.Number]*wireMsg{5: wireExemplar, 7: wireKeyValueMsg}}
	wireHistPoint   = &wireMsg{cost: costMessage, fields: map[protowire.Number]*wireMsg{8: wireExemplar, 9: wireKeyValueMsg},
		packed: map[protowire.Number]bool{6: true, 7: true}}
	wireBuckets      = &wireMsg{cost: costMessage, packed: map[protowire.Number]bool{2: true}}
	wireExpHistPoint = &wireMsg{cost: costMessage, fields: map[protowire.Number]*wireMsg{1: wireKeyValueMsg, 8: wireBuckets, 9: wireBuckets, 11: wireExemplar}}
	wireSummaryPoint = &wireMsg{cost: costMessage, fields: map[protowire.Number]*wireMsg{6: {cost: costMessage}, 7: wireKeyValueMsg}}
	wireMetric       = &wireMsg{cost: costMessage, fields: map[protowire.Number]*wireMsg{
		5:  {cost: costMessage, fields: map[protowire.Number]*wireMsg{1: wireNumberPoint}},
		7:  {cost: costMessage, fields: map[protowire.Number]*wireMsg{1: wireNumberPoint}},
		9:  {cost: costMessage, fields: map[protowire.Number]*wireMsg{1: wireHistPoint}},
		10: {cost: costMessage, fields: map[protowire.Number]*wireMsg{1: wireExpHistPoint}},
		11: {cost: costMessage, fields: map[protowire.Number]*wireMsg{1: wireSummaryPoint}},
		12: wireKeyValueMsg}}
	wireScopeMetrics = &wireMsg{cost: costMessage, fields: map[protowire.Number]*wireMsg{1: wireScopeMsg, 2: wireMetric}}
	wireMetrics      = &wireMsg{cost: costMessage, fields: map[protowire.Number]*wireMsg{1: {cost: costMessage,
		fields: map[protowire.Number]*wireMsg{1: wireResourceMsg, 2: wireScopeMetrics, 1000: wireScopeMetrics}}}}
)

func init() {
	// Values nest: an array of values, a list of key-values.
	wireAnyValueMsg.fields = map[protowire.Number]*wireMsg{5: wireArrayValue, 6: wireKVList}
}

// otlpJSONValueCost is what one JSON value (an object, array, string,
// number...) of an OTLP/JSON body costs decoded, at most: the value {} in
// "attributes":[{},{},...] is a whole key-value.
const otlpJSONValueCost = costKeyValue

// nestedValueBytes is what each value inside an array or map attribute
// counts towards the attribute's size besides its strings: an array of a
// million empty values is not an empty attribute.
const nestedValueBytes = 8

// otlpMapCost is what mapping one span onto an event holds until the
// events are committed, besides the strings it copies.
const otlpMapCost = 4096

// OTLPDecodeEstimate is about how many bytes decoding data (an export
// request of signal, protobuf or JSON) holds at its peak, besides data
// itself. For protobuf traces it also applies the request limits of lim,
// so that a request over them is refused before it is decoded. It stops
// counting above ceiling (the decode budget): such a request is refused
// whatever more it holds.
func OTLPDecodeEstimate(data []byte, signal OTLPSignal, protobuf bool, lim Limits, ceiling int64) (int64, error) {
	if !protobuf {
		maxValues := int(min(ceiling/otlpJSONValueCost, math.MaxInt32))
		stats, err := scanJSON(data, jsonShape{Values: maxValues}, nil)
		var over *jsonShapeError
		switch {
		case errors.As(err, &over):
			return ceiling + 1, nil
		case err != nil:
			return int64(len(data)), nil // not JSON: the decoder stops early and says why
		}
		return int64(stats.Values)*otlpJSONValueCost + int64(len(data)), nil
	}
	w := wireWalker{lim: lim, limits: signal == OTLPTraces, ceiling: ceiling}
	root := map[OTLPSignal]*wireMsg{OTLPTraces: wireTraces, OTLPLogs: wireLogs, OTLPMetrics: wireMetrics}[signal]
	switch _, err := w.walk(data, root, 0); {
	case errors.Is(err, errWireMalformed):
		return int64(len(data)), nil
	case errors.Is(err, errWireOverCeiling):
		return ceiling + 1, nil
	case err != nil:
		return 0, err
	}
	return w.estimate, nil
}

// OTLPMapEstimate is about what mapping td's spans (decoded from a body of
// bodyBytes) holds until the events are committed: each span's event, and
// the strings copied into them, at most twice the body.
func OTLPMapEstimate(td ptrace.Traces, bodyBytes int) int64 {
	return int64(td.SpanCount())*otlpMapCost + 2*int64(bodyBytes)
}

type wireWalker struct {
	lim      Limits
	limits   bool  // apply lim's trace limits
	ceiling  int64 // stop counting above it
	estimate int64
	spans    int
}

// errWireOverCeiling: the estimate passed the ceiling; the rest was not
// walked.
var errWireOverCeiling = errors.New("otlp: estimate over the ceiling")

// wireInfo is what a walked message tells its parent.
type wireInfo struct {
	valueBytes int64  // an attribute value's size
	key        []byte // a key-value's key
	set        bool   // a value had a field: decoded over an earlier one, it replaces it
}

// wireLimit is a limit broken inside a span, before the span is named.
type wireLimit struct{ problem string }

func (e *wireLimit) Error() string { return e.problem }

// walk walks one message of type m, adding to the estimate and, for
// traces, checking the limits.
func (w *wireWalker) walk(buf []byte, m *wireMsg, depth int) (wireInfo, error) {
	var info wireInfo
	if depth > wireRecursionLimit {
		return info, errWireMalformed
	}
	if w.estimate += m.cost; w.ceiling > 0 && w.estimate > w.ceiling {
		return info, errWireOverCeiling
	}
	whole := buf
	var attrs, events, links int
	for len(buf) > 0 {
		num, typ, n := protowire.ConsumeTag(buf)
		if n < 0 {
			return info, errWireMalformed
		}
		buf = buf[n:]
		if m.kind == wireAnyValue {
			// A value is one of a string, a number, an array...: the
			// last field decoded is the value (proto3 oneof).
			info.valueBytes, info.set = 0, true
		}
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, buf); n < 0 {
				return info, errWireMalformed
			}
			buf = buf[n:]
			w.estimate += costField
			continue
		}
		v, n := protowire.ConsumeBytes(buf)
		if n < 0 {
			return info, errWireMalformed
		}
		buf = buf[n:]
		sub := m.fields[num]
		if sub == nil {
			if m.packed[num] {
				w.estimate += costPackedByte * int64(len(v))
			} else {
				w.estimate += costField + int64(len(v))
			}
			switch {
			case m.kind == wireKeyValue && num == 1:
				info.key = v
			case m.kind == wireAnyValue && (num == 1 || num == 7): // a string, bytes
				info.valueBytes = int64(len(v))
			}
			continue
		}

		if sub.kind == wireSpan && w.limits {
			if w.spans++; w.lim.Spans > 0 && w.spans > w.lim.Spans {
				return info, tooManySpans(w.lim)
			}
		}
		limits := w.limits
		if num == 1000 {
			// Spans of the deprecated instrumentation_library_spans count
			// only where a resource has no scope_spans: they are checked
			// once decoded (CheckOTLPLimits), and only estimated here.
			w.limits = false
		}
		si, err := w.walk(v, sub, depth+1)
		w.limits = limits
		if err != nil {
			return info, nameInSpan(m, sub, whole, events, links, err)
		}
		switch {
		case m.kind == wireList:
			info.valueBytes += nestedValueBytes + int64(len(si.key)) + si.valueBytes
		case m.kind == wireArray:
			info.valueBytes += nestedValueBytes + si.valueBytes
		case m.kind == wireAnyValue:
			info.valueBytes = si.valueBytes
		case m.kind == wireKeyValue && si.set:
			// A key-value's value sent twice is merged: an empty one
			// changes nothing, any other replaces the first.
			info.valueBytes = si.valueBytes
		case m.kind.holdsAttributes() && sub.kind == wireKeyValue:
			attrs++
			switch lim := w.lim; {
			case !w.limits:
			case lim.SpanAttributes > 0 && attrs > lim.SpanAttributes:
				// Refused at the first one too many: a span of four
				// million attributes costs no more than one of 129.
				return info, limitIn(m, whole, countOver("attributes", lim.SpanAttributes))
			case lim.AttributeBytes > 0 && si.valueBytes > int64(lim.AttributeBytes):
				return info, limitIn(m, whole, attributeTooLarge(string(si.key), si.valueBytes, lim))
			}
		case sub.kind == wireSpanEvent:
			if events++; w.limits && w.lim.SpanEvents > 0 && events > w.lim.SpanEvents {
				return info, limitIn(m, whole, countOver("events", w.lim.SpanEvents))
			}
		case sub.kind == wireSpanLink:
			if links++; w.limits && w.lim.SpanEvents > 0 && links > w.lim.SpanEvents {
				return info, limitIn(m, whole, countOver("links", w.lim.SpanEvents))
			}
		}
	}
	return info, nil
}

// nameInSpan names the span in a limit broken inside it (sub, its
// events-th event or links-th link); other errors pass.
func nameInSpan(m, sub *wireMsg, span []byte, events, links int, err error) error {
	var wl *wireLimit
	if m.kind != wireSpan || !errors.As(err, &wl) {
		return err
	}
	switch sub.kind {
	case wireSpanEvent:
		return spanLimitIn(span, fmt.Sprintf("event %d: %s", events, wl.problem))
	case wireSpanLink:
		return spanLimitIn(span, fmt.Sprintf("link %d: %s", links, wl.problem))
	}
	return spanLimitIn(span, wl.problem)
}

// limitIn is a limit broken in m: named by the span when m is a span,
// handed to the span to name when m is one of its events or links.
func limitIn(m *wireMsg, whole []byte, problem string) error {
	switch m.kind {
	case wireSpan:
		return spanLimitIn(whole, problem)
	case wireResource:
		return requestError(http.StatusBadRequest, "resource: %s", problem)
	case wireScope:
		return requestError(http.StatusBadRequest, "scope: %s", problem)
	}
	return &wireLimit{problem: problem}
}

// spanLimitIn names the span whose encoding is span in a broken limit.
func spanLimitIn(span []byte, problem string) error {
	var id, name []byte
	for len(span) > 0 {
		num, typ, n := protowire.ConsumeTag(span)
		if n < 0 {
			break
		}
		span = span[n:]
		if n = protowire.ConsumeFieldValue(num, typ, span); n < 0 {
			break
		}
		if typ == protowire.BytesType && (num == 2 || num == 5) {
			v, _ := protowire.ConsumeBytes(span)
			if num == 2 {
				id = v
			} else {
				name = v
			}
		}
		span = span[n:]
	}
	return spanLimit(hex.EncodeToString(id), string(name), problem)
}

func tooManySpans(lim Limits) error {
	return requestError(http.StatusRequestEntityTooLarge, "spans: more than the limit of %d spans in one request", lim.Spans)
}

func spanLimit(spanID, name, problem string) error {
	return requestError(http.StatusBadRequest, "span %s (%q): %s", spanID, name, problem)
}

func countOver(what string, limit int) string {
	return fmt.Sprintf("more than the limit of %d %s", limit, what)
}

func attributeTooLarge(key string, n int64, lim Limits) string {
	return fmt.Sprintf("attribute %q: %d bytes, more than the limit of %d", key, n, lim.AttributeBytes)
}

// CheckOTLPLimits refuses an export request over lim: 413 for more spans
// than lim.Spans, 400 naming the span for a span over a per-span limit.
// Protobuf requests were checked before decoding; this checks JSON ones,
// and both, with the same words. The first problem in the request's order
// is the one named, as the walk over a protobuf request finds it: a span
// over a limit before the one span too many is refused with 400.
func CheckOTLPLimits(td ptrace.Traces, lim Limits) error {
	spans := 0
	for _, rs := range td.ResourceSpans().All() {
		if p := attributesProblem(rs.Resource().Attributes(), lim); p != "" {
			return requestError(http.StatusBadRequest, "resource: %s", p)
		}
		for _, ss := range rs.ScopeSpans().All() {
			if p := attributesProblem(ss.Scope().Attributes(), lim); p != "" {
				return requestError(http.StatusBadRequest, "scope: %s", p)
			}
			for _, sp := range ss.Spans().All() {
				if spans++; lim.Spans > 0 && spans > lim.Spans {
					return tooManySpans(lim)
				}
				if problem := spanProblem(sp, lim); problem != "" {
					return spanLimit(hexID(sp.SpanID()), sp.Name(), problem)
				}
			}
		}
	}
	return nil
}

// spanProblem is the first per-span limit sp breaks, in the order the
// protobuf walk finds them in an encoding in field order: the span's
// attributes, then its events and its links, each with its attributes.
func spanProblem(sp ptrace.Span, lim Limits) string {
	if p := attributesProblem(sp.Attributes(), lim); p != "" {
		return p
	}
	for i, e := range sp.Events().All() {
		if lim.SpanEvents > 0 && i >= lim.SpanEvents {
			return countOver("events", lim.SpanEvents)
		}
		if p := attributesProblem(e.Attributes(), lim); p != "" {
			return fmt.Sprintf("event %d: %s", i, p)
		}
	}
	for i, l := range sp.Links().All() {
		if lim.SpanEvents > 0 && i >= lim.SpanEvents {
			return countOver("links", lim.SpanEvents)
		}
		if p := attributesProblem(l.Attributes(), lim); p != "" {
			return fmt.Sprintf("link %d: %s", i, p)
		}
	}
	return ""
}

// attributesProblem is the first limit attrs break, in order.
func attributesProblem(attrs pcommon.Map, lim Limits) string {
	i := 0
	for k, v := range attrs.All() {
		if i++; lim.SpanAttributes > 0 && i > lim.SpanAttributes {
			return countOver("attributes", lim.SpanAttributes)
		}
		if n := valueBytes(v); lim.AttributeBytes > 0 && n > int64(lim.AttributeBytes) {
			return attributeTooLarge(k, n, lim)
		}
	}
	return ""
}

// valueBytes is an attribute value's size: a string's or bytes' length;
// for an array or a map, its values' sizes and keys' lengths summed, and
// nestedValueBytes for each value.
func valueBytes(v pcommon.Value) int64 {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return int64(len(v.Str()))
	case pcommon.ValueTypeBytes:
		return int64(v.Bytes().Len())
	case pcommon.ValueTypeSlice:
		var n int64
		for _, e := range v.Slice().All() {
			n += nestedValueBytes + valueBytes(e)
		}
		return n
	case pcommon.ValueTypeMap:
		var n int64
		for k, e := range v.Map().All() {
			n += nestedValueBytes + int64(len(k)) + valueBytes(e)
		}
		return n
	}
	return 0
}

// attributeJSONShape is the shape a string attribute holding JSON must
// have to be mapped as that JSON: an event's (DefaultLimits), and no key
// twice.
var attributeJSONShape = jsonShape{Depth: DefaultLimits.JSONDepth, Elements: DefaultLimits.JSONElements,
	Values: DefaultLimits.JSONValues + 1, DupKeys: true}

// jsonInAttribute reports whether s, a string attribute such as
// gen_ai.tool.call.arguments, is JSON to map as JSON. Anything else, such
// as a megabyte of [0,0,...] that would cost sixty to decode, or an object
// with a key twice, is kept as the string it is, shown as sent, and never
// decoded.
func jsonInAttribute(s string) bool {
	_, err := scanJSON([]byte(s), attributeJSONShape, nil)
	return err == nil
}
