package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/views"
)

// loginFormBytes bounds the login form's body: a token and a return path.
const loginFormBytes = 16 << 10

// handleLoginPage is GET /login: the form, or, for a browser that already
// has a session (or on a server whose reads are open), straight on to where
// it was going.
func (s *Server) handleLoginPage(c echo.Context) error {
	next := safeNext(c.QueryParam("next"))
	if s.auth == nil || s.auth.check(c.Request()) == credSession {
		return c.Redirect(http.StatusSeeOther, next)
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return render(c, http.StatusOK, views.LoginPage(views.LoginView{Next: next}))
}

// handleLogin is POST /login: the read token, once, for a session cookie.
// It answers only a form posted from this server's own pages (403
// otherwise), so another site cannot log a visitor in or out.
func (s *Server) handleLogin(c echo.Context) error {
	r := c.Request()
	if !sameOrigin(r) {
		return echo.NewHTTPError(http.StatusForbidden, "login: the form must be posted from this server's own page")
	}
	if s.auth == nil {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	r.Body = http.MaxBytesReader(c.Response(), r.Body, loginFormBytes)
	if err := r.ParseForm(); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "login: send the form as application/x-www-form-urlencoded, at most 16 KiB")
	}
	next := safeNext(r.PostForm.Get("next"))
	if !s.auth.tokenOK(r.PostForm.Get("token")) {
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		return render(c, http.StatusUnauthorized, views.LoginPage(views.LoginView{Next: next,
			Error: "That token does not match the server's read token."}))
	}
	value, expires := s.auth.newSession()
	c.SetCookie(&http.Cookie{
		Name:     sessionCookie,
		Value:    value,
		Path:     "/",
		Expires:  expires,
		MaxAge:   int(s.auth.ttl / time.Second),
		HttpOnly: true,
		Secure:   secureRequest(r),
		SameSite: http.SameSiteStrictMode,
	})
	return c.Redirect(http.StatusSeeOther, next)
}

// handleLogout is POST /logout: the session ends on the server too (a copy
// of the cookie no longer works), and the browser forgets it.
func (s *Server) handleLogout(c echo.Context) error {
	r := c.Request()
	if !sameOrigin(r) {
		return echo.NewHTTPError(http.StatusForbidden, "logout: the form must be posted from this server's own page")
	}
	if s.auth != nil {
		if ck, err := r.Cookie(sessionCookie); err == nil {
			s.auth.revoke(ck.Value)
		}
	}
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: secureRequest(r), SameSite: http.SameSiteStrictMode})
	return c.Redirect(http.StatusSeeOther, "/login")
}
