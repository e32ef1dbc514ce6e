package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/ingest"
)

// Live connections: a feed yields, in sequence order and exactly once,
// what one client should receive — first what it missed (read from the
// store after the sequence it names), then what the hub publishes.

const (
	backfillPage = 500
	writeWait    = 10 * time.Second
	pongWait     = 60 * time.Second
	pingPeriod   = pongWait * 9 / 10
	readLimit    = 4096 // clients only answer pings
)

type feed struct {
	s        *Server
	sub      *Subscription
	filter   LiveFilter
	last     int64 // the highest sequence number handed out
	pending  []LiveMessage
	caughtUp bool
	names    map[string]string // execution names, for the name filter
}

// openFeed subscribes first and reads the store second, so nothing
// committed in between is lost; duplicates are skipped by sequence.
func (s *Server) openFeed(filter LiveFilter, after int64, resume bool) (*feed, error) {
	sub := s.hub.Subscribe(filter)
	if sub == nil {
		return nil, errors.New("live: server shutting down")
	}
	return &feed{s: s, sub: sub, filter: filter, last: after, caughtUp: !resume, names: map[string]string{}}, nil
}

func (f *feed) close() { f.s.hub.Unsubscribe(f.sub) }

// next returns the next message, or ok=false when tick fired first.
func (f *feed) next(ctx context.Context, tick <-chan time.Time) (LiveMessage, bool, error) {
	for {
		if len(f.pending) > 0 {
			m := f.pending[0]
			f.pending = f.pending[1:]
			return m, true, nil
		}
		if !f.caughtUp {
			if err := f.backfill(ctx); err != nil {
				return LiveMessage{}, false, err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return LiveMessage{}, false, ctx.Err()
		case <-tick:
			return LiveMessage{}, false, nil
		case m, open := <-f.sub.C:
			if !open {
				return LiveMessage{Type: "dropped", Seq: f.last, Reason: f.sub.Reason()}, true, nil
			}
			if m.Type == "event" {
				if m.Seq <= f.last {
					continue // already sent from the store
				}
				f.last = m.Seq
			}
			ok, err := f.wanted(ctx, m)
			if err != nil {
				return LiveMessage{}, false, err
			}
			if ok {
				return m, true, nil
			}
		}
	}
}

func (f *feed) backfill(ctx context.Context) error {
	events, err := f.s.cfg.DB.EventsAfter(ctx, f.last, f.filter.ExecutionID, backfillPage)
	if err != nil {
		return err
	}
	if len(events) < backfillPage {
		f.caughtUp = true
	}
	for _, e := range events {
		f.last = e.Seq
		ev, err := ingest.ParseStored(e.Body)
		if err != nil {
			return fmt.Errorf("live: stored event %d: %w", e.Seq, err)
		}
		m := eventMessage(e.Seq, ev)
		if !f.filter.matches(m) {
			continue
		}
		if ok, err := f.wanted(ctx, m); err != nil {
			return err
		} else if ok {
			f.pending = append(f.pending, m)
		}
	}
	return nil
}

// wanted applies the name filter, which needs the execution's name.
func (f *feed) wanted(ctx context.Context, m LiveMessage) (bool, error) {
	if f.filter.Name == "" || m.ExecutionID == "" {
		return f.filter.Name == "", nil
	}
	if m.name != "" {
		f.names[m.ExecutionID] = m.name
	}
	name, known := f.names[m.ExecutionID]
	if !known {
		names, err := f.s.cfg.DB.ExecutionNames(ctx, []string{m.ExecutionID})
		if err != nil {
			return false, err
		}
		name = names[m.ExecutionID]
		// An execution not named yet is asked again next time: the event
		// that names it may be one the other filters keep from this feed.
		if name != "" {
			if len(f.names) > 10000 {
				clear(f.names)
			}
			f.names[m.ExecutionID] = name
		}
	}
	return name == f.filter.Name, nil
}

// liveQuery is what both live endpoints accept.
type liveQuery struct {
	After        string `query:"after"`
	ExecutionID  string `query:"execution_id"`
	Name         string `query:"name"`
	Provider     string `query:"provider"`
	FindingsOnly string `query:"findings_only"`
	View         string `query:"view"`
}

// bindLive reads a live endpoint's query: its filter, and the sequence to
// resume after when one is given.
func bindLive(c echo.Context) (q liveQuery, f LiveFilter, after int64, resume bool, err error) {
	if err = bindQuery(c, &q); err != nil {
		return q, f, 0, false, err
	}
	f, after, resume, err = q.parse()
	return q, f, after, resume, err
}

func (q liveQuery) parse() (LiveFilter, int64, bool, error) {
	f := LiveFilter{ExecutionID: q.ExecutionID, Name: q.Name, Provider: q.Provider}
	if q.FindingsOnly != "" {
		b, err := strconv.ParseBool(q.FindingsOnly)
		if err != nil {
			return f, 0, false, badQuery("findings_only: must be true or false")
		}
		f.FindingsOnly = b
	}
	if q.After == "" {
		return f, 0, false, nil
	}
	after, err := strconv.ParseInt(q.After, 10, 64)
	if err != nil || after < 0 {
		return f, 0, false, badQuery("after: must be a sequence number ≥ 0")
	}
	return f, after, true, nil
}

// handleStream is GET /api/v1/stream: NDJSON that stays open and flushes
// each event as it is committed, like tail -f.
func (s *Server) handleStream(c echo.Context) error {
	done, ok := s.liveStarted()
	if !ok {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "live: server shutting down")
	}
	defer done()
	_, filter, after, resume, err := bindLive(c)
	if err != nil {
		return err
	}
	if !resume { // without after, the stream starts now
		if after, err = s.cfg.DB.LastSeq(c.Request().Context()); err != nil {
			return err
		}
		resume = true
	}
	f, err := s.openFeed(filter, after, resume)
	if err != nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, err.Error())
	}
	defer f.close()
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.Flush()
	rc := http.NewResponseController(w.Writer)
	enc := json.NewEncoder(w)
	keepalive := time.NewTicker(30 * time.Second)
	defer keepalive.Stop()
	ctx := c.Request().Context()
	for {
		m, ok, err := f.next(ctx, keepalive.C)
		if err != nil {
			return nil // the client went away
		}
		_ = rc.SetWriteDeadline(time.Now().Add(writeWait))
		if !ok {
			if _, err := w.Write([]byte("\n")); err != nil {
				return nil
			}
		} else if m.Type != "changed" {
			if err := enc.Encode(m); err != nil {
				return nil
			}
		}
		w.Flush()
		if m.Type == "dropped" {
			return nil
		}
	}
}

// upgrader checks the Origin: a page of another site must not read the
// stream with the user's cookies. Same origin, or one configured.
func (s *Server) upgrader() *websocket.Upgrader {
	return &websocket.Upgrader{
		ReadBufferSize:  1024,
		WriteBufferSize: 8192,
		CheckOrigin: func(r *http.Request) bool {
			origin := r.Header.Get("Origin")
			if origin == "" {
				return true // not a browser
			}
			u, err := url.Parse(origin)
			if err != nil {
				return false
			}
			if u.Host == r.Host {
				return true
			}
			for _, allowed := range s.cfg.AllowedOrigins {
				if allowed == origin {
					return true
				}
			}
			return false
		},
	}
}

// handleLiveSocket is GET /api/v1/live: the WebSocket of the live page and
// of running execution pages. One goroutine writes (this one), one reads.
func (s *Server) handleLiveSocket(c echo.Context) error {
	done, open := s.liveStarted()
	if open {
		defer done()
	}
	q, filter, after, resume, err := bindLive(c)
	if err != nil {
		return err
	}
	if q.View == "execution" && filter.ExecutionID == "" {
		return badQuery("execution_id: required with view=execution")
	}
	conn, err := s.upgrader().Upgrade(c.Response(), c.Request(), nil)
	if err != nil {
		return nil // the upgrader has answered
	}
	defer conn.Close()
	if !open {
		// Shutting down: say so as to every other client, and touch nothing.
		closeSocket(conn, websocket.CloseGoingAway, ReasonShutdown)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The read pump: clients send nothing but pongs; a read error means the
	// client is gone.
	conn.SetReadLimit(readLimit)
	_ = conn.SetReadDeadline(time.Now().Add(pongWait))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(pongWait)) })
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer cancel()
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
		}
	}()
	defer func() { conn.Close(); <-readDone }()

	if !resume && q.View != "execution" {
		if after, err = s.cfg.DB.LastSeq(ctx); err != nil {
			return nil
		}
		resume = true
	}
	f, err := s.openFeed(filter, after, resume)
	if err != nil {
		closeSocket(conn, websocket.CloseGoingAway, ReasonShutdown)
		return nil
	}
	defer f.close()
	if q.View == "execution" {
		s.pushExecution(ctx, conn, f)
		return nil
	}
	ping := time.NewTicker(pingPeriod)
	defer ping.Stop()
	for {
		m, ok, err := f.next(ctx, ping.C)
		if err != nil {
			return nil
		}
		_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
		if !ok {
			if conn.WriteMessage(websocket.PingMessage, nil) != nil {
				return nil
			}
			continue
		}
		if m.Type == "changed" {
			continue
		}
		if q.View == "live" {
			m = withRow(ctx, m)
		}
		if conn.WriteJSON(m) != nil {
			return nil
		}
		if m.Type == "dropped" {
			closeSocket(conn, closeCode(m.Reason), m.Reason)
			return nil
		}
	}
}

// closeCode is 1001 (going away) on shutdown and 4000, ours, for a client
// dropped for being slow: it should reconnect with after=SEQ.
func closeCode(reason string) int {
	if reason == ReasonShutdown {
		return websocket.CloseGoingAway
	}
	return 4000
}

func closeSocket(conn *websocket.Conn, code int, reason string) {
	msg := websocket.FormatCloseMessage(code, reason)
	_ = conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(writeWait))
}
