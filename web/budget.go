package web

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
)

// Every handler that reads a body reads it within the decode budget
// (ingest.DecodeBudget): the reservation grows as the body arrives and
// again, to an estimate, before it is decoded, and is released once the
// request's events are committed, so the memory all requests hold at once
// is bounded by serve --max-decode-bytes. A request that cannot get its
// share within the budget's wait is answered 503 with Retry-After.

// readBody reads the request's body (gunzipped, within the body limit)
// holding a new reservation, which the caller releases when done with
// what the body became. On error nothing is held.
func (s *Server) readBody(c echo.Context) ([]byte, *ingest.Reservation, error) {
	req := c.Request()
	res, err := s.budget.Reserve(req.Context(), 0)
	if err != nil {
		return nil, nil, err
	}
	body := http.MaxBytesReader(c.Response(), req.Body, s.cfg.Limits.BodyBytes)
	data, err := ingest.ReadBodyWithin(req.Context(), res, body, req.Header.Get(echo.HeaderContentEncoding), req.ContentLength, s.cfg.Limits.BodyBytes)
	if err != nil {
		res.Release()
		return nil, nil, err
	}
	return data, res, nil
}

// reserveDecode holds n bytes of the budget while a handler that decodes
// a small, bounded body runs (the sandbox's).
func (s *Server) reserveDecode(n int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			res, err := s.budget.Reserve(c.Request().Context(), n)
			if err != nil {
				return err
			}
			defer res.Release()
			return next(c)
		}
	}
}

// decodeBusy reports whether err means the budget stayed full: the answer
// is 503 with Retry-After, retryable. A client that went away while
// waiting gets the same; it does not read it.
func decodeBusy(err error) bool { return errors.Is(err, ingest.ErrDecodeBusy) }

// decodeBusyRetryAfter is the Retry-After of a 503 for a full budget, in
// seconds: about the budget's wait, after which others have finished.
const decodeBusyRetryAfter = "2"

// otlpBodyError answers a body that could not be read, was over a limit,
// or did not get its share of the decode budget, as OTLP/HTTP asks: a
// Status in the request's encoding; retryable (503, code 14, Retry-After)
// only for the budget.
func otlpBodyError(c echo.Context, mt string, err error) error {
	var re *ingest.RequestError
	switch {
	case decodeBusy(err):
		c.Response().Header().Set("Retry-After", decodeBusyRetryAfter)
		return otlpError(c, mt, http.StatusServiceUnavailable, codeUnavailable, ingest.ErrDecodeBusy.Error())
	case errors.As(err, &re):
		return otlpError(c, mt, re.Status, codeInvalidArgument, re.Msg)
	}
	return otlpError(c, mt, http.StatusBadRequest, codeInvalidArgument, "body: "+err.Error())
}

// sandboxDecodeBytes is what the sandbox holds decoding one send: its
// body, the decoder's copy and the strings, each at most
// sandbox.MaxBodyBytes.
const sandboxDecodeBytes = 3*sandbox.MaxBodyBytes + 64<<10
