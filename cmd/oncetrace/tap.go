package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/mcp"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/ingest/feed/tap"
)

// tapOptions configure one recording proxy, standalone or inside serve.
type tapOptions struct {
	listen, upstream, provider string
	server, token              string // the standalone tap's oncetrace server
	insecure                   bool
	faults                     []sandbox.Fault
	effectIDField, targetField string
	effectIDHeaders            []string
	keyHeaders                 []string
	unsafeMethods              []string
	queueDir                   string
	queueMaxBytes              int64
	maxPeekBytes               int64
	recordTimeout              time.Duration
	// fingerprintIgnore holds every provider's fields; the tap takes its
	// own provider's.
	fingerprintIgnore fingerprintIgnore
	redact            *ingest.Redactor // what effect summaries hide; the default terms when nil
	limits            tapLimits
	// mcp makes the tap a proxy for a Streamable HTTP MCP server: it
	// records tools/calls (attempts and effects) instead of requests.
	mcp                   bool
	mcpEffectID           string // a JSON pointer into a tools/call result
	mcpKeyMeta, mcpKeyArg string
	mcpMaxMessageBytes    int64
}

// tapLimits bound what a tap's clients and upstream can hold
// (docs/security.md § The recording proxy's limits).
type tapLimits struct {
	readHeaderTimeout time.Duration // 0: none
	idleTimeout       time.Duration // 0: none
	upstreamTimeout   time.Duration
	upstreamGiveUp    time.Duration
	maxLate           int // 0: none waits
	maxConnsPerIP     int // 0: no cap
	maxConns          int // 0: no cap
	maxConnsFlag      string
}

// defaultMaxTapConns caps a tap's connections from every client together:
// a flood from many addresses, which the per-address cap does not stop,
// holds at most this many descriptors and goroutines, while an agent
// rarely opens more than a few dozen.
const defaultMaxTapConns = 1024

// defaultTapLimits are the limits of a tap given no flags.
var defaultTapLimits = tapLimits{readHeaderTimeout: defaultReadHeaderTimeout, idleTimeout: defaultIdleTimeout,
	upstreamTimeout: tap.DefaultUpstreamTimeout, upstreamGiveUp: tap.DefaultUpstreamGiveUp, maxLate: tap.DefaultMaxLate,
	maxConnsPerIP: defaultMaxConnsPerIP, maxConns: defaultMaxTapConns}

// registerUpstream adds the flags for the upstream's limits and the total
// connection cap, each named prefix+name: serve's are --tap-upstream-timeout
// and so on, its listener flags (--read-header-timeout, --idle-timeout,
// --max-conns-per-ip) serving its taps too.
func (l *tapLimits) registerUpstream(fs *flag.FlagSet, prefix string) {
	fs.DurationVar(&l.upstreamTimeout, prefix+"upstream-timeout", l.upstreamTimeout,
		"longest wait for the upstream's answer from forwarding a request; past it the client is answered 504 Gateway Timeout")
	fs.DurationVar(&l.upstreamGiveUp, prefix+"upstream-give-up", l.upstreamGiveUp,
		"how long, from forwarding, an unsafe request answered 504 (or whose client left) still waits for the upstream, to record the effect it may have had")
	fs.IntVar(&l.maxLate, prefix+"upstream-max-late", l.maxLate,
		"most unsafe requests waiting so at once; beyond it the upstream request is cancelled at the 504 (0: none waits)")
	l.maxConnsFlag = prefix + "max-conns"
	fs.IntVar(&l.maxConns, l.maxConnsFlag, l.maxConns, "most connections open at once to a tap, from every client together; more are closed at once (0: no cap)")
}

// register adds every flag of the standalone tap.
func (l *tapLimits) register(fs *flag.FlagSet) {
	fs.DurationVar(&l.readHeaderTimeout, "read-header-timeout", l.readHeaderTimeout, "longest wait for a request's header (0: none)")
	fs.DurationVar(&l.idleTimeout, "idle-timeout", l.idleTimeout, "how long an idle keep-alive connection stays open (0: none)")
	fs.IntVar(&l.maxConnsPerIP, "max-conns-per-ip", l.maxConnsPerIP,
		"most connections open at once from one client address (an IPv6 /64); more are closed at once (0: no cap)")
	l.registerUpstream(fs, "")
}

// check names the flag of a limit out of range; prefix is as registered.
func (l tapLimits) check(prefix string) error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"read-header-timeout", l.readHeaderTimeout}, {"idle-timeout", l.idleTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("--%s: %v is negative; give a duration such as 30s, or 0 for none", d.flag, d.v)
		}
	}
	switch {
	case l.upstreamTimeout <= 0:
		return fmt.Errorf("--%supstream-timeout: %v; give a positive duration such as 60s", prefix, l.upstreamTimeout)
	case l.upstreamGiveUp < l.upstreamTimeout:
		return fmt.Errorf("--%supstream-give-up: %v is shorter than --%supstream-timeout (%v); give at least that", prefix, l.upstreamGiveUp, prefix, l.upstreamTimeout)
	case l.maxLate < 0:
		return fmt.Errorf("--%supstream-max-late: must be ≥ 0 (0: none waits)", prefix)
	case l.maxConnsPerIP < 0:
		return errors.New("--max-conns-per-ip: must be ≥ 0 (0: no cap)")
	case l.maxConns < 0:
		return fmt.Errorf("--%s: must be ≥ 0 (0: no cap)", l.maxConnsFlag)
	}
	return nil
}

// fingerprintIgnoreEnv holds --fingerprint-ignore entries, separated by ';'.
const fingerprintIgnoreEnv = "ONCETRACE_FINGERPRINT_IGNORE"

// fingerprintIgnore is --fingerprint-ignore PROVIDER=field1,field2
// (repeatable) added to ONCETRACE_FINGERPRINT_IGNORE: the request fields a
// provider's taps leave out of effect fingerprints besides
// feed.DefaultFingerprintIgnore.
type fingerprintIgnore map[string][]string

// register reads the environment variable, then adds each flag.
func (f *fingerprintIgnore) register(fs *flag.FlagSet) error {
	*f = fingerprintIgnore{}
	if err := f.add(os.Getenv(fingerprintIgnoreEnv)); err != nil {
		return fmt.Errorf("%s: %w", fingerprintIgnoreEnv, err)
	}
	fs.Func("fingerprint-ignore", "PROVIDER=field1,field2: request fields that provider's clients fill afresh on each send, left out of effect fingerprints "+
		"besides the default list (idempotency_key, timestamp, nonce, request_id, ...; see docs/outbox.md) (repeatable; env "+fingerprintIgnoreEnv+", entries separated by ';')", f.add)
	return nil
}

func (f fingerprintIgnore) add(v string) error {
	m, err := feed.ParseFingerprintIgnore(v)
	for provider, fields := range m {
		f[provider] = append(f[provider], fields...)
	}
	return err
}

// warnUnused logs the providers an entry names that no tap here records:
// such an entry changes nothing, probably a misspelt name.
func (f fingerprintIgnore) warnUnused(logger *slog.Logger, providers ...string) {
	for provider := range f {
		if !slices.Contains(providers, provider) {
			logger.Warn("--fingerprint-ignore names a provider no tap here records; it changes nothing", "provider", provider, "taps", providers)
		}
	}
}

func tapFlags(args []string) (tapOptions, error) {
	o := tapOptions{limits: defaultTapLimits}
	fs := flag.NewFlagSet("tap", flag.ContinueOnError)
	fs.StringVar(&o.listen, "listen", envOr("ONCETRACE_TAP_LISTEN", "127.0.0.1:9001"), "where the agent sends its requests instead of the API (env ONCETRACE_TAP_LISTEN)")
	fs.StringVar(&o.upstream, "upstream", envOr("ONCETRACE_TAP_UPSTREAM", ""), "the API's base URL, e.g. https://api.stripe.com (env ONCETRACE_TAP_UPSTREAM)")
	fs.StringVar(&o.provider, "provider", envOr("ONCETRACE_TAP_PROVIDER", ""), "the provider the effects name, e.g. stripe: what your agent's attempts name as their provider (env ONCETRACE_TAP_PROVIDER)")
	fs.StringVar(&o.server, "server", envOr("ONCETRACE_SERVER", "http://127.0.0.1:8080"), "the oncetrace server that receives the effects (env ONCETRACE_SERVER)")
	fs.StringVar(&o.token, "token", envOr("ONCETRACE_INGEST_TOKEN", ""), "the server's ingest token, if it has one (env ONCETRACE_INGEST_TOKEN)")
	fs.BoolVar(&o.insecure, "insecure", false, "allow a non-loopback --listen: anyone who reaches it can call the API through the tap and write effects")
	fs.Func("fault", "a standing fault on unsafe requests (with --mcp: on tools/call of tools not annotated read-only): lose-response=0.1, fail-before=0.05, latency=500ms, "+
		"or the sandbox's syntax lose-response;p=0.1 (repeatable; see docs/outbox.md)", func(v string) error {
		fs, err := tap.ParseFaults(v)
		o.faults = append(o.faults, fs...)
		return err
	})
	fs.StringVar(&o.effectIDField, "effect-id-field", "id", "the response's JSON field holding the effect's id (a dotted path); without it the id is a hash of the request")
	fs.Func("effect-id-header", "a response header holding the effect's id, tried before --effect-id-field, e.g. X-Message-Id (repeatable)", func(v string) error {
		if v = strings.TrimSpace(v); v != "" {
			o.effectIDHeaders = append(o.effectIDHeaders, v)
		}
		return nil
	})
	fs.StringVar(&o.targetField, "target-field", "to", "the request's JSON or form field naming the effect's target (a dotted path)")
	fs.Func("key-header", "a request header carrying the idempotency key besides Idempotency-Key, e.g. X-Idempotency-Key (repeatable or comma-separated; tried before Idempotency-Key)", func(v string) error {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				o.keyHeaders = append(o.keyHeaders, h)
			}
		}
		return nil
	})
	unsafe := fs.String("unsafe-methods", strings.Join(tap.DefaultUnsafeMethods, ","), "methods whose 2xx answers are effects (comma-separated)")
	fs.StringVar(&o.queueDir, "queue-dir", envOr("ONCETRACE_TAP_QUEUE_DIR", ""), "where effects wait while the server cannot take them (default: the user cache directory's oncetrace/tap-queue/PROVIDER) (env ONCETRACE_TAP_QUEUE_DIR)")
	fs.Int64Var(&o.queueMaxBytes, "queue-max-bytes", feed.DefaultQueueBytes, "the queue's cap; when full, the oldest effects are dropped and counted")
	fs.Int64Var(&o.maxPeekBytes, "max-peek-bytes", tap.DefaultMaxPeekBytes, "how much of each request and response body the tap reads for the fields; longer bodies pass through whole, unread")
	fs.DurationVar(&o.recordTimeout, "record-timeout", 5*time.Second, "how long a response waits for its effect to be recorded before the effect is queued instead")
	fs.BoolVar(&o.mcp, "mcp", false, "the upstream is a Streamable HTTP MCP server (its endpoint, e.g. http://127.0.0.1:3000/mcp): record each tools/call as an attempt, "+
		"and the effects of tools not annotated read-only (see docs/mcp.md)")
	fs.StringVar(&o.mcpEffectID, "mcp-effect-id", mcp.DefaultEffectIDPointer, "with --mcp: a JSON pointer into a tools/call result holding the effect's id; a result without it gets an id hashed from the call")
	fs.StringVar(&o.mcpKeyMeta, "mcp-key", mcp.KeyMeta, "with --mcp: the params._meta entry carrying a call's idempotency key")
	fs.StringVar(&o.mcpKeyArg, "mcp-key-arg", "", "with --mcp: a tool argument carrying the idempotency key, read when _meta has none, e.g. idempotency_key")
	fs.Int64Var(&o.mcpMaxMessageBytes, "mcp-max-message-bytes", tap.DefaultMaxMessageBytes,
		"with --mcp: the longest message (a request, an SSE event, a JSON answer) the tap holds to read; a longer request passes unread, a longer answer is read for its id as it streams")
	o.limits.register(fs)
	if err := o.fingerprintIgnore.register(fs); err != nil {
		return o, fmt.Errorf("tap: %w", err)
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := refuseArguments("tap", fs); err != nil {
		return o, err
	}
	if err := checkModeFlags(fs, o.mcp); err != nil {
		return o, err
	}
	o.keyHeaders = append(o.keyHeaders, tap.DefaultKeyHeaders...)
	for _, m := range strings.Split(*unsafe, ",") {
		if m = strings.ToUpper(strings.TrimSpace(m)); m != "" {
			o.unsafeMethods = append(o.unsafeMethods, m)
		}
	}
	switch {
	case o.upstream == "":
		return o, errors.New("tap: --upstream is required, e.g. --upstream https://api.stripe.com")
	case o.provider == "":
		return o, errors.New("tap: --provider is required: the name the effects carry, e.g. --provider stripe")
	case len(o.unsafeMethods) == 0:
		return o, errors.New("tap: --unsafe-methods: name at least one method")
	case o.maxPeekBytes <= 0:
		return o, errors.New("tap: --max-peek-bytes must be positive")
	case o.mcpMaxMessageBytes <= 0:
		return o, errors.New("tap: --mcp-max-message-bytes must be positive")
	}
	if err := o.limits.check(""); err != nil {
		return o, fmt.Errorf("tap: %w", err)
	}
	if o.mcp {
		// The observer checks its pointer: a mistake is said now, not at the
		// first call.
		if _, err := mcp.New(mcp.Config{Provider: o.provider, EffectIDPointer: o.mcpEffectID}); err != nil {
			return o, fmt.Errorf("tap: --mcp-effect-id: %w", err)
		}
	}
	if o.queueDir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return o, fmt.Errorf("tap: no user cache directory for the queue (%v); set --queue-dir", err)
		}
		o.queueDir = filepath.Join(cache, "oncetrace", "tap-queue", tapQueueName(o.provider, o.mcp))
	}
	return o, checkTapExposure(o.listen, o.insecure)
}

// Flags of one mode of the tap only: the plain tap reads effects from
// requests and answers, the MCP tap from tools/calls.
var (
	plainTapFlags = []string{"effect-id-field", "effect-id-header", "target-field", "key-header", "unsafe-methods", "max-peek-bytes"}
	mcpTapFlags   = []string{"mcp-effect-id", "mcp-key", "mcp-key-arg", "mcp-max-message-bytes"}
)

// checkModeFlags refuses a flag the chosen mode does not read: it would
// change nothing, probably not what was meant.
func checkModeFlags(fs *flag.FlagSet, mcpMode bool) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch {
		case err != nil:
		case mcpMode && slices.Contains(plainTapFlags, f.Name):
			err = fmt.Errorf("tap: --%s is not used with --mcp, which reads tool calls (see --mcp-effect-id, --mcp-key, --mcp-key-arg)", f.Name)
		case !mcpMode && slices.Contains(mcpTapFlags, f.Name):
			err = fmt.Errorf("tap: --%s needs --mcp", f.Name)
		}
	})
	return err
}

// tapQueueName is the directory of a tap's queue: an MCP tap queues
// batches of events, not effects, and has one of its own ('@' is in no
// provider's directory name).
func tapQueueName(provider string, mcpMode bool) string {
	if mcpMode {
		return safeDirName(provider) + "@mcp"
	}
	return safeDirName(provider)
}

// checkTapExposure refuses a non-loopback listener without --insecure, as
// serve does: the tap has no authentication of its own, so anyone who
// reaches it could call the API through it and write effects. An ingest
// token does not change that.
func checkTapExposure(listen string, insecure bool) error {
	if err := checkExposure(listen, "", insecure); err != nil {
		if _, _, splitErr := net.SplitHostPort(listen); splitErr != nil {
			return fmt.Errorf("tap: listen address %q: %w", listen, splitErr)
		}
		return fmt.Errorf("tap: refusing to listen on %q: the tap has no authentication, so anyone who reaches it could call the API "+
			"through it and write effects; listen on 127.0.0.1 or pass --insecure", listen)
	}
	return nil
}

var unsafePathChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// safeDirName turns a provider name into one directory name.
func safeDirName(s string) string {
	s = unsafePathChars.ReplaceAllString(s, "_")
	if s == "" || s == "." || s == ".." {
		return "_"
	}
	return s
}

// runningTap is a tap serving on its listener, the retry loop of its
// recorder, and the queue they share; stop ends all three.
type runningTap struct {
	tap      *tap.Tap
	observer *mcp.Observer // in MCP mode
	counts   func() feed.Counts
	retry    func(context.Context) // the recorder's retry loop
	queue    io.Closer
	server   *http.Server
	url      string
	served   chan error
	cancel   context.CancelFunc
	retried  chan struct{}
}

// tapRecorder is what a tap records through: effects, or an MCP tap's
// batches of events (feed.WriterRecorder and feed.HTTPRecorder are both).
type tapRecorder interface {
	feed.Recorder
	feed.EventRecorder
}

// launchTap starts a tap on o.listen, recording through next and keeping
// what fails in o.queueDir.
func launchTap(o tapOptions, next tapRecorder, limits ingest.Limits, logger *slog.Logger) (*runningTap, error) {
	r := &runningTap{}
	cfg := tap.Config{Upstream: o.upstream, Provider: o.provider, Logger: logger,
		UpstreamTimeout: o.limits.upstreamTimeout, UpstreamGiveUp: o.limits.upstreamGiveUp, MaxLate: cmp.Or(o.limits.maxLate, -1)}
	var queued int
	if o.mcp {
		q, err := feed.OpenEventQueue(o.queueDir, o.queueMaxBytes)
		if err != nil {
			return nil, fmt.Errorf("tap %s: %w", o.provider, err)
		}
		rec := feed.NewQueuedEventRecorder(next, q, feed.QueuedConfig{Feed: mcp.Feed, Limits: limits, Timeout: o.recordTimeout, Logger: logger})
		obs, err := mcp.New(mcp.Config{Provider: o.provider, EffectIDPointer: o.mcpEffectID, KeyMeta: o.mcpKeyMeta, KeyArg: o.mcpKeyArg, Faults: o.faults,
			Recorder: feed.QueuedEvents{Recorder: rec}, FingerprintIgnore: o.fingerprintIgnore[o.provider], Redact: o.redact, Logger: logger})
		if err != nil {
			q.Close()
			return nil, fmt.Errorf("tap %s: %w", o.provider, err)
		}
		cfg.MCP, cfg.MaxMessageBytes, cfg.RecorderCounts = obs, o.mcpMaxMessageBytes, rec.Counts
		r.observer, r.counts, r.retry, r.queue, queued = obs, rec.Counts, rec.Run, q, q.Len()
	} else {
		q, err := feed.OpenQueue(o.queueDir, o.queueMaxBytes)
		if err != nil {
			return nil, fmt.Errorf("tap %s: %w", o.provider, err)
		}
		rec := feed.NewQueuedRecorder(next, q, feed.QueuedConfig{Feed: tap.Feed, Limits: limits, Timeout: o.recordTimeout, Logger: logger})
		cfg.UnsafeMethods, cfg.EffectIDField, cfg.EffectIDHeaders, cfg.TargetField, cfg.KeyHeaders = o.unsafeMethods, o.effectIDField, o.effectIDHeaders, o.targetField, o.keyHeaders
		cfg.MaxPeekBytes, cfg.Faults, cfg.Recorder, cfg.FingerprintIgnore, cfg.Redact = o.maxPeekBytes, o.faults, rec, o.fingerprintIgnore[o.provider], o.redact
		r.counts, r.retry, r.queue, queued = rec.Counts, rec.Run, q, q.Len()
	}
	tp, err := tap.New(cfg)
	if err != nil {
		r.queue.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		r.queue.Close()
		return nil, fmt.Errorf("tap %s: %w", o.provider, err)
	}
	ln = newConnLimiter(o.limits.maxConnsPerIP, o.limits.maxConns, o.limits.maxConnsFlag, logger).wrap(ln)
	ctx, cancel := context.WithCancel(context.Background())
	r.tap, r.url, r.served, r.cancel, r.retried = tp, "http://"+ln.Addr().String(), make(chan error, 1), cancel, make(chan struct{})
	// No read or write timeout: a request's body and its answer may
	// stream as long as the client and the upstream stream them;
	// --upstream-timeout bounds the wait for the answer instead.
	r.server = &http.Server{Handler: tp, ReadHeaderTimeout: o.limits.readHeaderTimeout, IdleTimeout: o.limits.idleTimeout,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	go func() {
		defer close(r.retried)
		r.retry(ctx)
	}()
	go func() { r.served <- r.server.Serve(ln) }()
	logger.Info("oncetrace tap", "url", r.url, "upstream", o.upstream, "provider", o.provider, "mcp", o.mcp, "status", r.url+tap.StatusPath,
		"queue", o.queueDir, "queued", queued)
	return r, nil
}

// stop ends held responses, lets requests in flight finish (within ctx),
// stops retrying and closes the queue; what is still queued stays on disk
// for the next start.
func (r *runningTap) stop(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.tap.Close()
	err := r.server.Shutdown(ctx)
	// The requests still waiting for a late answer record through the
	// recorder: they end before it, and so do the MCP observer's
	// hand-overs to it.
	err = errors.Join(err, r.tap.Drain(ctx))
	if r.observer != nil {
		err = errors.Join(err, r.observer.Wait(ctx))
	}
	r.cancel()
	<-r.retried
	return errors.Join(err, r.queue.Close())
}

// runTap is the "tap" command: a recording proxy in front of one API that
// posts its effects to an oncetrace server.
func runTap(args []string) error {
	o, err := tapFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	o.fingerprintIgnore.warnUnused(logger, o.provider)
	ctx, stop := signalContext()
	defer stop()
	if err := serverAnswers(ctx, o.server); err != nil {
		logger.Warn("tap: the oncetrace server does not answer; effects will wait in the queue until it does", "server", o.server, "err", err)
	}
	next := feed.HTTPRecorder{Server: o.server, Token: o.token, Feed: tap.Feed, Client: &http.Client{}, Limits: ingest.DefaultLimits}
	r, err := launchTap(o, next, ingest.DefaultLimits, logger)
	if err != nil {
		return err
	}
	var serveErr error
	select {
	case serveErr = <-r.served:
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = r.stop(shutdownCtx)
	c := r.tap.Status()
	attrs := []any{"proxied", c.Proxied}
	if c.MCP != nil {
		attrs = append(attrs, "calls", c.MCP.Calls, "attempts", c.MCP.Attempts, "effects", c.MCP.Effects)
	} else {
		attrs = append(attrs, "effects", c.Effects)
	}
	attrs = append(attrs, "recorded", c.Recorded, "failed", c.Failed, "queued", c.Queued, "dropped", c.Dropped, "rejected", c.Rejected)
	logger.Info("tap stopped", attrs...)
	if serveErr != nil {
		return fmt.Errorf("tap: %w", serveErr)
	}
	return err
}

// serverAnswers checks that an oncetrace server answers /healthz.
func serverAnswers(ctx context.Context, server string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(server, "/")+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /healthz: %s", resp.Status)
	}
	return nil
}

// serveTapSpec is one --tap NAME=UPSTREAM@LISTEN of serve; mcp, set by
// --tap-mcp NAME, makes it an MCP tap.
type serveTapSpec struct {
	name, upstream, listen string
	mcp                    bool
}

var tapNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func parseServeTap(v string) (serveTapSpec, error) {
	name, rest, ok := strings.Cut(v, "=")
	at := strings.LastIndex(rest, "@")
	if !ok || at < 0 {
		return serveTapSpec{}, fmt.Errorf("--tap %q: want NAME=UPSTREAM@LISTEN, e.g. stripe=https://api.stripe.com@127.0.0.1:9001", v)
	}
	s := serveTapSpec{name: name, upstream: rest[:at], listen: rest[at+1:]}
	if !tapNameRE.MatchString(s.name) {
		return s, fmt.Errorf("--tap %q: the name (the effects' provider) must be 1 to 64 letters, digits, '.', '_' or '-'", v)
	}
	if u, err := url.Parse(s.upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return s, fmt.Errorf("--tap %q: the upstream must be an http or https URL", v)
	}
	if _, _, err := net.SplitHostPort(s.listen); err != nil {
		return s, fmt.Errorf("--tap %q: the listen address: %w", v, err)
	}
	return s, nil
}

// markMCPTaps makes the taps --tap-mcp names MCP taps; a name no --tap
// gives is an error.
func markMCPTaps(taps []serveTapSpec, names []string) error {
	for _, name := range names {
		i := slices.IndexFunc(taps, func(t serveTapSpec) bool { return t.name == name })
		if i < 0 {
			return fmt.Errorf("serve: --tap-mcp %q: no --tap NAME=UPSTREAM@LISTEN names it", name)
		}
		taps[i].mcp = true
	}
	return nil
}

// serveTaps are the taps a serve process runs.
type serveTaps []*runningTap

// startServeTaps starts serve's --tap proxies, recording through the
// server's own writer (next); each queues what fails beside the database,
// in DB-tap-queue/NAME. Their effect summaries hide what
// ingestLimits.Redact names.
func startServeTaps(specs []serveTapSpec, db string, ignore fingerprintIgnore, limits tapLimits, next tapRecorder, ingestLimits ingest.Limits, logger *slog.Logger) (serveTaps, error) {
	var taps serveTaps
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.name
	}
	ignore.warnUnused(logger, names...)
	for _, s := range specs {
		o := tapOptions{listen: s.listen, upstream: s.upstream, provider: s.name, unsafeMethods: tap.DefaultUnsafeMethods,
			keyHeaders: tap.DefaultKeyHeaders, queueDir: filepath.Join(db+"-tap-queue", tapQueueName(s.name, s.mcp)), queueMaxBytes: feed.DefaultQueueBytes,
			maxPeekBytes: tap.DefaultMaxPeekBytes, recordTimeout: 5 * time.Second, fingerprintIgnore: ignore, redact: ingestLimits.Redact, limits: limits,
			mcp: s.mcp, mcpEffectID: mcp.DefaultEffectIDPointer, mcpKeyMeta: mcp.KeyMeta, mcpMaxMessageBytes: tap.DefaultMaxMessageBytes}
		r, err := launchTap(o, next, ingestLimits, logger)
		if err != nil {
			taps.stop(context.Background())
			return nil, fmt.Errorf("serve: --tap %s: %w", s.name, err)
		}
		taps = append(taps, r)
	}
	return taps, nil
}

// stop stops every tap; see runningTap.stop.
func (ts serveTaps) stop(ctx context.Context) error {
	var errs []error
	for _, r := range ts {
		errs = append(errs, r.stop(ctx))
	}
	return errors.Join(errs...)
}
