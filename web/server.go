package web

import (
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/static"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// Config is what the server needs; cmd/oncetrace fills it from flags.
type Config struct {
	DB     *store.DB
	Writer *writer.Writer
	Limits ingest.Limits
	// ToolClasses classify OpenTelemetry tool calls that do not say their class.
	ToolClasses ingest.ToolClasses
	// SpanMap recognises OpenTelemetry spans' roles and reads their fields
	// (serve --span-map); nil is the built-in one.
	SpanMap     *ingest.SpanMap
	Analysis    trace.Config
	IngestToken string // when set, POST endpoints need "Authorization: Bearer <token>"
	Logger      *slog.Logger
	// Sandbox configures the built-in mail provider; its Recorder is set
	// by New.
	Sandbox sandbox.Config
	// Hub fans committed events out to live clients; the writer's OnCommit
	// must publish to it. New makes one when it is nil (no live events).
	Hub *Hub
	// AllowedOrigins may open the live WebSocket besides the server's own.
	AllowedOrigins []string
	// AllowedHosts are the Host names the server answers to, without port;
	// others get 421 (hardening.go). Empty or "*" allows any.
	AllowedHosts []string
	// Now is the clock of live pages and of webhook signature ages;
	// time.Now when nil.
	Now func() time.Time
	// Webhooks configures POST /api/v1/webhooks/{provider}: mappings,
	// signing secrets, the signature age tolerance.
	Webhooks WebhookConfig
	// Auth says who may read (auth.go); reads are open unless a read
	// token applies.
	Auth AuthConfig
	// Metrics is served at /metrics (metrics.go); New makes one when nil.
	Metrics *Metrics
	// MaxDecodeBytes bounds the memory requests hold while their bodies
	// are read, decoded and written (budget.go); ingest.DefaultDecodeBytes
	// when 0. DecodeWait is how long a request waits for its share before
	// a 503; ingest.DefaultDecodeWait when 0.
	MaxDecodeBytes int64
	DecodeWait     time.Duration
	// FollowStatus, when set, reports the followed clusters (serve
	// --temporal) in /healthz and /metrics (feed_status.go).
	FollowStatus func() []FollowStatus
	// NoBuildAhead leaves the big executions' page models to be built by
	// the requests that need them (execution_warm.go): the database is
	// read only for requests, as a test counting a request's queries
	// needs.
	NoBuildAhead bool
}

// Server serves the UI and the APIs.
type Server struct {
	cfg     Config
	echo    *echo.Echo
	sandbox *sandbox.Sandbox
	hub     *Hub

	// live counts the running live handlers (WebSockets and streams),
	// which outlive their requests as far as http.Server knows.
	liveMu sync.Mutex
	closed bool
	live   sync.WaitGroup

	// dropped counts the OTLP log records and metric points accepted and
	// not stored.
	dropped otlpDropped

	// storageLog logs a database that cannot be written once (health.go).
	storageLog storageLog

	auth    *authenticator // nil when reads are open (auth.go)
	metrics *serverMetrics // metrics.go

	// budget bounds the memory of bodies being decoded (budget.go).
	budget *ingest.DecodeBudget

	// executions keeps the models of executions read last
	// (execution_cache.go).
	executions *executionCache
	warmer     *modelWarmer // builds big executions' models ahead (execution_warm.go)
}

// New builds the server and its routes.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	cfg.Sandbox.Recorder = feed.WriterRecorder{Writer: cfg.Writer, Limits: cfg.Limits, Feed: "sandbox"}
	if cfg.Sandbox.Logger == nil {
		cfg.Sandbox.Logger = cfg.Logger
	}
	if cfg.Hub == nil {
		cfg.Hub = NewHub(0)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, echo: e, sandbox: sandbox.New(cfg.Sandbox), hub: cfg.Hub, executions: newExecutionCache(maxCachedItems)}
	s.budget = ingest.NewDecodeBudget(cfg.MaxDecodeBytes, cfg.DecodeWait)
	if token := cfg.Auth.Token(cfg.IngestToken); token != "" {
		s.auth = newAuthenticator(token, cfg.Auth.SessionTTL, cfg.Now)
	}
	s.metrics = newServerMetrics(cfg.Metrics, metricsSources{db: cfg.DB, writer: cfg.Writer, hub: cfg.Hub, follow: cfg.FollowStatus})
	e.HTTPErrorHandler = s.handleError
	s.routes()
	if !cfg.DB.Shared() {
		s.executions.sharing = cfg.DB.ExecutionsSharing
		// Before the warmer hears of the commits: a model carried is not
		// stale, and needs no building.
		s.hub.watchCommits(func(commits []writer.Commit) {
			s.metrics.models.WithLabelValues("carried").Add(float64(s.executions.carry(commits)))
		})
	}
	if !cfg.NoBuildAhead {
		s.warmer = newModelWarmer(s)
	}
	return s
}

// routes lists every route of the server.
func (s *Server) routes() {
	e := s.echo
	// hardening.go: the Host allowlist before routing; then what a page on
	// another site must not send.
	e.Pre(allowHosts(s.cfg.AllowedHosts))
	e.Use(s.observeRequests) // metrics.go: outermost, so it times and counts every answer
	e.Use(compress())        // compress.go: gzip for clients that accept it
	e.Use(securityHeaders, s.guardWrites())
	e.Use(s.requireRead) // auth.go: every GET but these open ones needs the read token when one applies
	e.GET("/login", s.handleLoginPage)
	e.POST("/login", s.handleLogin)
	e.POST("/logout", s.handleLogout)
	e.GET("/metrics", s.handleMetrics)
	e.GET("/healthz", s.handleHealth)
	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static/", staticFiles())))
	e.GET("/favicon.ico", handleFavicon)

	e.GET("/", s.handleExecutionListPage)
	e.GET("/executions/:id", s.handleExecutionShowPage)
	e.GET("/executions/:id/attempt", s.handleAttemptPage)
	e.GET("/executions/:id/effect", s.handleEffectPage)
	e.GET("/executions/:id/lanes", s.handleExecutionLanes)
	e.GET("/executions/:id/findings", s.handleExecutionFindings)
	e.GET("/executions/:id/incidents", s.handleExecutionIncidents)
	// Twins taking the id in the query, for ids a path cannot carry
	// (views/urls.go says which).
	e.GET("/execution", s.handleExecutionShowPage)
	e.GET("/execution/attempt", s.handleAttemptPage)
	e.GET("/execution/effect", s.handleEffectPage)
	e.GET("/execution/lanes", s.handleExecutionLanes)
	e.GET("/execution/findings", s.handleExecutionFindings)
	e.GET("/execution/incidents", s.handleExecutionIncidents)
	e.GET("/outbox", s.handleOutboxPage)
	e.GET("/outbox/messages", s.handleMessagePage)
	e.GET("/outbox/messages/html", s.handleMessageHTML)
	e.GET("/outbox/messages/raw", s.handleMessageRaw)
	e.GET("/keys/:key", s.handleKeyPage)
	e.GET("/key", s.handleKeyPage)
	e.GET("/compare", s.handleComparePage)
	e.GET("/live", s.handleLivePage)

	api := e.Group("/api/v1")
	api.POST("/events", s.handleEventsIngest, s.requireIngestToken)
	api.POST("/webhooks/:provider", s.handleWebhook, s.requireWebhookToken)
	api.GET("/executions", s.handleExecutionList)
	api.GET("/executions/:id", s.handleExecutionShow)
	api.GET("/execution", s.handleExecutionShow)
	api.GET("/effects", s.handleEffectList)
	api.GET("/messages", s.handleMessageShow)
	api.GET("/findings", s.handleFindingList)
	api.GET("/keys/:key", s.handleKeyShow)
	api.GET("/key", s.handleKeyShow)
	api.GET("/compare", s.handleCompare)
	api.GET("/stream", s.handleStream)
	api.GET("/live", s.handleLiveSocket)
	api.GET("/live/origin", s.handleLiveOrigin)

	e.POST(otlpTracesPath, s.handleOTLPTraces, s.requireIngestToken)
	e.POST(otlpLogsPath, s.handleOTLPLogs, s.requireIngestToken)
	e.POST(otlpMetricsPath, s.handleOTLPMetrics, s.requireIngestToken)

	box := e.Group("/sandbox")
	box.POST("/mail/v1/send", echo.WrapHandler(http.HandlerFunc(s.sandbox.ServeSend)), s.requireIngestToken, s.reserveDecode(sandboxDecodeBytes))
	box.GET("/faults", echo.WrapHandler(http.HandlerFunc(s.sandbox.ServeFaults)))
	box.PUT("/faults", echo.WrapHandler(http.HandlerFunc(s.sandbox.ServeFaults)), s.requireIngestToken)
	box.DELETE("/faults", echo.WrapHandler(http.HandlerFunc(s.sandbox.ServeFaults)), s.requireIngestToken)
	box.GET("/log", echo.WrapHandler(http.HandlerFunc(s.sandbox.ServeLog)))

	answerHeadAsGet(e) // compress.go: last, so every GET route above answers HEAD
}

// ServeHTTP lets the server be used as an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Close ends every live connection cleanly (WebSockets and streams are
// hijacked or long-lived, so http.Server.Shutdown would wait for them).
// It returns once every live handler has returned, so nothing touches the
// database after it.
func (s *Server) Close() {
	s.liveMu.Lock()
	s.closed = true
	s.liveMu.Unlock()
	if s.warmer != nil {
		s.warmer.close()
	}
	s.hub.Close()
	s.live.Wait()
}

// liveStarted counts a live handler in, unless the server is closing; the
// handler calls the returned func when it returns.
func (s *Server) liveStarted() (done func(), ok bool) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.closed {
		return nil, false
	}
	s.live.Add(1)
	return s.live.Done, true
}

// requireIngestToken checks the bearer token when one is configured.
func (s *Server) requireIngestToken(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.cfg.IngestToken == "" {
			return next(c)
		}
		token, ok := bearerToken(c.Request().Header.Get(echo.HeaderAuthorization))
		if !ok || subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.IngestToken)) != 1 {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="oncetrace"`)
			return echo.NewHTTPError(http.StatusUnauthorized, "Authorization: a valid \"Bearer <ingest token>\" is required")
		}
		return next(c)
	}
}

// bearerToken is the token of an Authorization header of the Bearer
// scheme. The scheme is case-insensitive (RFC 7235: "bearer", "BEARER"),
// and more than one space may separate it from the token.
func bearerToken(auth string) (string, bool) {
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	return token, token != ""
}

// notFoundError is a 404 that names what is missing ("execution: no
// execution \"exec_x\""); errors.Is sees store.ErrNotFound in it, so
// callers that wait for an execution to appear still can.
type notFoundError struct{ msg string }

func (e notFoundError) Error() string { return e.msg }
func (e notFoundError) Unwrap() error { return store.ErrNotFound }

// notFound names the missing thing: what it is, and its id quoted.
func notFound(what, id string) error {
	return notFoundError{msg: what + ": no " + what + " " + strconv.Quote(id)}
}

// handleError is the one place errors become responses: JSON {"error"}
// naming the field and the limit.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, msg := http.StatusInternalServerError, "internal error"
	var he *echo.HTTPError
	var re *ingest.RequestError
	var nf notFoundError
	ue, unavailable := store.Unwritable(err) // also a read's lost connection
	switch {
	case errors.As(err, &re):
		status, msg = re.Status, re.Msg
	case errors.As(err, &he):
		status = he.Code
		if m, ok := he.Message.(string); ok {
			msg = m
		} else {
			msg = http.StatusText(status)
		}
	case errors.As(err, &nf):
		status, msg = http.StatusNotFound, nf.msg
	case errors.Is(err, store.ErrNotFound):
		status, msg = http.StatusNotFound, "not found"
	case errors.Is(err, store.ErrBadCursor):
		status, msg = http.StatusBadRequest, err.Error()
	case unavailable:
		status, msg = storageStatus(c, ue) // health.go: 507, or 503 for OTLP and passing causes
		s.storageLog.note(s, s.cfg.DB.WriteHealth())
	case decodeBusy(err): // budget.go
		status, msg = http.StatusServiceUnavailable, ingest.ErrDecodeBusy.Error()
		c.Response().Header().Set("Retry-After", decodeBusyRetryAfter)
	case errors.Is(err, writer.ErrOverloaded), errors.Is(err, writer.ErrClosed):
		status, msg = http.StatusServiceUnavailable, "ingest: the writer is busy; retry after the Retry-After delay"
		c.Response().Header().Set("Retry-After", "1")
	default:
		s.cfg.Logger.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	if IsOTLPPath(c.Request().URL.Path) {
		otlpFailure(c, status, msg)
		return
	}
	if !isAPI(c) {
		if err := render(c, status, views.ErrorPage(views.ErrorView{Status: status, Message: msg})); err == nil {
			return
		}
	}
	_ = c.JSON(status, map[string]string{"error": msg})
}

// handleFavicon is GET /favicon.ico, which browsers ask for whatever the
// page links: the SVG mark, named by its type, kept for a week.
func handleFavicon(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "public, max-age=604800")
	return c.Blob(http.StatusOK, "image/svg+xml", static.Favicon)
}

// staticFiles serves the embedded stylesheet and scripts. They change only
// with the binary, so a browser may keep them for an hour.
func staticFiles() http.Handler {
	files := http.FileServer(http.FS(static.Files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}
