package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/trace"
)

// Names in params._meta the proxy reads (docs/mcp.md).
const (
	// KeyMeta carries a call's idempotency key unless Config.KeyMeta names
	// another.
	KeyMeta = "io.oncetrace/idempotency-key"
	// FaultMeta asks for faults on one call, in the syntax of the tap's
	// X-Oncetrace-Fault header (sandbox.ParseFaults).
	FaultMeta = "io.oncetrace/fault"
	// TraceparentMeta is where SEP-414 puts the caller's trace context.
	TraceparentMeta = "traceparent"
)

// DefaultEffectIDPointer is where an effect's id is read in a tools/call
// result unless Config.EffectIDPointer says otherwise.
const DefaultEffectIDPointer = "/structuredContent/id"

// Bounds on what an Observer keeps.
const (
	// MaxPending bounds the calls of one session awaiting an answer: past
	// it the oldest is recorded unanswered.
	MaxPending = 10_000
	// MaxTools bounds the tools whose class the observer remembers.
	MaxTools = 10_000
	// MaxResultBytes bounds the result an attempt stores; a longer one is
	// left out and said to be.
	MaxResultBytes = 64 << 10
)

// Feed names the MCP proxies in the ids of the events they record.
const Feed = "mcp"

// Recorder is where the observer's events go: native events (POST
// /api/v1/events's format), each call's attempt and effect in one batch
// (feed.WriterRecorder, feed.HTTPRecorder, or a feed.QueuedEventRecorder
// in front of one). The observer hands them over off the stream's path.
type Recorder = feed.EventRecorder

// Config configures an Observer.
type Config struct {
	// Provider names the MCP server: the effects' provider and the steps'.
	Provider string
	// EffectIDPointer is a JSON pointer (RFC 6901) into a tools/call
	// result holding the effect's id; DefaultEffectIDPointer when empty. A
	// result without it gets an id hashed from the call.
	EffectIDPointer string
	// KeyMeta names the params._meta entry holding a call's idempotency
	// key; KeyMeta when empty. KeyArg, when set, names a tool argument
	// that holds it, read when the _meta entry is absent.
	KeyMeta, KeyArg string
	// Faults are the standing faults, each rolled (Rand) for every call of
	// a tool that is not read-only and asks for none itself.
	Faults []sandbox.Fault
	// Strike, when set, decides in place of Faults which faults strike a
	// call of a tool that is not read-only (oncetrace chaos numbers them).
	Strike func(Call) []sandbox.Fault
	// Rand returns a number in [0, 1); a locked math/rand/v2 when nil.
	Rand func() float64
	// Recorder receives the events; none are recorded when nil.
	Recorder Recorder
	// RecordTimeout bounds one hand-over to the Recorder; 30 s when zero.
	RecordTimeout time.Duration
	// FingerprintIgnore are argument fields left out of the effects'
	// fingerprints besides feed.DefaultFingerprintIgnore.
	FingerprintIgnore []string
	// Redact names the argument fields the effects' summaries hide;
	// ingest.DefaultRedactKeys when nil.
	Redact *ingest.Redactor
	Now    func() time.Time
	Logger *slog.Logger
}

// Call is a tools/call request the client sent, as the proxy must treat it.
type Call struct {
	// Session is the id of the session it came in.
	Session string
	// ID is its JSON-RPC id, as sent.
	ID json.RawMessage
	// Seq numbers the calls of tools that are not read-only, across the
	// observer, from 1: oncetrace chaos's call sites. 0 for a read-only
	// tool's.
	Seq   int
	Tool  string
	Class trace.EffectClass
	// Args are the call's arguments, as sent.
	Args json.RawMessage
	Key  string
	// Faults are what strikes the call: the proxy forwards it late
	// (latency), answers it with an error without forwarding it
	// (fail-before, Session.Refuse), or forwards it and drops its answer
	// (lose-response: the observer says so when the answer comes).
	Faults []sandbox.Fault
}

// Fault returns the fault of kind that strikes the call, if one does.
func (c Call) Fault(kind sandbox.FaultKind) (sandbox.Fault, bool) {
	for _, f := range c.Faults {
		if f.Kind == kind {
			return f, true
		}
	}
	return sandbox.Fault{}, false
}

// Counts are an Observer's counters since it started.
type Counts struct {
	Calls    int64 `json:"calls"`    // tools/call requests seen
	Attempts int64 `json:"attempts"` // attempts handed to the recorder
	Effects  int64 `json:"effects"`  // effects handed to the recorder
	// Dropped are answers withheld from the client (lose-response),
	// Refused calls answered with an error unforwarded (fail-before),
	// Delayed calls forwarded late (latency).
	Dropped int64 `json:"dropped"`
	Refused int64 `json:"refused"`
	Delayed int64 `json:"delayed"`
	// RecordFailures are hand-overs the recorder returned an error for.
	RecordFailures int64 `json:"record_failures"`
}

// Observer watches the messages of every session of one MCP server.
type Observer struct {
	cfg      Config
	ignore   feed.IgnoredFields
	pointer  []string
	mu       sync.Mutex
	tools    map[string]trace.EffectClass // by tool name, from tools/list results
	sessions map[string]*Session
	seq      int
	counts   Counts
	records  sync.WaitGroup
}

// New makes an observer.
func New(cfg Config) (*Observer, error) {
	if cfg.Provider == "" {
		return nil, errorf("provider: must name the MCP server")
	}
	ptr, err := parsePointer(cmpOr(cfg.EffectIDPointer, DefaultEffectIDPointer))
	if err != nil {
		return nil, err
	}
	cfg.KeyMeta = cmpOr(cfg.KeyMeta, KeyMeta)
	if cfg.RecordTimeout <= 0 {
		cfg.RecordTimeout = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = lockedRand()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Redact == nil {
		cfg.Redact = ingest.NewRedactor(ingest.DefaultRedactKeys)
	}
	return &Observer{cfg: cfg, ignore: feed.NewIgnoredFields(cfg.FingerprintIgnore...), pointer: ptr,
		tools: map[string]trace.EffectClass{}, sessions: map[string]*Session{}}, nil
}

// Session returns the session with id, made on first use. An empty id is
// a session of its own that no other call of Session finds (a stdio
// child's, a stateless server's): its execution id is made up once.
func (o *Observer) Session(id string) *Session {
	o.mu.Lock()
	defer o.mu.Unlock()
	if id != "" {
		if s := o.sessions[id]; s != nil {
			return s
		}
	}
	s := &Session{o: o, id: id, started: o.cfg.Now(), pending: map[string]*pendingCall{}, lists: map[string]bool{}, inits: map[string]bool{}}
	if id == "" {
		s.id = "mcp-" + randomHex(8)
	} else {
		o.sessions[id] = s
	}
	return s
}

// Adopt names s, a session begun without an id (an initialize request
// over HTTP), with the id the server gave it, so that later requests
// carrying the id find it.
func (o *Observer) Adopt(s *Session, id string) {
	if id == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, taken := o.sessions[id]; taken {
		return
	}
	delete(o.sessions, s.id)
	s.id = id
	o.sessions[id] = s
}

// Forget drops a session the client ended (HTTP DELETE), recording its
// unanswered calls as such.
func (o *Observer) Forget(id string) {
	o.mu.Lock()
	s := o.sessions[id]
	delete(o.sessions, id)
	o.mu.Unlock()
	if s != nil {
		s.Close()
	}
}

// Counts returns the counters.
func (o *Observer) Counts() Counts {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts
}

// Wait waits, until ctx ends, for the hand-overs to the recorder still
// running.
func (o *Observer) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { o.records.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// classOf is a tool's class as its annotations say; a tool never listed
// has none said, and MCP's defaults make it a destructive write. o.mu is
// held.
func (o *Observer) classOf(tool string) trace.EffectClass {
	if c, ok := o.tools[tool]; ok {
		return c
	}
	return trace.EffectWrite
}

// learnTools records the classes a tools/list result gives. o.mu is held.
func (o *Observer) learnTools(result json.RawMessage) {
	var r toolsListResult
	if json.Unmarshal(result, &r) != nil {
		return
	}
	for _, t := range r.Tools {
		if len(o.tools) >= MaxTools && o.tools[t.Name] == "" {
			continue
		}
		o.tools[t.Name] = annotationClass(t.Annotations)
	}
}

// annotationClass maps a tool's annotations to its class (docs/mcp.md):
// readOnlyHint is a read; anything else a write — idempotentHint says it
// is safe to repeat with the same arguments, which is what the effects
// will show, not what the class claims.
func annotationClass(a *struct {
	ReadOnlyHint    *bool `json:"readOnlyHint"`
	DestructiveHint *bool `json:"destructiveHint"`
	IdempotentHint  *bool `json:"idempotentHint"`
}) trace.EffectClass {
	if a != nil && a.ReadOnlyHint != nil && *a.ReadOnlyHint {
		return trace.EffectRead
	}
	return trace.EffectWrite
}

// record hands events to the recorder without holding up the stream.
func (o *Observer) record(events []json.RawMessage, attempts, effects int64) {
	o.counts.Attempts += attempts
	o.counts.Effects += effects
	if o.cfg.Recorder == nil || len(events) == 0 {
		return
	}
	o.records.Add(1)
	go func() {
		defer o.records.Done()
		ctx, cancel := context.WithTimeout(context.Background(), o.cfg.RecordTimeout)
		defer cancel()
		if err := o.cfg.Recorder.RecordEvents(ctx, events); err != nil {
			o.mu.Lock()
			o.counts.RecordFailures++
			o.mu.Unlock()
			o.cfg.Logger.Warn("mcp: recording a call failed", "provider", o.cfg.Provider, "err", err)
		}
	}()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

func cmpOr(s, def string) string {
	if s != "" {
		return s
	}
	return def
}
