package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// A tool call's step is its tool name and canonical arguments within the
// execution (docs/otlp.md § Tool calls). Whoever records a tool call with
// no step id of its own derives it with these two functions, so that the
// span mapping and a recorder that sees the call on the wire (the MCP
// proxy reads params.arguments of a tools/call) agree on one step.

// ToolStepID is the step id of a call of tool with these arguments: "tool-"
// and the first 16 hex digits of SHA-256 of the tool name, a NUL byte and
// canonicalArgs (CanonicalArgs' form). Arguments sent as null, or none
// given here, hash as null.
func ToolStepID(tool string, canonicalArgs json.RawMessage) string {
	if canonicalArgs == nil {
		canonicalArgs = json.RawMessage("null")
	}
	sum := sha256.Sum256(append([]byte(tool+"\x00"), canonicalArgs...))
	return "tool-" + hex.EncodeToString(sum[:8])
}

// CanonicalArgs is raw JSON arguments as the span mapping stores them and
// hashes them into the step id: secret values masked by r (the receiving
// server's Limits.Redact: DefaultLimits.Redact unless serve --redact says
// otherwise; nil masks nothing), keys sorted, no spaces, numbers as sent.
// Masking comes first because the server never holds the unmasked form.
func CanonicalArgs(raw json.RawMessage, r *Redactor) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("ingest: arguments: invalid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("ingest: arguments: invalid JSON: data after the value")
	}
	redacted, _ := r.Value(v)
	return appendCanonical(nil, redacted), nil
}
