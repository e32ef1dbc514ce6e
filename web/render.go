package web

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/views"
)

// render renders a component into a buffer first, so that a render error
// reaches the error handler instead of leaving half a page. Times show in
// the zone the reader chose (requestZone).
func render(c echo.Context, status int, component templ.Component) error {
	var buf bytes.Buffer
	ctx := views.WithZone(c.Request().Context(), requestZone(c.Request()))
	if err := component.Render(ctx, &buf); err != nil {
		return fmt.Errorf("web: render %s: %w", c.Path(), err)
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// wantsFragment reports whether the page's script asked for the fragment
// only (to show in a side panel) rather than a whole page.
func wantsFragment(c echo.Context) bool {
	return c.Request().Header.Get("X-Oncetrace-Fragment") == "1"
}

func isAPI(c echo.Context) bool {
	p := c.Request().URL.Path
	return strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/sandbox/") || p == "/healthz"
}

// contentSecurityPolicy forbids inline script and style: pages need
// neither, and it makes an injected attribute or tag inert.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		return next(c)
	}
}
