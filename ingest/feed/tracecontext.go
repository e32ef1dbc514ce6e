package feed

import (
	"strings"

	"github.com/oncetrace/oncetrace/trace"
)

// ParseTraceContext reads a W3C traceparent carried as a string (in a
// webhook payload's custom fields, a message header) exactly as
// TraceContext reads the request header: a value that breaks the format
// gives none, never a wrong one.
func ParseTraceContext(traceparent string) (traceID, spanID string) {
	traceID, spanID, _ = trace.ParseTraceparent(traceparent)
	return traceID, spanID
}

// TraceIDs validates a trace id and a span id carried as two fields rather
// than one traceparent. They go through the same parser (hex is
// lowercased first, as many SDKs print it upper case); a pair that is not
// a valid trace context gives none.
func TraceIDs(traceID, spanID string) (string, string) {
	return ParseTraceContext("00-" + strings.ToLower(traceID) + "-" + strings.ToLower(spanID) + "-01")
}
