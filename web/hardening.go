package web

import (
	"crypto/subtle"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
)

// What a page on another site, or a page whose name was rebound to this
// server's address, can no longer do (docs/security.md): write through a
// CORS-simple request (a form, sendBeacon, fetch with mode no-cors), or
// reach the server under a name that is not its own.

// writeContentTypes lists the media types each route that takes a body
// accepts, by "METHOD path" as routes() registers it. None of the API's is
// one an HTML form or a CORS-simple request can send, so a page on another
// site cannot write to it even where the Origin check does not apply. A
// POST, PUT or PATCH route missing here accepts application/json only.
var writeContentTypes = map[string][]string{
	"POST /api/v1/events":             {"application/json", "application/x-ndjson", "application/ndjson", "application/jsonl"},
	"POST /api/v1/webhooks/:provider": {"application/json"},
	"POST " + otlpTracesPath:          {otlpProtobuf, otlpJSON},
	"POST " + otlpLogsPath:            {otlpProtobuf, otlpJSON},
	"POST " + otlpMetricsPath:         {otlpProtobuf, otlpJSON},
	"POST /sandbox/mail/v1/send":      {"application/json"},
	"PUT /sandbox/faults":             {"application/json"},
	// The login form (login.go): what an HTML form sends. Its origin is
	// checked above, as every write's is.
	"POST /login":  {"application/x-www-form-urlencoded"},
	"POST /logout": {"application/x-www-form-urlencoded"},
}

// defaultWriteTypes is what a write route missing from writeContentTypes accepts.
var defaultWriteTypes = []string{"application/json"}

// allowHosts answers 421 Misdirected Request to a request whose Host is
// not one of hosts, before routing, so on every route and the WebSocket
// upgrade: a page whose name an attacker rebound to this server's address
// sends its own name as Host. Hosts are names or IP addresses, compared
// without port and case; "*" allows any. No hosts allows any too (the
// server is then used as a library, as in tests). A request without a Host
// (HTTP/1.0, as some health checkers send) is not a browser's and passes.
func allowHosts(hosts []string) echo.MiddlewareFunc {
	allowed := map[string]bool{}
	for _, h := range hosts {
		if h == "*" {
			return passThrough
		}
		allowed[hostName(h)] = true
	}
	if len(allowed) == 0 {
		return passThrough
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			host := c.Request().Host
			if host == "" || allowed[hostName(host)] {
				return next(c)
			}
			return echo.NewHTTPError(http.StatusMisdirectedRequest, fmt.Sprintf(
				"Host: %q is not a name of this server; an operator adds one with serve --allowed-hosts", clipHeader(host)))
		}
	}
}

func passThrough(next echo.HandlerFunc) echo.HandlerFunc { return next }

// hostName is a Host header's or an allowlist entry's name: lowercase,
// without port, brackets or a trailing dot.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// guardWrites refuses what a browser on another origin can send without a
// CORS preflight, on every method but GET, HEAD and OPTIONS:
//
//   - a cross-origin request (Sec-Fetch-Site cross-site or same-site, or
//     else an Origin that is not the Host, as http.CrossOriginProtection
//     decides) without a valid ingest token: 403 naming the header;
//   - a body without one of the route's content types (writeContentTypes),
//     a body without Content-Type included: 415 naming the header and the
//     accepted types.
//
// Same-origin requests and clients that are not browsers (no Origin, no
// Sec-Fetch-Site) pass the first check. A request for no route passes on
// to its 404 or 405.
func (s *Server) guardWrites() echo.MiddlewareFunc {
	crossOrigin := http.NewCrossOriginProtection()
	var once sync.Once
	var routes map[string]bool
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			switch req.Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions:
				return next(c)
			}
			if err := crossOrigin.Check(req); err != nil && !s.validIngestToken(req) {
				header := "Sec-Fetch-Site"
				if req.Header.Get(header) == "" {
					header = "Origin"
				}
				return refuse(c, http.StatusForbidden, fmt.Sprintf(
					"%s: %q: a request from another site cannot write here; send it from this server's own pages, or without %s and with Authorization: Bearer <ingest token>",
					header, clipHeader(req.Header.Get(header)), header))
			}
			once.Do(func() {
				routes = map[string]bool{}
				for _, r := range c.Echo().Routes() {
					routes[r.Method+" "+r.Path] = true
				}
			})
			route := req.Method + " " + c.Path()
			if !routes[route] {
				return next(c)
			}
			types, listed := writeContentTypes[route]
			if !listed {
				if req.Method != http.MethodPost && req.Method != http.MethodPut && req.Method != http.MethodPatch {
					return next(c) // DELETE and the like carry no body
				}
				types = defaultWriteTypes
			}
			ct := req.Header.Get(echo.HeaderContentType)
			if mt, _, err := mime.ParseMediaType(ct); err == nil && acceptsType(types, mt) {
				return next(c)
			}
			if ct == "" {
				return refuse(c, http.StatusUnsupportedMediaType, "Content-Type: required; send "+orList(types))
			}
			return refuse(c, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type: %q is not accepted here; send %s", clipHeader(ct), orList(types)))
		}
	}
}

func acceptsType(types []string, mt string) bool {
	for _, t := range types {
		if t == mt {
			return true
		}
	}
	return false
}

// validIngestToken reports whether the request carries the ingest token
// as a Bearer token; with no token configured, none is valid.
func (s *Server) validIngestToken(req *http.Request) bool {
	if s.cfg.IngestToken == "" {
		return false
	}
	token, ok := bearerToken(req.Header.Get(echo.HeaderAuthorization))
	return ok && subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.IngestToken)) == 1
}

// refuse answers in the error format of the route: the sandbox's own,
// which clients of a mail API read, or the error handler's.
func refuse(c echo.Context, status int, msg string) error {
	if strings.HasPrefix(c.Request().URL.Path, "/sandbox/") {
		var e sandbox.APIError
		e.Error.Type, e.Error.Message = "invalid_request_error", msg
		return c.JSON(status, e)
	}
	return echo.NewHTTPError(status, msg)
}

func orList(types []string) string {
	if len(types) == 1 {
		return types[0]
	}
	return strings.Join(types[:len(types)-1], ", ") + " or " + types[len(types)-1]
}

// clipHeader keeps an echoed header value short.
func clipHeader(v string) string {
	if len(v) > 100 {
		return v[:100] + "…"
	}
	return v
}
