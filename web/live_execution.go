package web

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/a-h/templ"
	"github.com/gorilla/websocket"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/views"
)

const (
	liveRerenderEvery = time.Second            // running bars grow, silences count up
	liveCoalesce      = 200 * time.Millisecond // a burst of events, one re-render
)

// pushExecution keeps a running execution's page current: whenever the
// execution is re-audited, and every second while it runs, it renders the
// page's fragments with the page's own components and pushes the HTML.
// When the execution ends it pushes the last state and "end".
func (s *Server) pushExecution(ctx context.Context, conn *websocket.Conn, f *liveFeed) {
	id := f.filter.ExecutionID
	tick := time.NewTicker(liveRerenderEvery)
	defer tick.Stop()
	lastPing := time.Now()
	for {
		it, ok, err := f.next(ctx, tick.C, nil)
		if err != nil {
			return
		}
		if ok && it.msg.Type == "dropped" {
			_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
			_ = conn.WriteJSON(it.msg)
			closeSocket(conn, closeCode(it.msg.Reason), it.msg.Reason)
			return
		}
		if ok {
			// Let a burst settle into one re-render.
			if f.more() {
				continue
			}
			time.Sleep(liveCoalesce)
			if f.more() {
				continue
			}
		}
		ended, err := s.pushFragments(ctx, conn, id)
		if err != nil || ended {
			return
		}
		if time.Since(lastPing) > pingPeriod {
			_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
			if conn.WriteMessage(websocket.PingMessage, nil) != nil {
				return
			}
			lastPing = time.Now()
		}
	}
}

// pushFragments renders and sends the fragments; ended reports that the
// execution is over and the socket closed.
func (s *Server) pushFragments(ctx context.Context, conn *websocket.Conn, id string) (ended bool, err error) {
	x, err := s.loadExecution(ctx, id, true)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // not there yet
	}
	if err != nil {
		return false, err
	}
	v := x.Page(views.TimeRange{}, s.cfg.Now())
	fragments := map[string]string{}
	for target, component := range map[string]templ.Component{
		"execution-header": views.ExecutionHeader(v),
		"findings":         views.FindingGroups(v.FindingGroups, len(v.Findings)),
		"timeline":         views.TimelineBlock(v.Timeline),
	} {
		var buf bytes.Buffer
		if err := component.Render(ctx, &buf); err != nil {
			return false, err
		}
		fragments[target] = buf.String()
	}
	_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
	if err := conn.WriteJSON(LiveMessage{Type: "html", ExecutionID: id, Fragments: fragments}); err != nil {
		return false, err
	}
	if v.LiveURL != "" {
		return false, nil
	}
	_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
	_ = conn.WriteJSON(LiveMessage{Type: "end", ExecutionID: id})
	closeSocket(conn, websocket.CloseNormalClosure, "execution ended")
	return true, nil
}
