package web

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
)

type ingestResponse struct {
	Accepted   int                `json:"accepted"`
	Duplicates int                `json:"duplicates"`
	Rejected   []ingest.Rejection `json:"rejected"`
}

// rejectedResponse answers a request whose every event was invalid: 400
// with the {"error"} every error has, and the per-index rejections.
type rejectedResponse struct {
	Error string `json:"error"`
	ingestResponse
}

func allRejected(rejected []ingest.Rejection) rejectedResponse {
	msg := fmt.Sprintf("events: all %d events were rejected, nothing was stored; ", len(rejected))
	if len(rejected) == 1 {
		msg = "events: the event was rejected, nothing was stored; "
	}
	msg += fmt.Sprintf("event %d: %s", rejected[0].Index, rejected[0].Error)
	return rejectedResponse{Error: msg, ingestResponse: ingestResponse{Rejected: rejected}}
}

// handleEventsIngest is POST /api/v1/events: it answers only after the
// request's events are committed.
func (s *Server) handleEventsIngest(c echo.Context) error {
	req := c.Request()
	format, err := ingest.FormatOf(req.Header.Get(echo.HeaderContentType))
	if err != nil {
		return err
	}
	data, held, err := s.readBody(c) // within the decode budget (budget.go)
	if err != nil {
		return err
	}
	defer held.Release() // once the events are committed
	batch, err := ingest.DecodeWithin(req.Context(), held, data, format, s.cfg.Limits)
	if err != nil {
		return err
	}
	if len(batch.Events) == 0 && len(batch.Rejected) > 0 {
		// Nothing to store: a client error, not a 2xx a client would take
		// for success. The body still lists every event's problem.
		s.metrics.ingested("native", writer.Result{}, batch.Rejected)
		return c.JSON(http.StatusBadRequest, allRejected(batch.Rejected))
	}
	res, err := s.cfg.Writer.Write(req.Context(), batch.Events)
	if err != nil {
		return err
	}
	s.metrics.ingested("native", res, batch.Rejected)
	out := ingestResponse{Accepted: res.Accepted, Duplicates: res.Duplicates, Rejected: batch.Rejected}
	status := http.StatusOK
	if len(batch.Rejected) > 0 {
		status = http.StatusMultiStatus
	} else {
		out.Rejected = []ingest.Rejection{}
	}
	return c.JSON(status, out)
}
