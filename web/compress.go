package web

import (
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
)

// compressMinBytes is the smallest answer worth compressing: below about a
// kilobyte gzip's header and the CPU cost more than the bytes saved.
const compressMinBytes = 1024

// uncompressedPaths answer in ways gzip would break: the live WebSocket is
// hijacked, the NDJSON stream must reach the client line by line as it is
// written, and Prometheus' handler compresses /metrics itself.
var uncompressedPaths = map[string]bool{
	"/api/v1/live":   true,
	"/api/v1/stream": true,
	"/metrics":       true,
}

// compress gzips pages, stylesheets, scripts, SVG and JSON for clients
// that accept it. Only answers are encoded; request bodies are untouched.
// (echo's own Gzip middleware would pull in golang.org/x/time through its
// package; this is the same idea with the decision made once the type and
// the first kilobyte are known.)
func compress() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if skipCompression(c) {
				return next(c)
			}
			res := c.Response()
			res.Header().Add(echo.HeaderVary, echo.HeaderAcceptEncoding)
			if !acceptsGzip(c.Request().Header.Get(echo.HeaderAcceptEncoding)) {
				return next(c)
			}
			gw := &gzipWriter{ResponseWriter: res.Writer}
			res.Writer = gw
			defer func() {
				gw.finish()
				res.Writer = gw.ResponseWriter
			}()
			// The error page is answered here, while the writer compresses,
			// as echo's logger middleware answers it.
			if err := next(c); err != nil {
				c.Error(err)
			}
			return nil
		}
	}
}

// acceptsGzip reports whether an Accept-Encoding header lists gzip (or *)
// without q=0.
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "*" {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		if q == "q=0" || strings.HasPrefix(q, "q=0.") && strings.Trim(q[4:], "0") == "" {
			return false
		}
		return true
	}
	return false
}

// compressible says whether a type is text worth gzipping; images other
// than SVG, and anything already encoded, are not.
func compressible(contentType string) bool {
	mediaType, _, _ := strings.Cut(contentType, ";")
	mediaType = strings.ToLower(strings.TrimSpace(mediaType))
	switch {
	case strings.HasPrefix(mediaType, "text/"):
		return true
	case mediaType == "application/json", mediaType == "application/javascript",
		mediaType == "image/svg+xml", strings.HasSuffix(mediaType, "+json"):
		return true
	}
	return false
}

var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(io.Discard) }}

// gzipWriter holds back the status and the first compressMinBytes of the
// body; then it knows whether to compress, and says so in the headers
// before any byte goes out.
type gzipWriter struct {
	http.ResponseWriter
	status  int
	held    []byte
	decided bool
	gz      *gzip.Writer // nil when the answer goes out plain
}

func (w *gzipWriter) WriteHeader(status int) {
	if !w.decided && w.status == 0 {
		w.status = status
	}
}

func (w *gzipWriter) Write(p []byte) (int, error) {
	switch {
	case w.gz != nil:
		return w.gz.Write(p)
	case w.decided:
		return w.ResponseWriter.Write(p)
	}
	w.held = append(w.held, p...)
	if len(w.held) >= compressMinBytes {
		if err := w.decide(true); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// decide sends the headers, compressing when the body is big enough and
// of a compressible type, then what was held back.
func (w *gzipWriter) decide(bigEnough bool) error {
	w.decided = true
	if w.status == 0 {
		w.status = http.StatusOK
	}
	h := w.Header()
	if h.Get(echo.HeaderContentType) == "" && len(w.held) > 0 {
		h.Set(echo.HeaderContentType, http.DetectContentType(w.held))
	}
	if bigEnough && compressible(h.Get(echo.HeaderContentType)) && h.Get(echo.HeaderContentEncoding) == "" {
		h.Del(echo.HeaderContentLength)
		h.Set(echo.HeaderContentEncoding, "gzip")
		if etag := h.Get("ETag"); strings.HasPrefix(etag, `"`) {
			h.Set("ETag", "W/"+etag) // the gzip bytes are not the file's bytes
		}
		w.gz = gzipWriters.Get().(*gzip.Writer)
		w.gz.Reset(w.ResponseWriter)
	}
	w.ResponseWriter.WriteHeader(w.status)
	held := w.held
	w.held = nil
	if len(held) == 0 {
		return nil
	}
	var err error
	if w.gz != nil {
		_, err = w.gz.Write(held)
	} else {
		_, err = w.ResponseWriter.Write(held)
	}
	return err
}

// finish sends what is still held back (a small answer goes out plain)
// and ends the gzip stream.
func (w *gzipWriter) finish() {
	if !w.decided && (w.status != 0 || len(w.held) > 0) {
		_ = w.decide(false)
	}
	if w.gz != nil {
		_ = w.gz.Close()
		w.gz.Reset(io.Discard)
		gzipWriters.Put(w.gz)
		w.gz = nil
	}
}

// Flush sends everything so far: a flushed answer is a stream, so it is
// compressed whatever its size when its type allows.
func (w *gzipWriter) Flush() {
	if !w.decided {
		_ = w.decide(true)
	}
	if w.gz != nil {
		_ = w.gz.Flush()
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// hijacking) through the writer.
func (w *gzipWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// skipCompression leaves alone the live endpoints, any upgrade, byte
// ranges (a range of the plain file is not a range of its gzip stream) and
// HEAD, which then states the plain answer's Content-Length.
func skipCompression(c echo.Context) bool {
	r := c.Request()
	return r.Method == http.MethodHead || uncompressedPaths[r.URL.Path] || r.Header.Get(echo.HeaderUpgrade) != "" || r.Header.Get("Range") != ""
}

// answerHeadAsGet registers HEAD beside every GET route registered so
// far: the HEAD route finds the GET route of the same path and runs it on
// a copy of the request that says GET (handlers that switch on the method
// answer it as GET). net/http still holds the request as HEAD and drops
// the body written, so HEAD gets the GET's status and headers. Global
// middleware has already run for the HEAD request (reads need the same
// credentials; nothing is compressed).
func answerHeadAsGet(e *echo.Echo) {
	runGet := func(c echo.Context) error {
		head := c.Request()
		e.Router().Find(http.MethodGet, echo.GetPath(head), c)
		get := head.WithContext(head.Context()) // a shallow copy
		get.Method = http.MethodGet
		c.SetRequest(get)
		return c.Handler()(c)
	}
	for _, r := range e.Routes() {
		if r.Method == http.MethodGet {
			e.HEAD(r.Path, runGet)
		}
	}
}
