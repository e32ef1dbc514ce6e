package web

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/store"
)

// writeProbeInterval is how long /healthz lets a failing database rest
// before it tries a write itself (store.DB.ProbeWrite). Without the probe a
// server taken out of a load balancer for being degraded would get no
// write that could tell it space came back.
const writeProbeInterval = 5 * time.Second

// storageRetryAfter is the Retry-After of a write refused because the
// database cannot be written: as long as a probe waits, the soonest
// /healthz can have noticed that it can.
const storageRetryAfter = "5"

// transientRetryAfter is the Retry-After while the database cannot be
// reached or is locked: the writer retries every second at most, so a
// client need not wait longer.
const transientRetryAfter = "1"

// handleHealth is GET /healthz: 200 {"status":"ok"} while the database
// can be read and the last write committed; 503 {"status":"degraded",
// "reason"} while writes fail for want of space, a read-only file, a
// failing disk, a lost connection or another process's lock, until a
// commit or a probe succeeds again.
func (s *Server) handleHealth(c echo.Context) error {
	if err := s.cfg.DB.Ping(c.Request().Context()); err != nil {
		c.Response().Header().Set("Retry-After", transientRetryAfter)
		return c.JSON(http.StatusServiceUnavailable, map[string]any{"status": "degraded",
			"reason": store.ReasonUnreachable, "error": "database: " + err.Error()})
	}
	// The gap threshold tells agents (the demo) how long a silence must be
	// to show as a gap on this server.
	// otlp_dropped counts what POST /v1/logs and /v1/metrics accepted and
	// did not store, since the server started.
	body := map[string]any{
		"status":        "ok",
		"gap_threshold": s.cfg.Analysis.GapThreshold.String(),
		"otlp_dropped": map[string]int64{
			"log_records":   s.dropped.logRecords.Load(),
			"metric_points": s.dropped.metricPoints.Load(),
		},
	}
	// A followed cluster (serve --temporal) that cannot be reached does
	// not make the server degraded: it serves and takes other ingest all
	// the same. Its entry says how far behind it is.
	if s.cfg.FollowStatus != nil {
		var follow []map[string]any
		for _, st := range s.cfg.FollowStatus() {
			follow = append(follow, st.healthBody())
		}
		body["follow"] = follow
	}
	h := s.cfg.DB.ProbeWrite(c.Request().Context(), writeProbeInterval)
	s.storageLog.note(s, h)
	if h.OK {
		return c.JSON(http.StatusOK, body)
	}
	body["status"] = "degraded"
	body["reason"] = h.Reason
	body["error"] = h.Error
	body["since"] = h.Since.UTC().Format(time.RFC3339Nano)
	c.Response().Header().Set("Retry-After", storageRetryAfter)
	return c.JSON(http.StatusServiceUnavailable, body)
}

// storageStatus is the answer to a request the database refused (a
// *store.UnwritableError, or a read that lost its connection): the same
// request may pass later. A write refused for want of space, a read-only
// file or a failing disk stored nothing; the native API says 507
// Insufficient Storage. An OTLP exporter retries only 429, 502, 503 and
// 504, so OTLP gets 503, as does the sandbox, whose clients are mail SDKs
// that retry a 503. A database that cannot be reached or is locked is a
// 503 everywhere, with a short Retry-After: the writer reconnects by
// itself, and a retry of a commit whose answer was lost stores nothing
// twice.
func storageStatus(c echo.Context, ue *store.UnwritableError) (int, string) {
	if ue.Transient() {
		c.Response().Header().Set("Retry-After", transientRetryAfter)
		verb := "written"
		if m := c.Request().Method; m == http.MethodGet || m == http.MethodHead {
			verb = "read"
		}
		return http.StatusServiceUnavailable, "storage: the database cannot be " + verb + " at the moment (" + ue.Reason +
			"); retry after the Retry-After delay (event ids make a retry safe)"
	}
	c.Response().Header().Set("Retry-After", storageRetryAfter)
	msg := "storage: the database cannot be written (" + ue.Reason + "); nothing of this request was stored; retry after the Retry-After delay"
	p := c.Request().URL.Path
	if IsOTLPPath(p) || strings.HasPrefix(p, "/sandbox/") {
		return http.StatusServiceUnavailable, msg
	}
	return http.StatusInsufficientStorage, msg
}

// storageLog logs when writes start failing and when they pass again,
// once each, rather than once per refused request.
type storageLog struct {
	mu      sync.Mutex
	failing bool
	reason  string
}

func (l *storageLog) note(s *Server, h store.WriteHealth) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !h.OK && (!l.failing || l.reason != h.Reason):
		s.cfg.Logger.Error("the database cannot be written; ingest answers 503 (507 on the native API for a full disk, a read-only file or a failing disk) until it can",
			"reason", h.Reason, "err", h.Error, "db", s.cfg.DB.Path)
	case h.OK && l.failing:
		s.cfg.Logger.Info("the database can be written again", "was", l.reason, "db", s.cfg.DB.Path)
	}
	l.failing, l.reason = !h.OK, h.Reason
}
