package trace

import "strings"

// ParseTraceparent reads a W3C Trace Context traceparent header
// ("00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>") and returns its
// trace id and parent span id, lowercase. Every outbox feed records the
// trace context of the request that caused an effect through it. A header
// that breaks the format, or carries an all-zero id, gives ok false: the
// effect is then recorded without a trace context, never with a wrong one.
func ParseTraceparent(header string) (traceID, spanID string, ok bool) {
	h := strings.TrimSpace(header)
	if len(h) < 55 {
		return "", "", false
	}
	version := h[0:2]
	if !isLowerHex(version) || version == "ff" {
		return "", "", false
	}
	// Version 00 is exactly 55 characters; a later version may append
	// fields after another dash, which this parser ignores as the spec asks.
	if (version == "00" && len(h) != 55) || (len(h) > 55 && h[55] != '-') {
		return "", "", false
	}
	if h[2] != '-' || h[35] != '-' || h[52] != '-' {
		return "", "", false
	}
	traceID, spanID, flags := h[3:35], h[36:52], h[53:55]
	if !isLowerHex(traceID) || !isLowerHex(spanID) || !isLowerHex(flags) ||
		strings.Trim(traceID, "0") == "" || strings.Trim(spanID, "0") == "" {
		return "", "", false
	}
	return traceID, spanID, true
}

func isLowerHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}
