package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
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
	fs.Func("fault", "a standing fault on unsafe requests: lose-response=0.1, fail-before=0.05, latency=500ms, or the sandbox's syntax lose-response;p=0.1 (repeatable; see docs/outbox.md)", func(v string) error {
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
	}
	if err := o.limits.check(""); err != nil {
		return o, fmt.Errorf("tap: %w", err)
	}
	if o.queueDir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return o, fmt.Errorf("tap: no user cache directory for the queue (%v); set --queue-dir", err)
		}
		o.queueDir = filepath.Join(cache, "oncetrace", "tap-queue", safeDirName(o.provider))
	}
	return o, checkTapExposure(o.listen, o.insecure)
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
	recorder *feed.QueuedRecorder
	queue    *feed.Queue
	server   *http.Server
	url      string
	served   chan error
	cancel   context.CancelFunc
	retried  chan struct{}
}

// launchTap starts a tap on o.listen, recording through next and keeping
// what fails in o.queueDir.
func launchTap(o tapOptions, next feed.Recorder, limits ingest.Limits, logger *slog.Logger) (*runningTap, error) {
	q, err := feed.OpenQueue(o.queueDir, o.queueMaxBytes)
	if err != nil {
		return nil, fmt.Errorf("tap %s: %w", o.provider, err)
	}
	rec := feed.NewQueuedRecorder(next, q, feed.QueuedConfig{Feed: tap.Feed, Limits: limits, Timeout: o.recordTimeout, Logger: logger})
	tp, err := tap.New(tap.Config{Upstream: o.upstream, Provider: o.provider, UnsafeMethods: o.unsafeMethods, EffectIDField: o.effectIDField,
		EffectIDHeaders: o.effectIDHeaders, TargetField: o.targetField, KeyHeaders: o.keyHeaders, MaxPeekBytes: o.maxPeekBytes, Faults: o.faults, Recorder: rec, Logger: logger,
		FingerprintIgnore: o.fingerprintIgnore[o.provider], Redact: o.redact,
		UpstreamTimeout: o.limits.upstreamTimeout, UpstreamGiveUp: o.limits.upstreamGiveUp, MaxLate: cmp.Or(o.limits.maxLate, -1)})
	if err != nil {
		q.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		q.Close()
		return nil, fmt.Errorf("tap %s: %w", o.provider, err)
	}
	ln = newConnLimiter(o.limits.maxConnsPerIP, o.limits.maxConns, o.limits.maxConnsFlag, logger).wrap(ln)
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningTap{tap: tp, recorder: rec, queue: q, url: "http://" + ln.Addr().String(), served: make(chan error, 1),
		cancel: cancel, retried: make(chan struct{}),
		// No read or write timeout: a request's body and its answer may
		// stream as long as the client and the upstream stream them;
		// --upstream-timeout bounds the wait for the answer instead.
		server: &http.Server{Handler: tp, ReadHeaderTimeout: o.limits.readHeaderTimeout, IdleTimeout: o.limits.idleTimeout,
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}}
	go func() {
		defer close(r.retried)
		rec.Run(ctx)
	}()
	go func() { r.served <- r.server.Serve(ln) }()
	logger.Info("oncetrace tap", "url", r.url, "upstream", o.upstream, "provider", o.provider, "status", r.url+tap.StatusPath,
		"queue", o.queueDir, "queued", q.Len())
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
	// recorder: they end before it.
	err = errors.Join(err, r.tap.Drain(ctx))
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
	next := feed.HTTPRecorder{Server: o.server, Token: o.token, Feed: tap.Feed, Client: &http.Client{}}
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
	logger.Info("tap stopped", "proxied", c.Proxied, "effects", c.Effects, "recorded", c.Recorded, "failed", c.Failed,
		"queued", c.Queued, "dropped", c.Dropped, "rejected", c.Rejected)
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

// serveTapSpec is one --tap NAME=UPSTREAM@LISTEN of serve.
type serveTapSpec struct {
	name, upstream, listen string
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

// serveTaps are the taps a serve process runs.
type serveTaps []*runningTap

// startServeTaps starts serve's --tap proxies, recording through the
// server's own writer (next); each queues what fails beside the database,
// in DB-tap-queue/NAME. Their effect summaries hide what
// ingestLimits.Redact names.
func startServeTaps(specs []serveTapSpec, db string, ignore fingerprintIgnore, limits tapLimits, next feed.Recorder, ingestLimits ingest.Limits, logger *slog.Logger) (serveTaps, error) {
	var taps serveTaps
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.name
	}
	ignore.warnUnused(logger, names...)
	for _, s := range specs {
		o := tapOptions{listen: s.listen, upstream: s.upstream, provider: s.name, unsafeMethods: tap.DefaultUnsafeMethods,
			keyHeaders: tap.DefaultKeyHeaders, queueDir: filepath.Join(db+"-tap-queue", s.name), queueMaxBytes: feed.DefaultQueueBytes,
			maxPeekBytes: tap.DefaultMaxPeekBytes, recordTimeout: 5 * time.Second, fingerprintIgnore: ignore, redact: ingestLimits.Redact, limits: limits}
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
