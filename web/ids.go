package web

import (
	"net/url"
	"slices"

	"github.com/labstack/echo/v4"
)

// Ids in URLs (see views/urls.go for how links are written): a route names
// an execution or a key either in its path (/executions/{id},
// /keys/{key}, escaped with url.PathEscape) or, on the twin routes for ids
// a path cannot carry, in the query (/execution?execution_id=...,
// /key?idempotency_key=...). The handlers read them only through these
// functions.

// pathParam is a path parameter as the client meant it. Echo matches
// routes on the escaped path whenever the request has one (URL.RawPath,
// set when the path holds an escape such as %2F that the decoded path
// cannot show, see echo.GetPath), and then hands parameters over still
// escaped; otherwise on the decoded path, with decoded parameters.
func pathParam(c echo.Context, name string) (string, error) {
	v := c.Param(name)
	if c.Request().URL.RawPath == "" {
		return v, nil
	}
	u, err := url.PathUnescape(v)
	if err != nil {
		return "", badQuery(name + ": not a valid escaped path segment")
	}
	return u, nil
}

// idParam is the id a route names: the path parameter param when the
// route has one, else the query parameter query, which must be set.
func idParam(c echo.Context, param, query string) (string, error) {
	if slices.Contains(c.ParamNames(), param) {
		return pathParam(c, param)
	}
	if id := c.QueryParam(query); id != "" {
		return id, nil
	}
	return "", badQuery(query + ": required")
}

// executionIDParam is the execution of /executions/{id}/... or of
// /execution/...?execution_id=.
func executionIDParam(c echo.Context) (string, error) { return idParam(c, "id", "execution_id") }

// keyParam is the key of /keys/{key} or of /key?idempotency_key=.
func keyParam(c echo.Context) (string, error) { return idParam(c, "key", "idempotency_key") }
