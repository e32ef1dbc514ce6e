package tap

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/mcp"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/trace"
)

// Feed names the tap in the event ids of the effects it records
// (feed.EventID): the same effect reported twice by the tap is one event.
const Feed = "tap"

// StatusPath is the tap's own endpoint: GET answers its counters and its
// recent requests as JSON. It is never proxied.
const StatusPath = "/_oncetrace/tap"

// DefaultMaxPeekBytes is how much of a body the tap looks at by default.
const DefaultMaxPeekBytes = 1 << 20

// The defaults for an upstream that does not answer. 60 s is well past
// any usual API latency and answers before the usual client timeouts
// (stripe-node's is 80 s), so the client gets a 504 it can act on rather
// than its own timeout. 5 minutes is past the time limits the usual load
// balancers put in front of an API (60 to 100 s): an answer that late will
// not come. 128 requests waiting at once hold at most 256 MiB of body
// prefixes at the default peek limit.
const (
	DefaultUpstreamTimeout = 60 * time.Second
	DefaultUpstreamGiveUp  = 5 * time.Minute
	DefaultMaxLate         = 128
)

// Defaults for the fields the tap reads.
var (
	DefaultUnsafeMethods = []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	DefaultKeyHeaders    = []string{"Idempotency-Key"}
)

const (
	defaultEffectIDField = "id"
	defaultTargetField   = "to"
	logLength            = 200
	// maxProviderBytes leaves room in an event id (tap:PROVIDER:ID, at
	// most 256 bytes) for an effect id.
	maxProviderBytes = 64
)

// Recorder is where the tap's effects go. It records an effect or keeps it
// to retry, and makes the proxied request wait at most its own timeout;
// *feed.QueuedRecorder is the one oncetrace uses.
type Recorder interface {
	Record(ctx context.Context, e trace.Effect) (feed.Outcome, error)
	Counts() feed.Counts
}

// Config configures a tap.
type Config struct {
	// Upstream is the API's base URL; a request's path is joined to it.
	Upstream string
	// Provider names the API in the effects: stripe, sendgrid, ...
	Provider string
	// UnsafeMethods are the methods whose 2xx answers are effects;
	// DefaultUnsafeMethods when empty.
	UnsafeMethods []string
	// EffectIDHeaders are response headers holding the effect's id (such
	// as SendGrid's X-Message-Id), tried first, in order.
	EffectIDHeaders []string
	// EffectIDField is the response's JSON field holding the effect's id
	// (a dotted path); "id" when empty.
	EffectIDField string
	// TargetField is the request's field naming whom the effect is for (a
	// dotted JSON path, or a form field); "to" when empty.
	TargetField string
	// KeyHeaders are the request headers that may carry the idempotency
	// key, the first present wins; DefaultKeyHeaders when empty.
	KeyHeaders []string
	// MaxPeekBytes bounds what the tap reads of each body for those
	// fields; DefaultMaxPeekBytes when zero. A longer body is passed
	// through whole, and none of its fields is read.
	MaxPeekBytes int64
	// FingerprintIgnore are request fields left out of each effect's
	// fingerprint besides feed.DefaultFingerprintIgnore: fields this
	// provider's clients fill afresh on every send of one intent.
	FingerprintIgnore []string
	// Redact names the request fields whose values an effect's summary
	// hides; ingest.DefaultRedactKeys when nil.
	Redact *ingest.Redactor
	// Faults are the standing faults, applied to unsafe requests that carry
	// no X-Oncetrace-Fault header.
	Faults []sandbox.Fault
	// Strike, when set, decides instead of Faults which faults strike an
	// unsafe request: it is called once for every unsafe request, in the
	// order they arrive (oncetrace chaos counts them with it), and the
	// faults it returns all strike, their probability not rolled again. A
	// request's X-Oncetrace-Fault header still wins over what it returns.
	Strike func(r *http.Request) []sandbox.Fault
	// HoldLimit bounds how long lose-response holds a connection before
	// answering 504; 2 minutes when zero.
	HoldLimit time.Duration
	// UpstreamTimeout bounds how long a client waits for the upstream's
	// answer (its header) from when the request is forwarded: past it the
	// client is answered 504; DefaultUpstreamTimeout when zero.
	UpstreamTimeout time.Duration
	// UpstreamGiveUp bounds how long, from forwarding, an unsafe request
	// whose client was answered 504 (or left) still waits for the
	// upstream's answer, so that the effect it may have had is recorded;
	// DefaultUpstreamGiveUp when zero, at least UpstreamTimeout.
	UpstreamGiveUp time.Duration
	// MaxLate bounds the requests waiting so at once; beyond it the
	// upstream request is cancelled when its client is answered.
	// DefaultMaxLate when zero; negative: none waits.
	MaxLate  int
	Recorder Recorder
	// Transport reaches the upstream; a clone of http.DefaultTransport that
	// never asks for compression itself when nil.
	Transport http.RoundTripper
	Now       func() time.Time
	// Rand returns a number in [0, 1) to decide whether a fault strikes.
	Rand   func() float64
	Logger *slog.Logger

	// MCP, when set, makes the tap a proxy for a Streamable HTTP MCP
	// server (mcp.go): the observer is told every message and records
	// each tools/call, its faults strike calls (not requests), and the
	// fields above that read effects from requests and answers are not
	// used. Recorder may then be nil: the observer has its own.
	MCP *mcp.Observer
	// MaxMessageBytes bounds an MCP message the tap holds to read (a
	// POST's body, an SSE event); DefaultMaxMessageBytes when zero. A
	// longer request passes through unread; a longer answer is read as it
	// streams, for the call it closes.
	MaxMessageBytes int64
	// RecorderCounts gives the status endpoint the counters of the
	// recorder when Recorder is nil (the MCP observer's).
	RecorderCounts func() feed.Counts
}

// Tap is the recording proxy, an http.Handler.
type Tap struct {
	cfg      Config
	upstream *url.URL
	proxy    *httputil.ReverseProxy
	unsafe   map[string]bool
	ignore   feed.IgnoredFields

	closing   chan struct{}
	closeOnce sync.Once

	// lateCtx ends the requests still waiting for a late answer when the
	// tap stops; lateWG waits for them.
	lateCtx    context.Context
	cancelLate context.CancelFunc
	lateWG     sync.WaitGroup

	mu        sync.Mutex
	proxied   int64
	effects   int64
	timeouts  int64
	late      int64 // waiting now
	draining  bool  // Drain was called: no more wait
	abandoned int64
	faults    map[string]int64
	log       []LogEntry
	// stateless is the session of an MCP server that names none: its
	// requests share it.
	stateless *mcp.Session
}

// LogEntry is one line of the tap's log of unsafe and faulted requests.
// It carries what an effect has no field for: the upstream's status and
// latency.
type LogEntry struct {
	At             time.Time `json:"at"`
	Method         string    `json:"method"`
	Path           string    `json:"path"`
	Status         int       `json:"status"`     // the upstream's; 0 when it did not answer or was not asked
	LatencyMS      float64   `json:"latency_ms"` // from forwarding the request to the upstream's answer
	EffectID       string    `json:"effect_id,omitempty"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	Target         string    `json:"target,omitempty"`
	Fingerprint    string    `json:"fingerprint,omitempty"`
	Summary        string    `json:"summary,omitempty"`
	ExecutionID    string    `json:"execution_id,omitempty"`
	StepID         string    `json:"step_id,omitempty"`
	TraceID        string    `json:"trace_id,omitempty"`
	SpanID         string    `json:"span_id,omitempty"`
	// Record is what became of the effect: recorded, queued, rejected or
	// dropped; empty when there was no effect.
	Record string `json:"record,omitempty"`
	// Late says what the client had already got when the upstream
	// answered (or was given up on): a 504, or nothing as it left.
	Late  string `json:"late,omitempty"`
	Fault string `json:"fault,omitempty"`
	Error string `json:"error,omitempty"`
	// Calls are the tools/call requests of an MCP POST: tool#id.
	Calls string `json:"calls,omitempty"`
}

// New makes a tap.
func New(cfg Config) (*Tap, error) {
	u, err := url.Parse(cfg.Upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tap: upstream %q: must be an http or https URL such as https://api.stripe.com", cfg.Upstream)
	}
	if len(cfg.Provider) > maxProviderBytes || !usableID(cfg.Provider, "") {
		return nil, fmt.Errorf("tap: provider %q: must be 1 to %d bytes of printable text", cfg.Provider, maxProviderBytes)
	}
	if cfg.Recorder == nil && cfg.MCP == nil {
		return nil, errors.New("tap: a recorder is required")
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if len(cfg.UnsafeMethods) == 0 {
		cfg.UnsafeMethods = DefaultUnsafeMethods
	}
	if len(cfg.KeyHeaders) == 0 {
		cfg.KeyHeaders = DefaultKeyHeaders
	}
	cfg.EffectIDField = cmpOr(cfg.EffectIDField, defaultEffectIDField)
	cfg.TargetField = cmpOr(cfg.TargetField, defaultTargetField)
	if cfg.MaxPeekBytes <= 0 {
		cfg.MaxPeekBytes = DefaultMaxPeekBytes
	}
	if cfg.HoldLimit <= 0 {
		cfg.HoldLimit = 2 * time.Minute
	}
	if cfg.UpstreamTimeout <= 0 {
		cfg.UpstreamTimeout = DefaultUpstreamTimeout
	}
	if cfg.UpstreamGiveUp <= 0 {
		cfg.UpstreamGiveUp = DefaultUpstreamGiveUp
	}
	cfg.UpstreamGiveUp = max(cfg.UpstreamGiveUp, cfg.UpstreamTimeout)
	if cfg.MaxLate == 0 {
		cfg.MaxLate = DefaultMaxLate
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = mrand.Float64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Redact == nil {
		cfg.Redact = ingest.NewRedactor(ingest.DefaultRedactKeys)
	}
	if cfg.Transport == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// Asking for gzip on the client's behalf would have the Transport
		// decompress the answer: the client would get other bytes than the
		// upstream sent. Accept-Encoding is passed through as the client
		// set it instead.
		tr.DisableCompression = true
		cfg.Transport = tr
	}
	t := &Tap{cfg: cfg, upstream: u, unsafe: map[string]bool{}, ignore: feed.NewIgnoredFields(cfg.FingerprintIgnore...),
		closing: make(chan struct{}), faults: map[string]int64{}}
	t.lateCtx, t.cancelLate = context.WithCancel(context.Background())
	for _, m := range cfg.UnsafeMethods {
		t.unsafe[strings.ToUpper(strings.TrimSpace(m))] = true
	}
	t.proxy = &httputil.ReverseProxy{
		Rewrite:        t.rewrite,
		Transport:      roundTripFunc(t.roundTrip),
		ModifyResponse: t.modifyResponse,
		ErrorHandler:   t.handleError,
		ErrorLog:       slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	return t, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Close answers 504 to every response lose-response is holding, so that
// the server the tap runs in can shut down; it does not stop the server.
func (t *Tap) Close() {
	t.closeOnce.Do(func() { close(t.closing) })
}

// Drain waits, until ctx ends, for the requests still waiting for the
// upstream's late answer, then cancels those left (each is logged, its
// effect unknown) and waits for them to stop. Call it after the server's
// Shutdown and before the recorder stops.
func (t *Tap) Drain(ctx context.Context) error {
	t.mu.Lock()
	t.draining = true
	t.mu.Unlock()
	done := make(chan struct{})
	go func() {
		t.lateWG.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	t.cancelLate()
	<-done
	return fmt.Errorf("tap: stopped before the upstream answered every request still waiting: %w", ctx.Err())
}

// exchange is what the tap knows of one request while it is proxied.
type exchange struct {
	unsafe                       bool
	method, uri, path, rawQuery  string
	key, target                  string
	execution, step              string
	traceID, spanID              string
	contentType, contentEncoding string
	nonce                        [16]byte
	lose                         *sandbox.Fault
	replayed                     bool // the answer said Idempotent-Replayed: true
	faultNames                   []string
	request                      *prefix
	forwarded, answered          time.Time
	status                       int
	// late says what the client got before the upstream answered, in the
	// copy of the exchange that waits on; waiting, in the client's, that
	// one does.
	late               string
	waiting, abandoned bool
	// mcp is set in MCP mode.
	mcp *mcpExchange
}

type exchangeKey struct{}

func exchangeOf(ctx context.Context) *exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*exchange)
	return ex
}

// ServeHTTP proxies one request, injecting its faults and recording its
// effect.
func (t *Tap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == StatusPath {
		t.serveStatus(w, r)
		return
	}
	if t.cfg.MCP != nil {
		t.serveMCP(w, r)
		return
	}
	// What the tap records of the request's header is read in rewrite,
	// from what is forwarded.
	ex := &exchange{unsafe: t.unsafe[r.Method], method: r.Method, uri: r.URL.RequestURI(), path: r.URL.Path, rawQuery: r.URL.RawQuery}
	faults, err := t.faultsFor(r, ex.unsafe)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "%s: %v", sandbox.HeaderFault, err)
		return
	}
	if _, err := rand.Read(ex.nonce[:]); err != nil {
		panic(err)
	}
	for _, f := range faults {
		ex.faultNames = append(ex.faultNames, f.String())
		t.countFault(f)
		t.cfg.Logger.Info("tap fault", "provider", t.cfg.Provider, "fault", f.String(), "method", r.Method, "path", r.URL.Path)
	}
	if _, ok := findFault(faults, sandbox.FailBefore); ok {
		t.note(ex, LogEntry{Error: "not forwarded (fail-before)"})
		writeError(w, http.StatusServiceUnavailable, "api_error", "the upstream is unavailable (fault fail-before injected by oncetrace tap); the request was not forwarded")
		return
	}
	if f, ok := findFault(faults, sandbox.LoseResponse); ok {
		ex.lose = &f
	}
	for _, f := range faults {
		if f.Kind != sandbox.Latency {
			continue
		}
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			t.note(ex, LogEntry{Error: "the client left during the latency fault; not forwarded"})
			return
		case <-t.closing:
			writeError(w, http.StatusServiceUnavailable, "api_error", "oncetrace tap is shutting down; the request was not forwarded")
			return
		}
	}
	t.mu.Lock()
	t.proxied++
	t.mu.Unlock()
	ex.forwarded = t.cfg.Now()
	t.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, ex)))
}

// faultsFor returns the faults that strike this request: those of its
// header (which the upstream never sees), else for an unsafe request what
// Strike returns, or the standing ones, each by its probability.
func (t *Tap) faultsFor(r *http.Request, unsafe bool) ([]sandbox.Fault, error) {
	var candidates []sandbox.Fault
	h, hasHeader := r.Header[http.CanonicalHeaderKey(sandbox.HeaderFault)]
	if unsafe && t.cfg.Strike != nil {
		struck := t.cfg.Strike(r) // called even when the header wins, so every unsafe request is counted
		if !hasHeader {
			return struck, nil
		}
	}
	if hasHeader {
		var err error
		if candidates, err = sandbox.ParseFaults(strings.Join(h, ",")); err != nil {
			return nil, err
		}
	} else if unsafe {
		candidates = t.cfg.Faults
	}
	var strike []sandbox.Fault
	for _, f := range candidates {
		if f.Probability >= 1 || t.cfg.Rand() < f.Probability {
			strike = append(strike, f)
		}
	}
	return strike, nil
}

func findFault(faults []sandbox.Fault, kind sandbox.FaultKind) (sandbox.Fault, bool) {
	for _, f := range faults {
		if f.Kind == kind {
			return f, true
		}
	}
	return sandbox.Fault{}, false
}

// rewrite points the request at the upstream and changes nothing else the
// upstream could see, except what is addressed to the tap: the fault
// header. ReverseProxy drops hop-by-hop headers, as any proxy must, those
// a Connection header names included, before rewrite is called: what the
// tap records of the header is read here, from pr.Out, so that it records
// only what the upstream was sent.
func (t *Tap) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(t.upstream)
	if t.cfg.MCP != nil && (pr.In.URL.Path == "/" || pr.In.URL.Path == "" || pr.In.URL.Path == t.upstream.Path) {
		// The upstream is the MCP endpoint itself: the tap serves it at
		// its root and at the endpoint's own path.
		pr.Out.URL.Path, pr.Out.URL.RawPath = t.upstream.Path, t.upstream.RawPath
	}
	if t.upstream.RawQuery == "" {
		pr.Out.URL.RawQuery = pr.In.URL.RawQuery // as sent, even the parts Go would not parse
	}
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		if v, ok := pr.In.Header[h]; ok {
			pr.Out.Header[h] = v
		}
	}
	pr.Out.Header.Del(sandbox.HeaderFault)
	ex := exchangeOf(pr.In.Context())
	if ex == nil {
		return
	}
	ex.readForwarded(pr.Out.Header, t.cfg.KeyHeaders)
	if ex.unsafe && ex.mcp == nil && pr.Out.Body != nil {
		ex.request = newPrefix(t.cfg.MaxPeekBytes)
		pr.Out.Body = &peekingBody{rc: pr.Out.Body, p: ex.request}
	}
}

// readForwarded takes from the header forwarded to the upstream what the
// tap records: the idempotency key (the first of keyHeaders present), the
// run's ids, the trace context and how the body is encoded.
func (ex *exchange) readForwarded(h http.Header, keyHeaders []string) {
	for _, name := range keyHeaders {
		if v := h.Get(name); v != "" {
			ex.key = v
			break
		}
	}
	ex.execution, ex.step = h.Get(sandbox.HeaderExecution), h.Get(sandbox.HeaderStep)
	ex.traceID, ex.spanID = feed.TraceContext(h)
	ex.contentType, ex.contentEncoding = h.Get("Content-Type"), h.Get("Content-Encoding")
}

// errLost ends a response that lose-response swallows.
var errLost = errors.New("tap: response lost on purpose")

// modifyResponse sees the upstream's answer before the client does. A 2xx
// to an unsafe request is an effect: it is recorded when its body has been
// passed on (or, for lose-response, read and dropped).
func (t *Tap) modifyResponse(resp *http.Response) error {
	ex := exchangeOf(resp.Request.Context())
	if ex == nil {
		return nil
	}
	ex.answered, ex.status = t.cfg.Now(), resp.StatusCode
	if ex.mcp != nil {
		return t.mcpResponse(resp, ex)
	}
	ex.replayed = strings.EqualFold(resp.Header.Get("Idempotent-Replayed"), "true")
	success := resp.StatusCode >= 200 && resp.StatusCode <= 299
	// As in the sandbox, only a fresh success is lost: a replay from the
	// upstream's key store comes through, so a keyed retry can succeed.
	// A late answer has no client left to lose it for.
	lose := ex.lose != nil && success && !ex.replayed && ex.late == ""
	if !ex.unsafe || !success {
		if ex.unsafe || len(ex.faultNames) > 0 {
			t.note(ex, LogEntry{})
		}
		if lose {
			return errLost
		}
		return nil
	}
	body := newPrefix(t.cfg.MaxPeekBytes)
	header := resp.Header.Clone()
	if lose || ex.late != "" {
		drain(resp.Body, body, t.cfg.MaxPeekBytes+1)
		t.record(resp.Request.Context(), ex, header, body)
		if lose {
			return errLost
		}
		return nil
	}
	resp.Body = &recordingBody{rc: resp.Body, p: body, done: func() { t.record(resp.Request.Context(), ex, header, body) }}
	return nil
}

// record builds the effect of a successful unsafe request and records it.
func (t *Tap) record(ctx context.Context, ex *exchange, header http.Header, body *prefix) {
	e := trace.Effect{Provider: t.cfg.Provider, At: ex.answered.UTC(), TraceID: ex.traceID, SpanID: ex.spanID}
	var dropped []string
	keep := func(name, v string, dst *string) {
		if v == "" {
			return
		}
		if usableID(v, "") {
			*dst = v
		} else {
			dropped = append(dropped, name)
		}
	}
	keep("idempotency key", ex.key, &e.IdempotencyKey)
	keep(sandbox.HeaderExecution, ex.execution, &e.ExecutionID)
	if e.ExecutionID != "" {
		keep(sandbox.HeaderStep, ex.step, &e.StepID) // a step means nothing without its execution
	}
	reqData, reqWhole := ex.request.snapshot()
	if reqWhole {
		if v, ok := field(ex.contentType, reqData, t.cfg.TargetField); ok && len(v) <= ingest.DefaultLimits.TextBytes {
			e.Target = v
		}
	}
	e.Fingerprint, e.Summary = t.fingerprint(ex, reqData, reqWhole)
	fromBody := false
	for _, h := range t.cfg.EffectIDHeaders {
		if id := header.Get(h); usableID(id, t.cfg.Provider) {
			e.ID = id
			break
		}
	}
	if data, whole := body.snapshot(); whole && e.ID == "" {
		if plain, ok := decoded(header.Get("Content-Encoding"), data, t.cfg.MaxPeekBytes); ok {
			if id, ok := field("application/json", plain, t.cfg.EffectIDField); ok && usableID(id, t.cfg.Provider) {
				e.ID, fromBody = id, true
			}
		}
	}
	if ex.replayed && !fromBody {
		// The API says it did nothing new. The stored answer's own id would
		// name the original effect again; a header's or a hash would name
		// another one, a duplicate that never happened.
		t.note(ex, LogEntry{Error: "a replayed answer without an id in its body: no new effect"})
		t.cfg.Logger.Info("tap: replayed answer, no new effect", "provider", t.cfg.Provider, "method", ex.method, "path", ex.path, "key", ex.key)
		return
	}
	if e.ID == "" {
		e.ID = t.requestID(ex, reqData)
	}
	if len(dropped) > 0 {
		t.cfg.Logger.Warn("tap: left out of the effect, not a usable id (1 to 256 bytes of printable text)", "fields", dropped, "effect_id", e.ID)
	}
	t.mu.Lock()
	t.effects++
	t.mu.Unlock()
	outcome, err := t.cfg.Recorder.Record(ctx, e)
	entry := LogEntry{EffectID: e.ID, Target: e.Target, Fingerprint: e.Fingerprint, Summary: e.Summary, Record: string(outcome)}
	if err != nil {
		entry.Error = err.Error()
	}
	t.note(ex, entry)
	attrs := []any{"provider", e.Provider, "effect_id", e.ID, "method", ex.method, "path", ex.path, "status", ex.status,
		"latency", ex.answered.Sub(ex.forwarded).Round(time.Microsecond), "key", e.IdempotencyKey, "record", outcome}
	switch outcome {
	case feed.Recorded:
		t.cfg.Logger.Info("tap effect", attrs...)
	case feed.Queued:
		t.cfg.Logger.Warn("tap effect queued: recording failed, it will be retried", append(attrs, "err", err)...)
	default:
		t.cfg.Logger.Error("tap effect not recorded", append(attrs, "err", err)...)
	}
}

// fingerprint is what the request asked for (feed.HTTPRequest): method,
// path, query and canonical body, without the fields that differ between
// two sends of one intent. A body longer than MaxPeekBytes was not read:
// it gets no fingerprint, since a prefix could make two different
// requests look the same. A body in a Content-Encoding the tap does not
// undo is compared as its bytes.
func (t *Tap) fingerprint(ex *exchange, body []byte, whole bool) (fingerprint, summary string) {
	if !whole {
		return "", feed.ClipSummary(fmt.Sprintf("%s %s (a body over %d bytes, not read)", ex.method, ex.path, t.cfg.MaxPeekBytes))
	}
	if plain, ok := decoded(ex.contentEncoding, body, t.cfg.MaxPeekBytes); ok {
		body = plain
	}
	r := feed.HTTPRequest{Method: ex.method, Path: ex.path, RawQuery: ex.rawQuery, ContentType: ex.contentType, Body: body}
	return r.Fingerprint(t.ignore, t.cfg.Redact)
}

// requestID names an effect whose answer gave no usable id: a hash of the
// method, the path and query, the key and the body's prefix. A PUT or
// DELETE, idempotent by HTTP's definition, gets the same id when repeated.
// A POST or PATCH that the API answered afresh acted, whatever key it
// carried (an API may ignore keys), so its hash also covers a nonce of the
// request: two are two effects. (A replay is not recorded at all; see
// record.)
func (t *Tap) requestID(ex *exchange, body []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%d\n", ex.method, ex.uri, ex.key, len(body))
	h.Write(body)
	if ex.method != http.MethodPut && ex.method != http.MethodDelete {
		h.Write(ex.nonce[:])
	}
	return "req_" + hex.EncodeToString(h.Sum(nil))[:32]
}

// usableID reports whether s can be an id in an effect event: printable
// and short enough that the event's own id, which contains it, fits.
func usableID(s, provider string) bool {
	if s == "" || !utf8.ValidString(s) || len(feed.EventID(Feed, trace.Effect{Provider: provider, ID: s})) > ingest.DefaultLimits.IDBytes {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

// handleError answers when the upstream did not, or when lose-response
// swallowed the answer.
func (t *Tap) handleError(w http.ResponseWriter, r *http.Request, err error) {
	ex := exchangeOf(r.Context())
	if errors.Is(err, errLost) {
		t.hold(w, r, ex)
		return
	}
	if errors.Is(err, errUpstreamTimeout) {
		t.cfg.Logger.Warn("tap: the upstream did not answer in time; answered 504", "provider", t.cfg.Provider, "method", r.Method, "path", r.URL.Path,
			"upstream_timeout", t.cfg.UpstreamTimeout, "still_waiting", ex != nil && ex.waiting)
		if ex != nil {
			t.note(ex, LogEntry{Error: fmt.Sprintf("the upstream did not answer within %s; answered 504%s", t.cfg.UpstreamTimeout, ex.stillWaiting())})
			t.mcpUnanswered(ex, fmt.Sprintf("the server did not answer within %s; the client was answered 504", t.cfg.UpstreamTimeout))
		}
		writeError(w, http.StatusGatewayTimeout, "api_error", "oncetrace tap: the upstream did not answer within %s; it may still act on the request", t.cfg.UpstreamTimeout)
		return
	}
	if r.Context().Err() != nil {
		if ex != nil && (ex.unsafe || len(ex.faultNames) > 0) {
			t.note(ex, LogEntry{Error: "the client left before the upstream answered" + ex.stillWaiting()})
		}
		t.mcpUnanswered(ex, "the client went away before the server answered")
		return // the client left; nobody to answer
	}
	t.cfg.Logger.Warn("tap: the upstream did not answer", "provider", t.cfg.Provider, "method", r.Method, "path", r.URL.Path, "err", err)
	if ex != nil {
		t.note(ex, LogEntry{Error: "the upstream did not answer: " + err.Error()})
		t.mcpUnanswered(ex, "the server did not answer: "+err.Error())
	}
	writeError(w, http.StatusBadGateway, "api_error", "oncetrace tap: the upstream did not answer: %v", err)
}

// stillWaiting completes a log line about a request the client no longer
// waits for.
func (ex *exchange) stillWaiting() string {
	switch {
	case ex.waiting:
		return "; still waiting for its answer, to record its effect"
	case ex.abandoned:
		return "; the upstream request was cancelled (too many waiting): an effect it had is not recorded"
	}
	return ""
}

// hold is lose-response after the upstream answered: the client gets
// nothing until it gives up, or 504 (at once with ;mode=504, else after
// HoldLimit or when the tap closes).
func (t *Tap) hold(w http.ResponseWriter, r *http.Request, ex *exchange) {
	if ex == nil || ex.lose == nil || !ex.lose.Answer504 {
		timer := time.NewTimer(t.cfg.HoldLimit)
		defer timer.Stop()
		select {
		case <-r.Context().Done():
			return
		case <-timer.C:
		case <-t.closing:
		}
	}
	writeError(w, http.StatusGatewayTimeout, "api_error", "gateway timeout (fault lose-response injected by oncetrace tap; the upstream answered)")
}

func writeError(w http.ResponseWriter, status int, typ, format string, args ...any) {
	var e sandbox.APIError
	e.Error.Type, e.Error.Message = typ, fmt.Sprintf(format, args...)
	b, _ := json.Marshal(e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func (t *Tap) countFault(f sandbox.Fault) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.faults[string(f.Kind)]++
}

// note appends a line to the tap's log, filled in from the exchange.
func (t *Tap) note(ex *exchange, e LogEntry) {
	e.At = t.cfg.Now().UTC()
	e.Method, e.Path, e.Status = ex.method, ex.path, ex.status // not the query: it may hold secrets
	if !ex.answered.IsZero() {
		e.LatencyMS = float64(ex.answered.Sub(ex.forwarded).Microseconds()) / 1000
	}
	if e.IdempotencyKey == "" {
		e.IdempotencyKey = ex.key
	}
	e.ExecutionID, e.StepID, e.TraceID, e.SpanID = ex.execution, ex.step, ex.traceID, ex.spanID
	e.Fault = strings.Join(ex.faultNames, "; ")
	e.Late = ex.late
	if ex.mcp != nil {
		e.Calls = ex.mcp.label()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.log = append(t.log, e)
	if len(t.log) > logLength {
		t.log = slices.Delete(t.log, 0, len(t.log)-logLength)
	}
}

// Status is what GET StatusPath answers.
type Status struct {
	Provider string `json:"provider"`
	Upstream string `json:"upstream"`
	// Proxied counts the requests forwarded to the upstream; Effects the
	// 2xx answers to unsafe requests, each an effect handed to the
	// recorder. Faults counts the faults that struck, by kind.
	Proxied int64            `json:"proxied"`
	Effects int64            `json:"effects"`
	Faults  map[string]int64 `json:"faults"`
	// Timeouts counts the 504s answered because the upstream did not
	// answer within UpstreamTimeout; Late the unsafe requests still
	// waiting for the upstream's answer now, their client answered or
	// gone; Abandoned those cancelled instead, MaxLate being reached.
	Timeouts  int64 `json:"upstream_timeouts"`
	Late      int64 `json:"late"`
	Abandoned int64 `json:"abandoned"`
	// The recorder's counters: recorded, failed, queued, queue_bytes,
	// dropped, rejected.
	feed.Counts
	// MCP is the MCP observer's counters, in MCP mode.
	MCP *mcp.Counts `json:"mcp,omitempty"`
	// Log is the last 200 unsafe or faulted requests, newest last.
	Log []LogEntry `json:"log"`
}

// Status returns the tap's counters and log.
func (t *Tap) Status() Status {
	t.mu.Lock()
	s := Status{Provider: t.cfg.Provider, Upstream: t.upstream.String(), Proxied: t.proxied, Effects: t.effects,
		Timeouts: t.timeouts, Late: t.late, Abandoned: t.abandoned, Faults: map[string]int64{}, Log: append([]LogEntry{}, t.log...)}
	for k, v := range t.faults {
		s.Faults[k] = v
	}
	t.mu.Unlock()
	switch {
	case t.cfg.Recorder != nil:
		s.Counts = t.cfg.Recorder.Counts()
	case t.cfg.RecorderCounts != nil:
		s.Counts = t.cfg.RecorderCounts()
	}
	if t.cfg.MCP != nil {
		c := t.cfg.MCP.Counts()
		s.MCP = &c
	}
	return s
}

func (t *Tap) serveStatus(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "%s: use GET", StatusPath)
		return
	}
	b, _ := json.Marshal(t.Status())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
}
