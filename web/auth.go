package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/views"
)

// AuthConfig says who may read traces. Reads are open unless a read token
// applies: ReadToken when set, else, on an Exposed server, the ingest
// token (so one token set for a server on the network protects both).
type AuthConfig struct {
	// ReadToken protects every read: the pages, GET /api/v1/*, the stream,
	// the WebSocket, /sandbox/log and /metrics.
	ReadToken string
	// Exposed says the server listens on an address that is not loopback.
	Exposed bool
	// SessionTTL is how long a login lasts; DefaultSessionTTL when zero.
	SessionTTL time.Duration
}

// DefaultSessionTTL is how long a login lasts unless configured.
const DefaultSessionTTL = 12 * time.Hour

// sessionCookie holds a signed session, never the token.
const sessionCookie = "oncetrace_session"

// Token is the token reads need under cfg, given the server's ingest
// token, or "" when reads are open.
func (cfg AuthConfig) Token(ingestToken string) string {
	if cfg.ReadToken != "" {
		return cfg.ReadToken
	}
	if cfg.Exposed {
		return ingestToken
	}
	return ""
}

// authenticator checks read credentials: a bearer token, or a session
// cookie the login form set. A session is a random id and an expiry,
// signed with HMAC-SHA256 under a key derived from the token: changing the
// token ends every session, a restart does not, and the cookie reveals
// nothing of the token.
type authenticator struct {
	tokenSum [sha256.Size]byte
	key      []byte
	ttl      time.Duration
	now      func() time.Time

	mu      sync.Mutex
	revoked map[[sessionIDBytes]byte]time.Time // logged-out sessions, until they expire
}

const (
	sessionVersion  = 1
	sessionIDBytes  = 16
	sessionBodySize = 1 + 8 + sessionIDBytes // version, expiry (Unix seconds), id
	sessionSize     = sessionBodySize + sha256.Size
)

func newAuthenticator(token string, ttl time.Duration, now func() time.Time) *authenticator {
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("oncetrace session key v1"))
	return &authenticator{tokenSum: sha256.Sum256([]byte(token)), key: mac.Sum(nil), ttl: ttl, now: now,
		revoked: map[[sessionIDBytes]byte]time.Time{}}
}

// tokenOK compares hashes in constant time, so neither the token's bytes
// nor its length leak through timing.
func (a *authenticator) tokenOK(token string) bool {
	sum := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(sum[:], a.tokenSum[:]) == 1
}

// newSession returns a signed session value and when it expires.
func (a *authenticator) newSession() (string, time.Time) {
	expires := a.now().Add(a.ttl).Truncate(time.Second)
	b := make([]byte, sessionBodySize, sessionSize)
	b[0] = sessionVersion
	binary.BigEndian.PutUint64(b[1:9], uint64(expires.Unix()))
	if _, err := rand.Read(b[9:]); err != nil {
		panic("web: no randomness for a session id: " + err.Error()) // crypto/rand does not fail on supported systems
	}
	mac := hmac.New(sha256.New, a.key)
	mac.Write(b)
	return base64.RawURLEncoding.EncodeToString(mac.Sum(b)), expires
}

// session checks a cookie value: well formed, signed by this token's key,
// not expired, not logged out.
func (a *authenticator) session(value string) (id [sessionIDBytes]byte, expires time.Time, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(b) != sessionSize || b[0] != sessionVersion {
		return id, expires, false
	}
	mac := hmac.New(sha256.New, a.key)
	mac.Write(b[:sessionBodySize])
	if !hmac.Equal(mac.Sum(nil), b[sessionBodySize:]) {
		return id, expires, false
	}
	expires = time.Unix(int64(binary.BigEndian.Uint64(b[1:9])), 0)
	if !a.now().Before(expires) {
		return id, expires, false
	}
	copy(id[:], b[9:sessionBodySize])
	a.mu.Lock()
	_, gone := a.revoked[id]
	a.mu.Unlock()
	return id, expires, !gone
}

// revoke ends a session before its expiry (logout). Revocations live in
// memory until the session would have expired anyway.
func (a *authenticator) revoke(value string) {
	id, expires, ok := a.session(value)
	if !ok {
		return
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, exp := range a.revoked {
		if !now.Before(exp) {
			delete(a.revoked, k)
		}
	}
	a.revoked[id] = expires
}

// credentials says how a request proves it may read.
type credentials int

const (
	credNone    credentials = iota
	credBearer              // Authorization: Bearer <read token>
	credSession             // the login cookie
)

func (a *authenticator) check(r *http.Request) credentials {
	if token, ok := bearerToken(r.Header.Get(echo.HeaderAuthorization)); ok && a.tokenOK(token) {
		return credBearer
	}
	if ck, err := r.Cookie(sessionCookie); err == nil {
		if _, _, ok := a.session(ck.Value); ok {
			return credSession
		}
	}
	return credNone
}

// openReads are the routes anyone may GET on a protected server: the
// health check (for load balancers), the login form, and the stylesheet
// and script the form uses.
var openReads = map[string]bool{"/healthz": true, "/login": true, "/static/*": true, "/favicon.ico": true}

// requireRead guards every read when a read token applies. It guards by
// method rather than route by route, so a read route added later is
// protected without anyone remembering to: GET and HEAD need credentials
// unless the route is in openReads. Writes keep their own checks (the
// ingest token, webhook signatures, the login form's origin check).
func (s *Server) requireRead(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if s.auth == nil || (r.Method != http.MethodGet && r.Method != http.MethodHead) || openReads[c.Path()] {
			return next(c)
		}
		switch s.auth.check(r) {
		case credSession:
			// The layout then offers to log out.
			c.SetRequest(r.WithContext(views.WithSignedIn(r.Context())))
			return next(c)
		case credBearer:
			return next(c)
		}
		if !isAPI(c) && c.Path() != "/metrics" && !wantsFragment(c) {
			return s.loginRedirect(c)
		}
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="oncetrace"`)
		return echo.NewHTTPError(http.StatusUnauthorized,
			"Authorization: a valid \"Bearer <read token>\" is required (or a session: log in at /login)")
	}
}

// loginRedirect sends a browser without a session to the login form,
// which brings it back here afterwards.
//
// The session cookie is SameSite=Strict, so a browser does not send it on a
// link followed from another site (a chat message, an alert): that first
// request arrives without it although the user is logged in. It is
// answered with a page that reloads the same address from this origin, a
// request which does carry the cookie; only that one goes to the login form
// when it has none. No loop: the reload is same-origin.
func (s *Server) loginRedirect(c echo.Context) error {
	r := c.Request()
	if r.Method == http.MethodGet && r.Header.Get("Sec-Fetch-Site") == "cross-site" && r.Header.Get("Sec-Fetch-Mode") == "navigate" {
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		return render(c, http.StatusOK, views.SameSiteReload(safeNext(r.URL.RequestURI())))
	}
	return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(r.URL.RequestURI()))
}

// safeNext is where to go after logging in: a path of this server, never
// another site ("//evil.test", "/\evil.test" and absolute URLs become "/").
func safeNext(next string) string {
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") || strings.HasPrefix(next, `/\`) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}

// sameOrigin reports whether a form POST comes from one of this server's
// own pages: an Origin naming this Host, or, from a browser that sends no
// Origin, a Sec-Fetch-Site of same-origin (or none: typed by the user). A
// client sending neither is not a browser, which a cross-site form cannot
// drive. Only the host is compared, not the scheme: behind a proxy that
// ends TLS, the browser's https origin reaches a plain-HTTP listener.
func sameOrigin(r *http.Request) bool {
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return true
	}
	return false
}

// secureRequest reports whether the browser reached the server over TLS,
// directly or through a proxy that says so; the cookie is then Secure.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}
