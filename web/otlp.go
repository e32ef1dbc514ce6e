package web

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/oncetrace/oncetrace/ingest"
)

const (
	otlpProtobuf = "application/x-protobuf"
	otlpJSON     = "application/json"
)

// otlpTracesPath is where OTLP/HTTP exporters post traces.
const otlpTracesPath = "/v1/traces"

// gRPC status codes used in OTLP/HTTP error bodies.
const (
	codeInvalidArgument   = 3
	codeResourceExhausted = 8
	codeInternal          = 13
	codeUnavailable       = 14
	codeUnauthenticated   = 16
)

// handleOTLPTraces is POST /v1/traces, OTLP/HTTP: protobuf or JSON,
// optionally gzipped, answered in the request's own encoding. Spans are
// mapped onto native events (ingest.MapOTLP) and go through the same writer.
func (s *Server) handleOTLPTraces(c echo.Context) error {
	req := c.Request()
	mt, _, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil || (mt != otlpProtobuf && mt != otlpJSON) {
		return otlpError(c, otlpJSON, http.StatusUnsupportedMediaType, codeInvalidArgument,
			"Content-Type: send application/x-protobuf or application/json")
	}
	body := http.MaxBytesReader(c.Response(), req.Body, s.cfg.Limits.BodyBytes)
	data, err := ingest.ReadBody(body, req.Header.Get(echo.HeaderContentEncoding), s.cfg.Limits.BodyBytes)
	if err != nil {
		var re *ingest.RequestError
		if errors.As(err, &re) {
			return otlpError(c, mt, re.Status, codeInvalidArgument, re.Msg)
		}
		return otlpError(c, mt, http.StatusBadRequest, codeInvalidArgument, "body: "+err.Error())
	}
	export := ptraceotlp.NewExportRequest()
	if mt == otlpProtobuf {
		err = export.UnmarshalProto(data)
	} else {
		err = export.UnmarshalJSON(data)
	}
	if err != nil {
		return otlpError(c, mt, http.StatusBadRequest, codeInvalidArgument, "body: not a valid OTLP ExportTraceServiceRequest: "+err.Error())
	}
	mapped := ingest.MapOTLP(export.Traces(), s.cfg.Limits)
	if _, err := s.cfg.Writer.Write(req.Context(), mapped.Events); err != nil {
		if errors.Is(err, ingest.ErrOverloaded) || errors.Is(err, ingest.ErrClosed) {
			c.Response().Header().Set("Retry-After", "1")
			return otlpError(c, mt, http.StatusServiceUnavailable, codeUnavailable, "ingest: the writer is busy; retry after the Retry-After delay")
		}
		return err
	}
	resp := ptraceotlp.NewExportResponse()
	if mapped.Rejected > 0 {
		resp.PartialSuccess().SetRejectedSpans(int64(mapped.Rejected))
		resp.PartialSuccess().SetErrorMessage(strings.Join(mapped.Reasons, "; "))
	}
	var out []byte
	if mt == otlpProtobuf {
		out, err = resp.MarshalProto()
	} else {
		out, err = resp.MarshalJSON()
	}
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, mt, out)
}

// otlpError answers with a google.rpc.Status in the request's encoding, as
// OTLP/HTTP asks.
func otlpError(c echo.Context, mt string, status, code int, msg string) error {
	if mt == otlpProtobuf {
		// Status{code = 1; message = 2}, encoded by hand: two fields do not
		// justify a protobuf runtime.
		b := binary.AppendUvarint([]byte{0x08}, uint64(code))
		b = append(b, 0x12)
		b = binary.AppendUvarint(b, uint64(len(msg)))
		b = append(b, msg...)
		return c.Blob(status, otlpProtobuf, b)
	}
	out, _ := json.Marshal(map[string]any{"code": code, "message": msg})
	return c.Blob(status, otlpJSON, out)
}

// otlpFailure answers an error raised outside handleOTLPTraces (the ingest
// token check, a method not allowed, an internal error) as OTLP/HTTP asks
// of every 4xx and 5xx: a Status in the request's encoding, not the HTML
// or {"error"} body of the other routes.
func otlpFailure(c echo.Context, status int, msg string) {
	mt := otlpJSON
	if ct, _, err := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType)); err == nil && ct == otlpProtobuf {
		mt = otlpProtobuf
	}
	code := codeInvalidArgument
	switch {
	case status == http.StatusUnauthorized:
		code = codeUnauthenticated
	case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
		code = codeUnavailable
	case status >= 500:
		code = codeInternal
	}
	_ = otlpError(c, mt, status, code, msg)
}
