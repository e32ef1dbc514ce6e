package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/ingest/feed/smtpsink"
	"github.com/oncetrace/oncetrace/ingest/feed/tap"
	"github.com/oncetrace/oncetrace/ingest/feed/temporal/follow"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/postgres"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

type serveConfig struct {
	addr, db, sync, token string
	insecure              bool
	groupCommit           bool
	analysis              trace.Config
	limits                ingest.Limits
	sandbox               sandbox.Config
	demo                  bool
	demoGap               time.Duration
	liveBuffer            int
	otlpAddr              string
	allowedOrigins        []string
	toolClasses           ingest.ToolClasses
	spanMapFlags          spanMapFlags    // spanmap.go: --span-map
	spanMap               *ingest.SpanMap // nil: the built-in one
	webhookFlags          webhookFlags
	webhooks              web.WebhookConfig
	smtpAddr              string
	smtp                  smtpsink.Config
	taps                  []serveTapSpec
	fingerprintIgnore     fingerprintIgnore // tap.go: --fingerprint-ignore, for the taps
	tapLimits             tapLimits         // tap.go: --tap-upstream-timeout, ...; the listener flags for the rest
	listen                listenFlags       // listen.go: hosts, timeouts, per-IP cap
	access                accessFlags       // serve_access.go: read token, login session, alert webhook
	allowedHosts          []string
	retention             retentionFlags // prune.go: --retain, --retain-effects, --redact
	decode                decodeFlags    // serve_decode.go: --max-decode-bytes, JSON and OTLP shape limits
	temporalFlags         temporalFlags  // temporal.go: --temporal, its TLS and API key
	temporal              []follow.Target
}

func serveFlags(args []string) (serveConfig, error) {
	c := serveConfig{analysis: trace.DefaultConfig, limits: ingest.DefaultLimits, tapLimits: defaultTapLimits}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", envOr("ONCETRACE_ADDR", "127.0.0.1:8080"), "listen address (env ONCETRACE_ADDR)")
	fs.StringVar(&c.db, "db", envOr("ONCETRACE_DB", "oncetrace.db"), "database: a SQLite file, created if missing, or a postgres:// URL of an existing PostgreSQL database (env ONCETRACE_DB)")
	fs.StringVar(&c.sync, "sync", envOr("ONCETRACE_SYNC", "normal"), "SQLite durability: normal survives a process crash, full also a power loss; PostgreSQL uses the server's settings (env ONCETRACE_SYNC)")
	fs.StringVar(&c.token, "ingest-token", envOr("ONCETRACE_INGEST_TOKEN", ""), "token POST endpoints require as Authorization: Bearer (env ONCETRACE_INGEST_TOKEN)")
	fs.BoolVar(&c.insecure, "insecure", false, "allow a non-loopback address without an ingest token")
	fs.BoolVar(&c.groupCommit, "group-commit", true, "commit concurrent ingest requests in one transaction")
	fs.DurationVar(&c.analysis.GapThreshold, "gap-threshold", c.analysis.GapThreshold, "shortest idle interval shown as a gap")
	fs.DurationVar(&c.analysis.KeyRetention, "key-retention", c.analysis.KeyRetention, "how long receiving APIs keep idempotency keys (retry_beyond_retention)")
	fs.DurationVar(&c.analysis.RepeatWindow, "repeat-window", c.analysis.RepeatWindow, "how close two identical effects with no run id must be for repeated_effect")
	fs.Int64Var(&c.limits.BodyBytes, "max-body-bytes", c.limits.BodyBytes, "largest request body, after decompression")
	fs.IntVar(&c.limits.Events, "max-events", c.limits.Events, "most events in one request")
	registerEventLimitFlags(fs, &c.limits) // serve_decode.go; import takes them too
	fs.DurationVar(&c.sandbox.Retention, "sandbox-retention", 24*time.Hour, "how long the sandbox mail API keeps idempotency keys")
	fs.Func("sandbox-fault", "standing sandbox fault, e.g. lose-response;p=0.3 or latency=500ms (repeatable; see docs/sandbox.md)", func(v string) error {
		fs, err := sandbox.ParseFaults(v)
		c.sandbox.Faults = append(c.sandbox.Faults, fs...)
		return err
	})
	fs.StringVar(&c.otlpAddr, "otlp-addr", envOr("ONCETRACE_OTLP_ADDR", ""), "also accept OTLP/HTTP here (POST /v1/traces; /v1/logs and /v1/metrics are accepted and dropped), e.g. 127.0.0.1:4318 (env ONCETRACE_OTLP_ADDR)")
	fs.StringVar(&c.smtpAddr, "smtp", envOr("ONCETRACE_SMTP_ADDR", ""), "also accept mail here, e.g. 127.0.0.1:2525, and record each message as an effect of provider smtp (see docs/outbox.md) (env ONCETRACE_SMTP_ADDR)")
	fs.Int64Var(&c.smtp.MaxMessageBytes, "smtp-max-bytes", smtpsink.DefaultMaxMessageBytes, "with --smtp: largest message (552 beyond it); it is kept whole")
	fs.IntVar(&c.smtp.MaxRecipients, "smtp-max-recipients", smtpsink.DefaultMaxRecipients, "with --smtp: most recipients of one message (452 beyond it)")
	fs.IntVar(&c.smtp.MaxConnections, "smtp-max-connections", smtpsink.DefaultMaxConnections, "with --smtp: most open connections (421 beyond it)")
	fs.DurationVar(&c.smtp.Timeout, "smtp-timeout", smtpsink.DefaultTimeout, "with --smtp: longest wait for each command, for a whole message's data, and for a reply to be written")
	fs.DurationVar(&c.smtp.IdleTimeout, "smtp-idle-timeout", smtpsink.DefaultIdleTimeout, "with --smtp: longest a connection may go without delivering a message, whatever else it sends (NOOP, RSET, ...); 421 beyond it")
	fs.DurationVar(&c.smtp.SessionTimeout, "smtp-session-timeout", smtpsink.DefaultSessionTimeout, "with --smtp: longest a connection may stay open, messages or not; 421 beyond it")
	fs.DurationVar(&c.smtp.AuthTimeout, "smtp-auth-timeout", smtpsink.DefaultAuthTimeout, "with --smtp and --ingest-token: longest from connecting to AUTH; 421 beyond it")
	fs.IntVar(&c.liveBuffer, "live-buffer", 1024, "messages a live client may fall behind before it is dropped (it then resumes from its last sequence)")
	fs.Func("allowed-origin", "an origin besides the server's own that may open the live WebSocket (repeatable)", func(v string) error {
		c.allowedOrigins = append(c.allowedOrigins, v)
		return nil
	})
	toolClasses := fs.String("tool-class", envOr("ONCETRACE_TOOL_CLASS", ""),
		"classify OpenTelemetry tool calls without oncetrace.effect by tool-name glob, e.g. 'send_*=write,get_*=read,charge_*=unsafe'; unmatched tools are class unknown (env ONCETRACE_TOOL_CLASS)")
	c.webhookFlags.register(fs)
	c.spanMapFlags.register(fs)
	c.listen.register(fs)
	c.access.register(fs)
	c.retention.register(fs)
	c.decode.register(fs, &c.limits)
	c.temporalFlags.register(fs)
	fs.Func("tap", "a recording proxy in front of an API: NAME=UPSTREAM@LISTEN, e.g. stripe=https://api.stripe.com@127.0.0.1:9001; NAME is the effects' provider (repeatable; see docs/outbox.md)", func(v string) error {
		t, err := parseServeTap(v)
		c.taps = append(c.taps, t)
		return err
	})
	var mcpTaps []string
	fs.Func("tap-mcp", "the --tap named NAME is in front of a Streamable HTTP MCP server: it records tools/calls as attempts and effects (repeatable; see docs/mcp.md)", func(v string) error {
		mcpTaps = append(mcpTaps, v)
		return nil
	})
	c.tapLimits.registerUpstream(fs, "tap-")
	if err := c.fingerprintIgnore.register(fs); err != nil {
		return c, fmt.Errorf("serve: %w", err)
	}
	fs.BoolVar(&c.demo, "demo", false, "run the demo's scenarios against this server in the background at start-up (once per database)")
	fs.DurationVar(&c.demoGap, "demo-gap", 0, "with --demo: how long the crash scenarios wait with no process running (default: just over --gap-threshold)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if err := refuseArguments("serve", fs); err != nil {
		return c, err
	}
	var err error
	if c.toolClasses, err = ingest.ParseToolClasses(*toolClasses); err != nil {
		return c, fmt.Errorf("serve: --tool-class: %w", err)
	}
	if c.webhooks, err = c.webhookFlags.config(); err != nil {
		return c, err
	}
	if c.spanMap, err = c.spanMapFlags.spanMap("serve"); err != nil {
		return c, err
	}
	if c.temporal, err = c.temporalFlags.config(); err != nil {
		return c, err
	}
	if err := c.access.check(); err != nil {
		return c, err
	}
	if err := c.retention.check(); err != nil {
		return c, err
	}
	if err := c.decode.check(c.limits.BodyBytes); err != nil {
		return c, err
	}
	if c.limits.Redact, err = c.retention.redactor(); err != nil {
		return c, fmt.Errorf("serve: %w", err)
	}
	if c.allowedHosts, err = c.listen.allowedHosts(c.addr, c.otlpAddr); err != nil {
		return c, err
	}
	// The taps' listeners take serve's own header and idle timeouts and
	// per-address cap (each tap counting its own connections), not its
	// read and write timeouts: a proxied body or answer may stream longer.
	c.tapLimits.readHeaderTimeout, c.tapLimits.maxConnsPerIP = c.listen.readHeaderTimeout, c.listen.maxConnsPerIP
	c.tapLimits.idleTimeout = cmp.Or(c.listen.idleTimeout, c.listen.readTimeout)
	if err := c.tapLimits.check("tap-"); err != nil {
		return c, fmt.Errorf("serve: %w", err)
	}
	if err := markMCPTaps(c.taps, mcpTaps); err != nil {
		return c, err
	}
	if c.otlpAddr != "" {
		if err := checkExposure(c.otlpAddr, c.token, c.insecure); err != nil {
			return c, err
		}
	}
	if c.smtpAddr != "" {
		if err := checkExposure(c.smtpAddr, c.token, c.insecure); err != nil {
			return c, err
		}
	}
	for _, t := range c.taps {
		if err := checkTapExposure(t.listen, c.insecure); err != nil {
			return c, err
		}
	}
	return c, checkExposure(c.addr, c.token, c.insecure)
}

// checkExposure refuses to serve ingest to a network without a token: anyone
// who can reach the port could write traces.
func checkExposure(addr, token string, insecure bool) error {
	if token != "" || insecure {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("serve: --addr %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("serve: refusing to listen on %q without an ingest token: anyone who reaches it could write traces; "+
		"set --ingest-token (or ONCETRACE_INGEST_TOKEN), listen on 127.0.0.1, or pass --insecure", addr)
}

func runServe(args []string) (err error) {
	c, err := serveFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	warnInsecure(c, os.Stderr, logger)
	c.decode.applyMemoryLimit(logger)
	ctx, stop := signalContext()
	defer stop()

	// Every listener but the taps' binds before the database is opened,
	// so that a port already taken fails the start before anything is
	// created. Closing one the server already closed is harmless.
	lns, err := listenServe(c)
	if err != nil {
		return err
	}
	defer lns.close()
	// What fails later (a tap's port, a rebuild) removes the database
	// this start created, since nothing was served from it: the listener
	// answers 503 until the very end of the start. One that holds events
	// (another instance's, created at the same moment) stays.
	created := absentDatabaseFiles(c.db)
	started := false
	db, err := openDB(ctx, c.db, sqlite.Sync(c.sync))
	if err != nil {
		created.remove(logger)
		return err
	}
	defer func() {
		discard := err != nil && !started && len(created) > 0 && isEmpty(db)
		db.Close()
		if discard {
			created.remove(logger)
		}
	}()
	// The listener serves at once and answers 503 with Retry-After until
	// the server is ready: while an older database's derived rows are
	// rebuilt, nothing is served from, or written over, rows derived by
	// other rules, and clients and load balancers are told to come back.
	limiter := newConnLimiter(c.listen.maxConnsPerIP, 0, "", logger) // one count over --addr and --otlp-addr
	ln := limiter.wrap(lns.addr)
	gate := newStartingGate()
	httpServer := c.listen.httpServer(gate)
	serveErr := make(chan error, 3)
	go func() { serveErr <- httpServer.Serve(ln) }()
	if err := rebuildDerived(ctx, db, c.analysis, logger, gate.progress); err != nil {
		httpServer.Close()
		return err
	}
	hub := web.NewHub(c.liveBuffer)
	wcfg := writer.DefaultConfig
	wcfg.Analysis = c.analysis
	wcfg.GroupCommit = c.groupCommit
	wcfg.OnCommit = hub.Publish // after each commit; never blocks
	if db.Shared() {
		// Other instances may write the database: the live tail follows
		// the store's notices instead, this writer's commits among them.
		if err := followSharedDatabase(ctx, db, c.db, hub, logger); err != nil {
			httpServer.Close()
			return err
		}
		wcfg.OnCommit = func(writer.Commit) {}
	}
	metrics := web.NewMetrics()
	alerts := startAlerts(c.access, logger) // nil without --alert-webhook
	defer stopAlerts(alerts)                // deferred, so after ingestWriter.Close on every return below
	wcfg.OnCommit, wcfg.OnBatch = withAlerts(wcfg.OnCommit, alerts, metrics), metrics.ObserveBatch
	ingestWriter := writer.New(db, wcfg)
	// Retention shares the writer in short transactions; it stops before
	// the database closes.
	pruner := startPruner(ctx, db, c.retention, c.analysis, logger, metrics.ObservePrune)
	defer pruner.stop()
	// The recording proxies record through the same writer, so they stop
	// before it. They start before the server is ready: a tap that cannot
	// listen fails the start while nothing has been accepted yet.
	taps, err := startServeTaps(c.taps, c.db, c.fingerprintIgnore, c.tapLimits, feed.WriterRecorder{Writer: ingestWriter, Limits: c.limits, Feed: tap.Feed}, c.limits, logger)
	if err != nil {
		httpServer.Close()
		ingestWriter.Close()
		return err
	}
	// The Temporal followers write through the same writer, in the
	// background: a cluster that is slow or away delays nothing.
	followers := startTemporal(ctx, c.temporal, c.temporalFlags, ingestWriter, c.limits, c.toolClasses, logger)
	defer followers.stop() // a no-op after the stops below; first on a failed start
	srv := web.New(web.Config{DB: db, Writer: ingestWriter, Limits: c.limits, ToolClasses: c.toolClasses, SpanMap: c.spanMap, Analysis: c.analysis, IngestToken: c.token, Webhooks: c.webhooks,
		Logger: logger, Sandbox: c.sandbox, Hub: hub, AllowedOrigins: c.allowedOrigins, AllowedHosts: c.allowedHosts,
		Auth: c.auth(), Metrics: metrics, MaxDecodeBytes: c.decode.maxBytes, FollowStatus: followers.status()})

	started = true
	gate.ready(srv)
	logger.Info("oncetrace serving", "url", "http://"+ln.Addr().String(), "db", redactedTarget(c.db), "engine", db.Engine(), "sync", db.Durability(), "version", version)
	logger.Info("oncetrace redaction", "redact", strings.Join(c.limits.Redact.Terms(), ",")) // prune.go
	logger.Info("oncetrace hosts", "allowed_hosts", strings.Join(c.allowedHosts, ","), "max_conns_per_ip", c.listen.maxConnsPerIP)
	if c.spanMap != nil {
		logger.Info("oncetrace span map", "files", strings.Join(c.spanMapFlags.files, ","), "dialects", strings.Join(c.spanMap.Dialects(), ","))
	}
	// The conventional OTLP/HTTP port, for exporters left at their default.
	otlpServer := c.listen.httpServer(otlpOnly(srv))
	if lns.otlp != nil {
		logger.Info("oncetrace OTLP/HTTP", "url", "http://"+lns.otlp.Addr().String()+"/v1/traces")
		go func() { serveErr <- otlpServer.Serve(limiter.wrap(lns.otlp)) }()
	}
	// The SMTP sink records each message through the same writer, before
	// it answers 250.
	var sink *smtpsink.Sink
	if lns.smtp != nil {
		cfg := c.smtp
		cfg.Recorder = feed.WriterRecorder{Writer: ingestWriter, Limits: c.limits, Feed: smtpsink.Feed}
		cfg.Messages, cfg.Limits, cfg.Token, cfg.Logger = storedMessages{db}, c.limits, c.token, logger
		sink = smtpsink.New(cfg)
		logger.Info("oncetrace SMTP sink", "addr", lns.smtp.Addr().String(), "auth", c.token != "")
		go func() { serveErr <- sink.Serve(lns.smtp) }()
	}
	demoDone := make(chan struct{})
	if c.demo {
		go func() {
			defer close(demoDone)
			serveDemo(ctx, db, c, "http://"+ln.Addr().String(), logger)
		}()
	} else {
		close(demoDone)
	}

	select {
	case err := <-serveErr:
		taps.stop(context.Background())
		followers.stop()
		ingestWriter.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down: finishing requests, then draining the writer")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	<-demoDone  // the demo stops with ctx; its agent processes are killed
	srv.Close() // live connections are told and closed; Shutdown does not wait for hijacked ones
	if sink != nil {
		sink.Close() // returns once the messages being recorded are committed
	}
	err = errors.Join(httpServer.Shutdown(shutdownCtx), otlpServer.Shutdown(shutdownCtx), taps.stop(shutdownCtx))
	followers.stop()     // what a follower was writing is committed, or read again at the next start
	ingestWriter.Close() // commits whatever is queued before the database closes
	return err
}

// serveListeners are serve's own listeners: --addr, and --otlp-addr and
// --smtp when given (nil otherwise).
type serveListeners struct {
	addr, otlp, smtp net.Listener
}

func listenServe(c serveConfig) (serveListeners, error) {
	var lns serveListeners
	var err error
	if lns.addr, err = net.Listen("tcp", c.addr); err != nil {
		return lns, fmt.Errorf("serve: %w", err)
	}
	if c.otlpAddr != "" {
		if lns.otlp, err = net.Listen("tcp", c.otlpAddr); err != nil {
			lns.close()
			return lns, fmt.Errorf("serve: --otlp-addr: %w", err)
		}
	}
	if c.smtpAddr != "" {
		if lns.smtp, err = net.Listen("tcp", c.smtpAddr); err != nil {
			lns.close()
			return lns, fmt.Errorf("serve: --smtp: %w", err)
		}
	}
	return lns, nil
}

func (l serveListeners) close() {
	for _, ln := range []net.Listener{l.addr, l.otlp, l.smtp} {
		if ln != nil {
			ln.Close()
		}
	}
}

// databaseFiles are the files of a SQLite database that did not exist
// before a start; none for PostgreSQL, whose database is never created.
type databaseFiles []string

func absentDatabaseFiles(target string) databaseFiles {
	if postgres.IsURL(target) {
		return nil
	}
	var absent databaseFiles
	for _, suffix := range []string{"", "-wal", "-shm", "-journal", "-tap-queue"} {
		if _, err := os.Lstat(target + suffix); errors.Is(err, fs.ErrNotExist) {
			absent = append(absent, target+suffix)
		}
	}
	return absent
}

// isEmpty says whether the database holds no event.
func isEmpty(db *store.DB) bool {
	seq, err := db.LastSeq(context.Background())
	return err == nil && seq == 0
}

// remove deletes those of the files that exist now: a failed start leaves
// no new, empty database behind to be mistaken for a real one.
func (files databaseFiles) remove(logger *slog.Logger) {
	for _, path := range files {
		if _, err := os.Lstat(path); err != nil {
			continue
		}
		if err := os.RemoveAll(path); err != nil {
			logger.Warn("serve: the start failed, and the database it created could not be removed", "path", path, "err", err)
		}
	}
}

// otlpOnly serves the OTLP/HTTP paths (/v1/traces, and /v1/logs and
// /v1/metrics, accepted and dropped) and nothing else: the OTLP port is
// for exporters, not for the UI.
func otlpOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !web.IsOTLPPath(r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serveDemo loads the demo into a database that does not have it yet, in
// the background, so the first page is served at once.
func serveDemo(ctx context.Context, db *store.DB, c serveConfig, server string, logger *slog.Logger) {
	// The demo is there when its six scenarios are: executions named
	// demo-… carrying a scenario label. A user's own demo-… executions, or
	// a demo cut short by a shutdown, do not count.
	existing, _, err := db.ListExecutions(ctx, store.ExecutionFilter{Q: "demo-", Limit: store.MaxPageSize})
	if err != nil {
		logger.Error("demo: cannot look for earlier demo runs", "err", err)
		return
	}
	scenariosDone := map[string]bool{}
	for _, x := range existing {
		if sc := x.Labels["scenario"]; sc != "" && x.Status.Terminal() {
			scenariosDone[sc] = true
		}
	}
	if len(scenariosDone) >= len(scenarios) {
		logger.Info("demo: this database already holds the demo; not running it again")
		return
	}
	gap := c.demoGap
	if gap <= 0 {
		// Just over the gap threshold, so the crash scenarios show a crash gap.
		gap = max(3*time.Second, c.analysis.GapThreshold+time.Second)
	}
	out := &logWriter{logger: logger}
	if _, err := runDemo(ctx, demoOptions{server: server, token: c.token, readToken: c.effectiveReadToken(), gap: gap, timeout: time.Second, out: out}); err != nil && ctx.Err() == nil {
		logger.Error("demo failed", "err", err)
	}
}

// logWriter turns the demo's lines into log records.
type logWriter struct{ logger *slog.Logger }

func (w *logWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.logger.Info(line)
	}
	return len(p), nil
}

// storedMessages keeps the SMTP sink's messages in the database, for the
// UI: the sink, a feed, does not import the store.
type storedMessages struct{ db *store.DB }

func (s storedMessages) PutMessage(ctx context.Context, m smtpsink.Received) error {
	return s.db.PutMessage(ctx, store.Message{Provider: m.Provider, EffectID: m.EffectID, From: m.From,
		Recipients: m.Recipients, ReceivedAt: m.ReceivedAt, Raw: m.Raw})
}
