package web

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/views"
)

// liveCap is how many rows the live page keeps.
const liveCap = 200

// handleLivePage is GET /live: the newest events, then the live tail.
func (s *Server) handleLivePage(c echo.Context) error {
	_, filter, _, _, err := bindLive(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	last, err := s.cfg.DB.LastSeq(ctx)
	if err != nil {
		return err
	}
	v := views.LiveView{Cap: liveCap, Filter: views.LiveFilterView{ExecutionID: filter.ExecutionID, Name: filter.Name,
		Provider: filter.Provider, FindingsOnly: filter.FindingsOnly}}
	if !filter.FindingsOnly {
		// The newest rows matching the filter, read back through the same
		// feed a live client gets, from a little before the end.
		f := &liveFeed{s: s, filter: filter, last: max(0, last-liveCap*5), names: map[string]string{}}
		for !f.caughtUp {
			if err := f.backfill(ctx); err != nil {
				return err
			}
		}
		for i := len(f.pending) - 1; i >= 0 && len(v.Rows) < liveCap; i-- {
			row, err := liveRow(f.pending[i].msg)
			if err != nil {
				return err
			}
			v.Rows = append(v.Rows, row)
		}
	}
	params := url.Values{"view": {"live"}, "after": {strconv.FormatInt(last, 10)}}
	for k, val := range map[string]string{"execution_id": filter.ExecutionID, "name": filter.Name, "provider": filter.Provider} {
		if val != "" {
			params.Set(k, val)
		}
	}
	if filter.FindingsOnly {
		params.Set("findings_only", "true")
	}
	v.SocketURL = "/api/v1/live?" + params.Encode()
	return render(c, http.StatusOK, views.LivePage(v))
}

// liveRow makes a live message's row.
func liveRow(m LiveMessage) (views.LiveRowView, error) {
	if m.Finding != nil {
		return views.LiveRowView{Seq: m.Seq, ExecutionID: m.ExecutionID, Finding: m.Finding}, nil
	}
	ev, err := ingest.ParseStored(m.Event)
	if err != nil {
		return views.LiveRowView{}, err
	}
	return views.NewLiveRow(m.Seq, ev), nil
}

// withRow renders the row of an event or finding into the message, for
// the live page's script to insert as it is: one renderer, on the server.
func withRow(ctx context.Context, m LiveMessage) LiveMessage {
	if m.Type != "event" && m.Type != "finding" {
		return m
	}
	row, err := liveRow(m)
	if err != nil {
		return m
	}
	var buf bytes.Buffer
	if views.LiveRow(row).Render(ctx, &buf) == nil {
		m.Fragments = map[string]string{"row": buf.String()}
	}
	return m
}
