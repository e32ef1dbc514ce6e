package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/ingest"
)

type ingestResponse struct {
	Accepted   int                `json:"accepted"`
	Duplicates int                `json:"duplicates"`
	Rejected   []ingest.Rejection `json:"rejected"`
}

// handleEventsIngest is POST /api/v1/events: it answers only after the
// request's events are committed.
func (s *Server) handleEventsIngest(c echo.Context) error {
	req := c.Request()
	format, err := ingest.FormatOf(req.Header.Get(echo.HeaderContentType))
	if err != nil {
		return err
	}
	body := http.MaxBytesReader(c.Response(), req.Body, s.cfg.Limits.BodyBytes)
	data, err := ingest.ReadBody(body, req.Header.Get(echo.HeaderContentEncoding), s.cfg.Limits.BodyBytes)
	if err != nil {
		return err
	}
	batch, err := ingest.Decode(data, format, s.cfg.Limits)
	if err != nil {
		return err
	}
	res, err := s.cfg.Writer.Write(req.Context(), batch.Events)
	if err != nil {
		return err
	}
	out := ingestResponse{Accepted: res.Accepted, Duplicates: res.Duplicates, Rejected: batch.Rejected}
	status := http.StatusOK
	if len(batch.Rejected) > 0 {
		status = http.StatusMultiStatus
	} else {
		out.Rejected = []ingest.Rejection{}
	}
	return c.JSON(status, out)
}
