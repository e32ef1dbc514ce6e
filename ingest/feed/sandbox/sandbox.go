package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/trace"
)

// Provider is the name effects of the sandbox carry.
const Provider = "sandbox-mail"

// MaxKeyLength is the longest Idempotency-Key accepted, as Stripe's.
const MaxKeyLength = 255

// MaxBodyBytes is the largest send request accepted (413 above it).
const MaxBodyBytes = 1 << 20

// Headers a client may send besides Idempotency-Key.
const (
	HeaderExecution = "X-Oncetrace-Execution"
	HeaderStep      = "X-Oncetrace-Step"
	HeaderFault     = "X-Oncetrace-Fault"
)

// EffectRecorder stores a delivery as an effect. The sandbox answers only
// after it returns, so an email's effect is never missing from the trace.
type EffectRecorder interface {
	RecordEffect(ctx context.Context, e trace.Effect) error
}

// Config configures a sandbox.
type Config struct {
	Recorder  EffectRecorder
	Retention time.Duration // how long a key is kept; 24 h when zero
	Faults    []Fault       // standing faults, applied to every request
	// HoldLimit bounds how long lose-response holds a connection before
	// answering 504 when the client does not give up first.
	HoldLimit time.Duration
	Now       func() time.Time
	Logger    *slog.Logger
	// Rand returns a number in [0, 1) to decide whether a fault strikes.
	Rand func() float64
}

// Sandbox is the mail API. Its key store lives in memory for the retention
// window: restarting serve forgets keys, as if the provider lost its cache.
type Sandbox struct {
	cfg Config

	mu     sync.Mutex
	keys   map[string]*keyEntry
	faults []Fault
	log    []LogEntry
}

type keyEntry struct {
	paramsHash string
	created    time.Time
	inFlight   bool
	status     int
	body       []byte
}

// LogEntry is one line of the sandbox's own log.
type LogEntry struct {
	At             time.Time `json:"at"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	To             string    `json:"to,omitempty"`
	Event          string    `json:"event"` // delivered, replayed, in_flight, key_conflict, rejected, fault:...
	MessageID      string    `json:"message_id,omitempty"`
	Status         int       `json:"status"`
	Execution      string    `json:"execution_id,omitempty"`
	Step           string    `json:"step_id,omitempty"`
	// TraceID and SpanID are the request's W3C traceparent: the trace and
	// the span that made the request.
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
}

const logLength = 1000

// New makes a sandbox.
func New(cfg Config) *Sandbox {
	if cfg.Retention <= 0 {
		cfg.Retention = 24 * time.Hour
	}
	if cfg.HoldLimit <= 0 {
		cfg.HoldLimit = 2 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Rand == nil {
		cfg.Rand = mrand.Float64
	}
	return &Sandbox{cfg: cfg, keys: map[string]*keyEntry{}, faults: cfg.Faults}
}

// Message is the body of a send request.
type Message struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// SendResponse is the body of a successful send.
type SendResponse struct {
	ID             string `json:"id"`
	Object         string `json:"object"`
	Status         string `json:"status"`
	To             string `json:"to"`
	Subject        string `json:"subject"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Deduplicated   bool   `json:"deduplicated"`
}

// APIError is the body of every error, shaped like Stripe's.
type APIError struct {
	Error struct {
		Type    string `json:"type"` // invalid_request_error, idempotency_error, api_error
		Message string `json:"message"`
	} `json:"error"`
}

func errorBody(typ, format string, args ...any) []byte {
	var e APIError
	e.Error.Type, e.Error.Message = typ, fmt.Sprintf(format, args...)
	b, _ := json.Marshal(e)
	return b
}

// ServeSend is POST /sandbox/mail/v1/send.
func (s *Sandbox) ServeSend(w http.ResponseWriter, r *http.Request) {
	entry := LogEntry{At: s.cfg.Now(), IdempotencyKey: r.Header.Get("Idempotency-Key"),
		Execution: r.Header.Get(HeaderExecution), Step: r.Header.Get(HeaderStep)}
	entry.TraceID, entry.SpanID = feed.TraceContext(r.Header)
	a := s.send(r, &entry)
	entry.Status = a.status
	s.record(entry)
	if a.status == 0 {
		return // the response was lost on purpose
	}
	for k, v := range a.headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	w.Write(a.body)
}

// answer is the sandbox's answer to a send request. Status 0 is none: the
// response lost on purpose, or the client gone.
type answer struct {
	status  int
	body    []byte
	headers map[string]string
}

// reject answers a request the sandbox refuses before anything is sent.
func reject(entry *LogEntry, status int, body []byte) *answer {
	entry.Event = "rejected"
	return &answer{status: status, body: body}
}

// send is one request's flow, each step able to answer early: read the
// request, the fail-before fault, claim the idempotency key, the latency
// faults (key held), deliver, settle the key, the lose-response fault.
func (s *Sandbox) send(r *http.Request, entry *LogEntry) answer {
	faults, msg, refused := s.readSend(r, entry)
	if refused != nil {
		return *refused
	}
	entry.To = msg.To
	key := entry.IdempotencyKey
	if f, ok := find(faults, FailBefore); ok {
		s.logFault(entry, f, "fault:"+f.String())
		return answer{status: http.StatusServiceUnavailable, body: errorBody("api_error", "the mail service is unavailable (injected fault fail-before); nothing was sent")}
	}
	hash, now := paramsHash(msg), s.cfg.Now()
	if held := s.claimKey(key, hash, now, entry); held != nil {
		return *held
	}
	slow, gone := s.serveLatency(r.Context(), faults, entry)
	if gone {
		s.releaseKey(key)
		entry.Event = strings.Join(slow, "; ")
		return answer{}
	}
	status, body, headers := s.deliver(r.Context(), msg, key, entry)
	if len(slow) > 0 {
		entry.Event += "; " + strings.Join(slow, "; ")
	}
	s.settleKey(key, hash, now, status, body)
	if f, ok := find(faults, LoseResponse); ok && status < 300 {
		return s.loseResponse(r.Context(), f, entry)
	}
	return answer{status: status, body: body, headers: headers}
}

// readSend checks the request's faults, key and body; refused is the
// answer to a request that fails them.
func (s *Sandbox) readSend(r *http.Request, entry *LogEntry) (faults []Fault, msg Message, refused *answer) {
	faults, err := s.faultsFor(r)
	if err != nil {
		return nil, msg, reject(entry, http.StatusBadRequest, errorBody("invalid_request_error", "%s: %v", HeaderFault, err))
	}
	if key := entry.IdempotencyKey; len(key) > MaxKeyLength {
		return nil, msg, reject(entry, http.StatusBadRequest, errorBody("invalid_request_error", "Idempotency-Key: %d characters, limit %d", len(key), MaxKeyLength))
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err == nil && len(raw) > MaxBodyBytes {
		return nil, msg, reject(entry, http.StatusRequestEntityTooLarge, errorBody("invalid_request_error", "body: over the limit of %d bytes (1 MiB)", MaxBodyBytes))
	}
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		err = dec.Decode(&msg)
	}
	if err != nil || msg.To == "" {
		return nil, msg, reject(entry, http.StatusBadRequest, errorBody("invalid_request_error", "body: must be JSON {\"to\",\"subject\",\"body\"} with a non-empty \"to\""))
	}
	return faults, msg, nil
}

// logFault logs a fault that strikes and names it in the entry's event.
func (s *Sandbox) logFault(entry *LogEntry, f Fault, event string) {
	entry.Event = event
	s.cfg.Logger.Info("sandbox fault", "fault", f.String(), "key", entry.IdempotencyKey, "to", entry.To)
}

// claimKey marks key in flight for this request; held is the answer when
// the key is already taken: in flight (409), reused with other parameters
// (400), or done (its first answer, replayed). A request without a key
// claims nothing.
func (s *Sandbox) claimKey(key, hash string, now time.Time, entry *LogEntry) (held *answer) {
	if key == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.keys[key]
	if ok && now.Sub(e.created) >= s.cfg.Retention {
		ok = false // past retention: the key runs as new
	}
	switch {
	case ok && e.inFlight:
		entry.Event = "in_flight"
		return &answer{status: http.StatusConflict, body: errorBody("idempotency_error", "Idempotency-Key %s: another request with this key is in progress; retry later", key)}
	case ok && e.paramsHash != hash:
		entry.Event = "key_conflict"
		return &answer{status: http.StatusBadRequest, body: errorBody("idempotency_error", "Idempotency-Key %s: keys can only be reused with the same parameters they were first used with", key)}
	case ok:
		entry.Event = "replayed"
		return &answer{status: e.status, body: replayed(e.body), headers: map[string]string{"Idempotent-Replayed": "true"}}
	}
	s.keys[key] = &keyEntry{paramsHash: hash, created: now, inFlight: true}
	return nil
}

// serveLatency serves the latency faults with the key in flight, as a
// slow provider holds it: a concurrent request with the same key gets 409
// meanwhile. slow names the faults served; gone is whether the client
// left before anything was sent.
func (s *Sandbox) serveLatency(ctx context.Context, faults []Fault, entry *LogEntry) (slow []string, gone bool) {
	for _, f := range faults {
		if f.Kind != Latency {
			continue
		}
		slow = append(slow, "fault:"+f.String())
		s.cfg.Logger.Info("sandbox fault", "fault", f.String(), "key", entry.IdempotencyKey, "to", entry.To)
		select {
		case <-time.After(f.Delay):
		case <-ctx.Done():
			return slow, true
		}
	}
	return slow, false
}

// releaseKey frees a key nothing was sent under, so its retry can send.
func (s *Sandbox) releaseKey(key string) {
	if key == "" {
		return
	}
	s.mu.Lock()
	delete(s.keys, key)
	s.mu.Unlock()
}

// settleKey keeps the answer under key for replays, or frees the key
// when nothing was sent (5xx, 400): a retry must be able to send.
func (s *Sandbox) settleKey(key, hash string, now time.Time, status int, body []byte) {
	if key == "" {
		return
	}
	if status >= 500 || status == http.StatusBadRequest {
		s.releaseKey(key)
		return
	}
	s.mu.Lock()
	s.keys[key] = &keyEntry{paramsHash: hash, created: now, status: status, body: body}
	s.mu.Unlock()
}

// loseResponse loses a delivery's answer: 504 at once in 504 mode, else
// the connection held until the client gives up, as a lost response looks
// from the client's side (504 after HoldLimit).
func (s *Sandbox) loseResponse(ctx context.Context, f Fault, entry *LogEntry) answer {
	entry.Event += "; fault:" + f.String()
	s.cfg.Logger.Info("sandbox fault", "fault", f.String(), "key", entry.IdempotencyKey, "to", entry.To, "message_id", entry.MessageID)
	timeout := answer{status: http.StatusGatewayTimeout, body: errorBody("api_error", "gateway timeout (injected fault lose-response)")}
	if f.Answer504 {
		return timeout
	}
	select {
	case <-ctx.Done():
		return answer{}
	case <-time.After(s.cfg.HoldLimit):
		return timeout
	}
}

// deliver sends the email: a new message id, and the effect recorded
// before anyone hears about it. An effect the trace cannot hold (an
// X-Oncetrace-Execution over the id limit) is the request's fault: 400. A
// recorder that cannot record now (a full disk, a busy writer) gets 503
// with Retry-After, as a mail API unable to take mail says. Nothing is
// sent in either case.
func (s *Sandbox) deliver(ctx context.Context, msg Message, key string, entry *LogEntry) (int, []byte, map[string]string) {
	id := newMessageID()
	effect := trace.Effect{Provider: Provider, ID: id, IdempotencyKey: key, ExecutionID: entry.Execution,
		StepID: entry.Step, Target: msg.To, At: s.cfg.Now().UTC(), TraceID: entry.TraceID, SpanID: entry.SpanID}
	effect.Fingerprint, effect.Summary = msg.fingerprint()
	if entry.Execution == "" {
		effect.StepID = "" // a step means nothing without its execution
	}
	if s.cfg.Recorder != nil {
		// Recorded even if the client has gone: the email went out.
		if err := s.cfg.Recorder.RecordEffect(context.WithoutCancel(ctx), effect); err != nil {
			entry.Event = "rejected"
			if errors.Is(err, feed.ErrRejected) {
				return http.StatusBadRequest, errorBody("invalid_request_error", "%s; nothing was sent", rejectedField(err)), nil
			}
			s.cfg.Logger.Error("sandbox: recording the effect failed; not sending", "err", err)
			retry := "1"
			if unwritable(err) {
				retry = "5" // as the native API's 507 (web/health.go)
			}
			return http.StatusServiceUnavailable, errorBody("api_error", "could not record the delivery; nothing was sent: %v", err),
				map[string]string{"Retry-After": retry}
		}
	}
	entry.Event, entry.MessageID = "delivered", id
	body, _ := json.Marshal(SendResponse{ID: id, Object: "email", Status: "sent", To: msg.To, Subject: msg.Subject, IdempotencyKey: key})
	return http.StatusOK, body, nil
}

// rejectedField names what the client sent for the effect field a
// recorder's rejection names: "execution_id: ..." becomes
// "X-Oncetrace-Execution: execution_id: ...".
func rejectedField(err error) string {
	msg := err.Error()
	for field, sent := range map[string]string{"execution_id": HeaderExecution, "step_id": HeaderStep,
		"idempotency_key": "Idempotency-Key", "target": "to", "trace_id": "traceparent", "span_id": "traceparent"} {
		if i := strings.Index(msg, field+":"); i >= 0 {
			return sent + ": " + msg[i:]
		}
	}
	return msg
}

// replayed marks a stored response as answered from the key store.
func replayed(body []byte) []byte {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	m["deduplicated"] = true
	out, _ := json.Marshal(m)
	return out
}

// fingerprint is what the message asked for (feed.Mail): two sends of
// one email match whatever their keys, so a retry that went out twice
// shows as one fingerprint twice.
func (m Message) fingerprint() (fingerprint, summary string) {
	return feed.Mail{Recipients: []string{m.To}, Subject: m.Subject, Body: []string{m.Body}}.Fingerprint()
}

func paramsHash(m Message) string {
	b, _ := json.Marshal(m) // struct fields marshal in a fixed order
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func newMessageID() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "msg_" + hex.EncodeToString(b[:])
}

func find(faults []Fault, kind FaultKind) (Fault, bool) {
	for _, f := range faults {
		if f.Kind == kind {
			return f, true
		}
	}
	return Fault{}, false
}

// faultsFor returns the faults that strike this request: those of its
// header, else the standing ones, each by its probability.
func (s *Sandbox) faultsFor(r *http.Request) ([]Fault, error) {
	candidates := s.Faults()
	if h := r.Header.Get(HeaderFault); h != "" {
		var err error
		if candidates, err = ParseFaults(h); err != nil {
			return nil, err
		}
	}
	var strike []Fault
	for _, f := range candidates {
		if f.Probability >= 1 || s.cfg.Rand() < f.Probability {
			strike = append(strike, f)
		}
	}
	return strike, nil
}

// Faults returns the standing faults.
func (s *Sandbox) Faults() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Fault(nil), s.faults...)
}

// SetFaults replaces the standing faults.
func (s *Sandbox) SetFaults(fs []Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append([]Fault(nil), fs...)
}

func (s *Sandbox) record(e LogEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, e)
	if len(s.log) > logLength {
		s.log = s.log[len(s.log)-logLength:]
	}
	// Expired keys go when the log is written, so the map stays bounded by
	// the retention window without a goroutine of its own.
	now := s.cfg.Now()
	for k, v := range s.keys {
		if !v.inFlight && now.Sub(v.created) >= s.cfg.Retention {
			delete(s.keys, k)
		}
	}
}

// Log returns the sandbox's log, newest last.
func (s *Sandbox) Log() []LogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]LogEntry(nil), s.log...)
}

// faultsBody is GET/PUT /sandbox/faults.
type faultsBody struct {
	Faults []string `json:"faults"`
}

// ServeFaults is GET, PUT and DELETE /sandbox/faults: the standing faults.
func (s *Sandbox) ServeFaults(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
	case http.MethodPut, http.MethodPost:
		var b faultsBody
		if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&b); err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody("invalid_request_error", "body: must be {\"faults\":[\"lose-response;p=0.5\", ...]}"))
			return
		}
		fs, err := ParseFaults(strings.Join(b.Faults, ","))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody("invalid_request_error", "faults: %v", err))
			return
		}
		s.SetFaults(fs)
	case http.MethodDelete:
		s.SetFaults(nil)
	default:
		w.Header().Set("Allow", "GET, PUT, DELETE")
		writeJSON(w, http.StatusMethodNotAllowed, errorBody("invalid_request_error", "method: use GET, PUT or DELETE"))
		return
	}
	out := faultsBody{Faults: []string{}}
	for _, f := range s.Faults() {
		out.Faults = append(out.Faults, f.String())
	}
	b, _ := json.Marshal(out)
	writeJSON(w, http.StatusOK, b)
}

// ServeLog is GET /sandbox/log.
func (s *Sandbox) ServeLog(w http.ResponseWriter, r *http.Request) {
	entries := s.Log()
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].At.After(entries[j].At) })
	if entries == nil {
		entries = []LogEntry{}
	}
	b, _ := json.Marshal(map[string]any{"log": entries})
	writeJSON(w, http.StatusOK, b)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// unwritable reports whether err is the database refusing writes for a
// while (a full disk, a lost connection: store.UnwritableError). The
// sandbox, a feed, does not import the store, so it knows that error by
// the method it alone has.
func unwritable(err error) bool {
	var refusal interface{ Transient() bool }
	return errors.As(err, &refusal)
}
