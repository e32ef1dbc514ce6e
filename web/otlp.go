package web

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
)

const (
	otlpProtobuf = "application/x-protobuf"
	otlpJSON     = "application/json"
)

// The paths OTLP/HTTP exporters post to, given the base endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT). Only traces are stored; logs and metrics
// are accepted and dropped, so that an SDK exporting all three signals to
// the base endpoint does not log export failures.
const (
	otlpTracesPath  = "/v1/traces"
	otlpLogsPath    = "/v1/logs"
	otlpMetricsPath = "/v1/metrics"
)

// IsOTLPPath reports whether path is one of the OTLP/HTTP paths the server
// answers (/v1/traces, /v1/logs, /v1/metrics): what a listener reserved for
// exporters (serve --otlp-addr) should let through.
func IsOTLPPath(path string) bool {
	return path == otlpTracesPath || path == otlpLogsPath || path == otlpMetricsPath
}

// gRPC status codes used in OTLP/HTTP error bodies.
const (
	codeInvalidArgument   = 3
	codeResourceExhausted = 8
	codeInternal          = 13
	codeUnavailable       = 14
	codeUnauthenticated   = 16
)

// otlpDropped counts what /v1/logs and /v1/metrics accepted and dropped
// since the server started; /healthz shows it.
type otlpDropped struct {
	logRecords   atomic.Int64
	metricPoints atomic.Int64
}

// otlpRequest is what the pdata export requests of every signal can do.
type otlpRequest interface {
	UnmarshalProto([]byte) error
	UnmarshalJSON([]byte) error
}

// readOTLP checks the Content-Type, reads the body (gunzipped, within the
// body limit) and decodes it into export, whose message name the 400 names,
// all within the decode budget (budget.go): held is the reservation, which
// the handler releases when done. A trace request is checked against the
// OTLP request limits. When ok is false the error answer has been written,
// nothing is held, and err is what the handler returns.
func (s *Server) readOTLP(c echo.Context, export otlpRequest, message string, signal ingest.OTLPSignal) (mt string, held *ingest.Reservation, ok bool, err error) {
	req := c.Request()
	mt, _, err = mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil || (mt != otlpProtobuf && mt != otlpJSON) {
		return otlpJSON, nil, false, otlpError(c, otlpJSON, http.StatusUnsupportedMediaType, codeInvalidArgument,
			"Content-Type: send application/x-protobuf or application/json")
	}
	data, held, err := s.readBody(c)
	if err != nil {
		return mt, nil, false, otlpBodyError(c, mt, err)
	}
	// What decoding will cost, reserved before it is spent; protobuf trace
	// requests over the limits are refused here, undecoded.
	est, err := ingest.OTLPDecodeEstimate(data, signal, mt == otlpProtobuf, s.cfg.Limits, s.budget.Capacity())
	if err == nil {
		err = held.Resize(req.Context(), int64(cap(data))+est)
	}
	if err != nil {
		held.Release()
		return mt, nil, false, otlpBodyError(c, mt, err)
	}
	if mt == otlpProtobuf {
		err = export.UnmarshalProto(data)
	} else {
		err = export.UnmarshalJSON(data)
	}
	if err != nil {
		held.Release()
		return mt, nil, false, otlpError(c, mt, http.StatusBadRequest, codeInvalidArgument, "body: not a valid OTLP "+message+": "+err.Error())
	}
	if traces, isTraces := export.(ptraceotlp.ExportRequest); isTraces {
		err = ingest.CheckOTLPLimits(traces.Traces(), s.cfg.Limits)
		if err == nil {
			err = held.Resize(req.Context(), held.Bytes()+ingest.OTLPMapEstimate(traces.Traces(), len(data)))
		}
		if err != nil {
			held.Release()
			return mt, nil, false, otlpBodyError(c, mt, err)
		}
	}
	return mt, held, true, nil
}

// otlpSuccess answers a fully successful export: an Export*ServiceResponse
// with partial_success unset, as OTLP asks, which is the same empty message
// for every signal (no bytes in protobuf, {} in JSON).
func otlpSuccess(c echo.Context, mt string) error {
	if mt == otlpProtobuf {
		return c.Blob(http.StatusOK, otlpProtobuf, []byte{})
	}
	return c.Blob(http.StatusOK, otlpJSON, []byte("{}"))
}

// handleOTLPTraces is POST /v1/traces, OTLP/HTTP: protobuf or JSON,
// optionally gzipped, answered in the request's own encoding. Spans are
// mapped onto native events (ingest.MapOTLP) and go through the same writer.
func (s *Server) handleOTLPTraces(c echo.Context) error {
	export := ptraceotlp.NewExportRequest()
	mt, held, ok, err := s.readOTLP(c, export, "ExportTraceServiceRequest", ingest.OTLPTraces)
	if !ok {
		return err
	}
	defer held.Release() // once the spans are committed
	mapped := ingest.MapOTLP(export.Traces(), ingest.OTLPConfig{Limits: s.cfg.Limits, ToolClasses: s.cfg.ToolClasses, SpanMap: s.cfg.SpanMap})
	res, err := s.cfg.Writer.Write(c.Request().Context(), mapped.Events)
	if err != nil {
		if errors.Is(err, writer.ErrOverloaded) || errors.Is(err, writer.ErrClosed) {
			c.Response().Header().Set("Retry-After", "1")
			return otlpError(c, mt, http.StatusServiceUnavailable, codeUnavailable, "ingest: the writer is busy; retry after the Retry-After delay")
		}
		return err
	}
	s.metrics.ingestedSpans(export.Traces().SpanCount(), mapped.Rejected, res)
	if mapped.Rejected == 0 {
		return otlpSuccess(c, mt)
	}
	resp := ptraceotlp.NewExportResponse()
	resp.PartialSuccess().SetRejectedSpans(int64(mapped.Rejected))
	resp.PartialSuccess().SetErrorMessage(strings.Join(mapped.Reasons, "; "))
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

// handleOTLPLogs is POST /v1/logs: the request is checked and decoded as
// for traces, its log records are counted, and nothing is stored. The
// answer is a full success, since the records were accepted (and dropped on
// purpose); a partial_success would make SDKs log a warning per export.
func (s *Server) handleOTLPLogs(c echo.Context) error {
	export := plogotlp.NewExportRequest()
	mt, held, ok, err := s.readOTLP(c, export, "ExportLogsServiceRequest", ingest.OTLPLogs)
	if !ok {
		return err
	}
	defer held.Release()
	s.dropped.logRecords.Add(int64(export.Logs().LogRecordCount()))
	return otlpSuccess(c, mt)
}

// handleOTLPMetrics is POST /v1/metrics, as handleOTLPLogs: its data points
// are counted and dropped.
func (s *Server) handleOTLPMetrics(c echo.Context) error {
	export := pmetricotlp.NewExportRequest()
	mt, held, ok, err := s.readOTLP(c, export, "ExportMetricsServiceRequest", ingest.OTLPMetrics)
	if !ok {
		return err
	}
	defer held.Release()
	s.dropped.metricPoints.Add(int64(export.Metrics().DataPointCount()))
	return otlpSuccess(c, mt)
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

// otlpFailure answers an error raised outside the OTLP handlers (the ingest
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
