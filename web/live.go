package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/ingest"
)

// Live connections: a feed yields, in sequence order and exactly once,
// what one client should receive — first what it missed (after the
// sequence it names, from the hub's recent messages or the store), then
// what the hub hands out. The messages are the hub's, encoded once for
// every connection; each connection gathers them and writes them together
// (live_conn.go), passing the hub's delivery gate (live_gate.go).

const (
	backfillPage = 500
	writeWait    = 10 * time.Second
	pongWait     = 60 * time.Second
	pingPeriod   = pongWait * 9 / 10
	readLimit    = 4096 // clients only answer pings
)

type liveFeed struct {
	s        *Server
	sub      *Subscription // nil for a feed that only reads back (the /live page)
	filter   LiveFilter
	last     int64       // the highest sequence number handed out or passed over
	handed   int64       // the highest sequence number handed out
	pending  []*liveItem // read back from the store, accepted
	backlog  []*liveItem // read back from the hub's recent messages, not yet accepted
	queue    []liveBatch // batches taken from sub, not yet begun
	batch    []*liveItem // the rest of the batch being read from sub, not yet accepted
	caughtUp bool
	names    map[string]string // execution names, for the name filter
	// unwritten counts what was taken from sub and is not yet known to be
	// written; it leaves sub's pending count only once it is.
	unwritten int64
}

// openFeed subscribes and reads back what the client missed in one step:
// from the hub's recent messages when it still holds all of them, else
// from the store, after subscribing (so nothing committed in between is
// lost); duplicates are skipped by sequence.
func (s *Server) openFeed(filter LiveFilter, after int64, resume bool) (*liveFeed, error) {
	from := int64(-1)
	if resume {
		from = after
	}
	sub, recent, covered := s.hub.subscribeAfter(filter, from)
	if sub == nil {
		return nil, errors.New("live: server shutting down")
	}
	f := &liveFeed{s: s, sub: sub, filter: filter, last: after, caughtUp: !resume || covered, backlog: recent,
		names: map[string]string{}}
	return f, nil
}

func (f *liveFeed) close() { f.s.hub.Unsubscribe(f.sub) }

// more reports that next has a message at hand without waiting (one the
// name filter may still turn down).
func (f *liveFeed) more() bool {
	if len(f.pending) > 0 || len(f.queue) > 0 || (f.sub != nil && f.sub.queued()) {
		return true
	}
	for _, items := range [][]*liveItem{f.backlog, f.batch} {
		for _, it := range items {
			if (it.msg.Type != "event" || it.msg.Seq > f.last) && f.filter.matches(it.msg) {
				return true
			}
		}
	}
	return false
}

// next returns the next message, or ok=false when tick fired first. Its
// work — reading back, taking from the subscription, and the caller's
// encoding and gathering of what it returns — happens inside unit (when
// not nil), which it finishes before it waits; without a unit, what it
// takes counts as written at once.
func (f *liveFeed) next(ctx context.Context, tick <-chan time.Time, unit *deliveryUnit) (*liveItem, bool, error) {
	begin := func() {
		if unit != nil {
			unit.begin()
		}
	}
	for {
		if f.sub != nil && f.sub.ended.Load() {
			return f.dropped(), true, nil
		}
		if len(f.pending) > 0 {
			begin()
			it := f.pending[0]
			f.pending = f.pending[1:]
			f.handedOut(it)
			return it, true, nil
		}
		if !f.caughtUp {
			begin()
			if err := f.backfill(ctx); err != nil {
				return nil, false, err
			}
			continue
		}
		if len(f.backlog) > 0 || len(f.batch) > 0 {
			begin()
			var it *liveItem
			if len(f.backlog) > 0 {
				it, f.backlog = f.backlog[0], f.backlog[1:]
			} else {
				it, f.batch = f.batch[0], f.batch[1:]
			}
			ok, err := f.accept(ctx, it)
			if err != nil {
				return nil, false, err
			}
			if ok {
				f.handedOut(it)
				return it, true, nil
			}
			continue
		}
		if len(f.queue) > 0 {
			b := f.queue[0]
			f.queue = f.queue[1:]
			f.unwritten += b.n
			f.batch = b.items
			if b.gap {
				// The hub lost commits before these: read them back.
				f.caughtUp = false
			}
			continue
		}
		if unit != nil {
			if err := unit.finish(); err != nil {
				return nil, false, err
			}
		}
		f.sub.written(f.unwritten)
		f.unwritten = 0
		if batches, open := f.sub.take(); len(batches) > 0 || !open {
			if len(batches) == 0 {
				return f.dropped(), true, nil
			}
			f.queue = batches
			continue
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-tick:
			return nil, false, nil
		case <-f.sub.ready:
		}
	}
}

func (f *liveFeed) handedOut(it *liveItem) {
	if it.msg.Type == "event" {
		f.handed = it.msg.Seq
	}
}

// dropped is the last message of a feed the hub has let go. What is still
// queued for it is not sent: a client dropped for being slow should resume
// soon rather than first take more of what it is behind on. Its sequence
// number is the last one handed out, or, when nothing read back waits, the
// last one passed over too (the filters turned the rest down).
func (f *liveFeed) dropped() *liveItem {
	seq := f.last
	if len(f.pending) > 0 {
		seq = f.handed
	}
	f.pending, f.backlog, f.queue, f.batch = nil, nil, nil, nil
	return newItem(LiveMessage{Type: "dropped", Seq: seq, Reason: f.sub.Reason()})
}

// accept decides whether this feed hands out it: an event once, in
// sequence order, when the filters select it.
func (f *liveFeed) accept(ctx context.Context, it *liveItem) (bool, error) {
	m := it.msg
	if m.Type == "event" {
		if m.Seq <= f.last {
			return false, nil // already handed out, from the store or the history
		}
		f.last = m.Seq
	}
	if !f.filter.matches(m) {
		return false, nil
	}
	return f.wanted(ctx, m)
}

// backfill reads back one page of what was missed: from the hub's recent
// messages once it holds all of them, else from the store. Recent
// messages are accepted as they are handed out, except by a feed without
// a subscription (a page reading back), which takes them all at once.
func (f *liveFeed) backfill(ctx context.Context) error {
	if recent, covered := f.s.hub.recentAfter(f.last); covered {
		f.caughtUp = true
		if f.sub != nil {
			f.backlog = recent
			return nil
		}
		for _, it := range recent {
			if ok, err := f.accept(ctx, it); err != nil {
				return err
			} else if ok {
				f.pending = append(f.pending, it)
			}
		}
		return nil
	}
	if f.filter.ExecutionID == "" {
		// From the pages every resuming client shares.
		items, err := f.s.hub.pages.get(ctx, f.last-f.last%storePageSize, f.s.loadStorePage)
		if err != nil {
			return err
		}
		if len(items) < storePageSize {
			f.caughtUp = true
		}
		for _, it := range items {
			if ok, err := f.accept(ctx, it); err != nil {
				return err
			} else if ok {
				f.pending = append(f.pending, it)
			}
		}
		return nil
	}
	events, err := f.s.cfg.DB.EventsAfter(ctx, f.last, f.filter.ExecutionID, backfillPage)
	if err != nil {
		return err
	}
	if len(events) < backfillPage {
		f.caughtUp = true
	}
	for _, e := range events {
		ev, err := ingest.ParseStored(e.Body)
		if err != nil {
			return fmt.Errorf("live: stored event %d: %w", e.Seq, err)
		}
		it := newItem(eventMessage(e.Seq, ev))
		if ok, err := f.accept(ctx, it); err != nil {
			return err
		} else if ok {
			f.pending = append(f.pending, it)
		}
	}
	return nil
}

// wanted applies the name filter, which needs the execution's name.
func (f *liveFeed) wanted(ctx context.Context, m LiveMessage) (bool, error) {
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
	ctx := c.Request().Context()
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
	keepalive := time.NewTicker(30 * time.Second)
	defer keepalive.Stop()
	// Lines are gathered, each the hub's one encoding of the message, and
	// written together when the feed has nothing more at hand, through the
	// hub's delivery gate.
	var lines bytes.Buffer
	unit := &deliveryUnit{gate: s.hub.gate, gathered: func() bool { return lines.Len() > 0 },
		write: func() error {
			f.sub.beginWrite()
			defer f.sub.endWrite()
			_ = rc.SetWriteDeadline(time.Now().Add(writeWait))
			_, err := w.Write(lines.Bytes())
			lines.Reset()
			if err != nil {
				return err
			}
			return rc.Flush()
		}}
	defer unit.end()
	for {
		it, ok, err := f.next(ctx, keepalive.C, unit)
		if err != nil {
			return nil // the client went away
		}
		if !ok {
			_ = rc.SetWriteDeadline(time.Now().Add(writeWait))
			if _, err := w.Write([]byte("\n")); err != nil || rc.Flush() != nil {
				return nil
			}
			continue
		}
		if it.msg.Type == "changed" {
			continue
		}
		line, _, err := it.encoded()
		if err != nil {
			return err
		}
		unit.begin()
		lines.Write(line)
		lines.WriteByte('\n')
		if it.msg.Type == "dropped" {
			_ = unit.finish()
			return nil
		}
		if lines.Len() >= batchFlushAt {
			if unit.finish() != nil {
				return nil
			}
		}
	}
}

var socketWriteBuffers sync.Pool

// upgrader checks the Origin: a page of another site must not read the
// stream with the user's cookies. Same origin, or one configured. A
// refusal is a 403 whose body says why; a browser shows a script neither,
// so the page asks GET /api/v1/live/origin (handleLiveOrigin) instead.
func (s *Server) upgrader() *websocket.Upgrader {
	return &websocket.Upgrader{
		ReadBufferSize:  1024,
		WriteBufferSize: 8192,
		// The hub's frames bypass gorilla's write buffer (batchConn);
		// pings, closes and execution pages borrow one from the pool.
		WriteBufferPool: &socketWriteBuffers,
		CheckOrigin: func(r *http.Request) bool {
			return s.originRefusal(r.Header.Get("Origin"), r.Host) == ""
		},
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			msg := reason.Error()
			if status == http.StatusForbidden {
				if why := s.originRefusal(r.Header.Get("Origin"), r.Host); why != "" {
					msg = why
				}
			}
			w.Header().Set("Sec-Websocket-Version", "13")
			http.Error(w, msg, status)
		},
	}
}

// originRefusal says why a page of origin, reaching the server as host,
// may not open the live WebSocket, or "" when it may: no Origin (not a
// browser), the origin of host itself, or one of --allowed-origin.
func (s *Server) originRefusal(origin, host string) string {
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err == nil && u.Host == host {
		return ""
	}
	if slices.Contains(s.cfg.AllowedOrigins, origin) {
		return ""
	}
	why := "origin " + origin + " is not allowed"
	if err == nil && u.Host != "" && hostName(u.Host) == hostName(host) {
		// The name matches but the port does not: a proxy that passed
		// nginx's $host, which drops the port (docs/deploy.md).
		why += ": the server was reached as " + host + ", without the page's port (a proxy should pass Host: " + u.Host + ", nginx's $http_host)"
	}
	return why + ": see --allowed-origin"
}

type liveOriginResponse struct {
	Origin  string `json:"origin"`
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
}

// handleLiveOrigin is GET /api/v1/live/origin?origin=O: whether a page of
// origin O, reaching the server as this request does, may open the live
// WebSocket, and why not. The live script asks when its socket is refused
// before it opens, since a refused handshake shows the script no status
// and no reason; the answer is what the server decides for any request,
// so it tells a page nothing it could not learn by trying, and the
// WebSocket's own check is unchanged.
func (s *Server) handleLiveOrigin(c echo.Context) error {
	origin := c.QueryParam("origin")
	if origin == "" {
		return badQuery("origin: required, the page's origin (location.origin)")
	}
	if len(origin) > maxOriginBytes {
		return badQuery("origin: must be at most " + strconv.Itoa(maxOriginBytes) + " bytes")
	}
	why := s.originRefusal(origin, c.Request().Host)
	return c.JSON(http.StatusOK, liveOriginResponse{Origin: origin, Allowed: why == "", Reason: why})
}

// maxOriginBytes bounds an origin asked about: scheme, host and port.
const maxOriginBytes = 512

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
	hw := &batchingHijacker{ResponseWriter: c.Response()}
	conn, err := s.upgrader().Upgrade(hw, c.Request(), nil)
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
	hw.conn.attach(f.sub)
	if q.View == "execution" {
		s.pushExecution(ctx, conn, f)
		return nil
	}
	// Frames go out together: gathered while the feed has more at hand,
	// written in one system call when it has not, through the hub's
	// delivery gate. Each frame is the hub's one encoding of the message,
	// shared by every connection.
	bc := hw.conn
	unit := &deliveryUnit{gate: s.hub.gate, gathered: func() bool { return bc.buffered() > 0 },
		write: func() error { return bc.flush(time.Now().Add(writeWait)) }}
	defer unit.end()
	ping := time.NewTicker(pingPeriod)
	defer ping.Stop()
	for {
		it, ok, err := f.next(ctx, ping.C, unit)
		if err != nil {
			return nil
		}
		if !ok {
			_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
			if conn.WriteMessage(websocket.PingMessage, nil) != nil {
				return nil
			}
			continue
		}
		if it.msg.Type == "changed" {
			continue
		}
		frame, err := it.wsFrame(q.View == "live")
		if err != nil {
			return err
		}
		unit.begin()
		bc.gather(frame)
		if it.msg.Type == "dropped" {
			if unit.finish() == nil {
				closeSocket(conn, closeCode(it.msg.Reason), it.msg.Reason)
			}
			return nil
		}
		if bc.buffered() >= batchFlushAt {
			if unit.finish() != nil {
				return nil
			}
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
