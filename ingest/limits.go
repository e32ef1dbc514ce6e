package ingest

// Limits bound what one request and one event may carry. Every limit is
// documented in docs/api.md; an event over a limit is rejected by index,
// never truncated.
type Limits struct {
	BodyBytes     int64 // request body, after decompression
	Events        int   // events in one request
	IDBytes       int   // ids, keys, provider and worker names
	JSONBytes     int   // args and result, each, as canonical JSON
	TextBytes     int   // name, tool, target and error
	Labels        int   // entries in an execution's label map
	LabelBytes    int   // one label key or value
	AttemptNumber int   // highest attempt number

	// The shape of an event's JSON, checked before it is decoded, so that
	// a small body cannot cost a lot of memory (jsonscan.go). Zero: no limit.
	JSONDepth    int // arrays and objects nested inside one field of an event
	JSONElements int // elements of one array, or keys of one object
	JSONValues   int // values inside the fields of one event, all together

	// OTLP, per export request (otlplimits.go). Zero: no limit.
	Spans          int // spans in one request
	SpanAttributes int // attributes of one span, span event, link, resource or scope
	SpanEvents     int // events of one span; links of one span
	AttributeBytes int // one attribute value: a string's or bytes' length, an array's or map's summed (otlplimits.go)

	// Redact masks the values of keys that name secrets before an event
	// is stored (redact.go); nil masks nothing. Not a limit, but it goes
	// wherever the limits go: every path from a wire format to the store.
	Redact *Redactor
}

// DefaultLimits are the limits docs/api.md ("Limits") lists as defaults.
var DefaultLimits = Limits{
	BodyBytes:     8 << 20,
	Events:        5000,
	IDBytes:       256,
	JSONBytes:     64 << 10,
	TextBytes:     64 << 10,
	Labels:        64,
	LabelBytes:    1024,
	AttemptNumber: 1_000_000,

	JSONDepth:    32,
	JSONElements: 10_000,
	JSONValues:   100_000,

	// The OpenTelemetry SDKs' own default limits are 128 attributes and
	// 128 events a span, so no SDK left at its defaults reaches these.
	Spans:          10_000,
	SpanAttributes: 128,
	SpanEvents:     128,
	AttributeBytes: 1 << 20,

	Redact: NewRedactor(DefaultRedactKeys),
}
