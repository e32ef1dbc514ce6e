package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/trace"
)

// The events a call becomes (docs/mcp.md § What is recorded). Their ids
// are made from the session and the request id, so a re-sent batch is
// the same events.

// execution is the call's execution: its trace's when the call carried a
// trace context (the trace id, as a trace's execution is named when no
// span names another), else the session's.
func (s *Session) execution(pc *pendingCall) string {
	if pc.traced {
		return pc.traceID
	}
	return s.id
}

// announce is the session's execution event, once, before its first
// untraced call: named after the client. o.mu is held.
func (s *Session) announce(pc *pendingCall) []json.RawMessage {
	if pc.traced || s.announced {
		return nil
	}
	s.announced = true
	ev := map[string]any{"type": "execution", "id": s.eventID("execution"), "execution_id": s.id, "status": "running",
		"started_at": stamp(s.started)}
	if s.client != "" {
		ev["name"] = s.client
	} else {
		ev["name"] = "MCP session"
	}
	return []json.RawMessage{marshal(ev)}
}

func (s *Session) eventID(what string) string {
	return Feed + ":" + s.o.cfg.Provider + ":" + s.id + ":" + what
}

// attemptEvent is the call as an attempt of its step: numbered by the
// store among the step's attempts by its span (trace.NumberSpanAttempts),
// recognised by "mcp" (the proxy, not a span dialect, saw it).
func (s *Session) attemptEvent(pc *pendingCall, end time.Time, outcome trace.Outcome, errText string, result json.RawMessage) json.RawMessage {
	c := pc.call
	ev := map[string]any{"type": "attempt", "id": s.eventID("call:" + idLabel(c.ID)), "execution_id": s.execution(pc),
		"step_id": ToolStepID(c.Tool, c.Args), "tool": c.Tool, "effect": string(c.Class), "provider": s.o.cfg.Provider,
		"started_at": stamp(pc.started), "ended_at": stamp(end), "outcome": string(outcome),
		"trace_id": pc.traceID, "span_id": pc.spanID, "recognised_by": Feed}
	if len(c.Args) > 0 && json.Valid(c.Args) {
		ev["args"] = c.Args
	}
	if c.Key != "" {
		ev["idempotency_key"] = c.Key
	}
	if errText != "" {
		// Every error names the call as the client's log would.
		ev["error"] = feed.OneLine("tools/call #"+idLabel(c.ID)+": "+errText, 1000)
	}
	if len(result) > 0 && json.Valid(result) {
		if len(result) <= MaxResultBytes {
			ev["result"] = result
		} else {
			ev["result"] = map[string]any{"oncetrace": "result of " + strconv.Itoa(len(result)) + " bytes, over the " +
				strconv.Itoa(MaxResultBytes) + " an attempt keeps"}
		}
	}
	return marshal(ev)
}

// effectEvent is what the server did for a call of a tool that is not
// read-only and answered without error.
func (s *Session) effectEvent(pc *pendingCall, at time.Time, result json.RawMessage) json.RawMessage {
	c := pc.call
	e := trace.Effect{Provider: s.o.cfg.Provider, ID: s.effectID(pc, result), IdempotencyKey: c.Key,
		ExecutionID: s.execution(pc), StepID: ToolStepID(c.Tool, c.Args), At: at, TraceID: pc.traceID, SpanID: pc.spanID,
		Fingerprint: pc.fingerprint, Summary: pc.sum}
	return marshal(feed.Event(e, feed.EventID(Feed, e)))
}

// effectID is the id the result holds at the configured pointer, else one
// hashed from the session and the request id: each call that acted is an
// effect of its own unless the server says two are one.
func (s *Session) effectID(pc *pendingCall, result json.RawMessage) string {
	if id, ok := lookupPointer(result, s.o.pointer); ok {
		return id
	}
	sum := sha256.Sum256([]byte(s.id + "\x00" + idKey(pc.call.ID)))
	return "call-" + hex.EncodeToString(sum[:8])
}

// syntheticContext is a trace context for a call that carried none: the
// session's trace, a span of its own, so that the store numbers the
// step's attempts by time as it does spans'.
func syntheticContext(session, id string) (traceID, spanID string) {
	t := sha256.Sum256([]byte("mcp session\x00" + session))
	sp := sha256.Sum256([]byte("mcp call\x00" + session + "\x00" + id))
	return hex.EncodeToString(t[:16]), hex.EncodeToString(sp[:8])
}

// ToolStepID is the step of a call of tool with args: the id the span
// mapping gives a tool call with arguments (ingest.ToolStepID over the
// arguments as the server stores them: secrets masked with its default
// redactor, keys sorted), so a proxy and an instrumented client agree.
// Arguments that are not JSON are hashed as sent.
func ToolStepID(tool string, args json.RawMessage) string {
	canon, err := ingest.CanonicalArgs(args, ingest.DefaultLimits.Redact)
	if err != nil {
		canon = args
	}
	return ingest.ToolStepID(tool, canon)
}

// parsePointer splits an RFC 6901 JSON pointer into its unescaped tokens.
func parsePointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, errorf("effect id pointer %q: a JSON pointer starts with /", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// lookupPointer is the string or number at ptr in doc; an empty string
// is no id.
func lookupPointer(doc json.RawMessage, ptr []string) (string, bool) {
	v, ok := feed.JSONValueAt(doc, ptr)
	return v, ok && v != ""
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func marshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("mcp: an event does not marshal: " + err.Error()) // only maps of strings and raw JSON checked valid
	}
	return b
}

func itoa(n int) string { return strconv.Itoa(n) }

func errorf(format string, args ...any) error {
	return errors.New("mcp: " + fmt.Sprintf(format, args...))
}

// lockedRand is a math/rand/v2 source safe for concurrent calls.
func lockedRand() func() float64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}
