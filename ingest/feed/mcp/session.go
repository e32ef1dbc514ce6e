package mcp

import (
	"encoding/json"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/trace"
)

// Session is one MCP session: the requests awaiting an answer and who the
// client is. Its methods may be called from several goroutines.
type Session struct {
	o       *Observer
	id      string
	client  string // clientInfo.name
	started time.Time
	// announced: its execution's event was recorded.
	announced bool
	pending   map[string]*pendingCall // by idKey
	order     []string                // pending ids, oldest first (some may be answered)
	lists     map[string]bool         // tools/list requests awaiting their result
	inits     map[string]bool         // initialize requests awaiting theirs
}

// pendingCall is a tools/call awaiting its answer.
type pendingCall struct {
	call             Call
	started          time.Time
	traceID, spanID  string
	traced           bool // the trace context came from the call
	dropAnswer       bool // lose-response struck it
	fingerprint, sum string
	// cancelled is when the client gave up on the call
	// (notifications/cancelled), why in cancelReason: an answer after it
	// may still prove an effect, but the client never saw it.
	cancelled    time.Time
	cancelReason string
}

// ID is the session's id: the Mcp-Session-Id, or one made up.
func (s *Session) ID() string {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	return s.id
}

// FromClient is told a message the client sent (an HTTP body, a stdio
// line) and returns the tools/call requests in it with what strikes each.
// Anything that is not JSON-RPC is ignored.
func (s *Session) FromClient(data []byte) []Call {
	o := s.o
	o.mu.Lock()
	defer o.mu.Unlock()
	var calls []Call
	for _, m := range parseMessages(data) {
		if m.isNotification() && m.Method == "notifications/cancelled" {
			s.cancel(m)
			continue
		}
		if !m.isRequest() {
			continue
		}
		if name := m.clientName(); name != "" {
			s.client = name
		}
		key := idKey(m.ID)
		switch m.Method {
		case "initialize":
			var p initializeParams
			if json.Unmarshal(m.Params, &p) == nil && p.ClientInfo.Name != "" {
				s.client = p.ClientInfo.Name
			}
			s.inits[key] = true
		case "tools/list":
			if len(s.lists) < MaxPending {
				s.lists[key] = true
			}
		case "tools/call":
			if c, ok := s.newCall(m); ok {
				calls = append(calls, c)
			}
		}
	}
	return calls
}

// cancel notes that the client gave up on a call. o.mu is held.
func (s *Session) cancel(m message) {
	var p cancelledParams
	if json.Unmarshal(m.Params, &p) != nil {
		return
	}
	if pc := s.pending[idKey(p.RequestID)]; pc != nil && pc.cancelled.IsZero() {
		pc.cancelled, pc.cancelReason = s.o.cfg.Now(), p.Reason
	}
}

// newCall registers a tools/call request. o.mu is held.
func (s *Session) newCall(m message) (Call, bool) {
	o := s.o
	var p callParams
	if json.Unmarshal(m.Params, &p) != nil || p.Name == "" {
		return Call{}, false
	}
	o.counts.Calls++
	c := Call{Session: s.id, ID: m.ID, Tool: p.Name, Class: o.classOf(p.Name), Args: p.Arguments, Key: s.key(p)}
	if c.Class != trace.EffectRead {
		o.seq++
		c.Seq = o.seq
	}
	c.Faults = s.faults(c, p.Meta)
	pc := &pendingCall{call: c, started: o.cfg.Now()}
	if tp, ok := p.Meta[TraceparentMeta].(string); ok {
		pc.traceID, pc.spanID = feed.ParseTraceContext(tp)
		pc.traced = pc.traceID != ""
	}
	if !pc.traced {
		pc.traceID, pc.spanID = syntheticContext(s.id, idKey(m.ID))
	}
	_, pc.dropAnswer = c.Fault(sandbox.LoseResponse)
	if c.Class != trace.EffectRead {
		pc.fingerprint, pc.sum = feed.ToolCallFingerprint(o.cfg.Provider, c.Tool, c.Args, o.ignore, o.cfg.Redact)
	}
	key := idKey(m.ID)
	if old := s.pending[key]; old != nil {
		// The same id again before an answer: the client reused it, so the
		// first will never be told apart from the second.
		s.finish(old, pc.started, trace.OutcomeTimeout, "no answer told apart: the client sent another request with the same id before this one was answered", nil, false)
	}
	s.pending[key] = pc
	s.order = append(s.order, key)
	s.bound()
	return c, true
}

// key is a call's idempotency key: the _meta entry, else the argument.
func (s *Session) key(p callParams) string {
	if k, ok := p.Meta[s.o.cfg.KeyMeta].(string); ok && k != "" {
		return k
	}
	if s.o.cfg.KeyArg == "" || len(p.Arguments) == 0 {
		return ""
	}
	var args map[string]any
	if json.Unmarshal(p.Arguments, &args) != nil {
		return ""
	}
	if k, ok := args[s.o.cfg.KeyArg].(string); ok {
		return k
	}
	return ""
}

// faults are what strikes call c: those its _meta asks for (any tool),
// else, for a tool that is not read-only, Strike's or the standing ones
// rolled. o.mu is held.
func (s *Session) faults(c Call, meta map[string]any) []sandbox.Fault {
	o := s.o
	if spec, ok := meta[FaultMeta].(string); ok && spec != "" {
		fs, err := sandbox.ParseFaults(spec)
		if err != nil {
			o.cfg.Logger.Warn("mcp: a call's fault is not understood; none strikes", "provider", o.cfg.Provider, "tool", c.Tool, "err", err)
			return nil
		}
		return fs
	}
	if c.Class == trace.EffectRead {
		return nil
	}
	if o.cfg.Strike != nil {
		return o.cfg.Strike(c)
	}
	var out []sandbox.Fault
	for _, f := range o.cfg.Faults {
		if o.cfg.Rand() < f.Probability {
			out = append(out, f)
		}
	}
	return out
}

// bound records the oldest calls unanswered while more than MaxPending
// await an answer. o.mu is held.
func (s *Session) bound() {
	for len(s.pending) > MaxPending && len(s.order) > 0 {
		key := s.order[0]
		s.order = s.order[1:]
		if pc := s.pending[key]; pc != nil {
			s.finish(pc, s.o.cfg.Now(), trace.OutcomeTimeout, "no answer while "+itoa(MaxPending)+" newer calls of the session awaited theirs", nil, false)
		}
	}
	if len(s.order) > 2*MaxPending {
		// Drop the answered ids from the order now and then.
		live := s.order[:0]
		for _, k := range s.order {
			if s.pending[k] != nil {
				live = append(live, k)
			}
		}
		s.order = live
	}
}

// FromServer is told a message the server sent (an HTTP body, an SSE
// event's data, a stdio line) and records the calls it answers. drop says
// the proxy must not deliver it: it answers a call lose-response struck.
func (s *Session) FromServer(data []byte) (drop bool) {
	return s.fromServer(parseMessages(data), delivery{})
}

// Undelivered is told a message the server sent that the client never
// gets: its request was answered otherwise (a 504 when the server was
// late) or its client went away. The calls it answers are recorded as
// timeouts, with the effects the server made, why saying what happened.
func (s *Session) Undelivered(data []byte, why string) {
	s.fromServer(parseMessages(data), delivery{withheld: why})
}

// delivery is what became of a message from the server.
type delivery struct {
	// withheld, when not empty, says why the client never gets it.
	withheld string
	// passed: the client got it whatever struck the calls it answers (it
	// was too long to hold back; large says so).
	passed, large bool
}

// loseText is the error of an attempt whose answer lose-response withheld.
const loseText = "the server answered; oncetrace (lose-response) withheld the answer from the client"

// fromServer records the calls msgs answer. drop says one answers a call
// lose-response struck: the proxy withholds it, unless d.passed says the
// client has it already, when drop says the fault missed.
func (s *Session) fromServer(msgs []message, d delivery) (drop bool) {
	o := s.o
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.cfg.Now()
	for _, m := range msgs {
		if !m.isResponse() {
			continue
		}
		key := idKey(m.ID)
		switch {
		case s.lists[key]:
			delete(s.lists, key)
			if d.large {
				o.cfg.Logger.Warn("mcp: a tools/list result too long to hold was not read; its tools' classes stay unknown", "provider", o.cfg.Provider)
			} else if m.Result != nil {
				o.learnTools(m.Result)
			}
		case s.inits[key]:
			delete(s.inits, key)
		case s.pending[key] != nil:
			pc := s.pending[key]
			why := d.withheld
			switch {
			case pc.dropAnswer && d.passed:
				drop = true
				o.cfg.Logger.Warn("mcp: lose-response missed: the answer was too long to hold back and reached the client", "provider", o.cfg.Provider, "tool", pc.call.Tool)
			case pc.dropAnswer:
				drop, why = true, loseText
				o.counts.Dropped++
			}
			s.answered(pc, m, now, why)
		}
	}
	return drop
}

// answered records the call pc as m answered it; withheld, when not
// empty, says why the client never got the answer.
func (s *Session) answered(pc *pendingCall, m message, now time.Time, withheld string) {
	var res callResult
	switch {
	case m.Error != nil:
		s.finish(pc, now, trace.OutcomeError, "JSON-RPC error "+itoa(m.Error.Code)+": "+m.Error.Message, nil, false)
	case json.Unmarshal(m.Result, &res) != nil:
		s.finish(pc, now, trace.OutcomeError, "the server's result is not a tools/call result", nil, false)
	case res.IsError:
		s.finish(pc, now, trace.OutcomeError, res.errorText(), m.Result, false)
	case withheld != "":
		// The server did it; the client never hears so.
		s.finish(pc, now, trace.OutcomeTimeout, withheld, m.Result, true)
	case !pc.cancelled.IsZero():
		// The server did it, after the client had given up: for the
		// client the call timed out when it cancelled it.
		s.finish(pc, pc.cancelled, trace.OutcomeTimeout, "the client cancelled the call"+reasonSuffix(pc.cancelReason)+
			"; the server answered later", m.Result, true)
	default:
		s.finish(pc, now, trace.OutcomeOK, "", m.Result, true)
	}
}

// Refuse records call c, struck by fail-before, as failed without being
// forwarded, and returns the JSON-RPC error the proxy answers it with.
func (s *Session) Refuse(c Call) []byte {
	o := s.o
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counts.Refused++
	const text = "oncetrace fail-before: the call was not forwarded to the MCP server"
	if pc := s.pending[idKey(c.ID)]; pc != nil {
		s.finish(pc, o.cfg.Now(), trace.OutcomeError, text, nil, false)
	}
	return errorResponse(c.ID, -32603, text)
}

// Delayed counts a call the proxy forwards late (latency).
func (s *Session) Delayed() {
	s.o.mu.Lock()
	s.o.counts.Delayed++
	s.o.mu.Unlock()
}

// Unanswered records the call with id as never answered (its stream
// ended, the client went away): a timeout, and no effect, as nothing says
// whether the server acted.
func (s *Session) Unanswered(id json.RawMessage, why string) {
	o := s.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if pc := s.pending[idKey(id)]; pc != nil {
		s.finish(pc, o.cfg.Now(), trace.OutcomeTimeout, why, nil, false)
	}
}

// Close records every call still awaiting an answer as unanswered, and
// the session's execution, when it has one, as completed: the session
// ended (the client's DELETE, the stdio server's end).
func (s *Session) Close() {
	o := s.o
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.cfg.Now()
	defer func() {
		if s.announced {
			o.record([]json.RawMessage{marshal(map[string]any{"type": "execution", "id": s.eventID("end"), "execution_id": s.id,
				"status": "completed", "ended_at": stamp(now)})}, 0, 0)
		}
	}()
	for _, key := range s.order {
		pc := s.pending[key]
		switch {
		case pc == nil:
		case !pc.cancelled.IsZero():
			s.finish(pc, pc.cancelled, trace.OutcomeTimeout, "the client cancelled the call"+reasonSuffix(pc.cancelReason)+
				"; the server never answered", nil, false)
		default:
			s.finish(pc, now, trace.OutcomeTimeout, "no answer: the session ended before the server answered", nil, false)
		}
	}
	s.order = nil
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

// finish records call pc as ended at end with outcome, and, when acted,
// the effect of a tool that is not read-only. o.mu is held.
func (s *Session) finish(pc *pendingCall, end time.Time, outcome trace.Outcome, errText string, result json.RawMessage, acted bool) {
	delete(s.pending, idKey(pc.call.ID))
	events := s.announce(pc)
	events = append(events, s.attemptEvent(pc, end, outcome, errText, result))
	effects := int64(0)
	if acted && pc.call.Class != trace.EffectRead {
		events = append(events, s.effectEvent(pc, end, result))
		effects = 1
	}
	s.o.record(events, 1, effects)
}
